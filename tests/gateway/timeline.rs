//! One bucket's timeline: evenly spaced grants up to the horizon, turns
//! for refused clients, returned times, the dispatch lead and tolerance,
//! and how several rules bind together.

use crate::common::gateway::{acquire, densest_window, penalize, release};
use crate::{core, per_second};
use paceline::gateway::{GatewayConfig, GatewayCore};
use paceline::protocol::PacingRule;
use paceline::sim::T0;

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
