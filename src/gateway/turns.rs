//! Turns: when a caller refused now, or one that will want more soon,
//! should come back, so callers return about when the timeline or a slot
//! will have room for them instead of polling.

use super::bucket::{Bucket, CONCURRENCY_RETRY_MS, MAX_TURN_QUEUE_US};
use super::grant::Grant;
use super::slot_claims::WAITERS_MEMORY_US;
use super::slot_streams::MAX_CHAIN_US;
use super::slots::KEEPER_RETRY_MS;
use super::timeline::{ceil_ms, interval_for_rps, micros, Micros};

/// A refused client is booked this long after the slot it waits for is
/// expected back, so it finds the slot free rather than a moment early.
const TURN_MARGIN_US: Micros = 10_000;

/// How long a client refused a slot while a chain is past its end waits
/// before it looks again: about half a held call, the longest such a chain
/// usually takes to come back, without a trip per slot's spacing (in the
/// fleet simulation, 100 ms cost 0.32 round trips per call, 150 ms 0.28
/// at the same throughput).
const OVERDUE_CHAIN_RETRY_MS: u64 = 150;

impl Bucket {
    /// Whether a grant fell short because other callers hold the timeline
    /// (its first time is past the earliest the caller could take), rather
    /// than because the caller asked for more than the horizon holds.
    pub(super) fn contended(&self, times: &[u64], wanted: u64, earliest: Micros) -> bool {
        (times.len() as u64) < wanted
            && times
                .first()
                .is_none_or(|&first| micros(first) > earliest.max(self.cooldown_until) + 1_000)
    }

    /// The spacing of the bucket's permits: its strictest timeline's, or the
    /// adaptive rate's if that is wider.
    pub(super) fn turn_interval(&self, adaptive_interval: Micros) -> Micros {
        self.timelines
            .iter()
            .map(|t| t.interval_us)
            .chain([adaptive_interval])
            .max()
            .unwrap_or(0)
            .max(1)
    }

    /// The spacing turns are booked at: the permits' (see
    /// [`Bucket::turn_interval`]), but during an outage's pause the rate's
    /// the bucket resumes at, not its probes'. A turn booked during a pause
    /// is used once the pause is over; booked at one probe per cooldown, a
    /// horizon's turn held seconds of the tally (a probe per permit), and
    /// the turns of a fleet refused through an outage were booked tens of
    /// seconds out while the timeline idled after it.
    pub(super) fn tally_interval(&self, adaptive_interval: Micros) -> Micros {
        let resumed = self
            .adaptive
            .as_ref()
            .filter(|_| self.paused())
            .map(|a| interval_for_rps(a.rate()));
        self.turn_interval(resumed.unwrap_or(adaptive_interval))
    }

    /// Whether turns are sized by callers now (see
    /// [`super::fair_turns::FairTurns::update`]):
    /// the adaptive rate's probes and cuts are read on whole-horizon turns,
    /// and a provider that refuses the rule refuses it in the first second.
    pub(super) fn fair_turns(&mut self, now: Micros) -> bool {
        let held_back = self.rate_reduced() || self.cooldown_until > now;
        self.fair_turns.update(now, held_back, self.turns_tat)
    }

    /// Whether other clients wait for turns: some hold the timeline past
    /// `earliest` now, and turns are booked past the end of what they hold.
    /// A booked turn nobody came for (its client gone, or back for fewer)
    /// leaves the timeline idle, and does not count.
    pub(super) fn others_wait(&self, earliest: Micros, interval: Micros) -> bool {
        let held_until = self.next_free(earliest);
        held_until > earliest && self.turns_tat > held_until.saturating_add(interval)
    }

    /// Every slot is taken: books the caller a turn at the slots, after the
    /// callers already refused, from when the leases in flight are likely
    /// to come back (their usual hold, learned from releases). Callers then
    /// return about when a slot frees instead of polling. `paced_by`: the
    /// spacing at which the rate frees slots when it binds tighter than
    /// they do (see [`Bucket::slots_paced_by_cut`]); each caller's turn is
    /// then one such spacing after the last, as one slot frees for it.
    pub(super) fn book_slot_turn(
        &mut self,
        requested: u64,
        paced_by: Option<Micros>,
        now: Micros,
        lease_ttl: Micros,
    ) -> u64 {
        let Some(max) = self.max_concurrency() else {
            return 1;
        };
        let Some(hold) = self.leases.hold_us else {
            // Nothing released yet: no idea how long calls take, so look
            // again soon.
            let until_expiry = self
                .leases
                .next_expiry(now)
                .map_or(CONCURRENCY_RETRY_MS, |e| ceil_ms(e.saturating_sub(now)));
            return until_expiry.clamp(1, CONCURRENCY_RETRY_MS);
        };
        let free_at = self.leases.likely_free_at(now, lease_ttl).unwrap_or(now);
        // A quarter of a slot's share per booked permit: calls end unevenly,
        // and a slot left idle costs more than a caller back a little early
        // (in the fleet simulation this cut round trips per permit from 8.9
        // to 3.0 for 4% of the throughput; a full share cost 25%).
        let per_slot = hold / max.max(1) / 4;
        let turn = match paced_by {
            Some(spacing) => spacing.max(per_slot),
            None => requested.min(max).saturating_mul(per_slot),
        };
        let start = self.slot_turns_tat.max(free_at);
        self.slot_turns_tat = start
            .saturating_add(turn)
            .min(now.saturating_add(MAX_TURN_QUEUE_US));
        ceil_ms(start.saturating_sub(now)).max(1)
    }

