//! The bucket's adaptive rate: multiplicative decrease on a provider's 429,
//! cubic increase on successes.
//!
//! After a cut at rate `r` the rate follows
//!
//! ```text
//! rate(s) = w + c (s - K)^3,   w = PLATEAU * r,   c = (w - beta r) / K^3
//! ```
//!
//! over `s` successes since the cut (permits that matured without a 429,
//! see the bucket): it starts at `beta * r`, climbs, flattens out at the
//! plateau `w` just under the rate the provider refused, holds there, and
//! only then probes above it (with the steeper `PROBE_SCALE`), faster the
//! longer the provider keeps saying yes. Its clock is successes, not time:
//! with no traffic there is no evidence the provider recovered.
//!
//! Two kinds of 429 get two answers. A 429 while probing just past the
//! plateau means the limit is where it was: a shallow cut (`PROBE_BETA`)
//! and a long hold (`PLATEAU_SUCCESSES`). Any other 429 means the limit
//! fell by an unknown amount: AWS SDK adaptive retry's deep cut of 0.7
//! (`BETA`) and a quick climb back (`RECOVERY_SUCCESSES`). Each probe costs
//! a 429 and a cooldown in which nothing is sent, so the hold sets the price
//! of probing; the fleet simulation (`cargo bench --bench fleet`) chose
//! these constants: under a hidden limit at 40% of the configured rate they
//! keep 429s under 2% and throughput over 90% of the hidden limit, and when
//! the limit returns the rate climbs back to the configured one within 30 s.

/// The deep cut, for a limit that fell: AWS SDK adaptive retry's factor.
pub(crate) const BETA: f64 = 0.7;
/// The shallow cut, for a probe just past the last plateau.
pub(crate) const PROBE_BETA: f64 = 0.95;
/// The plateau sits this far under the rate the provider refused.
pub(crate) const PLATEAU: f64 = 0.97;
/// A 429 at or above this share of the plateau is a failed probe.
const PROBE_ZONE: f64 = 0.95;
/// Successes from a deep cut to the plateau.
pub(crate) const RECOVERY_SUCCESSES: f64 = 60.0;
/// Successes from a shallow cut to the plateau: the hold before probing.
pub(crate) const PLATEAU_SUCCESSES: f64 = 150.0;
/// Steepness above the plateau, times the cap: how fast the rate climbs
/// once the provider keeps accepting more than it did at the last cut.
pub(crate) const PROBE_SCALE: f64 = 3.0e-6;
/// The rate never falls below this fraction of the cap: a provider that said
/// no once must still be asked again.
pub(crate) const FLOOR_FRACTION: f64 = 0.01;
const MIN_FLOOR_RPS: f64 = 0.001;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AdaptiveRate {
    /// The configured ceiling: the rules' rate, or `adaptiveMaxRps` if lower.
    pub cap: f64,
    /// The plateau: just under the rate the provider last refused.
    pub w_max: f64,
    /// Successes from the cut to the plateau; 0 before any cut.
    pub k: f64,
    /// The curve's steepness below the plateau, fixed at the cut.
    pub c: f64,
    pub successes_since_cut: u64,
}

impl AdaptiveRate {
    pub fn new(cap: f64) -> Self {
        AdaptiveRate {
            cap,
            w_max: cap,
            k: 0.0,
            c: 0.0,
            successes_since_cut: 0,
        }
    }

    pub fn floor(&self) -> f64 {
        (self.cap * FLOOR_FRACTION).max(MIN_FLOOR_RPS)
    }

    pub fn rate(&self) -> f64 {
        let s = self.successes_since_cut as f64 - self.k;
        let c = if s < 0.0 {
            self.c
        } else {
            PROBE_SCALE * self.cap
        };
        // max/min, not `f64::clamp`: clamp's panic message formats floats,
        // which alone keeps core's float formatter (~6 KB gzipped) in the
        // wasm. The floor is below the cap by construction.
        (self.w_max + c * s * s * s).max(self.floor()).min(self.cap)
    }

    /// Whether the rate is below its ceiling (a bucket that is must be kept
    /// in memory: forgetting it would lift the cut).
    pub fn is_reduced(&self) -> bool {
        self.rate() < self.cap
    }

