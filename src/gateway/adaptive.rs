//! The bucket's adaptive rate: multiplicative decrease on a provider's 429,
//! cubic increase in time, a pause (not a cut) for an outage, and a ceiling
//! the provider may lower by stating its limit.
//!
//! After a cut at rate `r` the rate follows CUBIC's curve
//!
//! ```text
//! rate(t) = w + c (t - K)^3,   c = (w - start) / K^3
//! ```
//!
//! over `t`, the time since the cut during which the bucket kept granting
//! permits and no 429 came back (see [`AdaptiveRate::credit`]): it starts
//! at `start`, climbs, flattens out at the plateau `w`, holds there, and
//! then probes above it (with the steeper `PROBE_SCALE`), faster the longer
//! the provider keeps saying yes. The clock is time, as CUBIC's and AWS SDK
//! adaptive retry's are, so a rate cut low recovers as fast as one cut a
//! little; it runs only while permits are granted (an idle bucket gathers
//! no evidence) and lags by [`MATURITY_US`], the time a 429 takes to come
//! back.
//!
//! Above the plateau the curve is on a leash (`leash`): a client is granted
//! a whole block at the rate of the moment, so each step may go only a share
//! past the highest rate seen accepted, a share that doubles with each step
//! the provider accepts.
//!
//! 429s within one overload (before the permits granted ahead of the cut
//! have gone out) are one event. Outside a probe (or the climb to a plateau
//! guessed from one reading, which is on trial), a 429 counts only when
//! 429s are at least `NOISE_SHARE` of the permits granted lately (less those
//! given back unused, plus the calls clients report their streamed leases
//! made off the timeline): a provider that refuses 1% of calls at random is
//! not asking for less.
//!
//! An outage is not a lower limit. Cuts with no credited time between them
//! form a run; the rate before the run is its memory. When a run would take
//! the rate under `PAUSE_SHARE` of that memory, the provider is refusing
//! everything rather than refusing a rate: the run's cuts are undone and the
//! bucket pauses, granting one probe per cooldown (the provider's
//! `Retry-After`). The first probe that matures without a 429 ends the pause
//! at the remembered rate. A provider whose limit truly fell that far
//! refuses again right after; a run that starts before `RUN_BREAK_US` of
//! trust after a resume cuts instead of pausing, so an outage costs at most
//! one extra round of 429s.
//!
//! A provider may state its limit (quota headers). A stated limit under the
//! rules' rate is a ceiling, not a cut: the rate drops to it at once and
//! returns as soon as the provider states more. A 429 at that ceiling steps
//! under it as a drift does. Nothing lifts the rate above the rules, and a
//! rules change never lifts a cut: the curve is kept apart from the ceiling,
//! so only a stricter ceiling moves the rate. The one thing that lifts a
//! cut is the provider stating more than it stated before.
//!
//! The constants were chosen with the fleet simulation
//! (`cargo bench --bench fleet`, 32 isolates x 8 callers, 20 req/s rule):
//! - `NOISE_SHARE` 5%: at 3% the 1%-noise provider still drew false cuts
//!   (utilization 87-95% of the rule); at 5% it keeps 98%, and a real limit
//!   drop (12 429s a second at 20 req/s against 8) still cuts within half
//!   a second.
//! - `HOLD_S` 8 s and `PROBE_SCALE` 0.004: chosen before the reading and
//!   the leash (a 5 s hold probed too often, a steeper probe overshot; 5-6 s
//!   still cost 0.5-1 point of 429s with them). Against a hidden limit of 8
//!   of 20 req/s: 1.40% 429s, 95.9% of it and 13.75 s back to 95% of 20
//!   once it rises at the 1 s horizon; 1.17%, 95.7%, 9.25 s at the 2 s fleet
//!   horizon (before: 1.41%, 95.7%, 9.25 s and 3.08%, 93.0%, 16.5 s). Those
//!   depend on where the last probe falls against the rise: over rises at
//!   56-64 s the means are 1.40%, 96.0%, 13.75 s and 1.28%, 95.4%, 14.8 s,
//!   the slowest recovery 17.75 s and 20.75 s.
//! - The leash's `FIRST_STEP` 5%: 8% and 10% cut the recovery at 1 s a
//!   little but took the 2 s horizon to 2.6-2.85% 429s; a first step of at
//!   least one call a second cost 1 point of 429s at 2 s. Letting the
//!   leash go for a whole first step past the plateau, not only for a step
//!   past the rate refused (which after a cut to a reading is the
//!   overshoot's), finds a rise in one step instead of four (peer scenario
//!   b's shape, the raised half over rises at 8-12 s: 52% -> 64% at the
//!   1 s horizon, 48% -> 70% at 2 s with the pacer's check of drawn
//!   permits) and costs the drifting limit 2.46 -> 2.78% and 2.67 ->
//!   2.92% 429s; no hidden-limit figure moved. Letting go for a second step
//!   only: 61%. Dropping the curve's bound once let go as well: 67% and
//!   71%, but the drifting limit at 3.03% and the demo's case at 2.61%.
//!   Jumping to the leash's whole reach once it lets go, rather than
//!   following the curve there: b's raised half 74.5% -> 79% and 73.5%
//!   -> 77.5% (the simulated provider answering 429s at once), the
//!   hidden limit back a second sooner; but a refused jump's reading errs
//!   high (calls in flight), and read as a plain limit it brings back the
//!   demo's fall to 11 of 15 after a false let-go, while read as a guess
//!   (no trend followed) it took the drifting limit to 3.2-3.5% 429s.
//!   Probing more often does not buy b's raised half: a hold of 4 s
//!   instead of 8 took the hidden limit to 2.33% 429s for 61% there.
//! - `READ_BETA` 0.95 and `READ_PLATEAU` 0.99: a sliding window's count
//!   is exact; 0.97 as the start cost more 429s. A reading is held as long
//!   as a failed probe (`HOLD_S`, not `RECOVERY_S`): climbing back over
//!   4 s, peer scenario b's fleet, which reads its 8 a second within its
//!   first second, probed 7-8 s in and met the low limit just before it
//!   rose (a 429 in the 2 s before the rise in 6 of the 9 rises at 8-12 s,
//!   a raised half of 40%), then held 11 s; held 8 s: 1 and 2 of 9 at the
//!   1 s and 2 s horizons, 69% and 63%. With that hold a plateau of 0.985
//!   of the reading left the hidden limit at 95.0% of it and 15.25 s back
//!   at 1 s, and the drifting limit at 3.05% 429s at 2 s; 0.99 holds them
//!   at 95.5%, 14.75 s and 2.89%. (Until the simulated provider answered
//!   a 429 at once it held it as long as a call, so the first reading
//!   erred a call high and b's extra cuts put its first probe past 10 s;
//!   the other items' figures were measured so.)
//! - `DRIFT_BETA` 0.92 over 0.85 (chosen before the reading, which now
//!   bounds the drift step), and a falling limit followed down over
//!   `FALL_S` 8 s (see `cut`): a sine between 30% and 100% of the rule,
//!   stepped each second, is tracked at 90.6% and 92.4% of it with 2.88%
//!   and 2.86% 429s at the 1 s and 2 s horizons (before following it,
//!   91% at 3.4%). Over the same sine started at each of twelve points of
//!   its period (measured before the pacer kept a shallow cut's permits
//!   due soon) the means are 3.14% and 3.19% 429s (worst 3.7%), 91%
//!   used: each integer step down still costs a 429 unless the rate
//!   already sits a whole call under it. Following over 4 or 6 s, or 1.5-2
//!   times as fast, moved the means by under 0.1 point either way;
//!   following only a second fall in a row gave back most of the gain.
//!   A drift step climbs back to the reading itself, not `READ_PLATEAU`
//!   of it, since the reading is taken before the refused call went out:
//!   at 0.99 of it the sine at the 2 s horizon was tracked at 89.4%; at
//!   the reading, 91.7% and 90.2% with 2.45% and 2.66% 429s.
//! - `BETA` 0.7 over 0.6 or 0.8: both others did worse on the hidden limit
//!   and on a rule of 25 against a true 15 (the demo's case).
//! - `PAUSE_SHARE` 0.3: a limit at 40% of the rule is never taken for an
//!   outage (its run ends at 34%), while an outage pauses after four cuts
//!   (2.7 calls a second reach a provider that refuses everything, and the
//!   rule is back within 8-9 s of its end).