    /// How long a client holding a turn ticket waits for its slot: the
    /// `place`-th slot to free (counting from 1), when the `place`-th
    /// oldest lease's call is likely to end (its time plus the usual hold,
    /// learned from releases). Slots free in the order their calls started,
    /// and each goes to the next ticket, so a ticket holder comes back
    /// about when its own slot is free rather than polling for it.
    pub(super) fn ticket_turn_ms(&mut self, place: u64, now: Micros, lease_ttl: Micros) -> u64 {
        let spacing = self.turn_interval(self.adaptive_interval());
        let Some(hold) = self.leases.hold_us else {
            return CONCURRENCY_RETRY_MS;
        };
        self.leases.next_expiry(now);
        let mut frees = self
            .leases
            .iter()
            .map(|&(expires_at, _)| expires_at.saturating_sub(lease_ttl).saturating_add(hold));
        let index = place.saturating_sub(1);
        let (mut ahead, mut last) = (0, now);
        let free_at = loop {
            match frees.next() {
                Some(at) if ahead == index => break at,
                Some(at) => (ahead, last) = (ahead + 1, at),
                // More tickets than leases: the rest wait a spacing each
                // after the last.
                None => break last.saturating_add(spacing.saturating_mul(place - ahead)),
            }
        };
        ceil_ms(free_at.saturating_sub(now))
            .max(ceil_ms(spacing) / 4)
            .clamp(1, MAX_TURN_QUEUE_US / 1_000)
    }

    /// Books the caller's next turn: the stretch of the timeline, after every
    /// turn already booked, where its next block (`wanted` permits, at most a
    /// horizon's worth) will be free. Returns how long the caller should
    /// wait before asking for it: until the turn starts, or later if the
    /// horizon would not yet reach the turn's last permit. Callers that
    /// honour it come back one at a time to full blocks instead of polling
    /// together for scraps, which keeps gateway round trips per permit low
    /// when many isolates contend.
    ///
    /// A turn shorter than the horizon (`fair`) is told to come early, by
    /// half the horizon it leaves free: a turn before it that was used short
    /// (its client came back for fewer, or not at all) is then filled by
    /// this one's permits instead of leaving the timeline idle, and its
    /// permits still fit the horizon from when it comes.
    pub(super) fn book_turn(
        &mut self,
        wanted: u64,
        now: Micros,
        horizon: Micros,
        interval: Micros,
        fair: bool,
    ) -> u64 {
        let reach = horizon - now;
        let booked = wanted.min(reach / interval + 1);
        let turn_start = self.turns_tat.max(self.next_free(now));
        let last_permit = turn_start.saturating_add((booked - 1).saturating_mul(interval));
        self.turns_tat = last_permit
            .saturating_add(interval)
            .min(now.saturating_add(MAX_TURN_QUEUE_US));
        let span = last_permit
            .saturating_sub(turn_start)
            .saturating_add(interval);
        let early = match fair {
            true => reach.saturating_sub(span) / 2,
            false => 0,
        };
        let ready = turn_start
            .saturating_sub(early)
            .max(last_permit.saturating_sub(reach));
        ceil_ms(ready.saturating_sub(now))
    }

    fn slot_count(&self) -> u64 {
        self.max_concurrency().unwrap_or(1).max(1)
    }

    /// Whether slots free, as calls end, less often than a refused client
    /// looks again: a call's usual hold over the slots is at least
    /// [`CONCURRENCY_RETRY_MS`].
    pub(super) fn slots_free_slowly(&self) -> bool {
        self.leases
            .hold_us
            .is_some_and(|hold| hold / self.slot_count() >= micros(CONCURRENCY_RETRY_MS))
    }