    /// A rules change moved the ceiling. A rate the provider never pushed
    /// back on follows it; a cut rate never rises because of it, and falls
    /// if the new ceiling is below it.
    pub fn set_cap(&mut self, cap: f64) {
        let rate = self.rate();
        if !self.is_reduced() || rate >= cap {
            *self = AdaptiveRate::new(cap);
            return;
        }
        self.cap = cap;
        self.restart(self.w_max.min(cap), rate, RECOVERY_SUCCESSES);
    }

    pub fn observe_successes(&mut self, n: u64) {
        self.successes_since_cut = self.successes_since_cut.saturating_add(n);
    }

    /// The provider pushed back at the current rate.
    pub fn cut(&mut self) {
        let rate = self.rate();
        let failed_probe = self.k > 0.0 && rate >= PROBE_ZONE * self.w_max;
        let (beta, k) = if failed_probe {
            (PROBE_BETA, PLATEAU_SUCCESSES)
        } else {
            (BETA, RECOVERY_SUCCESSES)
        };
        self.restart(rate * PLATEAU, rate * beta, k);
    }

    /// Restarts the curve so that it now stands at `rate` and reaches the
    /// plateau `w_max` after `k` successes.
    fn restart(&mut self, w_max: f64, rate: f64, k: f64) {
        let rate = rate.max(self.floor());
        self.w_max = w_max.max(rate);
        self.k = k;
        self.c = (self.w_max - rate) / (k * k * k);
        self.successes_since_cut = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn starts_at_the_cap() {
        let a = AdaptiveRate::new(20.0);
        assert_eq!(a.rate(), 20.0);
        assert!(!a.is_reduced());
    }

    #[test]
    fn a_429_that_is_no_probe_cuts_deep() {
        let mut a = AdaptiveRate::new(20.0);
        a.cut();
        assert!(close(a.rate(), 14.0), "{}", a.rate());
        a.cut();
        assert!(close(a.rate(), 9.8), "{}", a.rate());
    }

    #[test]
    fn successes_climb_to_a_plateau_under_the_refused_rate_and_hold() {
        let mut a = AdaptiveRate::new(20.0);
        a.cut();
        a.observe_successes(RECOVERY_SUCCESSES as u64);
        assert!(close(a.rate(), 20.0 * PLATEAU), "{}", a.rate());
        a.observe_successes(5);
        assert!(
            a.rate() - 20.0 * PLATEAU < 0.01,
            "barely moves: {}",
            a.rate()
        );
    }

    #[test]
    fn a_failed_probe_cuts_shallow_and_holds_longer() {
        let mut a = AdaptiveRate::new(20.0);
        a.cut();
        a.cut();
        a.observe_successes(RECOVERY_SUCCESSES as u64 + 20);
        let probing = a.rate();
        assert!(probing > 9.8 * PLATEAU, "{probing}");
        a.cut();
        assert!(close(a.rate(), probing * PROBE_BETA), "{}", a.rate());
        assert_eq!(a.k, PLATEAU_SUCCESSES);
    }

    #[test]
    fn past_the_plateau_the_rate_climbs_back_to_the_cap() {
        let mut a = AdaptiveRate::new(20.0);
        a.cut();
        a.cut();
        a.cut();
        a.observe_successes(RECOVERY_SUCCESSES as u64 + 100);
        assert_eq!(a.rate(), 20.0);
    }

    #[test]
    fn the_rate_never_falls_below_the_floor() {
        let mut a = AdaptiveRate::new(10.0);
        for _ in 0..100 {
            a.cut();
        }
        assert_eq!(a.rate(), a.floor());
        assert!(a.rate() > 0.0);
    }

    #[test]
    fn a_cut_rate_keeps_below_a_higher_cap_and_drops_to_a_lower_one() {
        let mut a = AdaptiveRate::new(20.0);
        a.cut();
        a.set_cap(40.0);
        assert!(close(a.rate(), 14.0), "{}", a.rate());
        a.set_cap(10.0);
        assert_eq!(a.rate(), 10.0);
    }

    #[test]
    fn an_uncut_rate_follows_the_cap_both_ways() {
        let mut a = AdaptiveRate::new(20.0);
        a.set_cap(40.0);
        assert_eq!(a.rate(), 40.0);
        a.set_cap(5.0);
        assert_eq!(a.rate(), 5.0);
    }
}
