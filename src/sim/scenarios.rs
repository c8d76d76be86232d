//! The fleet scenarios the client issue names, shared by the test that
//! checks their invariants and the benchmark that reports their figures.

use super::arrivals::{bursts, churn, oracle_waits, percentile, poisson};
use super::fleet::FleetConfig;
use super::jitter::{Jitter, Spread};
use super::oracle::closed_loop_oracle_waits;
use super::provider::ProviderModel;
use super::report::FleetReport;
use crate::client::LOCAL_WINDOW_GUARD_MS;
use crate::protocol::PacingRule;
use crate::time::Millis;

/// The horizon the fleet scenarios run with. At the gateway's default of
/// one second a block holds at most 21 permits of a 20 req/s rule, so 32
/// isolates pay about 0.06 round trips per permit; two seconds halves that.
pub const FLEET_HORIZON_MS: Millis = 2_000;

/// Callers waiting on another caller's refill look every
/// `REFILL_POLL_MS`, so the first permit of a block can go out up to that
/// late, and the block after it then follows its own schedule: a window
/// guard of the same size keeps the provider's count within the rule.
pub const FLEET_WINDOW_GUARD_MS: Millis = crate::client::REFILL_POLL_MS;

fn with_horizon(mut c: FleetConfig, horizon_ms: Millis) -> FleetConfig {
    c.gateway.window_guard_ms = FLEET_WINDOW_GUARD_MS;
    // The simulated provider sees each call the instant it is sent: no
    // part of the guard is needed for the way there.
    c.gateway.dispatch_tolerance_ms = Some(FLEET_WINDOW_GUARD_MS);
    c.gateway.horizon_ms = horizon_ms;
    c.pacer.block_horizon_ms = horizon_ms;
    c
}

/// `config` with the window guard and dispatch tolerance a deployed
/// gateway has by default (a guard of [`LOCAL_WINDOW_GUARD_MS`], half of
/// it the tolerance), a guard of `guard_ms` instead when given, and
/// `jitter`.
pub fn at_the_edge(
    mut config: FleetConfig,
    guard_ms: Option<Millis>,
    jitter: Jitter,
) -> FleetConfig {
    config.gateway.window_guard_ms = guard_ms.unwrap_or(LOCAL_WINDOW_GUARD_MS);
    config.gateway.dispatch_tolerance_ms = None;
    config.jitter = jitter;
    config
}

/// The part of the guard left for the way to the provider once the
/// dispatch tolerance is taken out of it: the transit jitter `config`'s
/// gateway is documented to absorb.
pub fn transit_allowance_ms(config: &FleetConfig) -> Millis {
    config.gateway.window_guard_ms - config.gateway.dispatch_tolerance_ms()
}

/// 32 isolates x 8 callers, 20 req/s configured and true, 120 s.
pub fn saturated(horizon_ms: Millis) -> FleetConfig {
    with_horizon(FleetConfig::saturated(), horizon_ms)
}

/// `isolates` x `callers` calling back to back (calls of 40 ms) against a
/// 20 req/s rule the provider honours, 120 s: every caller always wants its
/// next call, so the fleet's waits are its share of the queue.
pub fn saturated_fleet(isolates: usize, callers: usize, horizon_ms: Millis) -> FleetConfig {
    let mut c = saturated(horizon_ms);
    c.isolates = isolates;
    c.callers_per_isolate = callers;
    c
}

/// A 20 req/s rule with `maxConcurrency: 5`, calls of 500 ms (so the slots
/// bind), and half of the 8 isolates dying at 30 s holding their leases.
pub fn concurrency_with_deaths(horizon_ms: Millis) -> FleetConfig {
    let mut c = with_horizon(FleetConfig::saturated(), horizon_ms);
    c.isolates = 8;
    c.callers_per_isolate = 4;
    c.rule = PacingRule::new(20, 1_000).with_max_concurrency(5);
    c.call_latency_ms = 500;
    c.true_max_concurrency = Some(5);
    c.gateway.lease_ttl_ms = 5_000;
    c.deaths = (0..4).map(|i| (i, 30_000)).collect();
    c.duration_ms = 60_000;
    c
}

