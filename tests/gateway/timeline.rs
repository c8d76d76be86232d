//! The gateway's scheduler on a fake clock: each seed behaviour and each bad
//! input, one test apiece.

mod common;

use common::gateway::{acquire, densest_window, penalize, release};
use paceline::gateway::{
    handle, mint_rate_scope_token, mint_run_scope_token, GatewayConfig, GatewayCore,
};
use paceline::protocol::{ChargeRequest, PacingRule};
use paceline::sim::{FakeClock, T0};
use paceline::time::Clock;
use paceline::ErrorCode;

fn per_second(n: u64) -> PacingRule {
    PacingRule::new(n, 1_000)
}

fn core() -> GatewayCore {
    GatewayCore::new(GatewayConfig::default(), 7).unwrap()
}

fn charge(run: &str, id: &str, charges: &[(&str, u64, u64)]) -> ChargeRequest {
    common::gateway::charge(run, id, None, charges)
}

#[test]
fn clients_of_one_bucket_share_one_evenly_spaced_timeline() {
    let mut g = core();
    let rules = [per_second(20)];
    let a = g.acquire(&acquire("org:p", &rules, 3), T0).unwrap();
    let b = g.acquire(&acquire("org:p", &rules, 3), T0).unwrap();
    assert_eq!(a.scheduled_at_ms.unwrap(), [T0, T0 + 50, T0 + 100]);
    assert_eq!(b.scheduled_at_ms.unwrap(), [T0 + 150, T0 + 200, T0 + 250]);
    assert_eq!(a.server_now_ms, Some(T0));
    assert_eq!(a.effective_requests_per_second, Some(20.0));
    assert_eq!(a.lease_ids, None, "pure-rate permits carry no lease");
}

#[test]
fn grants_stop_at_the_horizon_and_a_client_whose_ask_was_met_books_no_turn() {
    let mut g = core();
    let rules = [per_second(20)];
    let first = g.acquire(&acquire("org:p", &rules, 100), T0).unwrap();
    assert_eq!(first.granted, 21, "times T0..=T0+1000 fit a 1 s horizon");
    assert_eq!(*first.scheduled_at_ms.unwrap().last().unwrap(), T0 + 1_000);
    assert_eq!(first.wait_ms, 0, "nobody else held the timeline: no turn");
    let refused = g.acquire(&acquire("org:p", &rules, 1), T0 + 10).unwrap();
    assert_eq!(refused.granted, 0);
    assert_eq!(
        refused.wait_ms, 1_040,
        "its turn is the timeline's next free time, T0+1050, not after a turn nobody booked"
    );
}

#[test]
fn turns_line_refused_clients_up_one_full_block_after_another() {
    let mut g = core();
    let rules = [per_second(20)];
    let closed_loop = || {
        let mut req = acquire("org:p", &rules, 21);
        req.book_next_turn = true;
        req
    };
    let a = g.acquire(&closed_loop(), T0).unwrap();
    let b = g.acquire(&closed_loop(), T0).unwrap();
    let c = g.acquire(&closed_loop(), T0).unwrap();
    assert_eq!((a.granted, b.granted, c.granted), (21, 0, 0));
    assert_eq!((a.wait_ms, b.wait_ms, c.wait_ms), (1_050, 2_100, 3_150));
    let a2 = g.acquire(&closed_loop(), T0 + a.wait_ms).unwrap();
    let b2 = g.acquire(&closed_loop(), T0 + b.wait_ms).unwrap();
    let c2 = g.acquire(&closed_loop(), T0 + c.wait_ms).unwrap();
    for (turn, start) in [(a2, T0 + 1_050), (b2, T0 + 2_100), (c2, T0 + 3_150)] {
        assert_eq!(
            turn.granted, 21,
            "a client that keeps its turn gets a full block"
        );
        assert_eq!(turn.scheduled_at_ms.unwrap()[0], start);
    }
}

#[test]
fn a_turn_booked_for_a_client_that_never_returns_delays_nobody_past_its_own_time() {
    let mut g = core();
    let rules = [per_second(20)];
    let mut evicted = acquire("org:p", &rules, 21);
    evicted.book_next_turn = true;
    let gone = g.acquire(&evicted, T0).unwrap();
    assert_eq!(gone.wait_ms, 1_050, "booked T0+1050..T0+2100, never used");
    // Long after that turn's time, a newcomer is served at once.
    let later = g.acquire(&acquire("org:p", &rules, 3), T0 + 2_200).unwrap();
    assert_eq!(later.granted, 3);
    assert_eq!(later.scheduled_at_ms.unwrap()[0], T0 + 2_200);
    assert_eq!(later.wait_ms, 0);
}

