//! The bucket's adaptive rate: multiplicative decrease on a provider's 429,
//! cubic increase in time, a pause (not a cut) for an outage, and a ceiling
//! the provider may lower by saying its limit.
//!
//! After a cut at rate `r` the rate follows CUBIC's curve
//!
//! ```text
//! rate(t) = w + c (t - K)^3,   w = PLATEAU * r,   c = (w - beta r) / K^3
//! ```
//!
//! over `t`, the time since the cut's cooldown ended during which the
//! bucket kept granting permits and no 429 came back (see
//! [`AdaptiveRate::credit`]): it starts at `beta * r`, climbs, flattens out
//! at the plateau `w` just under the rate the provider refused, holds there,
//! and only then probes above it (with the steeper `PROBE_SCALE`), faster
//! the longer the provider keeps saying yes. The clock is time, as CUBIC's
//! and AWS SDK adaptive retry's are, so a rate cut low recovers as fast as
//! a rate cut a little; it runs only while permits are being granted (an
//! idle bucket gathers no evidence) and lags by [`MATURITY_US`], the time
//! a 429 takes to come back.
//!
//! Two kinds of 429 get two answers. A 429 while probing just past the
//! plateau means the limit is where it was: a shallow cut (`PROBE_BETA`)
//! and a long hold (`HOLD_S`). Any other 429 means the limit fell by an
//! unknown amount: AWS SDK adaptive retry's deep cut of 0.7 (`BETA`) and a
//! quick climb back (`RECOVERY_S`).
//!
//! An outage is not a lower limit. Cuts that follow one another with no
//! credited time between them form a run; the rate before the run is its
//! memory. When a run would take the rate under `PAUSE_SHARE` of that
//! memory, the provider is refusing everything rather than refusing a
//! rate: the run's cuts are undone and the bucket pauses, granting one
//! probe per cooldown (the provider's `Retry-After`). The first probe that
//! matures without a 429 ends the pause at the remembered rate, held and
//! then probed above like any plateau. A provider whose limit truly fell
//! that far refuses again right after the resume; a run that starts within
//! `RUN_BREAK_US` of a resume therefore cuts instead of pausing, so an
//! outage costs at most one extra round of 429s.
//!
//! A provider may state its limit (quota headers). A stated limit under the
//! rules' rate is a ceiling, not a cut: the rate drops to it at once and
//! returns as soon as the provider states more. Nothing lifts the rate above
//! the rules, and a rules change never lifts a cut: the curve is kept apart
//! from the ceiling, so only a stricter ceiling moves the rate.

use super::timeline::Micros;

/// The deep cut, for a limit that fell: AWS SDK adaptive retry's factor.
pub(crate) const BETA: f64 = 0.7;
/// The shallow cut, for a probe just past the last plateau.
pub(crate) const PROBE_BETA: f64 = 0.95;
/// The plateau sits this far under the rate the provider refused.
pub(crate) const PLATEAU: f64 = 0.97;
/// A 429 at or above this share of the plateau is a failed probe.
const PROBE_ZONE: f64 = 0.95;
/// Seconds from a deep cut to the plateau.
pub(crate) const RECOVERY_S: f64 = 4.0;
/// Seconds from a shallow cut to the plateau: the hold before probing.
pub(crate) const HOLD_S: f64 = 8.0;
/// Steepness above the plateau, per second cubed, times the ceiling: how
/// fast the rate climbs once the provider keeps accepting more than it did
/// at the last cut.
pub(crate) const PROBE_SCALE: f64 = 0.004;
/// A run of cuts that would take the rate under this share of the rate
/// before the run is an outage, not a lower limit.
pub(crate) const PAUSE_SHARE: f64 = 0.3;
/// Credited time that ends a run of cuts: the rate reached was accepted.
pub(crate) const RUN_BREAK_US: Micros = 2_000_000;
/// A permit whose dispatch time is this far past with no 429 since counts
/// as accepted. A 429 comes back within a call's first moments; counting
/// here, not when clients report, keeps the feedback loop short even when
/// each isolate talks to the gateway only once per turn.
pub(crate) const MATURITY_US: Micros = 1_000_000;
/// Time is credited to the curve only within this long of a grant (or two
/// of the rate's intervals, if longer): an idle bucket gathers no evidence.
const IDLE_CREDIT_US: Micros = 10_000_000;
/// A 429 cuts only while 429s are at least this share of the permits
/// granted lately (both counts decay over [`SHARE_MEMORY_US`]): a provider
/// that refuses a call now and then at random is not asking for less.
pub(crate) const NOISE_SHARE: f64 = 0.03;
pub(crate) const SHARE_MEMORY_US: Micros = 10_000_000;
/// The rate never falls below this fraction of the ceiling: a provider that
/// said no once must still be asked again.
pub(crate) const FLOOR_FRACTION: f64 = 0.01;
const MIN_FLOOR_RPS: f64 = 0.001;

