//! How a provider's 429 moves the adaptive rate.
//!
//! A 429 is read first by what the provider accepted in the second before
//! it (the gateway's count of grants less the 429s reported, see
//! `throughput`): when that is clearly under the rate refused, it is the
//! limit, read rather than guessed, and the rate goes to `READ_BETA` of it,
//! back to `READ_PLATEAU` of it over `HOLD_S`, without stopping the fleet.
//! Otherwise (no reading, or a limit that may lie anywhere above it) by
//! where the rate stood:
//! - above the plateau (probing): the limit lies between the plateau and
//!   the rate refused. The 429 answers a permit granted a lead earlier
//!   (grants run ahead of dispatch), so the rate goes to `PROBE_BETA` of
//!   the curve's rate then, at least the plateau and at most `PROBE_BETA`
//!   of the rate now, and holds for `HOLD_S` (`RECOVERY_S` when the
//!   reading shows the provider took clearly more than that plateau: the
//!   limit is rising). The fleet does not stop: the cut is the answer, and
//!   only the refused call waits its `Retry-After`.
//! - holding near the plateau, or at a limit the provider stated: the
//!   limit drifted down (or calls bunched on the way). Step down to
//!   `DRIFT_BETA`, climb back to `DRIFT_PLATEAU` of the refused rate over
//!   `RECOVERY_S`, again without stopping the fleet. A step soon after a
//!   step, to less than the plateau the last one set, shows the limit
//!   falling: the rate goes on down as fast over `FALL_S`.
//! - anywhere else (at the cap, or well under the plateau): the limit fell
//!   by an unknown amount. AWS SDK adaptive retry's deep cut of 0.7 (`BETA`),
//!   back to a plateau just under the refused rate over `RECOVERY_S` (lower
//!   still if it was refused short of the last plateau: CUBIC's fast
//!   convergence), and the bucket sits out the cooldown.

use super::{
    AdaptiveRate, Curve, Pause, BETA, DRIFT_BETA, DRIFT_PLATEAU, HOLD_S, MATURITY_US, PAUSE_SHARE,
    PLATEAU, PROBE_BETA, PROBE_ZONE, READ_BETA, READ_PLATEAU, RECOVERY_S, RUN_BREAK_US,
};
use crate::gateway::leash::FIRST_STEP;
use crate::gateway::timeline::Micros;

/// A limit seen falling is followed down over this long.
pub(crate) const FALL_S: f64 = 8.0;
/// Followed at most this share down.
const MAX_FALL: f64 = 0.25;
/// A cut that started at least this share of the rate it refused was a
/// step, not a deep cut.
const STEP_SHARE: f64 = 0.8;
/// Two steps this far apart (in credited seconds) or closer show a trend.
const TREND_S: f64 = 8.0;

impl AdaptiveRate {
    /// The provider pushed back at the current rate at `now`, asking for a
    /// cooldown of `cooldown_us`; permits were granted up to
    /// `granted_until`. Returns whether the whole bucket should sit out
    /// the cooldown: not for a failed probe, whose cut is the answer (the
    /// limit is where it was, and only the refused call waits).
    pub fn cut(
        &mut self,
        now: Micros,
        cooldown_us: Micros,
        granted_until: Micros,
        accepted_rps: Option<f64>,
    ) -> bool {
        let refused = self.rate();
        let pause_fleet = self.move_curve(now, cooldown_us, granted_until, accepted_rps);
        let rate = self.rate();
        self.leash.reset(rate, refused);
        pause_fleet
    }

