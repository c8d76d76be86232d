//! The bucket's adaptive rate: multiplicative decrease on a provider's 429,
//! cubic increase on confirmed successes.
//!
//! The decrease factor is AWS SDK adaptive retry's 0.7. The increase follows
//! the same CUBIC curve that SDK uses, but its clock is the count of
//! successes the clients report, not elapsed time: with no traffic there is
//! no evidence the provider recovered, so the rate does not climb. After a
//! cut at rate `w_max` the rate is
//!
//! ```text
//! rate(s) = w_max + C (s - K)^3,   K = cbrt(w_max (1 - BETA) / C)
//! ```
//!
//! so it starts at `BETA * w_max`, climbs fast, flattens out near `w_max`
//! (where the provider last pushed back, and where the rate then spends most
//! of its successes), and only then probes above it, faster the longer the
//! provider keeps saying yes. `C = CUBIC_SCALE * cap` makes the curve's shape
//! the same at every configured rate: about 67 successes to climb back to
//! `w_max` after a cut from the cap, and about 82 past a plateau at 40% of
//! the cap to reach 95% of it.

pub(crate) const BETA: f64 = 0.7;
pub(crate) const CUBIC_SCALE: f64 = 1.0e-6;
/// The rate never falls below this fraction of the cap: a provider that said
/// no once must still be asked again.
pub(crate) const FLOOR_FRACTION: f64 = 0.01;
const MIN_FLOOR_RPS: f64 = 0.001;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AdaptiveRate {
    /// The configured ceiling: the rules' rate, or `adaptiveMaxRps` if lower.
    pub cap: f64,
    /// The rate when the provider last pushed back.
    pub w_max: f64,
    /// Successes from the cut to the plateau at `w_max`.
    pub k: f64,
    /// The curve's steepness, fixed at the cut.
    pub c: f64,
    pub successes_since_cut: u64,
}

impl AdaptiveRate {
    pub fn new(cap: f64) -> Self {
        AdaptiveRate {
            cap,
            w_max: cap,
            k: 0.0,
            c: CUBIC_SCALE * cap,
            successes_since_cut: 0,
        }
    }

    pub fn floor(&self) -> f64 {
        (self.cap * FLOOR_FRACTION).max(MIN_FLOOR_RPS)
    }

    pub fn rate(&self) -> f64 {
        let s = self.successes_since_cut as f64 - self.k;
        (self.w_max + self.c * s * s * s).clamp(self.floor(), self.cap)
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
        self.restart_at(self.w_max.min(cap), rate);
    }

    pub fn observe_successes(&mut self, n: u64) {
        self.successes_since_cut = self.successes_since_cut.saturating_add(n);
    }

    /// The provider pushed back: the rate drops to `BETA` times itself and
    /// the curve will plateau where it was.
    pub fn cut(&mut self) {
        let rate = self.rate();
        self.restart_at(rate, rate * BETA);
    }

    /// Restarts the curve so that it plateaus at `w_max` and now stands at
    /// `rate`.
    fn restart_at(&mut self, w_max: f64, rate: f64) {
        let rate = rate.max(self.floor());
        self.w_max = w_max.max(rate);
        self.c = CUBIC_SCALE * self.cap;
        self.k = ((self.w_max - rate) / self.c).cbrt();
        self.successes_since_cut = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_at_the_cap() {
        let a = AdaptiveRate::new(20.0);
        assert_eq!(a.rate(), 20.0);
        assert!(!a.is_reduced());
    }

    #[test]
    fn each_cut_multiplies_the_rate_by_beta() {
        let mut a = AdaptiveRate::new(20.0);
        a.cut();
        assert!((a.rate() - 14.0).abs() < 1e-9);
        a.cut();
        assert!((a.rate() - 9.8).abs() < 1e-9);
    }

    #[test]
    fn successes_climb_back_to_the_last_limit_then_past_it_to_the_cap() {
        let mut a = AdaptiveRate::new(20.0);
        a.cut();
        a.observe_successes(a.k.round() as u64);
        assert!((a.rate() - 20.0).abs() < 0.01, "{}", a.rate());
        let mut b = AdaptiveRate::new(20.0);
        b.w_max = 8.0 / BETA;
        b.cut();
        assert!((b.rate() - 8.0).abs() < 1e-9);
        b.observe_successes(b.k.ceil() as u64);
        let plateau = b.rate();
        assert!((plateau - 8.0 / BETA).abs() < 0.05, "{plateau}");
        b.observe_successes(200);
        assert_eq!(b.rate(), 20.0);
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
        assert!((a.rate() - 14.0).abs() < 1e-9, "{}", a.rate());
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
