//! The fleet simulation as a test: many isolates, one gateway, a provider
//! with a hidden limit, on virtual time. Each test names the invariant it
//! holds; `cargo bench --bench fleet` reports the same runs' figures.

use paceline::sim::jitter::Spread;
use paceline::sim::run_fleet;
use paceline::sim::scenarios::{
    accepted_rps, bursty, churning, concurrency_with_deaths, drifting_limit, drifting_limit_at,
    fixed_window_quota, gateway_outage, hidden_limit, noisy_provider,
    overstated_rule_through_call_tool, overstated_rule_through_stalling_call_tool,
    per_request_state, provider_outage, ramp, rate_bound_slots, rising_limit, rising_stated_limit,
    saturated, shape_figures, slot_bound, sparse, ten_slots_bind, time_to_reach, DEATHS_AT_MS,
    FLEET_HORIZON_MS, LIMIT_RISES_AT_MS, OUTAGE_MS, PROVIDER_OUTAGE_MS, RISING_LIMIT_AT_MS,
    SLOT_BOUND_RPS,
};

/// Under a limit hidden at 40% of the rule: the 429 share after the first
/// 5 s, the share of the hidden limit used over the same time, and how long
/// the fleet takes to be back at 95% of the rule once the limit rises: the
/// targets, at the gateway's default 1 s horizon and the 2 s fleet horizon.
const HIDDEN_BY_HORIZON: [(u64, f64, f64, u64); 2] = [
    (1_000, 0.02, 0.95, 15_000),
    (FLEET_HORIZON_MS, 0.02, 0.95, 15_000),
];
/// Under a limit drifting as a sine between 30% and 100% of the rule: the
/// 429 share and the share of the true limit used: the targets.
const DRIFT_429_SHARE: f64 = 0.03;
const DRIFT_UTILIZATION: f64 = 0.90;

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