pub const DEATHS_AT_MS: Millis = 30_000;

/// 8 isolates x 4 callers against `{20/s, maxConcurrency 5}`, each call
/// held 300 ms at the provider: the slots bind at 5 / 0.3 s = 16.7 calls/s,
/// under the rate, so what counts is how little of each slot's time goes
/// idle between calls.
pub fn slot_bound(horizon_ms: Millis) -> FleetConfig {
    let mut c = with_horizon(FleetConfig::saturated(), horizon_ms);
    c.isolates = 8;
    c.callers_per_isolate = 4;
    c.rule = PacingRule::new(20, 1_000).with_max_concurrency(5);
    c.call_latency_ms = 300;
    c.true_max_concurrency = Some(5);
    c.duration_ms = 60_000;
    c
}

/// 4 isolates x 4 callers against `{20/s, maxConcurrency 10}`, calls of
/// 20-60 ms (the peer benchmark's scenario a): the rate binds, not the
/// slots. A quarter of the calls outlast a permit's spacing, so a paced
/// isolate needs two slots for the permits of its block. A minute, so the
/// isolates' shares are counted over several of the fleet's turns (each
/// isolate's block is a horizon of the whole rate).
pub fn rate_bound_slots(horizon_ms: Millis) -> FleetConfig {
    let mut c = with_horizon(FleetConfig::saturated(), horizon_ms);
    c.isolates = 4;
    c.callers_per_isolate = 4;
    c.rule = PacingRule::new(20, 1_000).with_max_concurrency(10);
    c.true_max_concurrency = Some(10);
    c.call_latency_ms = 20;
    c.jitter.call_hold = Spread::upto(40);
    c.duration_ms = 60_000;
    c
}

/// Peer scenario a's fleet and rule, `{20/s, maxConcurrency 10}`, with
/// calls of 1 s: demand wants 16 calls in flight, so the slots bind, at
/// 10 calls a second, with isolates keeping several streamed slots each.
pub fn ten_slots_bind(horizon_ms: Millis) -> FleetConfig {
    let mut c = rate_bound_slots(horizon_ms);
    c.call_latency_ms = 1_000;
    c.jitter.call_hold = Spread::default();
    c
}

/// Peer scenario b's shape: `rate_bound_slots`' fleet and rule against a
/// provider that takes 8 calls a second for the first [`RISING_LIMIT_AT_MS`]
/// and 20 after, for as long again, stating neither.
pub fn rising_limit(horizon_ms: Millis) -> FleetConfig {
    rising_limit_at(horizon_ms, RISING_LIMIT_AT_MS)
}

/// [`rising_limit`] with the rise at `rise_ms` instead, run to 10 s after it.
pub fn rising_limit_at(horizon_ms: Millis, rise_ms: Millis) -> FleetConfig {
    let mut c = rate_bound_slots(horizon_ms);
    c.true_limit = vec![(0, 8), (rise_ms, 20)];
    c.duration_ms = rise_ms + RISING_LIMIT_AT_MS;
    c
}

pub const RISING_LIMIT_AT_MS: Millis = 10_000;

/// How much later than the provider's moment every answer of
/// [`slow_answers`] reaches its caller: a model's reply, a provider across
/// the world on a slow path.
pub const SLOW_ANSWER_MS: Millis = 2_000;

/// `config` with every answer [`SLOW_ANSWER_MS`] later: each call then
/// holds its slot about 2 s, so `rate_bound_slots`' ten slots bind at
/// about 5 calls a second, past the spacing of each slot's stream.
pub fn slow_answers(mut config: FleetConfig) -> FleetConfig {
    config.answer_latency_ms = SLOW_ANSWER_MS;
    config
}

/// Peer scenario c's shape: [`rising_limit`] with every answer stating the
/// limit in force.
pub fn rising_stated_limit(horizon_ms: Millis) -> FleetConfig {
    let mut c = rising_limit(horizon_ms);
    c.provider = ProviderModel::StatedLimit;
    c
}

/// Calls per second the slots of `slot_bound` allow.
pub const SLOT_BOUND_RPS: f64 = 5.0 / 0.3;

