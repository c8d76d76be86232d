//! The fleet scenarios the client issue names, shared by the test that
//! checks their invariants and the benchmark that reports their figures.

use super::fleet::{FleetConfig, FleetReport};
use super::provider::ProviderModel;
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
    c.gateway.horizon_ms = horizon_ms;
    c.pacer.block_horizon_ms = horizon_ms;
    c
}

/// 32 isolates x 8 callers, 20 req/s configured and true, 120 s.
pub fn saturated(horizon_ms: Millis) -> FleetConfig {
    with_horizon(FleetConfig::saturated(), horizon_ms)
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

/// The provider's true limit is 40% of the configured 20 req/s until 60 s,
/// then back at 20.
pub fn hidden_limit(horizon_ms: Millis) -> FleetConfig {
    let mut c = with_horizon(FleetConfig::saturated(), horizon_ms);
    c.true_limit = vec![(0, 8), (LIMIT_RISES_AT_MS, 20)];
    c
}

pub const LIMIT_RISES_AT_MS: Millis = 60_000;

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

/// The provider refuses 1% of calls at random though the fleet stays well
/// under its limit (40 req/s against the configured 20).
pub fn noisy_provider(horizon_ms: Millis) -> FleetConfig {
    let mut c = with_horizon(FleetConfig::saturated(), horizon_ms);
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