    /// The permits' spacing (`interval`) when a client that asks for
    /// streamed slots is refused them because the rate is cut, paused or
    /// capped, and the rate binds tighter than the slots: a round of the
    /// slots at that spacing outlasts a call's usual hold. Such a bucket
    /// grants a lease per permit, each placed on the timeline, so a slot
    /// frees for a new permit only as often as the rate places one, for
    /// as long as the cut lasts.
    pub(super) fn slots_paced_by_cut(&self, interval: Micros) -> Option<Micros> {
        let hold = self.leases.hold_us?;
        let round = interval.saturating_mul(self.slot_count());
        (self.streams_held_back_by_cut() && round >= hold).then_some(interval)
    }

    /// A client refused a slot: no times, and its turn at the slots (a
    /// short retry for the first to wait, as no chain has been cut short
    /// for it yet and a holder done with its slot gives it back soon).
    pub fn refuse_for_slots(&mut self, now: Micros, first_waiter: bool) -> Grant {
        let wait_ms = if first_waiter {
            CONCURRENCY_RETRY_MS
        } else {
            self.slot_retry_ms(now)
        };
        Grant {
            times: Vec::new(),
            lease_ids: Some(Vec::new()),
            wait_ms,
            turn_ticket: None,
        }
    }

    /// How long a client refused a slot should wait: its turn, at the
    /// next chain end no other refused client was sent to (plus the usual
    /// delay of a lease coming back after its chain), or a slot's share of
    /// a chain after the last turn booked when every chain end is taken.
    fn slot_retry_ms(&mut self, now: Micros) -> u64 {
        let max = self.slot_count();
        let booked = self.slot_turns_tat.max(now);
        let streams = &self.leases.streams;
        let delay = streams.return_delay_us.unwrap_or(0);
        // A chain past its end is about to come back (its holder gives it
        // up when its call ends): a client refused now, as at its turn
        // come a little early, looks again shortly instead of joining the
        // back of the line.
        let overdue = streams
            .chains
            .values()
            .any(|&start| start.saturating_add(MAX_CHAIN_US) <= now);
        if overdue {
            return OVERDUE_CHAIN_RETRY_MS;
        }
        let next_end = streams
            .chains
            .values()
            .map(|&start| start.saturating_add(MAX_CHAIN_US + delay + TURN_MARGIN_US))
            .filter(|&end| end > booked)
            .min();
        let turn = next_end.unwrap_or(booked.saturating_add(MAX_CHAIN_US / max));
        self.slot_turns_tat = turn;
        // Its caller waits until then, whether or not it asks meanwhile.
        let streams = &mut self.leases.streams;
        streams.waiters_until = streams
            .waiters_until
            .max(turn.saturating_add(WAITERS_MEMORY_US));
        ceil_ms(turn.saturating_sub(now)).max(CONCURRENCY_RETRY_MS)
    }

    /// How long a client that keeps slots and waits for one more of its
    /// share waits: until the next client over its share is to give one
    /// back (the end of that client's oldest chain, and a quarter of a call
    /// for the call on it to end; then every eighth of a call), at most a
    /// chain's length, and a keeper's retry when none is to. Its callers
    /// are served by its own slots meanwhile: it need not look as often as
    /// a client with none.
    pub(super) fn keeper_turn_ms(&self, now: Micros) -> u64 {
        let call = self.leases.hold_us.unwrap_or(0);
        match self.leases.streams.claims.next_shed(now) {
            Some(at) => {
                let back = at
                    .saturating_add(call / 4)
                    .max(now.saturating_add(call / 8));
                ceil_ms(back.saturating_add(TURN_MARGIN_US).saturating_sub(now))
                    .clamp(CONCURRENCY_RETRY_MS, ceil_ms(MAX_CHAIN_US))
            }
            None => KEEPER_RETRY_MS,
        }
    }

    /// How long a client that asked for kept leases of a kind the bucket
    /// does not hand out now, and was granted nothing, waits (`wait_ms`:
    /// what the grant said). It comes back soon: the bucket turns as soon
    /// as the last of the old kind is back, or its rate as soon as its cut
    /// is over. Not before a slot held now could serve it, though: asking
    /// sooner is a wasted trip.
    pub(super) fn kind_retry_ms(&mut self, now: Micros, wait_ms: u64) -> u64 {
        let full = self.leases.live(now) as u64 >= self.max_concurrency().unwrap_or(u64::MAX);
        // A streamed chain's slot is ready a stream's spacing after it
        // began, even while a cut stops new streams.
        let spacing = self
            .stream_spacing()
            .or_else(|| self.base_spacing())
            .unwrap_or(0);
        match self.leases.streams.soonest_ready(spacing).filter(|_| full) {
            Some(at) => {
                ceil_ms(at.saturating_sub(now)).clamp(CONCURRENCY_RETRY_MS / 4, KEEPER_RETRY_MS)
            }
            None => wait_ms.clamp(CONCURRENCY_RETRY_MS / 4, CONCURRENCY_RETRY_MS),
        }
    }
}

#[cfg(test)]
#[path = "turns_tests.rs"]
mod tests;
