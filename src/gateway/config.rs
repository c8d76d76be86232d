//! What a host sets for its gateway: the secret and the limits. None of it
//! is state; a restored gateway takes it afresh.

use crate::error::{Error, Result};

/// The latest `nowMs` the gateway accepts: 2200-01-01T00:00:00Z. A clock
/// past it is broken, and near 2^53 milliseconds the arithmetic on
/// microseconds stops being exact.
pub const MAX_NOW_MS: u64 = 7_258_118_400_000;

#[derive(Debug, Clone, PartialEq)]
pub struct GatewayConfig {
    /// With a secret, every rate request must carry a valid token for its
    /// bucket, and every charge one for its run (see
    /// [`super::mint_rate_scope_token`] and [`super::mint_run_scope_token`]).
    pub secret: Option<Vec<u8>>,
    /// How far ahead of now a dispatch time may be granted.
    pub horizon_ms: u64,
    /// How long a concurrency lease lives past its dispatch time unless
    /// released.
    pub lease_ttl_ms: u64,
    /// The most buckets held at once. Past it idle ones are forgotten (only
    /// those whose forgetting cannot loosen a limit); with none idle a new
    /// bucket is refused with `GATEWAY_UNAVAILABLE`.
    pub max_buckets: usize,
    /// The same for run ledgers (forgotten a day after their last charge).
    pub max_runs: usize,
    /// Every rule window is scheduled as if this much longer, to absorb
    /// jitter between a permit's time and its arrival at the provider: how
    /// late a client sends it (up to the dispatch tolerance), the call's
    /// way there, and clocks that disagree (a client knows the gateway's
    /// clock only to within half its fastest round trip, so two isolates'
    /// permits can land their two errors closer than scheduled). A way
    /// that stalls longer than the tolerance leaves puts more than the
    /// rule in a provider's second.
    pub window_guard_ms: u64,
    /// How late after its time a permit may still be sent, out of the
    /// guard; `None` for half of it (see
    /// [`GatewayConfig::dispatch_tolerance_ms`]). All of the guard suits
    /// only a provider that sees each call the instant it is sent, as in
    /// the fleet simulation.
    pub dispatch_tolerance_ms: Option<u64>,
}

/// The largest `maxBuckets` and `maxRuns`: a million tables is gigabytes.
pub const MAX_TABLES: usize = 1_000_000;

/// No window guard: the schedule is exact, as the core's own tests and a
/// host that adds no jitter want. A gateway whose permits travel to real
/// providers sets one, as the JS entries do (25 ms,
/// [`crate::client::LOCAL_WINDOW_GUARD_MS`]); without it a permit sent a
/// moment late can put one call more than the rule in a provider's second.
impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            secret: None,
            horizon_ms: 1_000,
            lease_ttl_ms: 60_000,
            max_buckets: 10_000,
            max_runs: 10_000,
            window_guard_ms: 0,
            dispatch_tolerance_ms: None,
        }
    }
}

impl GatewayConfig {
    /// How late after its time a permit may still be sent: by default half
    /// the window guard. The guard has to absorb two delays: how late a client sends a
    /// permit (its timer fires late, its answer came late), which the
    /// client checks against this tolerance, and what happens after it is
    /// sent (the call's way to the provider, the provider's own event loop),
    /// which nobody can check. Spending the whole guard on the first left
    /// nothing for the second: under load, one call sent 25 ms late that
    /// also took 11 ms longer to arrive than the next made 21 arrivals in
    /// one second at a provider with a rule of 20.
    pub fn dispatch_tolerance_ms(&self) -> u64 {
        self.dispatch_tolerance_ms
            .unwrap_or(self.window_guard_ms / 2)
    }

    pub fn validate(&self) -> Result<()> {
        if !(1..=60_000).contains(&self.horizon_ms) {
            return Err(Error::invalid(format!(
                "horizonMs must be from 1 to 60000, got {}",
                self.horizon_ms
            )));
        }
        if !(self.horizon_ms..=86_400_000).contains(&self.lease_ttl_ms) {
            return Err(Error::invalid(format!(
                "leaseTtlMs must be from horizonMs ({}) to 86400000, got {}",
                self.horizon_ms, self.lease_ttl_ms
            )));
        }
        if self.secret.as_ref().is_some_and(|s| s.is_empty()) {
            return Err(Error::invalid("secret must not be empty"));
        }
        if self.window_guard_ms > 60_000 {
            return Err(Error::invalid(format!(
                "windowGuardMs must be at most 60000, got {}",
                self.window_guard_ms
            )));
        }
        if let Some(tolerance) = self.dispatch_tolerance_ms {
            if tolerance > self.window_guard_ms {
                return Err(Error::invalid(format!(
                    "dispatchToleranceMs must be at most windowGuardMs ({}), got {tolerance}",
                    self.window_guard_ms
                )));
            }
        }
        for (name, value) in [("maxBuckets", self.max_buckets), ("maxRuns", self.max_runs)] {
            if !(1..=MAX_TABLES).contains(&value) {
                return Err(Error::invalid(format!(
                    "{name} must be from 1 to {MAX_TABLES}, got {value}"
                )));
            }
        }
        Ok(())
    }
}

/// Refuses a `nowMs` that is no sane epoch time, before anything changes.
pub(crate) fn check_now(now_ms: u64) -> Result<()> {
    if now_ms > MAX_NOW_MS {
        return Err(Error::invalid(format!(
            "nowMs must be an epoch time in milliseconds before the year 2200 \
             ({MAX_NOW_MS}), got {now_ms}"
        )));
    }
    Ok(())
}
