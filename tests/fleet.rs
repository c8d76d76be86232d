//! The fleet simulation as a test: many isolates, one gateway, one
//! provider, on virtual time (its adaptive cases, a provider whose limit
//! moves or is hidden, are in `fleet_adaptive.rs`; open-loop traffic
//! shapes in `fleet_shapes.rs`). Each test names the invariant it holds;
//! `cargo bench --bench fleet` reports the same runs' figures.

use paceline::sim::arrivals::percentile;
use paceline::sim::jitter::Spread;
use paceline::sim::run_fleet;
use paceline::sim::scenarios::{
    concurrency_with_deaths, far_callers, gateway_outage, rate_bound_slots, saturated,
    saturated_fleet, shape_figures, slot_bound, ten_slots_bind, ShapeFigures, DEATHS_AT_MS,
    FLEET_HORIZON_MS, OUTAGE_MS, SLOT_BOUND_RPS,
};

#[test]
fn a_saturated_fleet_never_exceeds_the_limit_and_uses_all_of_it() {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let config = saturated(horizon);
        let r = run_fleet(&config);
        assert_eq!(r.windows_over(20, 1_000), 0, "horizon {horizon}");
        assert!(
            r.rejections.is_empty(),
            "horizon {horizon}: {} 429s",
            r.rejections.len()
        );
        assert!(r.every_dispatch_had_a_reserved_time(), "horizon {horizon}");
        let utilization = r.dispatches_between(10_000, 110_000) as f64 / (20.0 * 100.0);
        assert!(
            utilization >= 0.99,
            "horizon {horizon}: utilization {utilization}"
        );
    }
}

/// 32 isolates of 8 callers take turns of their callers' share (12
/// permits), not of the horizon (21 or 41): about a round trip per 11
/// permits at the default horizon, per 15 at the fleet's (one per 16 and
/// 26 when every turn was a whole horizon, at 2.5 times the tail wait).
#[test]
fn turns_keep_gateway_round_trips_under_one_per_ten_permits() {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let r = run_fleet(&saturated(horizon));
        assert!(
            r.round_trips_per_permit() <= 0.1,
            "horizon {horizon}: {}",
            r.round_trips_per_permit()
        );
    }
}

/// Bug: a saturated fleet shared the rule by turns of a whole horizon per
/// isolate, so a caller waited out every other isolate's horizon: p99 3.2 s
/// for 4 x 4 callers and 7.2 s for 8 x 4, where one central queue serving
/// the same callers in order gives each 0.76 s and 1.56 s. Turns among
/// contending isolates now hold their callers' share of a round.
#[test]
fn saturated_isolates_p99_wait_stays_near_the_closed_loop_oracle_bug_turns_of_a_whole_horizon() {
    let fleet = saturated_fleet(4, 4, 1_000);
    let r = run_fleet(&fleet);
    let f = shape_figures(&fleet, &r);
    assert_p99_near_the_oracle("4 x 4", &f);
    assert!(
        f.round_trips_per_permit <= 0.15,
        "4 x 4: {} round trips per permit",
        f.round_trips_per_permit
    );
    // Eight isolates start on whole-horizon turns (a bucket's first
    // second is read on them), so their waits are counted from 20 s.
    let fleet = saturated_fleet(8, 4, 1_000);
    let r = run_fleet(&fleet);
    let f = shape_figures(&fleet, &r);
    let p99 = percentile(&r.waits_from(20_000), 99.0);
    assert!(
        p99 <= 1.75 * f.oracle_p99_ms,
        "8 x 4: p99 {p99} after 20 s against the oracle's {}",
        f.oracle_p99_ms
    );
    for r in [&r, &run_fleet(&saturated_fleet(4, 4, 1_000))] {
        assert_eq!(r.windows_over(20, 1_000), 0);
        assert!(r.dispatches_between(10_000, 110_000) >= 1_980);
    }
}