/// The provider's true limit is 40% of the configured 20 req/s until 60 s,
/// then back at 20.
pub fn hidden_limit(horizon_ms: Millis) -> FleetConfig {
    hidden_limit_rising_at(horizon_ms, LIMIT_RISES_AT_MS, 20)
}

pub const LIMIT_RISES_AT_MS: Millis = 60_000;

/// [`hidden_limit`] with its 8/s rising to `to` at `rise_ms` instead.
pub fn hidden_limit_rising_at(horizon_ms: Millis, rise_ms: Millis, to: u64) -> FleetConfig {
    let mut c = with_horizon(FleetConfig::saturated(), horizon_ms);
    c.true_limit = vec![(0, 8), (rise_ms, to)];
    c
}

/// The gateway refuses connections from 40 s to 45 s; every call charges
/// one `toolCall` unit through the gateway's budget.
pub fn gateway_outage(horizon_ms: Millis) -> FleetConfig {
    let mut c = with_horizon(FleetConfig::saturated(), horizon_ms);
    c.duration_ms = 70_000;
    c.gateway_outages = vec![OUTAGE_MS];
    c.budget_limit = Some(1_000_000);
    c
}

pub const OUTAGE_MS: (Millis, Millis) = (40_000, 45_000);

/// The first time after `from` at which the dispatch rate over the next
/// five seconds reaches `rps`, as ms after `from`.
pub fn time_to_reach(report: &FleetReport, from: Millis, rps: f64) -> Option<Millis> {
    (from..report.dispatches.last().copied().unwrap_or(from))
        .step_by(250)
        .find(|&t| report.dispatches_between(t, t + 5_000) as f64 / 5.0 >= rps)
        .map(|t| t + 5_000 - from)
}

/// One way to the gateway in the traffic-shape scenarios (a round trip is
/// twice this).
pub const SHAPE_GATEWAY_ONE_WAY_MS: Millis = 15;

/// The horizon of the traffic-shape scenarios.
pub const SHAPE_HORIZON_MS: Millis = 1_000;

/// The rule of the traffic-shape scenarios: 20 req/s.
const SHAPE_RPS: f64 = 20.0;

/// A traffic shape: open-loop arrivals at the default 1 s horizon, the
/// provider honouring the rule, a gateway 15 ms away each way.
fn shape(arrivals: Vec<super::arrivals::Arrival>, duration_ms: Millis) -> FleetConfig {
    let mut c = with_horizon(FleetConfig::saturated(), SHAPE_HORIZON_MS);
    c.gateway_latency_ms = 2 * SHAPE_GATEWAY_ONE_WAY_MS;
    c.duration_ms = duration_ms;
    c.arrivals = Some(arrivals);
    c
}

/// `isolates` isolates with Poisson arrivals totalling `share` of the rule.
pub fn sparse(isolates: usize, share: f64) -> FleetConfig {
    let rate = SHAPE_RPS * share;
    shape(poisson(isolates, rate, |_| rate, 120_000, 11), 125_000)
}

/// 4 isolates, each a burst of 8 calls every 2 s (80% of the rule on
/// average, 32 at once at worst).
pub fn bursty() -> FleetConfig {
    shape(bursts(4, 8, 2_000, 120_000, 12), 125_000)
}

/// Workers churn: 20 isolate slots share 60% of the rule; each isolate
/// serves 1 to 6 calls and is evicted without handing anything back.
pub fn churning() -> FleetConfig {
    shape(churn(20, SHAPE_RPS * 0.6, 6, 120_000, 13), 125_000)
}

/// 40 isolates whose total demand ramps from 10% of the rule to 100% and
/// back over 10 minutes.
pub fn ramp() -> FleetConfig {
    let rate_at = |t: Millis| {
        let phase = t as f64 / 600_000.0;
        let up = if phase < 0.5 {
            phase * 2.0
        } else {
            (1.0 - phase) * 2.0
        };
        SHAPE_RPS * (0.1 + 0.9 * up)
    };
    shape(poisson(40, SHAPE_RPS, rate_at, 600_000, 14), 605_000)
}

