//! A bucket: everything the gateway knows about one provider limit shared by
//! many clients. All of them draw dispatch times from one set of timelines,
//! so the rules hold across clients, not per client.

use super::adaptive::AdaptiveRate;
use super::concurrency::ConcurrencyLimits;
use super::fair_turns::FairTurns;
use super::leases::LeaseTable;
use super::quota::Quota;
use super::recent::RecentPermits;
use super::returns::ReturnPool;
use super::throughput::{Throughput, READ_REACH_US, SENT_AT_REACH_US};
use super::tickets::TurnTickets;
use super::timeline::{ceil_ms, interval_for_rps, micros, Micros, Timeline};
use crate::error::{Error, Result};
use crate::protocol::{PacingRule, QuotaReport};

/// With every concurrency slot taken, the wait a refusal suggests when no
/// lease expires sooner: a release may free a slot at any moment.
pub(crate) const CONCURRENCY_RETRY_MS: u64 = 100;

/// How far ahead turns may be booked. Past it, callers come back before
/// their turn and are booked again; it stays below the clients' default
/// 120 s limit on a refusal's wait.
pub(crate) const MAX_TURN_QUEUE_US: Micros = 90_000_000;

/// Timelines a bucket may hold at once, current and retiring. Clients that
/// disagree about a provider's rules would otherwise grow it without bound.
pub(crate) const MAX_TIMELINES: usize = 32;

/// A cut that goes on without a cooldown to under this share of the rate
/// refused overfilled the provider's window: the bucket holds until the
/// window frees. A shallower one (a failed probe, a drift step) refused a
/// rate a few percent over the limit, whose window frees as the next call
/// leaves.
const HOLD_UNDER: f64 = 0.85;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bucket {
    pub rules: Vec<PacingRule>,
    pub signature: String,
    /// One per current rule, plus retiring ones of rules no longer sent.
    pub timelines: Vec<Timeline>,
    /// `None` until the first acquire names the rules (a 429 can be reported
    /// for a bucket the gateway has not seen yet).
    pub adaptive: Option<AdaptiveRate>,
    /// The adaptive rate's own timeline: spacing `1 / rate`.
    pub adaptive_tat: Micros,
    /// No permit is placed before this time; a 429 reported before it is
    /// part of the same overload and does not cut the rate again.
    pub cooldown_until: Micros,
    /// A 429 arrived before the rules did: cut once they are known.
    pub pending_cut: bool,
    pub leases: LeaseTable,
    /// Concurrency limits clients named within their windows.
    pub concurrency: ConcurrencyLimits,
    /// Permits placed lately, for a rule that starts binding mid-stream.
    pub recent: RecentPermits,
    /// The latest dispatch time handed out, where a new rule's timeline
    /// starts.
    pub last_at: Option<Micros>,
    /// The end of the last booked turn (see [`Bucket::book_turn`]).
    pub turns_tat: Micros,
    /// The same for callers waiting on concurrency slots
    /// (see [`Bucket::book_slot_turn`]).
    pub slot_turns_tat: Micros,
    /// When turns are sized by callers (see [`Bucket::fair_turns`]). Not
    /// kept in a snapshot: a restored bucket waits its warm-up again.
    pub fair_turns: FairTurns,
    /// What the provider said about its quota, and the grants since.
    pub quota: Quota,
    /// Successes clients reported (`observedSuccesses`), for the bucket view.
    pub reported_successes: u64,
    /// Granted times clients gave back, for the next acquirer.
    pub returns: ReturnPool,
    /// Permits granted and 429s lately, for what the provider accepted.
    pub throughput: Throughput,
    /// Clients refused a slot, each holding its turn.
    pub tickets: TurnTickets,
}

impl Bucket {
    /// A bucket whose first permit can be no earlier than `floor`.
    pub fn new(floor: Micros) -> Self {
        Bucket {
            rules: Vec::new(),
            signature: String::new(),
            timelines: Vec::new(),
            adaptive: None,
            adaptive_tat: floor,
            cooldown_until: floor,
            pending_cut: false,
            leases: LeaseTable::default(),
            concurrency: ConcurrencyLimits::default(),
            recent: RecentPermits::default(),
            last_at: None,
            turns_tat: floor,
            slot_turns_tat: floor,
            fair_turns: FairTurns::default(),
            quota: Quota::default(),
            reported_successes: 0,
            returns: ReturnPool::default(),
            throughput: Throughput::default(),
            tickets: TurnTickets::default(),
        }
    }

