//! Open-loop traffic shapes in the fleet simulation: isolates that come
//! and go with a trickle of calls, bursts, churn and a ramp, each set
//! beside one ideal central queue fed the same arrivals (the oracle).
//! `cargo bench --bench fleet` reports the same runs' figures.

use paceline::sim::arrivals::{bursts, oracle_waits, percentile};
use paceline::sim::run_fleet;
use paceline::sim::scenarios::{bursty, churning, per_request_state, ramp, shape_figures, sparse};

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

/// The bursty shape's waits over its first seconds depend on the phases of
/// its bursts: a fresh isolate whose callers arrive together asks for a
/// whole horizon, and one whose burst comes a moment later waits for that
/// horizon's end. Once every isolate has been served, the fleet's waits
/// follow the oracle's whatever the phases (12 arrival seeds; calls that
/// arrived after 20 s).
#[test]
fn bursty_isolates_wait_about_as_one_central_queue_once_started_whatever_their_phases() {
    const FROM_MS: u64 = 20_000;
    for seed in 100..112 {
        let mut config = bursty();
        let arrivals = bursts(4, 8, 2_000, 120_000, seed);
        let arrived: Vec<u64> = arrivals.iter().map(|a| a.at).collect();
        config.arrivals = Some(arrivals);
        let r = run_fleet(&config);
        let mut fleet = Vec::new();
        for (&wait, &(dispatched, _)) in r.waits.iter().zip(&r.dispatch_log) {
            if dispatched as f64 - wait >= FROM_MS as f64 {
                fleet.push(wait);
            }
        }
        let mut oracle = Vec::new();
        for (&at, wait) in arrived.iter().zip(oracle_waits(&arrived, 20.0)) {
            if at >= FROM_MS {
                oracle.push(wait);
            }
        }
        for p in [50.0, 99.0] {
            let (waited, ideal) = (percentile(&fleet, p), percentile(&oracle, p));
            assert!(
                waited <= ideal + 60.0,
                "seed {seed}: p{p} {waited} against the oracle's {ideal}"
            );
        }
        assert_eq!(r.windows_over(20, 1_000), 0, "seed {seed}");
    }
}