/// 8 request handlers calling back to back, each call building its own
/// rate state (demand far above the rule).
pub fn per_request_state() -> FleetConfig {
    let mut c = with_horizon(FleetConfig::saturated(), SHAPE_HORIZON_MS);
    c.gateway_latency_ms = 2 * SHAPE_GATEWAY_ONE_WAY_MS;
    c.isolates = 8;
    c.callers_per_isolate = 1;
    c.per_request_state = true;
    c.duration_ms = 60_000;
    c
}

/// What the traffic-shape scenarios report beside the oracle.
#[derive(Debug, Clone, Copy)]
pub struct ShapeFigures {
    /// Densest 1 s window of actual dispatches, over the rule.
    pub densest: u64,
    /// Calls dispatched over calls that arrived (open loop), or over what
    /// the rule allows (closed loop).
    pub utilization: f64,
    pub wait_p50_ms: f64,
    pub wait_p99_ms: f64,
    pub oracle_p50_ms: f64,
    pub oracle_p99_ms: f64,
    pub round_trips_per_permit: f64,
}

/// The figures of a shape run, with the oracle computed from the same
/// arrivals, or for a closed loop from the same callers (each asking again
/// when its call completes).
pub fn shape_figures(config: &FleetConfig, r: &FleetReport) -> ShapeFigures {
    let densest = r.densest_window(config.rule.window_ms);
    let (utilization, oracle) = match &config.arrivals {
        Some(arrivals) => {
            let arrived: Vec<Millis> = arrivals.iter().map(|a| a.at).collect();
            (
                r.dispatches.len() as f64 / arrived.len().max(1) as f64,
                oracle_waits(&arrived, config.rule.requests_per_second()),
            )
        }
        None => (
            r.dispatches.len() as f64
                / (config.rule.requests_per_second() * config.duration_ms as f64 / 1_000.0),
            closed_loop_oracle_waits(config),
        ),
    };
    ShapeFigures {
        densest,
        utilization,
        wait_p50_ms: percentile(&r.waits, 50.0),
        wait_p99_ms: percentile(&r.waits, 99.0),
        oracle_p50_ms: percentile(&oracle, 50.0),
        oracle_p99_ms: percentile(&oracle, 99.0),
        round_trips_per_permit: r.round_trips_per_permit(),
    }
}

/// The provider refuses every call from [`PROVIDER_OUTAGE_MS`]`.0` to `.1`
/// (`Retry-After: 1`), and is healthy at the configured 20 req/s around it.
pub fn provider_outage(horizon_ms: Millis) -> FleetConfig {
    let mut c = with_horizon(FleetConfig::saturated(), horizon_ms);
    c.duration_ms = 60_000;
    c.true_limit = vec![
        (0, 20),
        (PROVIDER_OUTAGE_MS.0, 0),
        (PROVIDER_OUTAGE_MS.1, 20),
    ];
    c
}

pub const PROVIDER_OUTAGE_MS: (Millis, Millis) = (20_000, 35_000);

/// A provider of 200 calls per fixed 10 s window (20 req/s) that says what
/// is left and when the window resets (`X-RateLimit-Remaining`/`-Reset`),
/// under a rule that overstates it at 25 req/s: only its headers keep the
/// fleet from its 429s.
pub fn fixed_window_quota(horizon_ms: Millis) -> FleetConfig {
    let mut c = with_horizon(FleetConfig::saturated(), horizon_ms);
    c.rule = PacingRule::new(25, 1_000);
    c.true_limit = vec![(0, u64::MAX)];
    c.provider = ProviderModel::FixedWindow {
        quota: FIXED_WINDOW_QUOTA,
        window_ms: FIXED_WINDOW_MS,
    };
    c
}

pub const FIXED_WINDOW_QUOTA: u64 = 200;
pub const FIXED_WINDOW_MS: Millis = 10_000;

/// The true limit drifts as a sine between 30% and 100% of the configured
/// 20 req/s, period [`DRIFT_PERIOD_MS`], stepped each second; 4 minutes.
pub fn drifting_limit(horizon_ms: Millis) -> FleetConfig {
    let mut c = with_horizon(FleetConfig::saturated(), horizon_ms);
    c.duration_ms = 2 * DRIFT_PERIOD_MS;
    c.true_limit = (0..c.duration_ms)
        .step_by(1_000)
        .map(|t| (t, drifting_limit_at(t)))
        .collect();
    c
}