/// A whole run's p99 wait within half as much again as the closed-loop
/// oracle's, and a quarter of a second for the gateway's round trips.
fn assert_p99_near_the_oracle(fleet: &str, f: &ShapeFigures) {
    assert!(
        f.wait_p99_ms <= 1.5 * f.oracle_p99_ms + 250.0,
        "{fleet}: p99 {} against the oracle's {}",
        f.wait_p99_ms,
        f.oracle_p99_ms
    );
}

/// Bug: isolates of paced slots (peer scenario a) refill ahead of their
/// block's end, asking for more than their waiting callers and booking
/// nothing; granted whatever the timeline held, ahead of the turns booked
/// for callers already waiting, they kept the fleet off its turns for
/// 25 s: p99 2131 ms against the oracle's 780, 2.9 s in some seconds.
/// Among booked turns such an ask now takes its share and is booked too.
#[test]
fn paced_isolates_refilling_ahead_take_turns_with_the_fleet_bug_they_took_permits_out_of_turn() {
    let fleet = rate_bound_slots(1_000);
    let r = run_fleet(&fleet);
    let f = shape_figures(&fleet, &r);
    assert_p99_near_the_oracle("paced slots", &f);
    let settled = percentile(&r.waits_from(10_000), 99.0);
    assert!(
        settled <= 1.75 * f.oracle_p99_ms,
        "p99 {settled} after 10 s"
    );
    assert!(
        f.round_trips_per_permit <= 0.2,
        "{} round trips per permit",
        f.round_trips_per_permit
    );
}

#[test]
fn with_the_slots_binding_the_provider_never_holds_more_than_max_concurrency() {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let config = slot_bound(horizon);
        let r = run_fleet(&config);
        assert!(r.max_in_flight <= 5, "{} in flight", r.max_in_flight);
        assert!(r.rejections.is_empty(), "{} 429s", r.rejections.len());
        assert_eq!(r.windows_over(20, 1_000), 0);
    }
}

#[test]
fn slots_stay_busy_without_a_round_trip_per_call_and_isolates_share_them() {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let config = slot_bound(horizon);
        let r = run_fleet(&config);
        let secs = (config.duration_ms - 10_000) as f64 / 1_000.0;
        let rate = r.dispatches_between(10_000, config.duration_ms) as f64 / secs;
        let per_call = r.round_trips_per_permit();
        // Shares once the fleet contends: the first isolate in holds what it
        // was granted alone for one chain.
        let shares = r.shares_between(10_000, config.duration_ms);
        let spread = r.share_spread(10_000, config.duration_ms);
        assert!(
            rate >= 0.95 * SLOT_BOUND_RPS,
            "{rate:.2}/s of the {SLOT_BOUND_RPS:.2}/s the slots allow"
        );
        assert!(per_call <= 0.3, "{per_call:.3} round trips per call");
        assert!(
            spread <= 0.2,
            "an isolate's share strays {:.1}% from equal: {shares:?}",
            100.0 * spread
        );
    }
}

/// `rate_bound_slots` at both horizons, after its first 5 s: the rule
/// used, never more than it nor more than 10 calls at the provider, each
/// isolate's share within 20% of equal, and at most `max_per_permit`
/// gateway round trips per permit.
fn assert_rate_bound_fleet(keep_leases: bool, max_per_permit: f64) {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let mut config = rate_bound_slots(horizon);
        config.pacer.keep_leases = keep_leases;
        let r = run_fleet(&config);
        assert!(r.max_in_flight <= 10, "{} in flight", r.max_in_flight);
        assert!(r.rejections.is_empty(), "{} 429s", r.rejections.len());
        assert_eq!(r.windows_over(20, 1_000), 0);
        let seconds = (config.duration_ms - 5_000) as f64 / 1_000.0;
        let rate = r.dispatches_between(5_000, config.duration_ms) as f64 / seconds;
        let per_permit = r.round_trips_per_permit();
        let spread = r.share_spread(5_000, config.duration_ms);
        assert!(rate >= 19.0, "{rate:.2}/s of the rule's 20");
        assert!(
            per_permit <= max_per_permit,
            "{per_permit:.2} round trips per permit"
        );
        assert!(
            spread <= 0.2,
            "an isolate's share strays {:.0}% from equal",
            100.0 * spread
        );
    }
}