pub(crate) use super::curve::Curve;
use super::leash::Leash;
use super::timeline::Micros;

mod cut;

/// The deep cut, for a limit that fell: AWS SDK adaptive retry's factor.
pub(crate) const BETA: f64 = 0.7;
/// The shallow cut, for a probe just past the last plateau.
pub(crate) const PROBE_BETA: f64 = 0.95;
/// The plateau sits this far under the rate the provider refused.
pub(crate) const PLATEAU: f64 = 0.97;
/// A 429 while holding near the plateau: the limit drifted down a little.
/// The rate steps down this far and climbs back to `DRIFT_PLATEAU` of the
/// refused rate.
pub(crate) const DRIFT_BETA: f64 = 0.92;
pub(crate) const DRIFT_PLATEAU: f64 = 0.95;
/// A cut to what the provider accepted goes this far under it, and climbs
/// back to `READ_PLATEAU` of it.
pub(crate) const READ_BETA: f64 = 0.95;
pub(crate) const READ_PLATEAU: f64 = 0.99;
/// A 429 at or above this share of the plateau is a failed probe.
const PROBE_ZONE: f64 = 0.95;
/// Seconds from a deep cut to the plateau.
pub(crate) const RECOVERY_S: f64 = 4.0;
/// Seconds from a shallow cut, or a cut to a reading, to the plateau: the
/// hold before probing.
pub(crate) const HOLD_S: f64 = 8.0;
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
pub(crate) const NOISE_SHARE: f64 = 0.05;
pub(crate) const SHARE_MEMORY_US: Micros = 10_000_000;
/// The rate never falls below this fraction of the ceiling: a provider that
/// said no once must still be asked again.
pub(crate) const FLOOR_FRACTION: f64 = 0.01;
const MIN_FLOOR_RPS: f64 = 0.001;

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
    /// When the provider made the statement in force (gateway clock).
    /// Answers reach the gateway out of order (an isolate's report rides
    /// on its next request), so one made before it is stale. Not kept in a
    /// snapshot: a restored rate takes the next statement as it comes.
    pub stated_at: Micros,
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
    /// How far a probe may step past the rate seen accepted.
    pub leash: Leash,
    /// The curve's plateau was read from one second in which a failed
    /// probe took more than the plateau held before it: a guess at a limit
    /// that rose, not a level refused just above. A 429 short of it says
    /// the guess was high (a reading errs high by about a call), not that
    /// the limit is falling. It stays a guess through the steps and failed
    /// probes that keep it as their floor. Not kept in a snapshot: a
    /// restored rate reads its next step as after any other.
    pub plateau_guessed: bool,
}