#[test]
fn returned_times_go_to_the_next_acquirer_before_the_timeline_extends() {
    let mut g = core();
    let rules = [per_second(20)];
    let block = g.acquire(&acquire("org:p", &rules, 10), T0).unwrap();
    let times = block.scheduled_at_ms.unwrap();
    let mut giving_back = acquire("org:p", &rules, 1);
    giving_back.returned_at_ms = times[5..].to_vec();
    let next = g.acquire(&giving_back, T0 + 100).unwrap();
    assert_eq!(
        next.scheduled_at_ms.unwrap(),
        [T0 + 250],
        "the earliest returned time that is still ahead"
    );
    let view = g.bucket("org:p", None, T0 + 100).unwrap().unwrap();
    assert_eq!(view.returned_permits, 4);
    let after = g.acquire(&acquire("org:p", &rules, 6), T0 + 100).unwrap();
    assert_eq!(
        after.scheduled_at_ms.unwrap(),
        [T0 + 300, T0 + 350, T0 + 400, T0 + 450, T0 + 500, T0 + 550],
        "four returned times, then the timeline from where it stood"
    );
}

#[test]
fn a_time_returned_twice_or_never_granted_or_past_comes_back_once_or_not_at_all() {
    let mut g = core();
    let rules = [per_second(20)];
    let block = g.acquire(&acquire("org:p", &rules, 4), T0).unwrap();
    let times = block.scheduled_at_ms.unwrap();
    let mut bogus = release("org:p", &rules, Vec::new());
    bogus.returned_at_ms = vec![times[3], times[3], T0 + 175, times[0]];
    g.release(&bogus, T0 + 10).unwrap();
    let view = g.bucket("org:p", None, T0 + 10).unwrap().unwrap();
    assert_eq!(
        view.returned_permits, 1,
        "one real time ahead; the copy, an invented time and a past one are ignored"
    );
}

#[test]
fn a_rate_cut_voids_returned_times_and_those_granted_before_it() {
    let mut g = core();
    let rules = [per_second(20)];
    let block = g.acquire(&acquire("org:p", &rules, 10), T0).unwrap();
    let times = block.scheduled_at_ms.unwrap();
    let mut early = release("org:p", &rules, Vec::new());
    early.returned_at_ms = times[5..7].to_vec();
    g.release(&early, T0 + 10).unwrap();
    g.penalize(&penalize("org:p", 100), T0 + 20).unwrap();
    let mut late = release("org:p", &rules, Vec::new());
    late.returned_at_ms = times[7..].to_vec();
    g.release(&late, T0 + 30).unwrap();
    let view = g.bucket("org:p", None, T0 + 30).unwrap().unwrap();
    assert_eq!(
        view.returned_permits, 0,
        "times spaced for the old rate never come back after a cut"
    );
}

#[test]
fn a_dispatch_lead_keeps_the_first_permit_clear_of_the_trip_back_and_the_tolerance_is_announced() {
    let config = GatewayConfig {
        window_guard_ms: 25,
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 7).unwrap();
    let rules = [per_second(20)];
    let mut req = acquire("org:p", &rules, 2);
    req.dispatch_lead_ms = Some(15);
    let r = g.acquire(&req, T0).unwrap();
    assert_eq!(r.scheduled_at_ms.unwrap(), [T0 + 15, T0 + 67]);
    assert_eq!(r.dispatch_tolerance_ms, Some(12));
    req.dispatch_lead_ms = Some(9_000);
    let capped = g.acquire(&req, T0 + 200).unwrap();
    assert_eq!(
        capped.scheduled_at_ms.unwrap()[0],
        T0 + 700,
        "a lead past half the horizon is cut to half"
    );
}