/// Bug: with calls shorter than a streamed slot's spacing, every permit
/// took a lease of its own: 2.13 round trips per permit.
#[test]
fn short_calls_keep_paced_slots_and_pay_a_round_trip_per_block_bug_two_per_permit() {
    assert_rate_bound_fleet(true, 0.3);
}

/// Bug: peer scenario a's fleet (short calls on paced slots) with one
/// call in twenty held up to 2 s more. A paced pool sizes what its slots
/// serve by how long its calls usually hold them, and one held-up call
/// took that mean from 40 ms to 285 ms: for seconds after each, the
/// pool gave back most of its block's permits as ones no slot would be
/// free for, and the fleet sent 18.68 calls a second (19.28 before paced
/// pools gave such permits back). One call moves the mean by at most four
/// times the mean now.
#[test]
fn a_paced_pool_s_usual_hold_ignores_a_held_up_call_bug_it_gave_back_the_permits_of_seconds() {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let mut config = rate_bound_slots(horizon);
        config.jitter.call_hold = Spread::rare(2_000, 50_000);
        let r = run_fleet(&config);
        let rate = r.dispatches.len() as f64 * 1_000.0 / config.duration_ms as f64;
        assert!(
            rate >= 19.0,
            "horizon {horizon}: {rate:.2}/s of the rule's 20"
        );
        assert_eq!(r.windows_over(20, 1_000), 0, "horizon {horizon}");
    }
}

/// Bug: a fleet of short calls lost most of its first second while it
/// turned from streamed to paced slots (11 calls of 20). An isolate that saw
/// its first call end gave back the streamed leases it held for calls to
/// come, uncalled, though each had its own time on the timeline (4 calls in
/// the first half second); and a lease granted one per permit on a slot
/// ready only half a second later parked the timeline there (12 calls in
/// the first second with the first fixed).
#[test]
fn a_fleet_turning_to_paced_slots_uses_its_first_second_bug_streamed_leases_went_back_uncalled() {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let mut config = rate_bound_slots(horizon);
        config.duration_ms = 5_000;
        let r = run_fleet(&config);
        assert_eq!(r.windows_over(20, 1_000), 0);
        assert!(r.max_in_flight <= 10, "{} in flight", r.max_in_flight);
        let first_half = r.dispatches_between(0, 500);
        let first_second = r.dispatches_between(0, 1_000);
        assert!(
            first_half >= 9,
            "horizon {horizon}: {first_half} calls in the first half second"
        );
        assert!(
            first_second >= 17,
            "horizon {horizon}: {first_second} calls in the first second"
        );
        let first_seconds = r.dispatches_between(0, 3_000);
        assert!(
            first_seconds >= 56,
            "horizon {horizon}: {first_seconds} calls in the first 3 s of 60"
        );
    }
}

/// Bug: while a fleet of short calls turned from streamed to paced slots,
/// isolates that had not seen a call end asked for more streamed slots,
/// and every isolate refused a slot asked again every 100 ms though no
/// slot held could serve it for half a second: 0.88 round trips per
/// permit over the first 5 s.
#[test]
fn a_fleet_turning_to_paced_slots_asks_little_meanwhile_bug_it_polled_every_100_ms() {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let mut config = rate_bound_slots(horizon);
        config.duration_ms = 5_000;
        let r = run_fleet(&config);
        let per_permit = r.round_trips_per_permit();
        assert!(
            per_permit <= 0.7,
            "horizon {horizon}: {per_permit:.2} round trips per permit"
        );
        assert!(r.dispatches.len() >= 94, "{} calls", r.dispatches.len());
    }
}

