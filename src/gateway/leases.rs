//! Concurrency leases: one per permit of a bucket whose rules bound calls in
//! flight. A lease ends when it is released or when its TTL runs out, so an
//! isolate that dies holding leases gives its slots back by itself.

use std::collections::{HashMap, VecDeque};

use super::lease_id::{parse_lease_id, LeaseId};
use super::slot_streams::SlotStreams;
use super::timeline::Micros;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LeaseTable {
    expires: HashMap<LeaseId, Micros>,
    /// Live leases by expiry (then id), earliest first, so a sweep touches
    /// only expired ones however many are live. Holds exactly the leases in
    /// `expires`: a release takes its lease out of both. Dispatch times only
    /// grow and the TTL is fixed, so new leases almost always go at the
    /// back; a release shifts at most [`MAX_LIVE_LEASES`] entries.
    queue: VecDeque<(Micros, LeaseId)>,
    /// How long callers have held a lease before releasing it (a moving
    /// average), to tell a refused caller when a slot is likely to free.
    pub hold_us: Option<Micros>,
    /// When each slot may start its next call, for buckets whose slots
    /// are streamed.
    pub streams: SlotStreams,
}

impl LeaseTable {
    pub fn live(&mut self, now: Micros) -> usize {
        self.sweep(now);
        self.expires.len()
    }

    pub fn insert(&mut self, id: LeaseId, expires_at: Micros) {
        if let Some(old) = self.expires.insert(id, expires_at) {
            self.unqueue(old, id);
        }
        let entry = (expires_at, id);
        match self.queue.back() {
            Some(last) if *last > entry => {
                let at = self.queue.partition_point(|e| *e < entry);
                self.queue.insert(at, entry);
            }
            _ => self.queue.push_back(entry),
        }
    }

    fn unqueue(&mut self, expires_at: Micros, id: LeaseId) {
        if let Ok(at) = self.queue.binary_search(&(expires_at, id)) {
            self.queue.remove(at);
        }
    }

    /// Ends the named leases; unknown or already expired ids are a no-op.
    /// Returns how many live leases it ended. `ttl` is the lease TTL, which
    /// tells each lease's dispatch time from its expiry.
    pub fn release<'a>(
        &mut self,
        ids: impl IntoIterator<Item = &'a String>,
        now: Micros,
        ttl: Micros,
    ) -> u64 {
        self.sweep(now);
        let mut released = 0;
        for id in ids.into_iter().filter_map(|text| parse_lease_id(text)) {
            if let Some(expires_at) = self.expires.remove(&id) {
                self.unqueue(expires_at, id);
                self.streams.freed(id, now);
                released += 1;
                let held = now.saturating_sub(expires_at.saturating_sub(ttl));
                self.hold_us = Some(match self.hold_us {
                    None => held,
                    Some(avg) => avg - avg / 8 + held / 8,
                });
            }
        }
        released
    }

    /// When the next slot is likely to free: the oldest live lease's
    /// dispatch time plus the usual hold, or its expiry if sooner.
    pub fn likely_free_at(&mut self, now: Micros, ttl: Micros) -> Option<Micros> {
        let expiry = self.next_expiry(now)?;
        let likely = self.hold_us.map_or(expiry, |hold| {
            expiry.saturating_sub(ttl).saturating_add(hold)
        });
        Some(likely.min(expiry).max(now))
    }

    /// When the next slot frees by itself, if any lease is live.
    pub fn next_expiry(&mut self, now: Micros) -> Option<Micros> {
        self.sweep(now);
        self.queue.front().map(|&(expires_at, _)| expires_at)
    }

    /// When the last live lease expires, if any is live.
    pub fn last_expiry(&self) -> Option<Micros> {
        self.queue.back().map(|&(expires_at, _)| expires_at)
    }

    /// Entries of the expiry queue, live or not: what the table costs.
    #[cfg(any(test, feature = "sim"))]
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// `(expiry, id)` of every live lease (as of the last sweep), in order.
    pub fn iter(&self) -> impl Iterator<Item = &(Micros, LeaseId)> {
        self.queue.iter()
    }

    fn sweep(&mut self, now: Micros) {
        while let Some(&(expires_at, id)) = self.queue.front() {
            if expires_at > now {
                break;
            }
            self.queue.pop_front();
            self.expires.remove(&id);
            // A lease that lapsed started its last call a TTL ago at most.
            self.streams.freed(id, expires_at);
        }
    }

    /// Extends a live lease to a full `ttl` from `now`; false for one that
    /// is not live (unknown or expired).
    /// Whether `id` is a live lease.
    pub fn holds(&mut self, id: LeaseId, now: Micros) -> bool {
        self.sweep(now);
        self.expires.contains_key(&id)
    }

    pub fn renew(&mut self, id: LeaseId, now: Micros, ttl: Micros) -> bool {
        self.sweep(now);
        let Some(&expires_at) = self.expires.get(&id) else {
            return false;
        };
        let renewed = now.saturating_add(ttl);
        if renewed > expires_at {
            self.insert(id, renewed);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::lease_id::format_lease_id;

    #[test]
    fn expired_leases_stop_counting_and_release_of_them_is_a_no_op() {
        let mut t = LeaseTable::default();
        let (a, b) = (format_lease_id(1), format_lease_id(2));
        t.insert(1, 100);
        t.insert(2, 200);
        assert_eq!(t.live(99), 2);
        assert_eq!(t.live(100), 1);
        assert_eq!(t.release([&a, &"zzz".to_string()], 150, 100), 0);
        assert_eq!(t.next_expiry(150), Some(200));
        assert_eq!(t.release([&b], 150, 100), 1);
        assert_eq!(t.hold_us, Some(50), "dispatched at 100, released at 150");
        assert_eq!(t.live(150), 0);
        assert_eq!(t.next_expiry(150), None);
    }

    #[test]
    fn released_leases_leave_the_expiry_queue_behind_a_live_one() {
        let mut t = LeaseTable::default();
        t.insert(1, 1_000_000);
        for id in 2..10_002u128 {
            t.insert(id, 2_000_000 + id as u64);
            assert_eq!(t.release([&format_lease_id(id)], 10, 100), 1);
        }
        assert_eq!(t.queued(), 1);
        assert_eq!(t.live(10), 1);
    }
}