    /// The strictest concurrency limit binding: the current rules' or one
    /// named within its window (see [`ConcurrencyLimits`]).
    pub fn max_concurrency(&self) -> Option<u64> {
        self.rules
            .iter()
            .filter_map(|r| r.max_concurrency)
            .chain(self.concurrency.strictest())
            .min()
    }

    /// The rate the rules allow: the strictest rule's, lowered further by any
    /// `adaptiveMaxRps`.
    pub fn configured_rps(rules: &[PacingRule]) -> f64 {
        rules
            .iter()
            .map(|r| {
                let rps = r.requests_per_second();
                r.adaptive_max_rps.map_or(rps, |max| rps.min(max))
            })
            .fold(f64::INFINITY, f64::min)
    }

    /// The rate permits are spaced at (during an outage's pause, the
    /// probes' rate).
    pub fn effective_rps(&self) -> Option<f64> {
        self.adaptive.as_ref().map(AdaptiveRate::pacing_rps)
    }

    /// Refuses a rules change that would take the bucket past
    /// [`MAX_TIMELINES`], before anything changes.
    pub fn check_rules_change(
        &self,
        rules: &[PacingRule],
        signature: &str,
        bucket_id: &str,
    ) -> Result<()> {
        if signature == self.signature {
            return Ok(());
        }
        let added = rules
            .iter()
            .filter(|r| !self.timelines.iter().any(|t| t.matches(r)))
            .count();
        if self.timelines.len() + added > MAX_TIMELINES {
            return Err(Error::invalid(format!(
                "bucket {bucket_id} has seen {} distinct rules within their windows; \
                 clients must agree on a provider's rules",
                self.timelines.len() + added
            )));
        }
        Ok(())
    }

    /// Makes `rules` (whose signature is `signature`) the bucket's rules. A
    /// change keeps every timeline the new rules share with the old, keeps
    /// the dropped ones binding for one of their windows past the latest
    /// permit, and starts each new one late enough that the permits already
    /// placed in its first window leave room for its own (see
    /// [`Bucket::first_free_for`]). No grant is ever faster than the
    /// stricter of the old and new rules.
    pub fn apply_rules(&mut self, rules: &[PacingRule], signature: String, guard_ms: u64) {
        if signature == self.signature {
            return;
        }
        for t in &mut self.timelines {
            if rules.iter().any(|r| t.matches(r)) {
                t.retire_at = None;
            } else if t.retire_at.is_none() {
                let last = self.last_at.unwrap_or(t.tat);
                t.retire_at = Some(last.saturating_add(micros(t.window_ms)));
            }
        }
        for rule in rules {
            if !self.timelines.iter().any(|t| t.matches(rule)) {
                let mut timeline = Timeline::for_rule(rule, 0, guard_ms);
                if let Some(last) = self.last_at {
                    timeline.tat = self.first_free_for(&timeline, last);
                }
                self.timelines.push(timeline);
            }
        }
        let cap = Self::configured_rps(rules);
        match &mut self.adaptive {
            Some(a) => a.set_cap(cap),
            None => {
                let mut a = AdaptiveRate::new(cap);
                if std::mem::take(&mut self.pending_cut) {
                    a.cut(self.cooldown_until, 0, self.cooldown_until, None);
                }
                self.adaptive = Some(a);
            }
        }
        self.rules = rules.to_vec();
        self.signature = signature;
        self.returns.clear();
    }

    /// Where a timeline new to the bucket may place its first permit, given
    /// the permits already placed up to `last` under other rules. With `k`
    /// of them in its window before `last`, its first `n - k` permits fit
    /// one interval apart in the window's rest; with `k >= n` it waits out
    /// a whole window. Else a switch from a lax rule to a strict one would
    /// let the lax rule's permits crowd the strict one's first window.
    fn first_free_for(&self, timeline: &Timeline, last: Micros) -> Micros {
        let window = timeline
            .interval_us
            .saturating_mul(timeline.requests_per_window);
        let placed = self.recent.count_after(last.saturating_sub(window));
        let room = timeline.requests_per_window.saturating_sub(placed);
        last.saturating_add(window)
            .saturating_sub(room.saturating_mul(timeline.interval_us))
            .max(last.saturating_add(timeline.interval_us))
    }

    /// Drops retiring timelines that can no longer bind a grant (every grant
    /// is at or after `now`).
    pub fn retire(&mut self, now: Micros) {
        self.timelines
            .retain(|t| t.retire_at.is_none_or(|at| at > now));
    }