/// Bug: the gateway announced its whole window guard as the dispatch
/// tolerance. A permit sent that late, whose call then took a little longer
/// to reach the provider than the next one's, made 21 arrivals in one
/// second under a rule of 20 (seen in real time with a 25 ms guard).
#[test]
fn the_dispatch_tolerance_leaves_half_the_guard_for_the_way_to_the_provider_bug_21_in_a_second() {
    let config = GatewayConfig {
        window_guard_ms: 25,
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 7).unwrap();
    let rules = [per_second(20)];
    let mut times = Vec::new();
    let mut tolerance = None;
    for step in 0..6 {
        let now = T0 + step * 1_000;
        let r = g.acquire(&acquire("org:p", &rules, 20), now).unwrap();
        tolerance = r.dispatch_tolerance_ms;
        times.extend(r.scheduled_at_ms.unwrap());
    }
    let tolerance = tolerance.expect("announced");
    let transit = 25 - tolerance;
    assert!(
        transit >= 12,
        "{transit} ms left for the way to the provider"
    );
    // The worst arrivals: one permit sent at the end of its tolerance and
    // slow on its way, every other one sent on time and fast.
    for late in 0..times.len() {
        let arrivals: Vec<u64> = times
            .iter()
            .enumerate()
            .map(|(i, &t)| {
                if i == late {
                    t + tolerance + transit
                } else {
                    t
                }
            })
            .collect();
        assert!(
            densest_window(&arrivals, 1_000) <= 20,
            "permit {late} late by {} ms crowds a window",
            tolerance + transit
        );
    }
}

/// Bug: a client refused a slot was told when to come back, but the slot
/// that freed meanwhile went to whoever asked first: isolates whose own
/// callers came straight back took every slot, and one isolate of four
/// starved in the fleet simulation.
#[test]
fn a_slot_freed_while_a_ticket_waits_is_held_for_it_bug_whoever_asked_first_took_it() {
    let mut g = core();
    let rules = [per_second(20).with_max_concurrency(1)];
    let mut first = acquire("org:p", &rules, 1);
    first.turn_ticket = Some(0);
    let holder = g.acquire(&first, T0).unwrap();
    let lease = holder.lease_ids.unwrap();
    assert_eq!(lease.len(), 1);
    let mut waiter = acquire("org:p", &rules, 1);
    waiter.turn_ticket = Some(0);
    let refused = g.acquire(&waiter, T0 + 1).unwrap();
    assert_eq!(refused.granted, 0);
    let ticket = refused.turn_ticket.expect("a refusal gives a ticket");
    g.release(&release("org:p", &rules, lease), T0 + 60)
        .unwrap();
    let mut other = acquire("org:p", &rules, 1);
    other.turn_ticket = Some(0);
    let cut_in = g.acquire(&other, T0 + 61).unwrap();
    assert_eq!(cut_in.granted, 0, "the freed slot is held for the ticket");
    assert!(
        cut_in.turn_ticket.is_some_and(|t| t > ticket),
        "it queues behind"
    );
    waiter.turn_ticket = Some(ticket);
    let served = g.acquire(&waiter, T0 + 62).unwrap();
    assert_eq!(served.granted, 1, "the ticket's holder gets its slot");
    // An older client that takes no tickets is refused and told when to
    // look again, with no ticket.
    let legacy = g.acquire(&acquire("org:p", &rules, 1), T0 + 63).unwrap();
    assert_eq!((legacy.granted, legacy.turn_ticket), (0, None));
}

#[test]
fn fractional_intervals_round_each_time_up_without_drifting() {
    let mut g = core();
    let rules = [per_second(3)];
    let first = g.acquire(&acquire("org:p", &rules, 4), T0).unwrap();
    let mut times = first.scheduled_at_ms.unwrap();
    assert_eq!(
        times,
        [T0, T0 + 334, T0 + 667],
        "T0+1000.002 is past the horizon"
    );
    let next = g.acquire(&acquire("org:p", &rules, 1), T0 + 1).unwrap();
    times.extend(next.scheduled_at_ms.unwrap());
    assert_eq!(times[3], T0 + 1_001);
    assert_eq!(densest_window(&times, 1_000), 3);
}

#[test]
fn multiple_rules_all_bind_and_the_strictest_sets_the_pace() {
    let mut g = core();
    let rules = [per_second(20), PacingRule::new(2, 500)];
    let r = g.acquire(&acquire("org:p", &rules, 3), T0).unwrap();
    assert_eq!(r.scheduled_at_ms.unwrap(), [T0, T0 + 250, T0 + 500]);
    assert_eq!(r.effective_requests_per_second, Some(4.0));
}

