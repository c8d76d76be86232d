//! Concurrency leases: one per permit of a bucket whose rules bound calls in
//! flight. A lease ends when it is released or when its TTL runs out, so an
//! isolate that dies holding leases gives its slots back by itself.

use std::collections::{HashMap, VecDeque};

use super::timeline::Micros;

/// A lease id as the gateway keeps it; clients see it as 16 hex digits.
pub(crate) type LeaseId = u64;

pub(crate) fn format_lease_id(id: LeaseId) -> String {
    format!("{id:016x}")
}

/// `None` for text that is no id this gateway could have made; releasing it
/// is then a no-op like any other unknown id.
pub(crate) fn parse_lease_id(text: &str) -> Option<LeaseId> {
    if text.len() != 16 {
        return None;
    }
    LeaseId::from_str_radix(text, 16).ok()
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LeaseTable {
    expires: HashMap<LeaseId, Micros>,
    /// Leases by expiry, earliest first, so a sweep touches only expired
    /// ones however many are live. Dispatch times only grow and the TTL is
    /// fixed, so new leases almost always go at the back. A released lease
    /// stays here until it reaches the front; `expires` is the truth.
    queue: VecDeque<(Micros, LeaseId)>,
    /// How long callers have held a lease before releasing it (a moving
    /// average), to tell a refused caller when a slot is likely to free.
    pub hold_us: Option<Micros>,
}

impl LeaseTable {
    pub fn live(&mut self, now: Micros) -> usize {
        self.sweep(now);
        self.expires.len()
    }

    pub fn insert(&mut self, id: LeaseId, expires_at: Micros) {
        self.expires.insert(id, expires_at);
        match self.queue.back() {
            Some(&(last, _)) if last > expires_at => {
                let at = self.queue.partition_point(|&(e, _)| e <= expires_at);
                self.queue.insert(at, (expires_at, id));
            }
            _ => self.queue.push_back((expires_at, id)),
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
                released += 1;
                let held = now.saturating_sub(expires_at.saturating_sub(ttl));
                self.hold_us = Some(match self.hold_us {
                    None => held,
                    Some(avg) => avg - avg / 8 + held / 8,
                });
            }
        }
        self.drop_released_front();
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

    pub fn iter(&self) -> impl Iterator<Item = (&LeaseId, &Micros)> {
        self.expires.iter()
    }

    fn sweep(&mut self, now: Micros) {
        while let Some(&(expires_at, id)) = self.queue.front() {
            if expires_at > now {
                break;
            }
            self.queue.pop_front();
            if self.expires.get(&id) == Some(&expires_at) {
                self.expires.remove(&id);
            }
        }
        self.drop_released_front();
    }

    fn drop_released_front(&mut self) {
        while let Some(&(expires_at, id)) = self.queue.front() {
            if self.expires.get(&id) == Some(&expires_at) {
                break;
            }
            self.queue.pop_front();
        }
    }
}

/// Lease ids: unique within a gateway for its whole life (the counter is part
/// of its snapshot) and unlike each other, so one cannot be guessed from the
/// next. `mix` is a bijection on `u64`, so distinct counters give distinct ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeaseIds {
    pub nonce: u64,
    pub counter: u64,
}

impl LeaseIds {
    pub fn new(nonce: u64) -> Self {
        LeaseIds { nonce, counter: 0 }
    }

    pub fn next_id(&mut self) -> LeaseId {
        self.counter += 1;
        mix(self.nonce ^ self.counter)
    }
}

/// splitmix64's finalizer.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_distinct_and_sixteen_hex_digits() {
        let mut ids = LeaseIds::new(0xdead_beef);
        let seen: HashSet<String> = (0..10_000)
            .map(|_| format_lease_id(ids.next_id()))
            .collect();
        assert_eq!(seen.len(), 10_000);
        assert!(seen.iter().all(|id| parse_lease_id(id).is_some()));
    }

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
}
