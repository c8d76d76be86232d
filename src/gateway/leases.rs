//! Concurrency leases: one per permit of a bucket whose rules bound calls in
//! flight. A lease ends when it is released or when its TTL runs out, so an
//! isolate that dies holding leases gives its slots back by itself.

use std::collections::{HashMap, VecDeque};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::slot_streams::SlotStreams;
use super::timeline::Micros;

/// The most live leases one bucket holds: rules naming a larger
/// `maxConcurrency` are refused. At 16 bytes of id and about 8 of expiry a
/// lease, a full table is some 24 KiB of a bucket's stored record, far
/// below a Durable Object's 128 KiB limit on one value.
pub const MAX_LIVE_LEASES: u64 = 1_024;

/// A lease id as the gateway keeps it; clients see it as 32 hex digits.
pub(crate) type LeaseId = u128;

/// As two 64-bit halves: formatting a `u128` directly would add its own
/// code to the wasm.
pub(crate) fn format_lease_id(id: LeaseId) -> String {
    format!("{:016x}{:016x}", (id >> 64) as u64, id as u64)
}

/// `None` for text that is no id this gateway could have made; releasing it
/// is then a no-op like any other unknown id. Sixteen digits are the ids of
/// gateways from before 128-bit ids, still live in a restored table.
pub(crate) fn parse_lease_id(text: &str) -> Option<LeaseId> {
    let lower_hex = text
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !lower_hex || !(text.len() == 32 || text.len() == 16) {
        return None;
    }
    // Checked, though the text is ASCII: `split_at`'s panic message formats
    // a `char` with `Debug`, which alone kept core's Unicode tables in the
    // module (3.8 KB gzip).
    let (high, low) = text.split_at_checked(text.len() - 16)?;
    let high = if high.is_empty() {
        0
    } else {
        u64::from_str_radix(high, 16).ok()?
    };
    Some(LeaseId::from(high) << 64 | LeaseId::from(u64::from_str_radix(low, 16).ok()?))
}

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

/// The key lease ids are made with: host randomness for a gateway that
/// faces clients, any fixed bytes for tests and simulations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseKey(pub [u8; 32]);

/// A bare number for a scheduler whose ids nobody can exploit (one inside
/// an isolate, a simulation): its ids are unique, not unpredictable.
impl From<u64> for LeaseKey {
    fn from(seed: u64) -> Self {
        let mut key = [0; 32];
        key[..8].copy_from_slice(&seed.to_le_bytes());
        LeaseKey(key)
    }
}

impl From<[u8; 32]> for LeaseKey {
    fn from(key: [u8; 32]) -> Self {
        LeaseKey(key)
    }
}

/// Lease ids: a MAC of a counter under a secret key, truncated to 128 bits.
/// Unique for the gateway's whole life (the key and the counter are part of
/// its snapshot), and seeing any number of ids tells nothing about the
/// next, so a client cannot release leases it never held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeaseIds {
    pub key: LeaseKey,
    pub counter: u64,
}

impl LeaseIds {
    pub fn new(key: LeaseKey) -> Self {
        LeaseIds { key, counter: 0 }
    }

    pub fn next_id(&mut self) -> LeaseId {
        self.counter += 1;
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.key.0).expect("HMAC accepts keys of any length");
        mac.update(b"paceline-lease\n");
        mac.update(&self.counter.to_le_bytes());
        let tag = mac.finalize().into_bytes();
        LeaseId::from_le_bytes(tag[..16].try_into().expect("16 of 32 bytes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_distinct_and_thirty_two_hex_digits() {
        let mut ids = LeaseIds::new(LeaseKey([9; 32]));
        let seen: HashSet<String> = (0..10_000)
            .map(|_| format_lease_id(ids.next_id()))
            .collect();
        assert_eq!(seen.len(), 10_000);
        assert!(seen
            .iter()
            .all(|id| id.len() == 32 && parse_lease_id(id).is_some()));
    }

    #[test]
    fn only_lowercase_ids_of_sixteen_or_thirty_two_digits_parse() {
        assert_eq!(parse_lease_id("00000000000000ff"), Some(255));
        assert_eq!(parse_lease_id(&format_lease_id(255)), Some(255));
        let both = (7u128 << 64) | 9;
        assert_eq!(parse_lease_id(&format_lease_id(both)), Some(both));
        for text in ["00000000000000FF", "+0000000000000ff", "ff", ""] {
            assert_eq!(parse_lease_id(text), None, "{text}");
        }
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