#[test]
fn penalize_cuts_the_rate_by_0_7_and_pushes_the_timeline_past_the_cooldown() {
    let mut g = core();
    let rules = [per_second(20)];
    g.acquire(&acquire("org:p", &rules, 2), T0).unwrap();
    let p = g.penalize(&penalize("org:p", 2_000), T0 + 100).unwrap();
    assert_eq!(p.effective_requests_per_second, Some(14.0));
    assert_eq!(p.cooldown_until_ms, T0 + 2_100);
    let during = g.acquire(&acquire("org:p", &rules, 1), T0 + 200).unwrap();
    assert_eq!(during.granted, 0);
    assert_eq!(during.wait_ms, 1_900, "until the cooldown ends");
    assert_eq!(during.cooldown_until_ms, Some(T0 + 2_100));
    let after = g.acquire(&acquire("org:p", &rules, 2), T0 + 1_500).unwrap();
    let times = after.scheduled_at_ms.unwrap();
    assert_eq!(times[0], T0 + 2_100);
    assert_eq!(times[1] - times[0], 72, "1/14 s, rounded up to whole ms");
}

#[test]
fn repeated_429s_within_one_cooldown_cut_once_and_extend_it() {
    let mut g = core();
    g.acquire(&acquire("org:p", &[per_second(20)], 1), T0)
        .unwrap();
    g.penalize(&penalize("org:p", 1_000), T0).unwrap();
    let again = g.penalize(&penalize("org:p", 3_000), T0 + 10).unwrap();
    assert_eq!(again.effective_requests_per_second, Some(14.0));
    assert_eq!(again.cooldown_until_ms, T0 + 3_010);
    let later = g.penalize(&penalize("org:p", 1_000), T0 + 3_010).unwrap();
    assert!((later.effective_requests_per_second.unwrap() - 9.8).abs() < 1e-9);
}

#[test]
fn a_429_for_an_unseen_bucket_is_kept_and_applied_when_its_rules_arrive() {
    let mut g = core();
    let p = g.penalize(&penalize("org:new", 500), T0).unwrap();
    assert_eq!(p.effective_requests_per_second, None);
    assert_eq!(p.cooldown_until_ms, T0 + 500);
    let r = g
        .acquire(&acquire("org:new", &[per_second(10)], 1), T0)
        .unwrap();
    assert_eq!(r.effective_requests_per_second, Some(7.0));
    assert_eq!(r.granted, 1);
    assert_eq!(r.scheduled_at_ms.unwrap(), [T0 + 500]);
}

#[test]
fn matured_permits_raise_the_rate_back_but_never_past_the_cap() {
    let mut g = core();
    let rules = [per_second(20).with_adaptive_max_rps(16.0)];
    let first = g.acquire(&acquire("org:p", &rules, 1), T0).unwrap();
    assert_eq!(first.effective_requests_per_second, Some(16.0));
    g.penalize(&penalize("org:p", 100), T0).unwrap();
    let mut now = T0 + 100;
    let mut rates = Vec::new();
    for _ in 0..30 {
        let r = g.acquire(&acquire("org:p", &rules, 20), now).unwrap();
        rates.push(r.effective_requests_per_second.unwrap());
        now += 1_000;
    }
    assert!((rates[0] - 16.0 * 0.7).abs() < 1e-9, "{}", rates[0]);
    assert!(rates.windows(2).all(|w| w[1] >= w[0]), "{rates:?}");
    assert_eq!(*rates.last().unwrap(), 16.0, "{rates:?}");
}

#[test]
fn reported_successes_are_shown_but_do_not_move_the_rate() {
    let mut g = core();
    let rules = [per_second(20)];
    g.acquire(&acquire("org:p", &rules, 1), T0).unwrap();
    g.penalize(&penalize("org:p", 100), T0).unwrap();
    let mut req = acquire("org:p", &rules, 1);
    req.observed_successes = 500;
    let r = g.acquire(&req, T0 + 200).unwrap();
    assert_eq!(r.effective_requests_per_second, Some(14.0));
    let view = g.bucket("org:p", None, T0 + 200).unwrap().unwrap();
    assert_eq!(view.reported_successes, 500);
}

#[test]
fn concurrency_leases_cap_live_permits_and_come_back_on_release() {
    let mut g = core();
    let rules = [per_second(20).with_max_concurrency(2)];
    let r = g.acquire(&acquire("org:p", &rules, 5), T0).unwrap();
    assert_eq!(r.granted, 2);
    let leases = r.lease_ids.unwrap();
    assert_eq!(leases.len(), 2);
    assert_ne!(leases[0], leases[1]);
    let full = g.acquire(&acquire("org:p", &rules, 1), T0).unwrap();
    assert_eq!(full.granted, 0);
    assert!(full.wait_ms >= 1 && full.wait_ms <= 100, "{}", full.wait_ms);
    let released = g
        .release(
            &release("org:p", &rules, vec![leases[0].clone(), "unknown".into()]),
            T0,
        )
        .unwrap();
    assert_eq!(released.released, 1);
    let again = g
        .release(&release("org:p", &rules, vec![leases[0].clone()]), T0)
        .unwrap();
    assert_eq!(again.released, 0, "releasing twice is a no-op");
    let next = g.acquire(&acquire("org:p", &rules, 5), T0).unwrap();
    assert_eq!(next.granted, 1);
}

