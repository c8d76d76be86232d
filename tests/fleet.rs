//! The fleet simulation as a test: many isolates, one gateway, a provider
//! with a hidden limit, on virtual time. Each test names the invariant it
//! holds; `cargo bench --bench fleet` reports the same runs' figures.

use paceline::sim::run_fleet;
use paceline::sim::scenarios::{
    bursty, churning, concurrency_with_deaths, gateway_outage, hidden_limit, per_request_state,
    ramp, saturated, shape_figures, sparse, time_to_reach, DEATHS_AT_MS, FLEET_HORIZON_MS,
    LIMIT_RISES_AT_MS, OUTAGE_MS,
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
    assert!(before > 8.0, "the slots bind at about 10 calls/s: {before}");
    assert!(
        after >= before * 0.95,
        "capacity returned within the lease TTL: {before} then {after}"
    );
}

#[test]
fn under_a_hidden_limit_429s_stay_rare_and_throughput_stays_near_it_then_recovers() {
    let r = run_fleet(&hidden_limit(FLEET_HORIZON_MS));
    let share = r.rejection_share(10_000, LIMIT_RISES_AT_MS);
    assert!(share < 0.02, "429 share after 10 s: {share}");
    let throughput = r.accepted_between(10_000, LIMIT_RISES_AT_MS) as f64
        / ((LIMIT_RISES_AT_MS - 10_000) as f64 / 1_000.0);
    assert!(
        throughput >= 0.9 * 8.0,
        "throughput {throughput} of a true 8/s"
    );
    let recovered = time_to_reach(&r, LIMIT_RISES_AT_MS, 0.95 * 20.0);
    assert!(
        recovered.is_some_and(|ms| ms <= 30_000),
        "recovered after {recovered:?} ms"
    );
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
fn a_state_built_per_request_still_uses_nine_tenths_of_the_rule() {
    let config = per_request_state();
    let r = run_fleet(&config);
    let f = shape_figures(&config, &r);
    assert!(f.utilization >= 0.9, "{}", f.utilization);
    assert_eq!(r.windows_over(20, 1_000), 0);
}