/// Bug: chains cut at their end came back together, and clients refused
/// while they were overdue (come at their turn a little early) went to the
/// back of the line, booked 600 ms apart: every slot sat idle for up to a
/// second (seconds of 2, 7 and 11 calls of 16.7 once timers ran up to 2 ms
/// late; 88% in real time).
#[test]
fn slots_freed_at_chain_ends_go_to_the_clients_refused_meanwhile_bug_slots_idled_for_a_second() {
    let mut config = slot_bound(FLEET_HORIZON_MS);
    config.duration_ms = 30_000;
    config.jitter.seed = 1;
    config.jitter.timer_late = Spread::upto(2);
    let r = run_fleet(&config);
    assert!(r.max_in_flight <= 5, "{} in flight", r.max_in_flight);
    let thinnest = (3..30)
        .map(|s| r.dispatches_between(s * 1_000, (s + 1) * 1_000))
        .min()
        .expect("seconds after the first three");
    assert!(thinnest >= 13, "a second with {thinnest} calls of 16.7");
    let rate = r.dispatches_between(3_000, 30_000) as f64 / 27.0;
    assert!(
        rate >= 0.95 * SLOT_BOUND_RPS,
        "{rate:.2}/s of the {SLOT_BOUND_RPS:.2}/s the slots allow"
    );
    let per_permit = r.round_trips_per_permit();
    assert!(per_permit <= 0.3, "{per_permit:.2} round trips per permit");
}

/// Bug: a paced isolate gave back its slots while its callers held drawn
/// permits waiting for their times (its block was empty, its callers not
/// counted), and started each turn with one slot though a quarter of its
/// calls outlast a permit's spacing: permits died unused, seconds of 12-16
/// calls of 20.
#[test]
fn paced_isolates_keep_the_slots_their_drawn_permits_need_bug_permits_died_between_turns() {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let config = rate_bound_slots(horizon);
        let r = run_fleet(&config);
        let seconds = config.duration_ms / 1_000;
        let thinnest = (2..seconds)
            .map(|s| r.dispatches_between(s * 1_000, (s + 1) * 1_000))
            .min()
            .expect("a run of several seconds");
        assert!(
            thinnest >= 18,
            "horizon {horizon}: a second with {thinnest} calls of 20"
        );
        let rate = r.dispatches_between(2_000, config.duration_ms) as f64
            / ((config.duration_ms - 2_000) as f64 / 1_000.0);
        assert!(rate >= 19.5, "horizon {horizon}: {rate:.2}/s of 20");
    }
}

#[test]
fn calls_in_flight_reach_max_concurrency_when_demand_wants_them() {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let config = ten_slots_bind(horizon);
        let r = run_fleet(&config);
        assert_eq!(r.max_in_flight, 10, "horizon {horizon}");
        assert!(r.rejections.is_empty(), "{} 429s", r.rejections.len());
        let rate = r.dispatches_between(5_000, config.duration_ms) as f64
            / ((config.duration_ms - 5_000) as f64 / 1_000.0);
        assert!(
            rate >= 9.5,
            "horizon {horizon}: {rate:.2}/s of the 10/s slot bound"
        );
    }
}

/// Bug: only an isolate left with no slot counted as waiting, so with
/// calls of 1 s on ten slots two isolates kept four slots each and two
/// kept one (shares 60% from equal) for as long as the run lasted. Each
/// isolate now shows the claim the gateway gave it, and the slots split
/// two and a half apiece, the odd ones moving round.
#[test]
fn isolates_keeping_several_slots_share_them_evenly_bug_two_kept_four_and_two_kept_one() {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let config = ten_slots_bind(horizon);
        let r = run_fleet(&config);
        for from in (5_000..config.duration_ms).step_by(15_000) {
            let to = (from + 15_000).min(config.duration_ms);
            let spread = r.share_spread(from, to);
            assert!(
                spread <= 0.2,
                "horizon {horizon}, {from}-{to} ms: an isolate's share strays {:.0}% from equal: {:?}",
                100.0 * spread,
                r.shares_between(from, to)
            );
        }
        let per_call = r.round_trips_per_permit();
        assert!(per_call <= 0.3, "{per_call:.3} round trips per call");
    }
}