#[test]
fn callers_refused_a_slot_take_turns_from_when_calls_usually_end() {
    let mut g = core();
    let rules = [per_second(20).with_max_concurrency(2)];
    let first = g.acquire(&acquire("org:p", &rules, 2), T0).unwrap();
    let leases = first.lease_ids.unwrap();
    g.release(&release("org:p", &rules, vec![leases[0].clone()]), T0 + 200)
        .unwrap();
    let third = g.acquire(&acquire("org:p", &rules, 1), T0 + 200).unwrap();
    assert_eq!(third.granted, 1, "the released slot is free again");
    let b = g.acquire(&acquire("org:p", &rules, 1), T0 + 200).unwrap();
    let c = g.acquire(&acquire("org:p", &rules, 1), T0 + 200).unwrap();
    assert_eq!((b.granted, c.granted), (0, 0));
    assert_eq!(
        b.wait_ms, 50,
        "the oldest call, sent at +50, usually ends 200 ms later"
    );
    assert_eq!(
        c.wait_ms, 75,
        "the next turn is a quarter of a slot's share of a hold later"
    );
}

#[test]
fn leases_of_a_dead_client_expire_after_the_ttl_past_their_dispatch_time() {
    let config = GatewayConfig {
        lease_ttl_ms: 5_000,
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 1).unwrap();
    let rules = [per_second(20).with_max_concurrency(3)];
    let held = g.acquire(&acquire("org:p", &rules, 3), T0).unwrap();
    assert_eq!(held.scheduled_at_ms.unwrap(), [T0, T0 + 50, T0 + 100]);
    assert_eq!(
        g.acquire(&acquire("org:p", &rules, 3), T0 + 4_999)
            .unwrap()
            .granted,
        0
    );
    let partly = g.acquire(&acquire("org:p", &rules, 3), T0 + 5_050).unwrap();
    assert_eq!(
        partly.granted, 2,
        "two leases expired by T0+5050, one still lives"
    );
    let view = g.bucket("org:p", None, T0 + 5_050).unwrap().unwrap();
    assert_eq!(view.live_leases, 3);
    assert_eq!(view.max_concurrency, Some(3));
}

#[test]
fn a_looser_rules_change_still_honours_the_old_rule_for_one_window() {
    let mut g = core();
    let slow = [per_second(10)];
    let fast = [per_second(20)];
    let a = g.acquire(&acquire("org:p", &slow, 2), T0).unwrap();
    assert_eq!(a.scheduled_at_ms.unwrap(), [T0, T0 + 100]);
    let b = g.acquire(&acquire("org:p", &fast, 3), T0).unwrap();
    let times = b.scheduled_at_ms.unwrap();
    assert_eq!(
        times,
        [T0 + 200, T0 + 300, T0 + 400],
        "old 10/s still binds"
    );
    let later = g.acquire(&acquire("org:p", &fast, 2), T0 + 1_200).unwrap();
    let later = later.scheduled_at_ms.unwrap();
    assert_eq!(
        later[1] - later[0],
        50,
        "after the old window, the new pace"
    );
}

#[test]
fn a_stricter_rules_change_counts_the_permits_already_in_its_first_window() {
    let mut g = core();
    g.acquire(&acquire("org:p", &[per_second(20)], 2), T0)
        .unwrap();
    let b = g
        .acquire(&acquire("org:p", &[per_second(5)], 3), T0)
        .unwrap();
    // T0 and T0+50 are in the first window: three of the 5/s rule's five
    // permits are left for it, one interval (200 ms) apart before its end.
    assert_eq!(b.scheduled_at_ms.unwrap(), [T0 + 450, T0 + 650, T0 + 850]);
    assert_eq!(b.effective_requests_per_second, Some(5.0));
}

#[test]
fn rule_order_does_not_rekey_the_bucket() {
    let mut g = core();
    let a = per_second(20);
    let b = PacingRule::new(600, 60_000);
    g.acquire(&acquire("org:p", &[a.clone(), b.clone()], 1), T0)
        .unwrap();
    let r = g.acquire(&acquire("org:p", &[b, a], 1), T0).unwrap();
    assert_eq!(r.scheduled_at_ms.unwrap(), [T0 + 100]);
}