impl AdaptiveRate {
    /// A rate restored from a form that kept no curve in time: held where
    /// it stood (if below the cap), probing up from there.
    pub fn holding_at(cap: f64, rate: f64) -> Self {
        let mut a = AdaptiveRate::new(cap);
        if rate < cap {
            a.curve = Some(Curve::holding(rate.max(a.floor())));
        }
        a
    }

    pub fn new(cap: f64) -> Self {
        AdaptiveRate {
            cap,
            stated: None,
            stated_at: 0,
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
            leash: Leash::default(),
            plateau_guessed: false,
        }
    }

    /// Decays the counts of grants and 429s to `now`.
    fn decay(&mut self, now: Micros) {
        if self.counted_at == 0 {
            // The first count: nothing to decay from (decaying from time 0
            // would wipe the grants counted so far, and let the very first
            // 429 pass for a signal however many calls went through).
            self.counted_at = now;
        } else if now > self.counted_at {
            // e^-x to within 2% for the x that matter (Taylor's cubic in
            // the denominator), without libm's `exp` in the wasm.
            let x = (now - self.counted_at) as f64 / SHARE_MEMORY_US as f64;
            let f = 1.0 / (1.0 + x * (1.0 + x * (0.5 + x / 6.0)));
            self.granted *= f;
            self.refused *= f;
            self.counted_at = now;
        }
    }

