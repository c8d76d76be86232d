//! CUBIC's curve in time: where the adaptive rate stands after a cut (see
//! the adaptive module for how cuts place it).

use super::timeline::Micros;

/// Steepness above the plateau, per second cubed, times the ceiling: how
/// fast the rate climbs once the provider keeps accepting more than it did
/// at the last cut.
pub(crate) const PROBE_SCALE: f64 = 0.004;

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
    /// A curve that now stands at `rate` and climbs to `w_max` (at least
    /// `rate`) in `k` seconds.
    pub fn from(rate: f64, w_max: f64, k: f64) -> Self {
        Curve::between(rate, w_max.max(rate), k)
    }

    /// A curve that now stands at `rate` and reaches `w_max` in `k` seconds,
    /// climbing or, for a plateau under `rate`, falling (fastest at first).
    pub fn between(rate: f64, w_max: f64, k: f64) -> Self {
        Curve {
            w_max,
            k,
            c: (w_max - rate) / (k * k * k),
            elapsed_us: 0,
        }
    }

    /// Standing at the plateau `rate`: held, then probed above.
    pub fn holding(rate: f64) -> Self {
        Curve {
            w_max: rate,
            k: 0.0,
            c: 0.0,
            elapsed_us: 0,
        }
    }

    pub fn rate(&self, cap: f64) -> f64 {
        self.rate_at(self.elapsed_us, cap)
    }

    /// The curve's rate after `elapsed_us` of credited time.
    pub fn rate_at(&self, elapsed_us: Micros, cap: f64) -> f64 {
        let s = elapsed_us as f64 / 1e6 - self.k;
        let c = if s < 0.0 { self.c } else { PROBE_SCALE * cap };
        self.w_max + c * s * s * s
    }
}