#[test]
fn with_a_secret_every_rate_call_needs_its_buckets_token_and_nothing_changes_without_it() {
    let secret = b"s3cret".to_vec();
    let config = GatewayConfig {
        secret: Some(secret.clone()),
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 1).unwrap();
    let rules = [per_second(20)];
    let mine = mint_rate_scope_token(&secret, "org_a:p", T0 + 60_000);
    let theirs = mint_rate_scope_token(&secret, "org_b:p", T0 + 60_000);

    let mut req = acquire("org_a:p", &rules, 1);
    req.rate_scope_token = Some(mine.clone());
    assert_eq!(g.acquire(&req, T0).unwrap().granted, 1);

    for token in [
        None,
        Some(theirs.clone()),
        Some(mine.replace("v1.", "v1.1")),
    ] {
        let mut forged = acquire("org_a:p", &rules, 1);
        forged.rate_scope_token = token.clone();
        let e = g.acquire(&forged, T0).unwrap_err();
        assert_eq!(e.code, ErrorCode::ForbiddenScope, "{token:?}");
        let mut p = penalize("org_a:p", 1_000);
        p.rate_scope_token = token.clone();
        assert_eq!(
            g.penalize(&p, T0).unwrap_err().code,
            ErrorCode::ForbiddenScope
        );
        let mut rel = release("org_a:p", &rules, vec!["x".into()]);
        rel.rate_scope_token = token;
        assert_eq!(
            g.release(&rel, T0).unwrap_err().code,
            ErrorCode::ForbiddenScope
        );
    }
    let view = g.bucket("org_a:p", Some(&mine), T0).unwrap().unwrap();
    assert_eq!(view.next_free_at_ms, T0 + 50, "refused calls took no time");
    assert_eq!(
        view.effective_requests_per_second,
        Some(20.0),
        "and cut nothing"
    );
    let expired = g.bucket("org_a:p", Some(&mine), T0 + 60_000).unwrap_err();
    assert_eq!(expired.code, ErrorCode::ForbiddenScope);
}

#[test]
fn budget_charges_are_all_or_nothing_and_idempotent_per_reservation() {
    let mut g = core();
    let ok = g
        .charge(&charge("run", "r1", &[("toolCall", 2, 3)]), T0)
        .unwrap();
    assert_eq!(ok.counters["toolCall"], 2);
    assert_eq!(
        g.charge(&charge("run", "r1", &[("toolCall", 2, 3)]), T0)
            .unwrap(),
        ok
    );
    let e = g
        .charge(
            &charge("run", "r2", &[("playCall", 1, 9), ("toolCall", 2, 3)]),
            T0,
        )
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::BudgetExceeded);
    assert_eq!(e.message, "Play execution toolCall budget exceeded (4/3).");
    let other_run = g
        .charge(&charge("run2", "r2", &[("toolCall", 3, 3)]), T0)
        .unwrap();
    assert_eq!(other_run.counters["toolCall"], 3, "runs count separately");
    let after = g
        .charge(&charge("run", "r3", &[("playCall", 1, 9)]), T0)
        .unwrap();
    assert_eq!(
        after.counters["playCall"], 1,
        "the refused charge applied nothing"
    );
}

#[test]
fn a_restored_gateway_never_regrants_a_time_and_keeps_leases_and_budgets() {
    let mut g = core();
    let rules = [per_second(20).with_max_concurrency(10)];
    let before = g.acquire(&acquire("org:p", &rules, 4), T0).unwrap();
    g.penalize(&penalize("org:q", 1_000), T0).unwrap();
    g.charge(&charge("run", "r1", &[("toolCall", 1, 5)]), T0)
        .unwrap();
    let bytes = g.snapshot();
    let mut back = GatewayCore::restore(&bytes, GatewayConfig::default()).unwrap();
    assert_eq!(back.snapshot(), bytes, "equal states give equal bytes");
    let after = back.acquire(&acquire("org:p", &rules, 1), T0).unwrap();
    assert_eq!(after.scheduled_at_ms.unwrap(), [T0 + 200]);
    let leases = before.lease_ids.unwrap();
    let released = back
        .release(&release("org:p", &rules, leases.clone()), T0)
        .unwrap();
    assert_eq!(released.released, 4);
    assert!(
        !leases.contains(&after.lease_ids.unwrap()[0]),
        "ids continue, never repeat"
    );
    let retried = back
        .charge(&charge("run", "r1", &[("toolCall", 1, 5)]), T0)
        .unwrap();
    assert_eq!(
        retried.counters["toolCall"], 1,
        "a retry after restore counts once"
    );
    let q = back
        .acquire(&acquire("org:q", &[per_second(10)], 1), T0)
        .unwrap();
    assert_eq!(
        q.scheduled_at_ms.unwrap(),
        [T0 + 1_000],
        "cooldown survived"
    );
}

