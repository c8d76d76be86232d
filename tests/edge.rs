//! What the provider counts at the rule's edge, when calls reach it a while
//! after their permits let them go, timers in busy isolates fire late,
//! gateway trips take longer one way than the other and isolate clocks
//! disagree with the gateway's. The gateway's window
//! guard is documented to absorb this: half of it is the dispatch
//! tolerance (how late a permit may still be sent, which the client
//! checks), the other half the call's way to the provider. Within that, no
//! sliding second at the provider holds more than the rule; past it, some
//! do, and a wider guard brings them back. `cargo bench --bench fleet`
//! reports the same runs' worst windows.

use paceline::sim::jitter::{Jitter, Spread};
use paceline::sim::scenarios::{
    accepted_rps, at_the_edge, bursty, churning, far_callers, gateway_outage, per_request_state,
    rate_bound_slots, saturated, slot_bound, sparse, transit_allowance_ms, FLEET_HORIZON_MS,
};
use paceline::sim::{run_fleet, FleetConfig, FleetReport};

const SEEDS: [u64; 3] = [1, 2, 3];

/// How long each scenario runs (the gateway outage keeps its own length):
/// long enough for hundreds of windows at the rule, short enough for three
/// seeds of nine scenarios in a debug build.
const RUN_MS: u64 = 30_000;

/// The fleet scenarios whose demand reaches the rule, cut to [`RUN_MS`]:
/// closed loops far above it, and open-loop sparse, bursty and churning
/// traffic that fills it at times.
fn saturating() -> Vec<(&'static str, FleetConfig)> {
    let shorter = |mut c: FleetConfig| {
        if let Some(arrivals) = &mut c.arrivals {
            arrivals.retain(|a| a.at < RUN_MS);
        }
        if c.gateway_outages.is_empty() {
            c.duration_ms = RUN_MS;
        }
        c
    };
    [
        ("saturated: 32 isolates x 8 callers", saturated(1_000)),
        ("saturated, 2 s horizon", saturated(FLEET_HORIZON_MS)),
        (
            "peer scenario a: 4 x 4 callers, maxConcurrency 10",
            rate_bound_slots(1_000),
        ),
        ("sparse: 40 isolates, Poisson, 90%", sparse(40, 0.9)),
        ("bursty: 4 isolates, 8 calls every 2 s", bursty()),
        ("churn: isolates evicted after 1-6 calls", churning()),
        ("a rate state per request, 8 handlers", per_request_state()),
        (
            "kept leases, maxConcurrency 5, calls of 300 ms",
            slot_bound(1_000),
        ),
        (
            "gateway down 40-45 s, budget charged per call",
            gateway_outage(1_000),
        ),
    ]
    .into_iter()
    .map(|(name, c)| (name, shorter(c)))
    .collect()
}

/// Every saturating scenario under `jitter` (one run per seed) with a
/// guard of `guard_ms` (the deployed default when `None`).
fn runs(guard_ms: Option<u64>, jitter: Jitter) -> Vec<(String, FleetConfig, FleetReport)> {
    let mut out = Vec::new();
    for seed in SEEDS {
        for (name, config) in saturating() {
            let config = at_the_edge(config, guard_ms, Jitter { seed, ..jitter });
            let r = run_fleet(&config);
            out.push((format!("{name}, seed {seed}"), config, r));
        }
    }
    out
}

/// No second of the run held more arrivals than the rule, and the
/// provider refused nothing.
fn assert_within_the_rule(name: &str, config: &FleetConfig, r: &FleetReport) {
    let densest = r.densest_window(1_000);
    assert!(
        densest <= config.rule.requests_per_window,
        "{name}: {densest} in one second"
    );
    assert!(
        r.rejections.is_empty(),
        "{name}: {} 429s",
        r.rejections.len()
    );
}

/// Seconds over the rule across every scenario, at the default guard.
fn seconds_over(jitter: Jitter) -> usize {
    runs(None, jitter)
        .iter()
        .map(|(_, c, r)| r.windows_over(c.rule.requests_per_window, 1_000))
        .sum()
}

/// The deployed gateway's defaults: its dispatch tolerance and the rest of
/// its guard, left for the way to the provider.
fn deployed_guard() -> (u64, u64) {
    let config = at_the_edge(saturated(1_000), None, Jitter::default());
    (
        config.gateway.dispatch_tolerance_ms(),
        transit_allowance_ms(&config),
    )
}

/// Every timer late by up to the dispatch tolerance, every call up to the
/// rest of the guard on its way, gateway trips up to 20 ms longer each way
/// (so their halves differ), on one clock. Slots hold too: a lease is held
/// from before the call leaves until after it is answered.
#[test]
fn within_the_window_guard_no_sliding_second_at_the_provider_holds_more_than_the_rule() {
    let (tolerance, allowance) = deployed_guard();
    let jitter = Jitter {
        transit: Spread::upto(allowance),
        timer_late: Spread::upto(tolerance),
        gateway_way: Spread::upto(20),
        ..Jitter::default()
    };
    for (name, config, r) in runs(None, jitter) {
        assert_within_the_rule(&name, &config, &r);
        if let Some(max) = config.rule.max_concurrency {
            assert!(
                r.max_in_flight <= max,
                "{name}: {} in flight",
                r.max_in_flight
            );
        }
        if config.gateway_outages.is_empty() {
            assert!(r.errors.is_empty(), "{name}: {:?}", r.errors);
        }
    }
}

