//! The fleet simulation's adaptive cases as tests: a provider whose limit
//! is hidden, rises, drifts, is stated, or refuses at random, on virtual
//! time. Each test names the invariant it holds; `cargo bench --bench
//! fleet` reports the same runs' figures.

use paceline::sim::run_fleet;
use paceline::sim::scenarios::{
    accepted_rps, drifting_limit, drifting_limit_at, fixed_window_quota, hidden_limit,
    hidden_limit_rising_at, noisy_provider, noisy_provider_streamed_slots, overstated_rule,
    overstated_rule_through_call_tool, overstated_rule_through_stalling_call_tool, provider_outage,
    rate_bound_slots, rising_limit, rising_limit_at, rising_stated_limit,
    slot_bound_through_an_outage, slot_bound_under_a_cut, slow_answers, time_to_reach,
    FLEET_HORIZON_MS, LIMIT_RISES_AT_MS, PROVIDER_OUTAGE_MS, RISING_LIMIT_AT_MS, SLOT_BOUND_CUT_TO,
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

/// The test above holds at one phase of the rise against the probes (where
/// the last refused probe falls decides its figures). Over rises at each
/// second of 56-64 s every run keeps its 429s after the first 5 s under 2%,
/// and uses at least 95% of the hidden limit at the default horizon (94%
/// at 2 s, where the slowest phase used 94.8%). How long each takes to use
/// the rise is not pinned per phase: the slowest took 17.75 s and 18.75 s,
/// past the canonical rise's 15 s.
#[test]
fn under_a_hidden_limit_429s_stay_rare_whichever_phase_the_rise_meets() {
    for (horizon, min_used) in [(1_000, 0.95), (FLEET_HORIZON_MS, 0.94)] {
        for second in 56..=64 {
            let rise = second * 1_000;
            let r = run_fleet(&hidden_limit_rising_at(horizon, rise, 20));
            let share = r.rejection_share(5_000, rise);
            assert!(
                share < 0.02,
                "horizon {horizon}, rise at {second} s: 429 share after 5 s: {share}"
            );
            let used = accepted_rps(&r, 5_000, rise) / 8.0;
            assert!(
                used >= min_used,
                "horizon {horizon}, rise at {second} s: {used} of a true 8/s"
            );
        }
    }
}

/// Bug: peer scenario b's shape (8 calls a second, then 20, no headers)
/// at the gateway's default horizon. The overshoot that found the limit of
/// 8 ran at 15.7 a second, and the probe's leash let go (the limit rose)
/// only for a step accepted clearly past that: a limit that rose to 20 was
/// climbed a doubling share at a time, a step every two seconds (8.3, 9.1,
/// 10.9, 15.3/s), and the fleet took 7 s to reach the rule. A whole first
/// step accepted past the plateau read now lets it go: the rule is reached
/// within 3 s of the first rate granted past 8.4/s. (When the probe that
/// finds the rise starts depends on where the last cut fell; over rises at
/// each half second of 8-12 s, `cargo bench --bench fleet` reports it.)
#[test]
fn a_limit_that_rises_past_a_plateau_read_is_found_in_one_step_bug_the_leash_waited_for_the_overshoot_s_rate(
) {
    let r = run_fleet(&rising_limit(1_000));
    let rise = RISING_LIMIT_AT_MS;
    let first_at = |from: u64, rps: f64| {
        r.effective_rps
            .iter()
            .find(|&&(t, r)| t >= from && r >= rps)
            .map(|&(t, _)| t)
    };
    let stepped = first_at(rise, 8.4).expect("a probe past the plateau after the rise");
    let found = first_at(stepped, 19.0);
    let per_second: Vec<usize> = (rise / 1_000..2 * rise / 1_000)
        .map(|s| r.accepted_between(s * 1_000, (s + 1) * 1_000))
        .collect();
    assert!(
        found.is_some_and(|at| at - stepped <= 3_000),
        "past 8.4/s at {stepped} ms, 19/s at {found:?}; accepted per second after the rise: \
         {per_second:?}"
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

/// Bug: while the adaptive rate was cut, or capped by a limit the provider
/// stated, a bucket whose rules bound concurrency stopped handing out the
/// paced slots it keeps at the rule's rate and gave one lease per permit:
/// each call a lease, most of them a release of their own, and clients
/// polling every 100 ms for the bucket to turn back. Peer scenarios b's and
/// c's shapes took 0.74 and 2.95 (b, 1 s and 2 s horizons), 2.91 and 4.66
/// (c) gateway round trips per permit, against 0.09 at the rule. Paced
/// slots are kept through a cut: their calls take the timeline's permits,
/// which the cut paces (granted no more than a window ahead, so a cut's
/// hold covers the permits granted at the rate refused).
#[test]
fn a_cut_rate_keeps_paced_slots_bug_every_permit_took_a_lease_and_its_own_round_trips() {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        for (shape, config) in [
            ("b", rising_limit(horizon)),
            ("c", rising_stated_limit(horizon)),
        ] {
            let r = run_fleet(&config);
            let per_permit = r.round_trips_per_permit();
            assert!(
                per_permit <= 0.5,
                "{shape}, horizon {horizon}: {per_permit:.2} round trips per permit: {:?}",
                r.round_trips_by_kind
            );
            let low = accepted_rps(&r, 0, RISING_LIMIT_AT_MS);
            assert!(
                low >= 0.85 * 8.0,
                "{shape}, horizon {horizon}: {low:.2}/s of 8 before the rise"
            );
            assert_eq!(r.windows_over(20, 1_000), 0);
        }
    }
}

/// Bug: peer scenario b's fleet starts on streamed slots (its first
/// answers hand them out before any call has shown how long calls take)
/// and turns to paced ones within a second. The gateway reads what the
/// provider accepted from the permits it granted, which a streamed lease's
/// calls after its first are not; so while the bucket streamed, the first
/// 429 (against 8 a second, at 20) had no reading and cut by a guessed
/// 30%, to 14 a second, and the next seconds sent 12-13 calls against 8.
/// A lease that has made no call off the timeline yet leaves the reading
/// whole: the first cut goes to what the provider took.
#[test]
fn the_first_429_reads_what_the_provider_took_while_no_streamed_call_left_the_timeline_bug_it_cut_to_14(
) {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let r = run_fleet(&rising_limit(horizon));
        let first = r.rejections[0];
        let cut_to = r
            .effective_rps
            .iter()
            .find(|&&(t, _)| t > first)
            .map(|&(_, rps)| rps)
            .expect("an answer after the first 429");
        assert!(
            cut_to <= 1.1 * 8.0,
            "horizon {horizon}: cut to {cut_to:.2}/s against 8 at {first} ms"
        );
        let sent: Vec<usize> = (1..4)
            .map(|s| r.dispatches_between(s * 1_000, (s + 1) * 1_000))
            .collect();
        assert!(
            sent.iter().all(|&n| n <= 10),
            "horizon {horizon}: sent {sent:?} in seconds 1-3 against 8"
        );
    }
}

/// Bug: peer scenario b's fleet reads the limit of 8 within its first
/// second and, climbing back over a deep cut's 4 s, probed 7-8 s in: where
/// the limit rose at 8-10 s the probe was refused in the low half's last
/// 2 s (the peer benchmark's "429s settle" counts it), and the failed probe
/// held the rate at 8 for the next 11 s (a raised half of 40%). A limit
/// read is held as long as one a failed probe confirmed. The rise may come
/// at any time against the probes, so the runs sweep it over 8-12 s.
#[test]
fn a_limit_read_is_held_before_it_is_probed_bug_the_first_probe_met_the_low_limit_just_before_its_rise(
) {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let runs: Vec<(bool, f64)> = (8_000..=12_000)
            .step_by(500)
            .map(|rise| {
                let r = run_fleet(&rising_limit_at(horizon, rise));
                let late_429 = r.rejections.iter().any(|&t| t + 2_000 >= rise && t < rise);
                (late_429, accepted_rps(&r, rise, rise + 10_000) / 20.0)
            })
            .collect();
        let settled = runs.iter().filter(|r| !r.0).count();
        let raised = runs.iter().map(|r| r.1).sum::<f64>() / runs.len() as f64;
        assert!(
            settled >= 6 && raised >= 0.55,
            "horizon {horizon}: {settled} of {} runs without a 429 in the 2 s before the rise, \
             raised half {:.1}%",
            runs.len(),
            raised * 100.0
        );
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

/// Bug: a streamed lease's calls after its first are not granted one by
/// one, so the grants a 429 was weighed against held about a tenth of the
/// calls (10 grants against some 80 calls at the first 429), and a
/// provider's 1% of random 429s read as a limit: the rule was cut by 30%,
/// the fleet sat at 12-14/s of its slots' 16.7 for half the run (13.5/s
/// after 10 s), and paced at the cut it made 6.2 gateway round trips per
/// permit. The successes clients report now count as calls while leases
/// stream (15.8/s), and a 429 the gateway takes for noise leaves an
/// isolate's stream as it was (16.2/s; 16.4/s with no 429 at all).
#[test]
fn random_429s_do_not_cut_a_fleet_on_streamed_slots_bug_a_tenth_of_its_calls_were_counted() {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let r = run_fleet(&noisy_provider_streamed_slots(horizon));
        assert!(!r.rejections.is_empty(), "the provider refused some calls");
        let lowest = r
            .effective_rps
            .iter()
            .map(|&(_, rps)| rps)
            .fold(f64::INFINITY, f64::min);
        assert!(lowest >= 20.0, "horizon {horizon}: cut to {lowest}/s");
        let rate = r.dispatches_between(10_000, 60_000) as f64 / 50.0;
        assert!(
            rate >= 0.96 * SLOT_BOUND_RPS,
            "horizon {horizon}: {rate}/s of the slots' {SLOT_BOUND_RPS}/s"
        );
        assert!(
            r.round_trips_per_permit() < 0.5,
            "horizon {horizon}: {} round trips per permit",
            r.round_trips_per_permit()
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

/// Bug: under a cut or a stated cap the gateway streams no slots, and an
/// isolate whose calls are long still asks for streamed ones. Refused for
/// want of a free slot, it was told to look again within 25-100 ms, though
/// ten slots held by 2 s calls free one every 200 ms: peer scenario b's and
/// c's fleets with every answer 2 s later made 6.8 and 9.2-10.7 gateway
/// round trips per call, against 0.5-0.8 with the limit known. Such a
/// client now takes its turn at the slots as a client refused one does.
#[test]
fn long_calls_wait_for_a_slot_under_a_cut_bug_7_to_11_round_trips_per_call() {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let known = run_fleet(&slow_answers(rate_bound_slots(horizon)));
        for (name, config) in [
            ("hidden", rising_limit(horizon)),
            ("stated", rising_stated_limit(horizon)),
        ] {
            let r = run_fleet(&slow_answers(config));
            assert!(
                r.round_trips_per_permit() <= 4.0,
                "{name} limit, horizon {horizon}: {} round trips per permit",
                r.round_trips_per_permit()
            );
            assert!(
                r.dispatches_between(0, RISING_LIMIT_AT_MS * 2) * 10
                    >= known.dispatches_between(0, RISING_LIMIT_AT_MS * 2) * 8,
                "{name} limit, horizon {horizon}: the slots still serve the calls"
            );
        }
    }
}

/// Bug: five slots, 300 ms calls and a provider that takes 12/s: the cut
/// rate frees a slot for a new permit once per 83 ms, as it places one,
/// and every slot is mostly held by a lease whose permit is still to come.
/// A client refused a slot was told to look again within 25-100 ms, so
/// the fleet's eight isolates made about 170 acquires a second for 12
/// calls: 14.8 gateway round trips per permit. Such clients now take turns
/// at the slots a permit's spacing apart, at the same throughput.
#[test]
fn clients_refused_slots_under_a_cut_take_turns_bug_15_round_trips_per_permit() {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let r = run_fleet(&slot_bound_under_a_cut(horizon));
        assert!(
            r.round_trips_per_permit() <= 3.0,
            "horizon {horizon}: {} round trips per permit",
            r.round_trips_per_permit()
        );
        let accepted = accepted_rps(&r, 10_000, 60_000);
        assert!(
            accepted >= 0.95 * SLOT_BOUND_CUT_TO as f64,
            "horizon {horizon}: {accepted:.2}/s of {SLOT_BOUND_CUT_TO}/s"
        );
        assert!(
            r.max_in_flight <= 5,
            "horizon {horizon}: {} in flight",
            r.max_in_flight
        );
    }
}

/// Bug: through a provider's outage (everything refused for 15 s with
/// `Retry-After: 1`) the bucket's rate is paused and hands out no streamed
/// slots; the slot-bound fleet's clients, which ask for them, were each
/// told to look again within 25-100 ms, though nothing could go out before
/// the pause's next probe: some 300 acquires a second through the outage
/// at the 2 s horizon, 3.3 and 6.5 gateway round trips per permit over the
/// run (1 s and 2 s horizons). They now look
/// again once that probe's time is within their horizon.
#[test]
fn clients_asking_for_streamed_slots_wait_out_a_pause_bug_300_acquires_a_second() {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let r = run_fleet(&slot_bound_through_an_outage(horizon));
        assert!(
            r.round_trips_per_permit() <= 2.5,
            "horizon {horizon}: {} round trips per permit",
            r.round_trips_per_permit()
        );
        let (from, to) = PROVIDER_OUTAGE_MS;
        let during = r.dispatches_between(from, to) as u64 * 1_000 / (to - from);
        assert!(
            during <= 3,
            "horizon {horizon}: {during} calls a second in the outage"
        );
        assert!(
            r.max_in_flight <= 5,
            "horizon {horizon}: {} in flight",
            r.max_in_flight
        );
    }
}

/// Bug: the demo's fleet (8 isolates x 2 callers, rule 25/s, provider 15/s)
/// with every answer 250 ms later. Each isolate's two callers take about 7
/// permits a second, yet its refills asked for a horizon's worth, spaced at
/// the bucket's rate: most of each block went back unused while the other
/// isolates waited for their turns, and the fleet kept 88.8% of the 15/s
/// at the 1 s horizon, 77.3% at 2 s. An isolate that gives permits back now
/// asks for about what its callers took. At 2 s its isolates then meet the
/// provider's limit within 4 s, and each cut's hold costs whole seconds:
/// 93.4% at 1 s, and 83.8% at 2 s with 3.95% 429s (85.9% with 4.69%
/// before the gateway shortened the turns booked ahead by the permits
/// given back; over 12 jittered seeds 85.1% -> 84.5%).
#[test]
fn a_fleet_whose_calls_outlast_the_permits_spacing_uses_the_limit_bug_most_of_each_block_went_back()
{
    for (horizon, share) in [(1_000, 0.92), (FLEET_HORIZON_MS, 0.83)] {
        let mut config = overstated_rule(horizon);
        config.answer_latency_ms = 250;
        let r = run_fleet(&config);
        let accepted = accepted_rps(&r, 0, config.duration_ms);
        assert!(
            accepted >= share * 15.0,
            "horizon {horizon}: {accepted:.2}/s accepted of 15"
        );
        assert_eq!(r.windows_over(25, 1_000), 0, "horizon {horizon}");
    }
}

/// Bug: peer scenario c's fleet (4 isolates x 4 callers, ten slots, a
/// limit stated at 8/s, then 20/s) with every answer 250 ms later. Its
/// calls are shorter than a streamed slot's spacing, so the isolates keep
/// paced slots, two or three each, while a block's permits come 50 ms
/// apart and each call holds its slot about 290 ms: most of a block's
/// permits found no slot free and died unsent, and the fleet used 42% /
/// 48% of the raised 20/s (1 s / 2 s horizon). The permits no kept slot
/// will be free for now go back while another isolate can take them, and
/// a paced isolate asks for what its slots serve.
#[test]
fn paced_slots_with_calls_longer_than_the_permits_spacing_serve_the_limit_bug_most_permits_died_unsent(
) {
    for horizon in [1_000, FLEET_HORIZON_MS] {
        let mut config = rising_stated_limit(horizon);
        config.answer_latency_ms = 250;
        let r = run_fleet(&config);
        let rise = RISING_LIMIT_AT_MS;
        let raised = accepted_rps(&r, rise, rise + 10_000) / 20.0;
        assert!(
            raised >= 0.70,
            "horizon {horizon}: raised half {:.1}% of 20/s",
            raised * 100.0
        );
        assert_eq!(r.windows_over(20, 1_000), 0, "horizon {horizon}");
    }
}