    /// The earliest time the next permit may be placed.
    pub fn next_free(&self, now: Micros) -> Micros {
        self.timelines
            .iter()
            .map(|t| t.tat)
            .chain([now, self.adaptive_tat, self.cooldown_until])
            .max()
            .map(|at| self.quota.blocked_until(at).unwrap_or(at))
            .unwrap_or(now)
    }

    /// Takes every timeline at `at`, for a permit placed there.
    pub(super) fn place(&mut self, at: Micros, now: Micros, adaptive_interval: Micros) {
        for t in &mut self.timelines {
            t.take(at);
        }
        self.adaptive_tat = at.saturating_add(adaptive_interval);
        self.last_at = Some(at);
        self.quota.take(at);
        if let Some(a) = &mut self.adaptive {
            a.on_grant(at);
        }
        self.throughput.granted(at, now);
        self.returns.granted(ceil_ms(at));
    }

    /// The adaptive rate's spacing, or none when no adaptive rule applies.
    pub(super) fn adaptive_interval(&self) -> Micros {
        self.effective_rps().map_or(0, interval_for_rps)
    }

    /// Whether the adaptive rate is cut, paused or capped.
    pub(super) fn rate_reduced(&self) -> bool {
        self.adaptive.as_ref().is_some_and(|a| a.is_reduced())
    }

    /// Whether the adaptive rate is paused through a provider's outage.
    pub(super) fn paused(&self) -> bool {
        self.adaptive.as_ref().is_some_and(|a| a.pause.is_some())
    }

    /// How far ahead a client that keeps paced slots is granted permits:
    /// up to `horizon`, but while the adaptive rate is cut, paused or
    /// capped, no more than a rule's window ahead. Its callers draw on its
    /// block without asking again, so it hears of the next cut only when
    /// the block runs low; the cut's hold (until the provider's window
    /// frees) then covers every permit it was granted at the rate refused,
    /// where one granted further ahead would go out at that rate into a
    /// window the new rate fills.
    pub fn grant_horizon(&self, now: Micros, horizon: Micros) -> Micros {
        match self.rate_reduced() {
            true => horizon.min(now.saturating_add(self.longest_window_us())),
            false => horizon,
        }
    }

    /// Successes a client reported, for the bucket view. While leases
    /// stream, most calls are not granted one by one, and the grants alone
    /// held a tenth of the calls a 429 is weighed against: a provider's 1%
    /// of random 429s read as a limit. Reported then, they count as calls;
    /// otherwise each was counted at its grant.
    pub fn successes_reported(&mut self, successes: u64, now: Micros) {
        self.reported_successes = self.reported_successes.saturating_add(successes);
        if successes > 0 && self.calls_off_timeline(now) {
            if let Some(adaptive) = &mut self.adaptive {
                adaptive.on_calls_off_timeline(successes, now);
            }
        }
    }

    /// Credits the adaptive rate with the time its granted permits have
    /// matured without a 429.
    pub fn mature(&mut self, now: Micros) {
        if let Some(adaptive) = &mut self.adaptive {
            adaptive.credit(now, self.last_at);
        }
    }

    /// What a provider said about its quota. A stated limit is read over
    /// its own window, or else over the window of the rule whose count is
    /// nearest to it (a provider's `X-RateLimit-Limit` is usually the limit
    /// a host configured from its documentation). Like a rule's, its window
    /// is lengthened by `guard_ms`: paced at exactly the stated rate, calls
    /// that bunch a little on the way put one too many in some window.
    pub fn observe_quota(&mut self, report: &QuotaReport, now: Micros, guard_ms: u64) {
        if let (Some(limit), Some(adaptive)) = (report.limit, &mut self.adaptive) {
            let window_ms = report.window_ms.or_else(|| {
                self.rules
                    .iter()
                    .min_by_key(|r| r.requests_per_window.abs_diff(limit))
                    .map(|r| r.window_ms)
            });
            if let Some(window_ms) = window_ms {
                // Compared with the rules before the guard: a provider that
                // states the rules' own limit caps nothing (read with the
                // 25 ms guard, 20 a second was 19.5 under a rule of 20, and the
                // bucket counted as capped for as long as it said so: no
                // streamed slots, no turns sized by callers).
                let stated = limit as f64 * 1_000.0 / window_ms as f64;
                let paced = match stated < adaptive.cap {
                    true => limit as f64 * 1_000.0 / (window_ms + guard_ms) as f64,
                    false => adaptive.cap,
                };
                adaptive.state_limit(paced, micros(report.observed_at_ms));
            }
        }
        if let (Some(remaining), Some(reset_at_ms)) = (report.remaining, report.reset_at_ms) {
            self.quota.observe(
                micros(report.observed_at_ms),
                remaining,
                micros(reset_at_ms),
                now,
            );
        }
    }