#[test]
fn turns_keep_gateway_round_trips_under_one_per_twenty_permits() {
    let r = run_fleet(&saturated(FLEET_HORIZON_MS));
    assert!(
        r.round_trips_per_permit() <= 0.05,
        "{}",
        r.round_trips_per_permit()
    );
    let at_default = run_fleet(&saturated(1_000));
    assert!(
        at_default.round_trips_per_permit() <= 0.065,
        "a 1 s horizon is bounded by 21-permit blocks: {}",
        at_default.round_trips_per_permit()
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
fn under_a_hidden_limit_429s_stay_rare_and_throughput_stays_near_it_then_recovers() {
    for (horizon, max_share, min_used, max_recovery_ms) in HIDDEN_BY_HORIZON {
        let r = run_fleet(&hidden_limit(horizon));
        let share = r.rejection_share(5_000, LIMIT_RISES_AT_MS);
        assert!(
            share < max_share,
            "horizon {horizon}: 429 share after 5 s: {share}"
        );
        let throughput = accepted_rps(&r, 5_000, LIMIT_RISES_AT_MS);
        assert!(
            throughput >= min_used * 8.0,
            "horizon {horizon}: throughput {throughput} of a true 8/s"
        );
        let recovered = time_to_reach(&r, LIMIT_RISES_AT_MS, 0.95 * 20.0);
        assert!(
            recovered.is_some_and(|ms| ms <= max_recovery_ms),
            "horizon {horizon}: recovered after {recovered:?} ms"
        );
        assert_eq!(r.windows_over(20, 1_000), 0);
    }
}

/// Bug: peer scenario b's shape (8 calls a second, then 20, no headers)
/// at the gateway's default horizon. The overshoot that found the limit of
/// 8 ran at 15.7 a second, and the probe's leash let go (the limit rose)
/// only for a step accepted clearly past that: a limit that rose to 20 was
/// climbed a doubling share at a time, a step every two seconds (8.3, 9.1,
/// 10.9, 15.3/s), and the fleet took 7 s to reach the rule. A step accepted
/// clearly past the plateau read now lets it go: the second step does.
#[test]
fn a_limit_that_rises_past_a_plateau_read_is_climbed_in_two_steps_bug_the_leash_waited_for_the_overshoot_s_rate(
) {
    let r = run_fleet(&rising_limit(1_000));
    let rise = RISING_LIMIT_AT_MS;
    let per_second: Vec<usize> = (rise / 1_000..2 * rise / 1_000)
        .map(|s| r.accepted_between(s * 1_000, (s + 1) * 1_000))
        .collect();
    let after = accepted_rps(&r, rise + 4_000, 2 * rise);
    assert!(
        after >= 19.0,
        "{after:.2}/s from 4 s after the rise; per second: {per_second:?}"
    );
    let low = accepted_rps(&r, 0, rise);
    assert!(low >= 0.85 * 8.0, "{low:.2}/s of 8 before the rise");
    assert_eq!(r.windows_over(20, 1_000), 0);
}

/// Bug: peer scenario c's shape (every answer states the limit in force,
/// 8 a second, then 20) at the gateway's default horizon. A new stated
/// limit goes to the gateway at once, a repeat rides on the isolate's next
/// request: one isolate's answer stating 8, made before the rise, came in
/// after another's stating 20, and the rate went back to 8 for half a
/// second (89% of 20/s after the rise). A statement made before the one in
/// force is stale.
#[test]
fn a_stated_limit_that_rose_is_not_undone_by_an_older_answer_bug_the_rate_fell_back_to_8() {
    let r = run_fleet(&rising_stated_limit(1_000));
    let rise = RISING_LIMIT_AT_MS;
    let lifted = r
        .effective_rps
        .iter()
        .position(|&(t, rps)| t >= rise && rps >= 19.0)
        .expect("the stated 20 lifts the rate");
    let lowest = r.effective_rps[lifted..]
        .iter()
        .map(|&(_, rps)| rps)
        .fold(f64::INFINITY, f64::min);
    assert!(lowest >= 19.0, "back down to {lowest:.2}/s after the rise");
    let raised = accepted_rps(&r, rise, 2 * rise);
    assert!(raised >= 0.92 * 20.0, "{raised:.2}/s of 20 after the rise");
    assert_eq!(r.windows_over(20, 1_000), 0);
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

/// Every open-loop shape, with its name.
fn shapes() -> Vec<(&'static str, paceline::sim::FleetConfig)> {
    vec![
        ("sparse: 40 isolates, Poisson, 90%", sparse(40, 0.9)),
        ("sparse: 100 isolates, Poisson, 50%", sparse(100, 0.5)),
        ("sparse: 1,000 isolates, Poisson, 50%", sparse(1_000, 0.5)),
        ("bursty: 4 isolates, 8 calls every 2 s", bursty()),
        ("churn: isolates evicted after 1-6 calls", churning()),
        ("ramp: 10% to 100% and back over 10 min", ramp()),
    ]
}

#[test]
fn sparse_bursty_and_churning_fleets_keep_the_provider_within_the_rule_and_near_the_oracle() {
    for (name, config) in shapes() {
        let r = run_fleet(&config);
        let f = shape_figures(&config, &r);
        assert!(f.densest <= 20, "{name}: {} in one second", f.densest);
        assert_eq!(r.windows_over(20, 1_000), 0, "{name}");
        assert!(f.utilization >= 0.99, "{name}: served {}", f.utilization);
        assert!(
            f.wait_p50_ms <= f.oracle_p50_ms + 40.0,
            "{name}: p50 {} against the oracle's {}",
            f.wait_p50_ms,
            f.oracle_p50_ms
        );
        assert!(
            f.wait_p99_ms <= f.oracle_p99_ms + 150.0,
            "{name}: p99 {} against the oracle's {}",
            f.wait_p99_ms,
            f.oracle_p99_ms
        );
        assert!(
            f.round_trips_per_permit <= 1.05,
            "{name}: {} round trips per permit",
            f.round_trips_per_permit
        );
        assert!(r.errors.is_empty(), "{name}: {:?}", r.errors);
    }
}

#[test]
fn a_provider_outage_is_a_pause_probed_once_per_cooldown_and_service_resumes_at_the_rule() {
    // At the default 1 s horizon the target, 3 calls/s; at 2 s, permits
    // other isolates were granted up to 2 s ahead before the first 429 still
    // go out (a bound a little over what the simulation measures).
    for (horizon, most) in [(1_000, 3.0), (FLEET_HORIZON_MS, 3.6)] {
        let r = run_fleet(&provider_outage(horizon));
        let (from, to) = PROVIDER_OUTAGE_MS;
        let during = r.dispatches_between(from, to) as f64 * 1_000.0 / (to - from) as f64;
        assert!(
            during <= most,
            "horizon {horizon}: {during} calls/s during the outage"
        );
        let back = time_to_reach(&r, to, 0.95 * 20.0);
        assert!(
            back.is_some_and(|ms| ms <= 10_000),
            "horizon {horizon}: back to 95% of the rule after {back:?} ms"
        );
        assert_eq!(r.windows_over(20, 1_000), 0);
    }
}

#[test]
fn a_state_built_per_request_still_uses_nine_tenths_of_the_rule() {
    let config = per_request_state();
    let r = run_fleet(&config);
    let f = shape_figures(&config, &r);
    assert!(f.utilization >= 0.9, "{}", f.utilization);
    assert_eq!(r.windows_over(20, 1_000), 0);
}

#[test]
fn a_fixed_window_provider_s_remaining_and_reset_headers_prevent_every_429() {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let r = run_fleet(&fixed_window_quota(horizon));
        assert!(
            r.rejections.is_empty(),
            "horizon {horizon}: {} 429s",
            r.rejections.len()
        );
        let utilization = accepted_rps(&r, 0, 120_000) / 20.0;
        assert!(
            utilization >= 0.97,
            "horizon {horizon}: utilization {utilization} of the provider's 20/s"
        );
    }
}

#[test]
fn a_drifting_limit_is_tracked_with_few_429s() {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let config = drifting_limit(horizon);
        let r = run_fleet(&config);
        let share = r.rejection_share(0, config.duration_ms);
        assert!(
            share < DRIFT_429_SHARE,
            "horizon {horizon}: 429 share {share}"
        );
        let allowed: u64 = (0..config.duration_ms)
            .step_by(1_000)
            .map(drifting_limit_at)
            .sum();
        let used = r.accepted_between(0, config.duration_ms) as f64 / allowed as f64;
        assert!(
            used >= DRIFT_UTILIZATION,
            "horizon {horizon}: {used} of the true limit"
        );
    }
}

#[test]
fn random_429s_well_under_the_limit_do_not_cut_the_rate() {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let r = run_fleet(&noisy_provider(horizon));
        assert!(!r.rejections.is_empty(), "the provider refused some calls");
        let utilization = accepted_rps(&r, 10_000, 110_000) / 20.0;
        assert!(
            utilization >= 0.95,
            "horizon {horizon}: utilization {utilization} of the rule"
        );
    }
}