    /// The cut itself: where the curve goes, by where the rate stood.
    fn move_curve(
        &mut self,
        now: Micros,
        cooldown_us: Micros,
        granted_until: Micros,
        accepted_rps: Option<f64>,
    ) -> bool {
        let rate = self.rate();
        // What the provider accepted in the second before, when clearly
        // under the rate refused: where the limit is, read rather than
        // guessed. A reading within `NOISE_SHARE` of the rate says as little
        // as a random 429 does.
        let accepted = accepted_rps.filter(|&a| a < rate);
        self.event_until = granted_until.saturating_add(MATURITY_US);
        let run_before = self.memory;
        if self.trust_us >= RUN_BREAK_US || self.memory.is_none() {
            self.memory = Some(rate);
        }
        self.trust_us = 0;
        let memory = self.memory.unwrap_or(rate);
        let w_max = self.curve.as_ref().map_or(f64::INFINITY, |c| c.w_max);
        let near_plateau = self.curve.is_some() && rate >= PROBE_ZONE * w_max;
        // Taking under `PAUSE_SHARE` of what it took before the run, the
        // provider is refusing almost everything: an outage, or a limit that
        // fell far, which only the pause's probe tells apart.
        let collapsed = accepted.filter(|&a| a < PAUSE_SHARE * memory);
        // At a limit the provider stated: it refused the rate it named (calls
        // bunched on the way, or permits granted before it said so), which
        // is a plateau held, not a limit found by guessing.
        let at_stated = self.curve.is_none() && self.stated.is_some();
        let goes_on = match (collapsed, accepted) {
            (Some(_), _) => None,
            // Refused while holding: the limit drifted down a little.
            _ if (near_plateau && !self.is_probing()) || at_stated => {
                Some(self.drift_step(rate, accepted, run_before))
            }
            _ if near_plateau => Some(self.failed_probe(now, granted_until, rate, w_max, accepted)),
            // The provider still takes a good share: its limit fell to what
            // it took. Go just under it; the fleet goes on at once.
            (None, Some(read)) => Some(self.under_reading(read)),
            (None, None) => None,
        };
        // A guess stays one through the steps and failed probes that keep
        // it as their floor, until a cut sets a plateau of its own.
        let rise_read = near_plateau
            && self.is_probing()
            && collapsed.is_none()
            && accepted.is_some_and(|read| reads_a_rise(read, w_max));
        let guess_kept = self.plateau_guessed
            && near_plateau
            && collapsed.is_none()
            && (!self.is_probing() || goes_on.as_ref().is_some_and(|c| c.w_max >= w_max));
        self.plateau_guessed = rise_read || guess_kept;
        if let Some(curve) = goes_on {
            self.curve = Some(curve);
            self.credited_until = self.credited_until.max(now);
            return false;
        }
        self.credited_until = self.credited_until.max(now.saturating_add(cooldown_us));
        let start = match collapsed {
            Some(read) => read * READ_BETA,
            None => rate * BETA,
        };
        if start < PAUSE_SHARE * memory && !self.resumed {
            self.curve = (memory < self.cap).then(|| Curve::holding(memory));
            self.pause = Some(Pause {
                probe_every_us: cooldown_us.max(1),
                probe_at: None,
            });
            return true;
        }
        self.curve = Some(match collapsed {
            Some(read) => self.under_reading(read),
            // Refused short of the plateau: the limit fell again, so the
            // next plateau sits lower too (CUBIC's fast convergence).
            None if self.curve.is_some() && rate < w_max => Curve::from(
                (rate * BETA).max(self.floor()),
                rate * (1.0 + BETA) / 2.0,
                RECOVERY_S,
            ),
            None => Curve::from((rate * BETA).max(self.floor()), rate * PLATEAU, RECOVERY_S),
        });
        true
    }

    /// Just under what the provider took, climbing back to it, and held
    /// as long as after a failed probe: a reading is as exact as the one a
    /// failed probe takes, and a limit read from the rules' rate has not
    /// been seen to move.
    fn under_reading(&self, read: f64) -> Curve {
        Curve::from(
            (read * READ_BETA).max(self.floor()),
            read * READ_PLATEAU,
            HOLD_S,
        )
    }

