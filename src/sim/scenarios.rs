//! The fleet scenarios the client issue names, shared by the test that
//! checks their invariants and the benchmark that reports their figures.

use super::fleet::{FleetConfig, FleetReport};
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