pub const DRIFT_PERIOD_MS: Millis = 120_000;

/// The drifting limit in force at `offset_ms`.
pub fn drifting_limit_at(offset_ms: Millis) -> u64 {
    let second = offset_ms - offset_ms % 1_000;
    let phase = std::f64::consts::TAU * second as f64 / DRIFT_PERIOD_MS as f64;
    (20.0 * (0.65 + 0.35 * phase.sin())).round() as u64
}

/// The demo's case: clients told 25 req/s by a provider that takes 15, and
/// few callers (8 isolates x 2), one minute.
pub fn overstated_rule(horizon_ms: Millis) -> FleetConfig {
    let mut c = with_horizon(FleetConfig::saturated(), horizon_ms);
    c.isolates = 8;
    c.callers_per_isolate = 2;
    c.rule = PacingRule::new(25, 1_000);
    c.true_limit = vec![(0, 15)];
    c.duration_ms = 60_000;
    c
}

/// The demo's fleet (8 isolates x 2 callers) against a provider that
/// takes the rule, 20/s, and answers every call 250 ms later: each call
/// holds its caller about 290 ms, longer than the permits' 50 ms spacing,
/// so an isolate's callers draw a few permits of each block, each at the
/// time it comes back.
pub fn far_callers(horizon_ms: Millis) -> FleetConfig {
    let mut c = overstated_rule(horizon_ms);
    c.rule = PacingRule::new(20, 1_000);
    c.true_limit = vec![(0, 20)];
    c.answer_latency_ms = 250;
    c
}

/// The provider refuses 1% of calls at random though the fleet stays well
/// under its limit (40 req/s against the configured 20).
pub fn noisy_provider(horizon_ms: Millis) -> FleetConfig {
    with_noise(with_horizon(FleetConfig::saturated(), horizon_ms))
}

/// [`noisy_provider`]'s provider under [`slot_bound`]'s fleet, whose kept
/// leases are streamed: their calls after the first are not granted one by
/// one.
pub fn noisy_provider_streamed_slots(horizon_ms: Millis) -> FleetConfig {
    with_noise(slot_bound(horizon_ms))
}

/// [`slot_bound`]'s fleet against a provider that takes 12 calls a second,
/// under both the rule's 20 and the slots' 16.7: the rate is cut, the
/// bucket hands out a lease per permit, and a client refused a slot looks
/// again within 25-100 ms, so the gateway's round trips per permit are
/// what this case is for.
pub fn slot_bound_under_a_cut(horizon_ms: Millis) -> FleetConfig {
    let mut c = slot_bound(horizon_ms);
    c.true_limit = vec![(0, SLOT_BOUND_CUT_TO)];
    c
}

/// The provider's limit in [`slot_bound_under_a_cut`].
pub const SLOT_BOUND_CUT_TO: u64 = 12;

/// [`slot_bound`]'s fleet through [`provider_outage`]'s outage: the
/// provider refuses everything from 20 s to 35 s with `Retry-After: 1`.
/// Its clients ask for streamed slots, which a paused rate does not hand
/// out.
pub fn slot_bound_through_an_outage(horizon_ms: Millis) -> FleetConfig {
    let mut c = slot_bound(horizon_ms);
    c.true_limit = provider_outage(horizon_ms).true_limit;
    c
}

fn with_noise(mut c: FleetConfig) -> FleetConfig {
    c.true_limit = vec![(0, 40)];
    c.provider = ProviderModel::Noise {
        refused_per_million: 10_000,
    };
    c
}

/// Accepted calls per second over `[from, to)`.
pub fn accepted_rps(report: &FleetReport, from: Millis, to: Millis) -> f64 {
    report.accepted_between(from, to) as f64 * 1_000.0 / (to - from) as f64
}

pub use super::call_tool_run::{
    overstated_rule_through_call_tool, overstated_rule_through_stalling_call_tool, CallToolRun,
};