    /// A 429 while holding near the plateau: a step down, bounded by what
    /// the provider took. When the limit is seen falling, the step goes on
    /// falling as fast over the next `FALL_S`: each step the provider
    /// refuses costs a 429 (more at a longer horizon, whose blocks went out
    /// at the rate before it), so a limit sliding down is better followed
    /// than met.
    fn drift_step(&self, rate: f64, accepted: Option<f64>, run_before: Option<f64>) -> Curve {
        let read = accepted.unwrap_or(f64::INFINITY);
        let start = (rate * DRIFT_BETA).min(read * READ_BETA);
        let plateau = (rate * DRIFT_PLATEAU).min(read);
        match self.falling_rps_per_s(read, plateau, run_before) {
            Some(fall) => Curve::between(
                start,
                (plateau - fall * FALL_S).max(plateau * (1.0 - MAX_FALL)),
                FALL_S,
            ),
            None => Curve::from(start, plateau, RECOVERY_S),
        }
    }

    /// How fast the limit fell since the last cut, in requests per second
    /// each second, when this step follows closely on a step and the
    /// provider now takes less than the plateau that step set. Not after a
    /// deep cut, nor after a step in a run of cuts that began more than a
    /// deep cut above (`run_before`, the rate before the run the last cut
    /// belonged to: a rate that overshot by far reads high for a second or
    /// two, so its readings come down to the limit as a falling limit's
    /// would), nor after a plateau a failed probe guessed from one reading:
    /// there the plateaus say how far the guess was off, not how the limit
    /// moves. A reading is a count of calls in one second, so one call off
    /// at 15 req/s is 7%, and on a host that sends calls late it is often
    /// off by one; followed down, such a guess cost a quarter of the rate
    /// for ten seconds.
    fn falling_rps_per_s(&self, read: f64, plateau: f64, run_before: Option<f64>) -> Option<f64> {
        let c = self.curve.as_ref()?;
        let since_s = c.elapsed_us as f64 / 1e6;
        let after_a_step = !self.plateau_guessed
            && c.rate_at(0, self.cap) >= STEP_SHARE * self.leash.refused
            && run_before.is_none_or(|before_run| self.leash.refused >= BETA * before_run);
        let took_less = read * READ_PLATEAU < c.w_max;
        (after_a_step && took_less && since_s <= TREND_S)
            .then(|| (c.w_max - plateau).max(0.0) / since_s.max(1.0))
    }

    /// A 429 above the plateau. The limit lies between the plateau held
    /// before the probe and the rate refused: back to the lower of the two,
    /// and hold. The 429 answers permits granted a lead earlier (the time
    /// grants run ahead, plus a call): the probe's rate then is what the
    /// provider refused, and more than the plateau when the limit rose
    /// while the rate held.
    fn failed_probe(
        &self,
        now: Micros,
        granted_until: Micros,
        rate: f64,
        w_max: f64,
        accepted: Option<f64>,
    ) -> Curve {
        let lead = granted_until
            .saturating_sub(now)
            .saturating_add(MATURITY_US / 2);
        let then = self.curve.as_ref().map_or(rate, |c| {
            c.rate_at(c.elapsed_us.saturating_sub(lead), self.cap)
        });
        match accepted {
            // What it took then is the limit; a reading low by the permits
            // a client dropped still leaves the plateau it took.
            // A reading clearly past that plateau shows the limit rising:
            // the next probe comes after a recovery, not a hold.
            Some(read) => Curve::from(
                (read * READ_BETA).max(w_max * PROBE_BETA),
                (read * READ_PLATEAU).max(w_max),
                if reads_a_rise(read, w_max) {
                    RECOVERY_S
                } else {
                    HOLD_S
                },
            ),
            None => {
                let start = (then * PROBE_BETA).max(w_max).min(rate * PROBE_BETA);
                Curve::from(start, start, HOLD_S)
            }
        }
    }

    /// A 429 during a pause: the probe failed; the next waits a cooldown.
    pub fn refuse_probe(&mut self, cooldown_us: Micros) {
        if let Some(p) = &mut self.pause {
            p.probe_at = None;
            p.probe_every_us = cooldown_us.max(1);
        }
    }
}

/// Whether a failed probe's reading shows the limit rose: what the provider
/// took is clearly past the plateau held before the probe.
fn reads_a_rise(read: f64, plateau: f64) -> bool {
    read * READ_PLATEAU > plateau * (1.0 + FIRST_STEP)
}
