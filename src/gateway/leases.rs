//! Concurrency leases: one per permit of a bucket whose rules bound calls in
//! flight. A lease ends when it is released or when its TTL runs out, so an
//! isolate that dies holding leases gives its slots back by itself.

use std::collections::HashMap;

use super::timeline::Micros;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LeaseTable {
    expires: HashMap<String, Micros>,
    /// No lease expires before this (the earliest expiry, or earlier once
    /// that lease is released), so expired leases are swept only when one
    /// may be due rather than on every call.
    next_expiry: Option<Micros>,
}

impl LeaseTable {
    pub fn live(&mut self, now: Micros) -> usize {
        self.sweep(now);
        self.expires.len()
    }

    pub fn insert(&mut self, id: String, expires_at: Micros) {
        self.next_expiry = Some(self.next_expiry.map_or(expires_at, |e| e.min(expires_at)));
        self.expires.insert(id, expires_at);
    }

    /// Ends the named leases; unknown or already expired ids are a no-op.
    /// Returns how many live leases it ended.
    pub fn release<'a>(&mut self, ids: impl IntoIterator<Item = &'a String>, now: Micros) -> u64 {
        self.sweep(now);
        let released = ids
            .into_iter()
            .filter(|id| self.expires.remove(id.as_str()).is_some())
            .count() as u64;
        if self.expires.is_empty() {
            self.next_expiry = None;
        }
        released
    }

    /// When the next slot frees by itself, if any lease is live.
    pub fn next_expiry(&mut self, now: Micros) -> Option<Micros> {
        self.sweep(now);
        self.next_expiry
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Micros)> {
        self.expires.iter()
    }

    fn sweep(&mut self, now: Micros) {
        if self.next_expiry.is_some_and(|e| e <= now) {
            self.expires.retain(|_, expires_at| *expires_at > now);
            self.next_expiry = self.expires.values().copied().min();
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

    pub fn next_id(&mut self) -> String {
        self.counter += 1;
        format!("{:016x}", mix(self.nonce ^ self.counter))
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
        let seen: HashSet<String> = (0..10_000).map(|_| ids.next_id()).collect();
        assert_eq!(seen.len(), 10_000);
        assert!(seen.iter().all(|id| id.len() == 16));
    }

    #[test]
    fn expired_leases_stop_counting_and_release_of_them_is_a_no_op() {
        let mut t = LeaseTable::default();
        t.insert("a".into(), 100);
        t.insert("b".into(), 200);
        assert_eq!(t.live(99), 2);
        assert_eq!(t.live(100), 1);
        assert_eq!(t.release([&"a".to_string(), &"zzz".to_string()], 150), 0);
        assert_eq!(t.next_expiry(150), Some(200));
        assert_eq!(t.release([&"b".to_string()], 150), 1);
        assert_eq!(t.live(150), 0);
        assert_eq!(t.next_expiry(150), None);
    }
}
