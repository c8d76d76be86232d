//! When a bucket or a run ledger may be forgotten, and an index of them by
//! that time, so making room costs a lookup, not a scan of every table.
//!
//! A bucket may be forgotten once forgetting it changes nothing a client
//! could observe: every time it reserved is past (the gateway's floor keeps
//! later buckets after them), no permit is within one window of its rules,
//! no lease is live. A cut rate or a 429 reported before the rules are
//! known is kept for [`FORGET_CUT_AFTER_US`] after the bucket's last call,
//! then forgotten too: an hour of silence is no evidence about the
//! provider's limit now, and keeping it would let any client pin a bucket
//! for ever. A run's ledger is forgotten [`RUN_IDLE_US`] after its last
//! charge.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::map_hash::KeyedMap;

use super::bucket::Bucket;
use super::timeline::{micros, Micros};

/// How long a bucket untouched keeps a cut rate: one hour.
pub const FORGET_CUT_AFTER_US: Micros = 3_600_000_000;

/// How long a run's budget counters outlive its last charge: one day. A run
/// charging again after that starts from zero.
pub const RUN_IDLE_US: Micros = 24 * 3_600_000_000;

/// The time from which `bucket`, touched at `now`, may be forgotten if no
/// one touches it again.
pub(crate) fn bucket_forgettable_at(bucket: &Bucket, now: Micros) -> Micros {
    let longest_window = bucket
        .timelines
        .iter()
        .map(|t| micros(t.window_ms))
        .max()
        .unwrap_or(0);
    let permits_aged = bucket
        .last_at
        .map_or(0, |at| at.saturating_add(longest_window));
    let cut = bucket.pending_cut || bucket.rate_reduced();
    bucket
        .next_free(0)
        .max(permits_aged)
        .max(bucket.leases.last_expiry().unwrap_or(0))
        .max(bucket.quota.idle_from())
        .max(if cut {
            now.saturating_add(FORGET_CUT_AFTER_US)
        } else {
            0
        })
}

/// Ids by the time from which they may be forgotten: a min-heap of
/// `(time, id)` whose entries go stale when an id's time moves (the map
/// holds the truth), compacted when stale entries outnumber live ones, so
/// it stays under twice the ids plus a constant. (A B-tree set would do
/// without stale entries but costs the wasm twice the code.)
#[derive(Debug, Clone, Default)]
pub(crate) struct IdleIndex {
    heap: BinaryHeap<Reverse<(Micros, String)>>,
    at: KeyedMap<Micros>,
}

/// Two indexes are equal when they file the same ids under the same times;
/// stale heap entries are bookkeeping.
impl PartialEq for IdleIndex {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}

impl IdleIndex {
    pub fn set(&mut self, id: &str, at: Micros) {
        if self.at.get(id) == Some(&at) {
            return;
        }
        self.at.insert(id.to_owned(), at);
        self.heap.push(Reverse((at, id.to_owned())));
        if self.heap.len() > 2 * self.at.len() + 64 {
            self.heap = self
                .at
                .iter()
                .map(|(id, &at)| Reverse((at, id.clone())))
                .collect();
        }
    }

    pub fn get(&self, id: &str) -> Option<Micros> {
        self.at.get(id).copied()
    }

    pub fn remove(&mut self, id: &str) {
        self.at.remove(id);
    }

    /// Takes out one id that may be forgotten at `now`, earliest first.
    pub fn pop_due(&mut self, now: Micros) -> Option<String> {
        while let Some(Reverse((at, _))) = self.heap.peek() {
            if *at > now {
                return None;
            }
            let Reverse((at, id)) = self.heap.pop().expect("peeked");
            if self.at.get(&id) == Some(&at) {
                self.at.remove(&id);
                return Some(id);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_only_due_ids_earliest_first_and_follows_moves() {
        let mut index = IdleIndex::default();
        index.set("a", 30);
        index.set("b", 10);
        index.set("c", 20);
        index.set("b", 40);
        assert_eq!(index.pop_due(25).as_deref(), Some("c"));
        assert_eq!(index.pop_due(25), None);
        index.remove("a");
        assert_eq!(index.pop_due(100).as_deref(), Some("b"));
        assert_eq!(index.pop_due(100), None);
    }

    #[test]
    fn stale_entries_never_outgrow_the_live_ones() {
        let mut index = IdleIndex::default();
        for t in 0..10_000 {
            index.set("a", t);
            index.set("b", t);
        }
        assert!(index.heap.len() <= 2 * 2 + 64);
        assert!(index.pop_due(9_999).is_some());
    }
}
