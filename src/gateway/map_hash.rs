//! The hash of the gateway's maps keyed by strings its clients choose
//! (bucket ids, run ids, reservation ids): SipHash with keys no client can
//! know, so nobody can pick ids that collide and turn every lookup into a
//! scan.
//!
//! std's `RandomState` would do natively, but on wasm32-unknown-unknown std
//! has no entropy: it builds its keys from memory addresses, which are the
//! same in every instance of the module. So the keys here are mixed from
//! each gateway's lease key (32 bytes of host randomness for a gateway that
//! faces clients, or a secret restored from its own storage) before that
//! gateway makes its maps. Mixing, not replacing: once one secret went in,
//! a scheduler made later in the isolate from a bare number leaves the
//! keys as unknown as they were.

use std::cell::Cell;
use std::hash::{BuildHasher, RandomState};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// A map keyed by client-chosen strings.
pub(crate) type KeyedMap<V> = std::collections::HashMap<String, V, MapHash>;

/// The keys in force when a map was made.
#[derive(Debug, Clone)]
pub(crate) struct MapHash {
    k0: u64,
    k1: u64,
}

thread_local! {
    static KEYS: Cell<(u64, u64)> = Cell::new({
        let state = RandomState::new();
        (state.hash_one(0u8), state.hash_one(1u8))
    });
}

impl Default for MapHash {
    fn default() -> Self {
        let (k0, k1) = KEYS.with(Cell::get);
        MapHash { k0, k1 }
    }
}

impl BuildHasher for MapHash {
    // std's only hasher that takes its keys from the caller: SipHash-2-4,
    // deprecated for want of a stable name, not for a flaw.
    #[allow(deprecated)]
    type Hasher = std::hash::SipHasher;

    #[allow(deprecated)]
    fn build_hasher(&self) -> Self::Hasher {
        std::hash::SipHasher::new_with_keys(self.k0, self.k1)
    }
}

/// Mixes `secret` into the keys of maps made from now on in this thread.
pub(crate) fn mix_keys(secret: &[u8]) {
    let (k0, k1) = KEYS.with(Cell::get);
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC accepts keys of any length");
    mac.update(b"paceline-map-hash\n");
    mac.update(&k0.to_le_bytes());
    mac.update(&k1.to_le_bytes());
    let tag = mac.finalize().into_bytes();
    let half = |at: usize| u64::from_le_bytes(tag[at..at + 8].try_into().expect("8 of 32 bytes"));
    KEYS.with(|keys| keys.set((half(0), half(8))));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_mixed_in_changes_the_hash_of_maps_made_after_and_not_of_those_made_before() {
        let before = MapHash::default();
        mix_keys(b"a gateway's lease key");
        let after = MapHash::default();
        assert_eq!(before.hash_one("bucket"), before.hash_one("bucket"));
        assert_ne!(before.hash_one("bucket"), after.hash_one("bucket"));
        mix_keys(&[7; 8]);
        assert_ne!(
            after.hash_one("bucket"),
            MapHash::default().hash_one("bucket")
        );
    }

    #[test]
    fn two_threads_that_mix_different_secrets_hash_apart() {
        let hash_after = |secret: &'static [u8]| {
            std::thread::spawn(move || {
                mix_keys(secret);
                MapHash::default().hash_one("run-1")
            })
            .join()
            .expect("the thread ends")
        };
        assert_ne!(hash_after(b"first"), hash_after(b"second"));
    }
}