#[test]
fn corrupt_or_foreign_snapshots_are_refused_with_a_reason() {
    let mut g = core();
    g.acquire(&acquire("org:p", &[per_second(20)], 2), T0)
        .unwrap();
    let bytes = g.snapshot();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", vec![], "truncated"),
        (
            "foreign",
            b"{\"json\":1}".to_vec(),
            "not a paceline gateway snapshot",
        ),
        (
            "newer version",
            [b"PCLN".as_slice(), &[9]].concat(),
            "format version 9",
        ),
        ("truncated", bytes[..bytes.len() - 3].to_vec(), "checksum"),
        ("cut to its envelope", bytes[..7].to_vec(), "truncated"),
        (
            "trailing bytes",
            [bytes.as_slice(), &[0]].concat(),
            "checksum",
        ),
        (
            "version 1 with trailing bytes",
            [
                include_bytes!("fixtures/gateway-snapshot-v1.bin").as_slice(),
                &[0],
            ]
            .concat(),
            "after its end",
        ),
    ];
    for (what, input, says) in cases {
        let e = GatewayCore::restore(&input, GatewayConfig::default()).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput, "{what}");
        assert!(e.message.contains(says), "{what}: {}", e.message);
    }
}

#[test]
fn idle_buckets_are_forgotten_only_when_that_cannot_loosen_a_limit() {
    let config = GatewayConfig {
        max_buckets: 3,
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 1).unwrap();
    let clock = FakeClock::new(T0);
    let rules = [per_second(1)];
    g.acquire(&acquire("idle", &rules, 1), clock.now_ms())
        .unwrap();
    g.acquire(
        &acquire("leased", &[per_second(1).with_max_concurrency(1)], 1),
        clock.now_ms(),
    )
    .unwrap();
    g.acquire(&acquire("cut", &rules, 1), clock.now_ms())
        .unwrap();
    g.penalize(&penalize("cut", 10), clock.now_ms()).unwrap();
    clock.advance(1_500);
    g.acquire(&acquire("fourth", &rules, 1), clock.now_ms())
        .unwrap();
    assert_eq!(g.bucket_count(), 3, "only the idle bucket was forgotten");
    assert!(g.bucket("idle", None, clock.now_ms()).unwrap().is_none());
    assert!(g.bucket("leased", None, clock.now_ms()).unwrap().is_some());
    assert!(g.bucket("cut", None, clock.now_ms()).unwrap().is_some());
}

#[test]
fn a_bucket_made_after_an_eviction_never_schedules_before_the_forgotten_times() {
    let config = GatewayConfig {
        max_buckets: 2,
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 1).unwrap();
    g.acquire(&acquire("a", &[per_second(1)], 1), T0).unwrap();
    g.acquire(&acquire("b", &[per_second(1)], 1), T0 + 1_000)
        .unwrap();
    assert!(g.bucket("a", None, T0 + 1_000).unwrap().is_none());
    let back = g
        .acquire(&acquire("a", &[per_second(1)], 1), T0 - 60_000)
        .unwrap();
    assert!(back.granted == 0 || back.scheduled_at_ms.unwrap()[0] >= T0 + 1_000);
}

#[test]
fn a_clock_that_jumps_back_never_gets_a_time_already_handed_out() {
    let mut g = core();
    let rules = [per_second(20)];
    let first = g.acquire(&acquire("org:p", &rules, 5), T0).unwrap();
    let last = *first.scheduled_at_ms.unwrap().last().unwrap();
    let back = g
        .acquire(&acquire("org:p", &rules, 5), T0 - 10_000)
        .unwrap();
    assert_eq!(back.granted, 0);
    let forward = g.acquire(&acquire("org:p", &rules, 1), T0).unwrap();
    assert_eq!(forward.scheduled_at_ms.unwrap(), [last + 50]);
}

