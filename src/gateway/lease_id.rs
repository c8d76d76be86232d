//! A lease's identity: the ids the gateway mints for leases, unguessable so
//! that a client cannot end a lease it never held, and how clients see them.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

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
}
