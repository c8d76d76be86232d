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
            .filter(|a| a.pause.is_some())
            .map(|a| interval_for_rps(a.rate()));
        self.turn_interval(resumed.unwrap_or(adaptive_interval))
    }

    /// Whether turns are sized by callers now (see
    /// [`super::fair_turns::FairTurns::update`]):
    /// the adaptive rate's probes and cuts are read on whole-horizon turns,
    /// and a provider that refuses the rule refuses it in the first second.
    pub(super) fn fair_turns(&mut self, now: Micros) -> bool {
        let reduced = self.adaptive.as_ref().is_some_and(|a| a.is_reduced());
        let held_back = reduced || self.cooldown_until > now;
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

    /// Whether the client asking now wants streamed slots and is refused
    /// them because the rate is cut, paused or capped, as it will be for
    /// as long as that lasts. A client that asks for paced slots is
    /// refused only while the bucket turns to them, and is served as soon
    /// as the turn is done.
    pub(super) fn streams_held_back_by_cut(&self) -> bool {
        let streamed = !self.leases.streams.paced;
        streamed && self.asks_streams() && self.adaptive.as_ref().is_some_and(|a| a.is_reduced())
    }

    /// Whether the client asking now wants streamed slots: the kind it
    /// named, or, naming none, the kind the bucket hands out.
    pub(super) fn asks_streams(&self) -> bool {
        let streams = &self.leases.streams;
        !streams.asked_paced.unwrap_or(streams.paced)
    }

    /// Whether the adaptive rate is paused through a provider's outage.
    pub(super) fn paused(&self) -> bool {
        self.adaptive.as_ref().is_some_and(|a| a.pause.is_some())
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
mod tests {
    use super::*;
    use crate::gateway::lease_id::{LeaseIds, LeaseKey};
    use crate::protocol::PacingRule;

    const S: Micros = 1_000_000;

    /// Bug: only asks without leases looked at the bucket's rate for
    /// turns sized by callers, so a limit the provider stated (or a cut,
    /// or a pause) that came and went while only leased asks arrived was
    /// never seen: the next ask without leases (a client of paced slots)
    /// started fair turns at once, where one that saw it waits 30 s.
    #[test]
    fn a_stated_limit_only_leased_asks_saw_still_keeps_turns_whole_for_30_s_bug_leased_asks_skipped_it(
    ) {
        let rules = [PacingRule::new(20, 1_000).with_max_concurrency(10)];
        let mut b = Bucket::new(0);
        b.apply_rules(&rules, "20/s, 10 at once".into(), 0);
        let mut ids = LeaseIds::new(LeaseKey([1; 32]));
        let mut leased = |b: &mut Bucket, now: Micros| {
            let g = b.grant(
                1,
                false,
                Some(1),
                None,
                true,
                false,
                now,
                now,
                now + S,
                5 * S,
                &mut ids,
            );
            assert_eq!(g.times.len(), 1);
        };
        leased(&mut b, S);
        let state_limit = |b: &mut Bucket, rps, at| {
            b.adaptive
                .as_mut()
                .expect("rules applied")
                .state_limit(rps, at)
        };
        state_limit(&mut b, 10.0, 2 * S);
        leased(&mut b, 2 * S);
        state_limit(&mut b, 20.0, 3 * S);
        assert!(!b.adaptive.as_ref().unwrap().is_reduced());
        assert!(!b.fair_turns(10 * S));
        assert!(
            !b.fair_turns(12 * S),
            "30 s after the limit was seen, not a warm-up after the first ask without leases"
        );
        assert!(b.fair_turns(32 * S), "and on once those are past");
    }

    /// A bucket of 20/s with `max` slots.
    fn slots_of(max: u64) -> Bucket {
        let rules = [PacingRule::new(20, 1_000).with_max_concurrency(max)];
        let mut b = Bucket::new(0);
        b.apply_rules(&rules, format!("20/s, {max} at once"), 0);
        b
    }

    /// An ask for `n` permits by a client that keeps slots and has `n`
    /// callers waiting, granted a lease per permit.
    fn ask_for_slots(b: &mut Bucket, n: u64, now: Micros, ids: &mut LeaseIds) -> Grant {
        b.grant(
            n,
            false,
            Some(n),
            None,
            true,
            true,
            now,
            now,
            now + S,
            5 * S,
            ids,
        )
    }

    /// Bug: a client that asks for streamed slots while the rate is cut
    /// is granted a lease per permit, and when every slot was held it was
    /// told to look again within 25-100 ms, though the cut rate frees a
    /// slot for a new permit only once per spacing: a fleet of eight such
    /// clients made 14.8 gateway round trips per permit. Refused clients
    /// now take turns at the slots one spacing apart.
    #[test]
    fn clients_refused_slots_under_a_cut_come_back_a_spacing_apart_bug_all_polled_within_100_ms() {
        let mut b = slots_of(5);
        let adaptive = b.adaptive.as_mut().expect("rules applied");
        adaptive.state_limit(10.0, 0);
        b.leases.hold_us = Some(300_000);
        let mut ids = LeaseIds::new(LeaseKey([1; 32]));
        let mut ask = |b: &mut Bucket, now: Micros| ask_for_slots(b, 5, now, &mut ids);
        assert_eq!(ask(&mut b, S).times.len(), 5, "the five slots");
        let waits: Vec<u64> = (0..3)
            .map(|_| {
                let refused = ask(&mut b, S + 10_000);
                assert!(refused.times.is_empty());
                refused.wait_ms
            })
            .collect();
        // The first lease's permit is at 1 s and its call ends 300 ms
        // later; the next slot frees 100 ms after that at 10/s.
        assert_eq!(waits, [290, 390, 490], "turns a spacing apart");
    }

    /// Bug: a client that asks for kept slots and is refused a lease per
    /// permit for want of a slot (the rate cut, or the bucket turning
    /// kind) was not counted as waiting, so isolates keeping paced slots
    /// were never told others wait and kept their idle ones: after a
    /// provider's outage two such isolates held all five slots while six
    /// others asked for streamed ones.
    #[test]
    fn a_client_refused_a_leased_permit_for_want_of_a_slot_counts_as_waiting_bug_keepers_never_heard(
    ) {
        let mut b = slots_of(2);
        let mut ids = LeaseIds::new(LeaseKey([1; 32]));
        let mut ask = |b: &mut Bucket, now: Micros| ask_for_slots(b, 2, now, &mut ids);
        assert_eq!(ask(&mut b, S).times.len(), 2, "both slots");
        assert!(!b.leases.streams.contended(S));
        assert!(ask(&mut b, S + 10_000).times.is_empty());
        assert!(
            b.leases.streams.contended(S + 10_000),
            "the refused client waits"
        );
    }
}