/// Bug: a failed probe cut the rate a few percent, and the refused
/// isolate thinned its cached block to the new spacing, which drops every
/// other permit of a block granted just above it: an isolate that is the
/// whole fleet (the demo's case, one isolate's four runs calling back to
/// back through `callTool`, told 25 req/s by a provider that takes 15) sent
/// half its calls for the rest of the block, 11 of 15 accepted in the
/// second of each probe. A shallow cut keeps the permits due soon: past
/// the rule's first overshoot, no second accepts under 13.
#[test]
fn a_failed_probe_does_not_halve_a_lone_isolate_s_block() {
    let run = overstated_rule_through_call_tool(60_000);
    let accepted = &run.accepted_per_second;
    let total: u64 = accepted.iter().sum();
    assert!(
        accepted[2..].iter().all(|&n| n >= 13),
        "a second accepted under 13 of 15: {accepted:?}"
    );
    assert!(
        total as f64 >= 0.95 * 15.0 * accepted.len() as f64,
        "accepted {total} in {} s: {accepted:?}",
        accepted.len()
    );
    assert!(
        run.refused as f64 <= 0.02 * run.dispatched as f64,
        "{} 429s of {}",
        run.refused,
        run.dispatched
    );
}

/// Bug: the overshoot that finds a limit (the demo's first second: 25 a
/// second against a provider that takes 15 over a sliding second) sent
/// every permit the runs had already drawn into the provider's full window.
/// All four runs were refused within 0.12 s and each waited its own
/// `Retry-After: 1`, so the second second accepted 5 of 15. The cut now
/// answers with the time the window frees, and a permit drawn before the
/// cut and due before then is not sent.
#[test]
fn permits_drawn_before_the_overshoot_s_cut_stay_out_of_the_full_window_bug_the_demo_s_second_second_took_5_of_15(
) {
    let run = overstated_rule_through_call_tool(6_000);
    let accepted = &run.accepted_per_second;
    assert!(
        accepted.iter().all(|&n| n >= 13),
        "a second accepted under 13 of 15: {accepted:?}"
    );
    let discovery = run.refused_at.iter().filter(|&&at| at < 1_000).count();
    assert!(
        discovery <= 2,
        "{discovery} 429s in the first second: {:?}",
        run.refused_at
    );
}

/// Bug: on a host that sends its calls late (the demo on a loaded machine),
/// the gateway's reading of what the provider took, a count of calls in
/// one second, is often a call off. A step that followed a reading one
/// call high (a failed probe read as a rising limit, or the overshoot that
/// found the limit) set a plateau over the limit; the next 429 read one
/// call lower, and that was taken for a falling limit and followed down a
/// quarter: the demo accepted 10-12 of 15 for ten seconds (13.5 req/s over
/// the run). A step after such a guess is not a trend: past the first two
/// seconds, no two seconds in a row accept under 13.
#[test]
fn a_reading_one_call_off_is_not_a_falling_limit_bug_the_demo_sat_at_11_of_15() {
    for (max_stall_ms, seed) in [(50, 3), (30, 10)] {
        let run = overstated_rule_through_stalling_call_tool(60_000, max_stall_ms, seed);
        let accepted = &run.accepted_per_second;
        assert!(
            accepted[2..].windows(2).all(|w| w[0] >= 13 || w[1] >= 13),
            "stalls up to {max_stall_ms} ms, seed {seed}: two seconds in a row under 13: {accepted:?}"
        );
        assert!(
            accepted[2..].iter().all(|&n| n >= 12),
            "stalls up to {max_stall_ms} ms, seed {seed}: a second under 12: {accepted:?}"
        );
    }
}