    /// Counts a 429 reported at `now`; whether 429s are now frequent enough
    /// to be the provider's answer to the rate rather than noise. Above the
    /// plateau (probing) a 429 is the answer expected. So is one on the way
    /// to a plateau guessed from a single reading, which may be a call
    /// high: the 429 says it is. Weighed as noise instead, such 429s let a
    /// fleet climbing to a guessed 15.84 a second take one a second from a
    /// provider taking 15, until the fifth.
    pub fn refused_at(&mut self, now: Micros) -> bool {
        self.decay(now);
        self.refused += 1.0;
        self.is_probing() || self.plateau_guessed || self.refused >= NOISE_SHARE * self.granted
    }
    /// Whether the rate is above the plateau it held after its last cut:
    /// the one time a 429 is expected, and needs no corroboration.
    fn is_probing(&self) -> bool {
        self.curve
            .as_ref()
            .is_some_and(|c| c.elapsed_us as f64 / 1e6 >= c.k)
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
        let curve = self.curve.as_ref().map_or(ceiling, |c| {
            let rate = c.rate(self.cap);
            if rate > c.w_max {
                rate.min(self.leash.reach(c.w_max))
            } else {
                rate
            }
        });
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
    /// a higher statement withdraws an earlier lower one, and with it a cut
    /// made under that one: the provider says it takes more now, which
    /// 429s would otherwise take a probe at a time to find.
    /// A statement made (`observed_at`) before the one in force is stale
    /// and changes nothing.
    pub fn state_limit(&mut self, rps: f64, observed_at: Micros) {
        if observed_at < self.stated_at {
            return;
        }
        self.stated_at = observed_at;
        if self.stated.is_some_and(|old| rps > old) && self.pause.is_none() {
            self.curve = None;
        }
        self.stated = (rps < self.cap).then_some(rps);
    }

    /// A permit was granted at `at`: during a pause, it is the probe.
    pub fn on_grant(&mut self, at: Micros) {
        self.granted += 1.0;
        let rate = self.rate();
        if self.is_probing() {
            self.leash.granted(at, rate);
        }
        if let Some(p) = &mut self.pause {
            p.probe_at.get_or_insert(at);
        }
    }

    /// A granted permit came back unused: it is not a call the provider
    /// may refuse, until it is granted again.
    pub fn on_return(&mut self) {
        self.granted = (self.granted - 1.0).max(0.0);
    }

    pub fn on_grant_again(&mut self) {
        self.granted += 1.0;
    }

    /// Calls the provider accepted off the timeline (a streamed lease's
    /// calls after its first), as clients report them: counted as grants
    /// are, so a 429 among them is weighed against every call made. The
    /// count goes no higher than calls at the rules' rate for the whole
    /// memory: a client's report cannot make real 429s pass for noise.
    pub fn on_calls_off_timeline(&mut self, calls: u64, now: Micros) {
        self.decay(now);
        let most = self.cap * SHARE_MEMORY_US as f64 / 1e6;
        self.granted = (self.granted + calls as f64).min(most.max(self.granted));
    }

    /// Credits the curve with the time up to `now - MATURITY_US` during
    /// which permits were granted (`last_grant` is the latest) and no 429
    /// came; ends a pause whose probe matured.
    pub fn credit(&mut self, now: Micros, last_grant: Option<Micros>) {
        let ripe = now.saturating_sub(MATURITY_US);
        // A curve that falls (a limit followed down) ends where the fall
        // was projected to, under what the provider took: a step past that
        // shows the fall stopped short, not that the limit rose. Read as a
        // rise, the leash let go and the rate ran from 8 a second to the
        // rules' 20 in one climb.
        let plateau = self
            .curve
            .as_ref()
            .filter(|c| c.c >= 0.0)
            .map_or(f64::INFINITY, |c| c.w_max);
        self.leash.matured(ripe, plateau);
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
        }
        if self.curve.is_some() && self.rate() >= self.cap {
            self.curve = None;
        }
    }
}

#[cfg(test)]
#[path = "adaptive_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "adaptive_noise_tests.rs"]
mod noise_tests;