/// Where the rate stands after a cut: CUBIC's curve over credited time.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Curve {
    /// The plateau: just under the rate the provider last refused.
    pub w_max: f64,
    /// Seconds from the cut to the plateau.
    pub k: f64,
    /// The curve's steepness below the plateau, fixed at the cut.
    pub c: f64,
    /// Credited time since the cut.
    pub elapsed_us: Micros,
}

impl Curve {
    /// A curve that now stands at `rate` and reaches `w_max` in `k` seconds.
    fn from(rate: f64, w_max: f64, k: f64) -> Self {
        let w_max = w_max.max(rate);
        Curve {
            w_max,
            k,
            c: (w_max - rate) / (k * k * k),
            elapsed_us: 0,
        }
    }

    /// Standing at the plateau `rate`: held, then probed above.
    fn holding(rate: f64) -> Self {
        Curve {
            w_max: rate,
            k: 0.0,
            c: 0.0,
            elapsed_us: 0,
        }
    }

    fn rate(&self, cap: f64) -> f64 {
        let s = self.elapsed_us as f64 / 1e6 - self.k;
        let c = if s < 0.0 { self.c } else { PROBE_SCALE * cap };
        self.w_max + c * s * s * s
    }
}

/// An outage in progress: one probe per cooldown until one is accepted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pause {
    /// The spacing of probes: the provider's last cooldown.
    pub probe_every_us: Micros,
    /// The probe granted since the last 429, if any.
    pub probe_at: Option<Micros>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AdaptiveRate {
    /// The rules' rate, or `adaptiveMaxRps` if lower.
    pub cap: f64,
    /// A lower limit the provider stated, if any.
    pub stated: Option<f64>,
    /// `None` until the first cut, and again once the rate climbs back past
    /// the cap.
    pub curve: Option<Curve>,
    /// The rate before the current run of cuts.
    pub memory: Option<f64>,
    /// Credited time since the last cut or resume.
    pub trust_us: Micros,
    /// Time is credited up to here.
    pub credited_until: Micros,
    pub pause: Option<Pause>,
    /// The pause that ended last has not yet earned `RUN_BREAK_US` of trust.
    pub resumed: bool,
    /// Permits granted and 429s reported lately, decayed to `counted_at`.
    pub granted: f64,
    pub refused: f64,
    pub counted_at: Micros,
    /// 429s before this are part of the last cut's overload: permits
    /// granted before it were still being dispatched.
    pub event_until: Micros,
}

impl AdaptiveRate {
    pub fn new(cap: f64) -> Self {
        AdaptiveRate {
            cap,
            stated: None,
            curve: None,
            memory: None,
            trust_us: 0,
            credited_until: 0,
            pause: None,
            resumed: false,
            granted: 0.0,
            refused: 0.0,
            counted_at: 0,
            event_until: 0,
        }
    }

    /// Decays the counts of grants and 429s to `now`.
    fn decay(&mut self, now: Micros) {
        if now > self.counted_at {
            let f = (-((now - self.counted_at) as f64) / SHARE_MEMORY_US as f64).exp();
            self.granted *= f;
            self.refused *= f;
            self.counted_at = now;
        }
    }

    /// Counts a 429 reported at `now`; whether 429s are now frequent enough
    /// to be the provider's answer to the rate rather than noise.
    pub fn refused_at(&mut self, now: Micros) -> bool {
        self.decay(now);
        self.refused += 1.0;
        self.refused >= NOISE_SHARE * self.granted
    }

    /// The most the rate may be: the rules' cap, or a lower stated limit.
    pub fn ceiling(&self) -> f64 {
        self.stated.map_or(self.cap, |s| s.min(self.cap))
    }

    pub fn floor(&self) -> f64 {
        (self.ceiling() * FLOOR_FRACTION).max(MIN_FLOOR_RPS)
    }

    /// The rate the provider is believed to accept (during a pause, the one
    /// service resumes at).
    pub fn rate(&self) -> f64 {
        let ceiling = self.ceiling();
        let curve = self.curve.as_ref().map_or(ceiling, |c| c.rate(self.cap));
        // max/min, not `f64::clamp`: clamp's panic message formats floats,
        // which alone keeps core's float formatter (~6 KB gzipped) in the
        // wasm. The floor is below the ceiling by construction.
        curve.min(ceiling).max(self.floor())
    }