    /// A provider's 429 with `Retry-After` of `cooldown_us`. The first report
    /// of an overload cuts the rate (or, for an outage, pauses the bucket)
    /// and pushes every timeline past the cooldown; reports during the
    /// cooldown only extend it. During a pause every 429 is a failed probe.
    ///
    /// A cut that goes on without a cooldown but far under the rate refused
    /// (the overshoot that found a limit, or a limit that fell) holds the
    /// bucket until the provider's window frees instead: the permits
    /// granted at the old rate and due before then would all be refused.
    /// Clients told of the hold send none of them, and 429s from those sent
    /// anyway are that same overload, not a reason to wait longer.
    ///
    /// `sent_at` is when the refused call went out, as its client said: the
    /// 429 is counted there, and the cut reads the second before it. A time
    /// after the report, or before what the counts still hold, is a
    /// client's mistake (or a lie) and is read as the report's.
    pub fn penalize(&mut self, now: Micros, cooldown_us: Micros, sent_at: Option<Micros>) {
        // Returned times were spaced for the rate the provider just
        // refused, and a time granted before may not come back after.
        self.returns.clear();
        let until = now.saturating_add(cooldown_us);
        let fresh = now >= self.cooldown_until;
        let sent = sent_at
            .filter(|&at| at <= now && at >= now.saturating_sub(SENT_AT_REACH_US))
            .unwrap_or(now);
        self.throughput.refused(sent);
        let off_timeline = self.calls_off_timeline(now);
        let Some(a) = &mut self.adaptive else {
            self.cooldown_until = self.cooldown_until.max(until);
            self.pending_cut = true;
            return;
        };
        // A pause sets the rate's credit aside to its end; a hold keeps it.
        let holding = !fresh && a.credited_until < self.cooldown_until;
        let signal = a.refused_at(now);
        let mut hold_until = None;
        let pause_fleet = if a.pause.is_some() {
            a.refuse_probe(cooldown_us);
            true
        } else if !signal || holding {
            false
        } else if !fresh {
            true
        } else if now >= a.event_until {
            let granted_until = self.last_at.unwrap_or(now).max(now);
            let refused = a.rate();
            // One reading for the cut and the hold. Calls off the timeline
            // make it say nothing of the rate, but the window it read
            // still frees when its first call leaves.
            let reading = self.throughput.reading(sent, now, refused);
            let accepted = reading.filter(|_| !off_timeline).map(|r| r.rps());
            let pause_fleet = a.cut(now, cooldown_us, granted_until, accepted);
            if !pause_fleet && a.rate() < HOLD_UNDER * refused {
                // No longer than the provider asked the refused call to wait.
                hold_until = reading.map(|r| self.throughput.window_frees_at(&r).min(until));
            }
            pause_fleet
        } else {
            false
        };
        if pause_fleet {
            self.cooldown_until = self.cooldown_until.max(until);
            // Nothing is granted during a cooldown: no time to credit.
            a.credited_until = a.credited_until.max(self.cooldown_until);
        } else if let Some(at) = hold_until {
            self.cooldown_until = self.cooldown_until.max(at);
        }
    }

    /// Whether calls may have gone out lately that the timeline did not
    /// grant: a streamed lease's calls after its first are not granted one
    /// by one, so the grants then say nothing of what the provider
    /// accepted. None can have yet while every live chain began less than a
    /// slot's spacing ago and no lease that may have made one ended within
    /// the second read (a fleet that starts streamed and turns paced).
    fn calls_off_timeline(&self, now: Micros) -> bool {
        let streams = &self.leases.streams;
        self.stream_spacing().is_some()
            && (streams.kept_ended_at.saturating_add(READ_REACH_US) > now
                || streams
                    .chains
                    .values()
                    .any(|&start| start.saturating_add(streams.spacing_floor_us) <= now))
    }

    pub fn cooldown_until_ms(&self, now: Micros) -> Option<u64> {
        (self.cooldown_until > now).then(|| ceil_ms(self.cooldown_until))
    }
}