/// Bug: isolates refused a slot polled for it, about four refusals per
/// permit granted (4.99 round trips per permit), and a turn booked for one
/// went to whoever asked when the slot freed.
#[test]
fn isolates_queued_for_slots_take_turns_by_ticket_bug_five_round_trips_per_permit() {
    // About 2.4 now: a lease per permit costs its acquire and its release.
    assert_rate_bound_fleet(false, 2.5);
}

#[test]
fn dead_isolates_leases_never_let_more_than_max_concurrency_through_and_expire() {
    let config = concurrency_with_deaths(FLEET_HORIZON_MS);
    let r = run_fleet(&config);
    assert!(r.max_in_flight <= 5, "{} in flight", r.max_in_flight);
    assert!(r.rejections.is_empty(), "{} 429s", r.rejections.len());
    assert_eq!(r.windows_over(20, 1_000), 0);
    let before = r.dispatches_between(DEATHS_AT_MS - 10_000, DEATHS_AT_MS) as f64 / 10.0;
    let ttl = config.gateway.lease_ttl_ms;
    let after_ttl = DEATHS_AT_MS + ttl + 2_000;
    let after = r.dispatches_between(after_ttl, after_ttl + 10_000) as f64 / 10.0;
    let during = r.dispatches_between(DEATHS_AT_MS, DEATHS_AT_MS + 4_000) as f64 / 4.0;
    assert!(before > 8.0, "the slots bind at about 10 calls/s: {before}");
    // While others wait, an isolate keeps one slot at most: the four dead
    // ones hold some of the five until their leases lapse.
    assert!(
        during < before * 0.8,
        "the dead isolates held their slots until the TTL: {before} then {during}"
    );
    // Half the callers are left, so their rate wobbles a little more under
    // the slot bound than the whole fleet's did.
    assert!(
        after >= before * 0.9,
        "capacity returned within the lease TTL: {before} then {after}"
    );
}

#[test]
fn a_gateway_outage_stops_dispatch_surfaces_unavailable_and_loses_no_budget_count() {
    let r = run_fleet(&gateway_outage(FLEET_HORIZON_MS));
    assert!(r.every_dispatch_had_a_reserved_time());
    assert!(
        r.errors.get("GATEWAY_UNAVAILABLE").copied().unwrap_or(0) > 0,
        "{:?}",
        r.errors
    );
    let after = r.dispatches_between(OUTAGE_MS.1 + 5_000, OUTAGE_MS.1 + 15_000) as f64 / 10.0;
    assert!(after >= 19.0, "work resumed at {after}/s");
    assert_eq!(
        r.budget_used + r.budget_reserved_unused,
        r.budget_counter_at_gateway,
        "every unit the gateway counted is used once or still held"
    );
    assert_eq!(r.windows_over(20, 1_000), 0);
}

/// Bug: 8 isolates of 2 callers whose calls take about 290 ms (answers
/// 250 ms later) against a provider that takes the rule, 20/s. Each
/// refill asked for the permits its callers drew of the last block, two,
/// spaced at the bucket's 50 ms; the second came due while its caller was
/// still in its call, and died undrawn: 75% of the rule at the 1 s
/// horizon, 68% at 2 s. A permit that dies undrawn now takes one off the
/// blocks the isolate asks for.
#[test]
fn callers_slower_than_the_permits_spacing_use_the_rule_bug_a_permit_a_block_died_undrawn() {
    for (horizon, share) in [(1_000, 0.9), (FLEET_HORIZON_MS, 0.85)] {
        let config = far_callers(horizon);
        let r = run_fleet(&config);
        let accepted = r.accepted_between(0, config.duration_ms) as f64;
        let allowed = 20.0 * config.duration_ms as f64 / 1_000.0;
        assert!(
            accepted >= share * allowed,
            "horizon {horizon}: {accepted} accepted of {allowed}"
        );
        assert_eq!(r.windows_over(20, 1_000), 0, "horizon {horizon}");
        assert!(r.rejections.is_empty(), "horizon {horizon}");
    }
}