    /// The rate permits are spaced at: during a pause, one per cooldown.
    pub fn pacing_rps(&self) -> f64 {
        match &self.pause {
            Some(p) => 1e6 / p.probe_every_us.max(1) as f64,
            None => self.rate(),
        }
    }

    /// Whether forgetting this rate would loosen the bucket: it is cut,
    /// paused or capped by the provider's word.
    pub fn is_reduced(&self) -> bool {
        self.curve.is_some() || self.pause.is_some() || self.stated.is_some()
    }

    /// A rules change moved the cap. The curve is kept: only a stricter cap
    /// lowers the rate, and no cap lifts a cut.
    pub fn set_cap(&mut self, cap: f64) {
        self.cap = cap;
    }

    /// The provider stated a limit of `rps`: a ceiling if under the cap;
    /// a higher statement withdraws an earlier lower one.
    pub fn state_limit(&mut self, rps: f64) {
        self.stated = (rps < self.cap).then_some(rps);
    }

    /// A permit was granted at `at`: during a pause, it is the probe.
    pub fn on_grant(&mut self, at: Micros) {
        self.granted += 1.0;
        if let Some(p) = &mut self.pause {
            p.probe_at.get_or_insert(at);
        }
    }

    /// Credits the curve with the time up to `now - MATURITY_US` during
    /// which permits were granted (`last_grant` is the latest) and no 429
    /// came; ends a pause whose probe matured.
    pub fn credit(&mut self, now: Micros, last_grant: Option<Micros>) {
        let ripe = now.saturating_sub(MATURITY_US);
        if let Some(p) = &self.pause {
            if p.probe_at.is_some_and(|at| at <= ripe) {
                self.pause = None;
                self.resumed = true;
                self.trust_us = 0;
                self.credited_until = self.credited_until.max(ripe);
            }
            return;
        }
        if ripe <= self.credited_until {
            return;
        }
        let interval = (2e6 / self.rate()) as Micros;
        let active_until = last_grant
            .map_or(0, |g| g.saturating_add(IDLE_CREDIT_US.max(interval)))
            .min(ripe);
        let gained = active_until.saturating_sub(self.credited_until);
        self.credited_until = ripe;
        self.trust_us = self.trust_us.saturating_add(gained);
        if self.trust_us >= RUN_BREAK_US {
            self.resumed = false;
        }
        if let Some(curve) = &mut self.curve {
            curve.elapsed_us = curve.elapsed_us.saturating_add(gained);
            if curve.rate(self.cap) >= self.cap {
                self.curve = None;
            }
        }
    }

    /// The provider pushed back at the current rate, asking for a cooldown
    /// until `cooldown_until`; permits were granted up to `granted_until`.
    pub fn cut(&mut self, cooldown_until: Micros, cooldown_us: Micros, granted_until: Micros) {
        let rate = self.rate();
        self.event_until = granted_until.saturating_add(MATURITY_US);
        eprintln!("CUT at {} rate {rate:.2} trust {} curve {:?} mem {:?}", (cooldown_until/1000) % 1_000_000, self.trust_us, self.curve, self.memory);
        self.credited_until = self.credited_until.max(cooldown_until);
        if self.trust_us >= RUN_BREAK_US || self.memory.is_none() {
            self.memory = Some(rate);
        }
        self.trust_us = 0;
        let memory = self.memory.unwrap_or(rate);
        let w_max = self.curve.as_ref().map_or(f64::INFINITY, |c| c.w_max);
        let failed_probe = self.curve.is_some() && rate >= PROBE_ZONE * w_max;
        let (beta, k) = if failed_probe {
            (PROBE_BETA, HOLD_S)
        } else {
            (BETA, RECOVERY_S)
        };
        if rate * beta < PAUSE_SHARE * memory && !self.resumed {
            self.curve = (memory < self.cap).then(|| Curve::holding(memory));
            self.pause = Some(Pause {
                probe_every_us: cooldown_us.max(1),
                probe_at: None,
            });
            return;
        }
        let floor = self.floor();
        self.curve = Some(Curve::from((rate * beta).max(floor), rate * PLATEAU, k));
    }

    /// A 429 during a pause: the probe failed; the next waits a cooldown.
    pub fn refuse_probe(&mut self, cooldown_us: Micros) {
        if let Some(p) = &mut self.pause {
            p.probe_at = None;
            p.probe_every_us = cooldown_us.max(1);
        }
    }
}

#[cfg(test)]
#[path = "adaptive_tests.rs"]
mod tests;