/// However late an isolate's timers fire, a permit woken past its
/// tolerance is dead and never sent: a stalled isolate costs permits,
/// never the rule.
#[test]
fn timers_late_past_the_dispatch_tolerance_cost_permits_never_the_rule() {
    let (tolerance, _) = deployed_guard();
    let jitter = Jitter {
        timer_late: Spread::upto(5 * tolerance),
        ..Jitter::default()
    };
    for (name, config, r) in runs(None, jitter) {
        assert_within_the_rule(&name, &config, &r);
        let closed_loop_on_rate_alone = config.arrivals.is_none()
            && config.rule.max_concurrency.is_none()
            && config.gateway_outages.is_empty();
        if closed_loop_on_rate_alone {
            // Each permit goes out when its timer fires within the
            // tolerance, and no other permit is lost: about 120 permits
            // are on time in a run, so the rate strays some 8% either way.
            let on_time = (tolerance + 1) as f64 / (5 * tolerance + 1) as f64;
            let rate = r.dispatches.len() as f64 * 1_000.0 / config.duration_ms as f64;
            let rule_rate = config.rule.requests_per_second();
            assert!(
                rate >= 0.8 * on_time * rule_rate,
                "{name}: {rate:.2}/s, {on_time:.2} of the timers on time"
            );
        }
    }
}

/// The guard holds the count because of the transit allowance, not by
/// luck: calls that take longer on their way than it allows do put more
/// than the rule in a second, and a guard of twice that transit (the
/// README's advice) brings every second back within the rule.
#[test]
fn transit_past_the_guard_s_allowance_overfills_seconds_and_a_guard_of_twice_it_does_not() {
    let transit_ms = 40;
    let jitter = Jitter {
        transit: Spread::upto(transit_ms),
        ..Jitter::default()
    };
    let over = seconds_over(jitter);
    assert!(
        over > 0,
        "no second over the rule at {transit_ms} ms of transit"
    );
    for (name, config, r) in runs(Some(2 * transit_ms), jitter) {
        assert_within_the_rule(&name, &config, &r);
    }
}

/// Isolate clocks a few milliseconds off the gateway's (synchronised
/// hosts): the client cannot tell an offset that small from a trip's
/// asymmetry, so it converts with none, and each isolate's permits land up
/// to its skew early or late. Two isolates' permits can then be twice the
/// skew closer than the gateway spaced them, and that comes out of the
/// way's half of the guard.
#[test]
fn clocks_off_by_a_few_ms_take_twice_their_skew_out_of_the_way_s_allowance() {
    let (tolerance, allowance) = deployed_guard();
    let skew = 3;
    let jitter = Jitter {
        transit: Spread::upto(allowance - 2 * skew),
        timer_late: Spread::upto(tolerance),
        gateway_way: Spread::upto(20),
        clock_skew_ms: skew,
        ..Jitter::default()
    };
    for (name, config, r) in runs(None, jitter) {
        assert_within_the_rule(&name, &config, &r);
    }
    let with_the_whole_allowance = Jitter {
        transit: Spread::upto(allowance),
        ..jitter
    };
    let over = seconds_over(with_the_whole_allowance);
    assert!(over > 0, "the skew took nothing from the allowance");
}

/// Bug: the demo's fleet (8 isolates of 2 callers looping, calls of about
/// 85 ms, answers 40 ms later) against a provider that takes the rule, with
/// timers and gateway trips up to 10 ms late and calls up to 5 ms on their
/// way, used 80-84% of what the deployed guard allows, at 0.46 round trips
/// a permit. An isolate looked at its next permit a round trip before it
/// was due; with both callers in calls nobody waited for it, so it gave
/// back a quarter of its permits and its booked turn, and asked again
/// seconds behind the fleet when its callers came back. A caller in a call
/// that usually ends before the permit's deadline now counts as coming
/// for it. The rest of the loss (94.6% at the 2 s horizon) was the start:
/// isolates gave back most of their first blocks before any call had
/// ended, and the turns they forgot stayed booked while the timeline
/// idled; the gateway now shortens the turns booked ahead by what comes
/// back.
#[test]
fn callers_in_calls_keep_the_permits_they_come_back_for_bug_the_demo_s_fleet_used_82_percent() {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let mut config = far_callers(horizon);
        config.answer_latency_ms = 40;
        let jitter = config.jitter.on_a_real_machine(1);
        let config = at_the_edge(config, None, jitter);
        let r = run_fleet(&config);
        let allowed = 20_000.0 / (1_000 + config.gateway.window_guard_ms) as f64;
        let share = accepted_rps(&r, 0, 60_000) / allowed;
        assert!(
            share >= 0.96,
            "horizon {horizon}: {share:.3} of {allowed}/s"
        );
        let trips = r.round_trips_per_permit();
        assert!(
            trips <= 0.25,
            "horizon {horizon}: {trips:.2} round trips a permit"
        );
        assert_within_the_rule(&format!("horizon {horizon}"), &config, &r);
    }
}