#[test]
fn too_many_distinct_rule_sets_are_refused_without_changing_the_bucket() {
    let mut g = core();
    for n in 1..=32 {
        g.acquire(&acquire("org:p", &[PacingRule::new(n, 60_000)], 1), T0)
            .unwrap();
    }
    let before = g.snapshot();
    let e = g
        .acquire(&acquire("org:p", &[PacingRule::new(99, 60_000)], 1), T0)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    assert!(
        e.message
            .contains("clients must agree on a provider's rules"),
        "{}",
        e.message
    );
    assert_eq!(g.snapshot(), before);
}

#[test]
fn bad_gateway_options_are_refused() {
    let cases = [
        (
            GatewayConfig {
                horizon_ms: 0,
                ..GatewayConfig::default()
            },
            "horizonMs",
        ),
        (
            GatewayConfig {
                lease_ttl_ms: 10,
                ..GatewayConfig::default()
            },
            "leaseTtlMs",
        ),
        (
            GatewayConfig {
                secret: Some(vec![]),
                ..GatewayConfig::default()
            },
            "secret",
        ),
        (
            GatewayConfig {
                max_buckets: 0,
                ..GatewayConfig::default()
            },
            "maxBuckets",
        ),
    ];
    for (config, field) in cases {
        let e = GatewayCore::new(config, 0).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert!(e.message.starts_with(field), "{}", e.message);
    }
}

#[test]
fn http_routes_map_errors_to_statuses_and_coded_bodies() {
    let secret = b"k".to_vec();
    let config = GatewayConfig {
        secret: Some(secret.clone()),
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 1).unwrap();
    let token = mint_rate_scope_token(&secret, "org:p", T0 + 1_000);
    let run_token = mint_run_scope_token(&secret, "r", T0 + 1_000);
    let body = format!(
        r#"{{"bucketId":"org:p","rateScopeToken":"{token}","rules":[{{"requestsPerWindow":20,"windowMs":1000}}],"requested":2}}"#
    );
    let ok = handle(&mut g, "POST", "/v1/rate/acquire", body.as_bytes(), T0);
    assert_eq!(ok.status, 200);
    assert!(
        ok.body
            .contains(r#""scheduledAtMs":[1767225600000,1767225600050]"#),
        "{}",
        ok.body
    );

    let cases: Vec<(&str, &str, String, u16, &str)> = vec![
        ("POST", "/v1/rate/acquire", "{".into(), 400, "INVALID_INPUT"),
        ("POST", "/v1/rate/acquire", body.replace(&token, "v1.1.00"), 403, "FORBIDDEN_SCOPE"),
        ("GET", "/v1/rate/acquire", String::new(), 405, "INVALID_INPUT"),
        ("POST", "/v1/nope", "{}".into(), 404, "INVALID_INPUT"),
        (
            "POST",
            "/v1/budget/charge",
            format!(r#"{{"rootRunId":"r","runScopeToken":"{run_token}","reservationId":"x","charges":[{{"key":"retry","amount":2,"limit":1}}]}}"#),
            409,
            "BUDGET_EXCEEDED",
        ),
        (
            "POST",
            "/v1/budget/charge",
            r#"{"rootRunId":"r","reservationId":"y","charges":[{"key":"retry","amount":1,"limit":1}]}"#.into(),
            403,
            "FORBIDDEN_SCOPE",
        ),
    ];
    for (method, path, body, status, code) in cases {
        let r = handle(&mut g, method, path, body.as_bytes(), T0);
        assert_eq!(r.status, status, "{method} {path}: {}", r.body);
        assert!(
            r.body.contains(&format!(r#""code":"{code}""#)),
            "{}",
            r.body
        );
    }
    let view = handle(
        &mut g,
        "GET",
        &format!("/v1/rate/buckets/org%3Ap?token={token}"),
        b"",
        T0,
    );
    assert_eq!(view.status, 200, "{}", view.body);
    assert!(
        view.body.contains(r#""nextFreeAtMs":1767225600100"#),
        "{}",
        view.body
    );
}

#[test]
fn leases_riding_on_an_acquire_are_ended_before_it_grants() {
    let mut g = core();
    let rules = [per_second(20).with_max_concurrency(1)];
    let first = g.acquire(&acquire("org:p", &rules, 1), T0).unwrap();
    let refused = g.acquire(&acquire("org:p", &rules, 1), T0 + 100).unwrap();
    assert_eq!(refused.granted, 0, "the one slot is held");
    let mut next = acquire("org:p", &rules, 1);
    next.released_lease_ids = first.lease_ids.unwrap();
    let granted = g.acquire(&next, T0 + 100).unwrap();
    assert_eq!(
        granted.granted, 1,
        "the ridden release freed the slot first"
    );
}
