//! Turns: when a caller refused now, or one that will want more soon,
//! should come back, so callers return about when the timeline or a slot
//! will have room for them instead of polling.

use super::bucket::{Bucket, CONCURRENCY_RETRY_MS, MAX_TURN_QUEUE_US};
use super::timeline::{ceil_ms, micros, Micros};

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

    /// Every slot is taken: books the caller a turn at the slots, after the
    /// callers already refused, from when the leases in flight are likely
    /// to come back (their usual hold, learned from releases). Callers then
    /// return about when a slot frees instead of polling.
    pub(super) fn book_slot_turn(&mut self, requested: u64, now: Micros, lease_ttl: Micros) -> u64 {
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
        let start = self.slot_turns_tat.max(free_at);
        self.slot_turns_tat = start
            .saturating_add(requested.min(max).saturating_mul(per_slot))
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
    pub(super) fn book_turn(
        &mut self,
        wanted: u64,
        now: Micros,
        horizon: Micros,
        interval: Micros,
    ) -> u64 {
        let reach = horizon - now;
        let booked = wanted.min(reach / interval + 1);
        let turn_start = self.turns_tat.max(self.next_free(now));
        let last_permit = turn_start.saturating_add((booked - 1).saturating_mul(interval));
        self.turns_tat = last_permit
            .saturating_add(interval)
            .min(now.saturating_add(MAX_TURN_QUEUE_US));
        let ready = turn_start.max(last_permit.saturating_sub(reach));
        ceil_ms(ready.saturating_sub(now))
    }
}
