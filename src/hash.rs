//! The hash of the client's maps: a fixed-key hash of one multiply per
//! byte (FNV-1a's form with a 64-bit odd multiplier, and a final rotation)
//! in place of std's SipHash-1-3 with a key per map. The client's maps are
//! keyed by names its own application chose (tools, budgets, buckets) and
//! by lease ids its gateway issued, so nobody can pick keys that collide
//! to slow it down; SipHash and its keys' setup were 2.3 KB of the wasm
//! module (1.1 KB gzip) for nothing. The gateway's maps, keyed by strings
//! its clients choose, keep std's hasher.

use std::hash::{BuildHasher, Hasher};

/// A `HashMap` with the fixed hash.
pub type HashMap<K, V> = std::collections::HashMap<K, V, FixedHash>;

#[derive(Clone, Copy, Default, Debug)]
pub struct FixedHash;

impl BuildHasher for FixedHash {
    type Hasher = FixedHasher;

    fn build_hasher(&self) -> FixedHasher {
        FixedHasher(0)
    }
}

pub struct FixedHasher(u64);

/// Odd, with its bits spread: each byte's bits reach the high half.
const MULTIPLIER: u64 = 0xf135_7aea_2e62_a9c5;

impl Hasher for FixedHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(MULTIPLIER);
        }
    }

    /// The multiply moves each input bit up, never down: the rotation
    /// brings the well-mixed high bits to the low ones a table indexes by.
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet as Seen;

    /// hashbrown picks a group from the low bits and tags entries with the
    /// top seven: names that differ in one character must spread over both.
    #[test]
    fn names_that_differ_in_one_character_spread_over_low_and_top_bits() {
        let hashes: Vec<u64> = (0..1_000)
            .map(|i| FixedHash.hash_one(format!("provider-{i}")))
            .collect();
        let low: Seen<u64> = hashes.iter().map(|h| h & 0x3ff).collect();
        let top: Seen<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert!(low.len() > 550, "{} of 1,024 low values", low.len());
        assert_eq!(top.len(), 128, "every top-seven tag is used");
    }

    #[test]
    fn a_map_with_the_fixed_hash_finds_what_it_holds() {
        let mut map: HashMap<String, u64> = HashMap::default();
        for i in 0..500 {
            map.insert(format!("lease-{i}"), i);
        }
        assert!((0..500).all(|i| map[&format!("lease-{i}")] == i));
        assert_eq!(map.get("lease-500"), None);
    }
}
