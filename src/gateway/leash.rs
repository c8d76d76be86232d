//! How far a probe may run ahead of what the provider was seen to accept.
//!
//! Above its plateau the adaptive rate climbs on a curve in time, but a
//! client is granted a whole block (up to the gateway's horizon) at the rate
//! of the moment, and a 429 answers it only after the block is out. Left to
//! the curve alone, one block can jump far past the limit, and every permit
//! of it past the limit is refused. The leash keeps each step within a
//! share of the highest rate whose first permit matured without a 429, and
//! doubles the share with each step the provider accepts: a probe past an
//! unchanged limit overshoots by a few percent. A step accepted clearly past
//! the rate refused at the last cut (a first step's share past it: a step
//! just past it may pass while the calls happen not to bunch), or a whole
//! first step past the plateau held since, shows the limit rose, and the
//! share goes straight to its largest, so a limit that rose is found in
//! one step. The plateau sits just under the limit the cut found, so a
//! whole step past it, held for the window a step matures in, meets that
//! limit; after a cut to what the provider accepted (an overshoot at twice
//! the limit, read as 8 a second) the rate refused is one no step would
//! ever pass. A limit followed down has no such plateau: the fall's end is
//! a projection under what the provider took, and only a step past the
//! rate refused counts.

use super::timeline::Micros;

/// The first step above the accepted rate, as a share of it.
pub(crate) const FIRST_STEP: f64 = 0.05;
/// The share of a first step that counts as the whole of it.
const WHOLE_STEP: f64 = 0.99;
/// Steps past this many accepted ones no longer double.
const MAX_DOUBLINGS: u32 = 5;

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Leash {
    /// The highest rate seen accepted since the last cut; 0 when unknown
    /// (the leash is then slack).
    pub accepted: f64,
    /// The highest rate granted above `accepted`, and the time of its first
    /// permit, until that permit matures.
    pub trial: Option<(Micros, f64)>,
    /// Steps accepted since the last cut.
    pub steps: u32,
    /// The rate the provider refused at the last cut: a step accepted past
    /// it (or past the plateau's first step, if lower) shows the limit
    /// rose, and the leash lets go.
    pub refused: f64,
}

impl Leash {
    /// After a cut of `refused` to `rate`, the rate believed, not yet seen.
    pub fn reset(&mut self, rate: f64, refused: f64) {
        *self = Leash {
            accepted: rate,
            trial: None,
            steps: 0,
            refused,
        };
    }

    /// The most a probe above `plateau` (a rate held and accepted) may ask
    /// for now.
    pub fn reach(&self, plateau: f64) -> f64 {
        if self.accepted <= 0.0 {
            return f64::INFINITY;
        }
        let share = FIRST_STEP * f64::from(1u32 << self.steps.min(MAX_DOUBLINGS));
        self.accepted.max(plateau) * (1.0 + share)
    }

    /// A permit granted at `at` at `rate`.
    pub fn granted(&mut self, at: Micros, rate: f64) {
        if rate > self.accepted && self.trial.is_none_or(|(_, r)| rate > r) {
            self.trial = Some((at, rate));
        }
    }

    /// Permits dispatched up to `ripe` have had the time a 429 takes;
    /// `plateau` is where the rate held, accepted, before the step.
    pub fn matured(&mut self, ripe: Micros, plateau: f64) {
        if let Some((at, rate)) = self.trial {
            if at <= ripe {
                self.accepted = self.accepted.max(rate);
                self.trial = None;
                let past_refused = rate > self.refused * (1.0 + FIRST_STEP);
                // A whole first step (but for rounding) past the plateau.
                let past_plateau = rate >= plateau * (1.0 + WHOLE_STEP * FIRST_STEP);
                self.steps = if past_refused || past_plateau {
                    MAX_DOUBLINGS
                } else {
                    self.steps.saturating_add(1)
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_accepted_step_doubles_the_share_and_one_past_the_refused_rate_lets_go() {
        let mut leash = Leash::default();
        assert_eq!(
            leash.reach(8.0),
            f64::INFINITY,
            "slack when nothing is known"
        );
        leash.reset(7.8, 8.4);
        assert!((leash.reach(7.8) - 7.8 * 1.05).abs() < 1e-9);
        leash.granted(10, 8.1);
        leash.matured(9, f64::INFINITY);
        assert_eq!(leash.steps, 0, "not yet matured");
        leash.matured(10, f64::INFINITY);
        assert!((leash.reach(7.8) - 8.1 * 1.1).abs() < 1e-9, "doubled");
        leash.granted(20, 8.6);
        leash.matured(20, f64::INFINITY);
        assert_eq!(leash.steps, 2, "8.6 is within a step of the 8.4 refused");
        leash.granted(30, 8.9);
        leash.matured(30, f64::INFINITY);
        assert_eq!(leash.steps, MAX_DOUBLINGS, "8.9 is clearly past it");
    }

    #[test]
    fn after_a_cut_far_under_the_rate_refused_a_whole_first_step_past_the_plateau_lets_go() {
        let mut leash = Leash::default();
        // An overshoot at 15.7 a second, cut to a reading of 8.
        leash.reset(7.6, 15.7);
        let plateau = 7.88;
        leash.granted(10, plateau * (1.0 + FIRST_STEP / 2.0));
        leash.matured(10, plateau);
        assert_eq!(leash.steps, 1, "half a step is not past the limit");
        leash.granted(20, plateau * (1.0 + FIRST_STEP));
        leash.matured(20, plateau);
        assert_eq!(leash.steps, MAX_DOUBLINGS, "a whole step is");
    }
}
