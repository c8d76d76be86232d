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

use std::collections::{BTreeSet, HashMap};

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
    let cut = bucket.pending_cut || bucket.adaptive.as_ref().is_some_and(|a| a.is_reduced());
    bucket
        .next_free(0)
        .max(permits_aged)
        .max(bucket.leases.last_expiry().unwrap_or(0))
        .max(if cut {
            now.saturating_add(FORGET_CUT_AFTER_US)
        } else {
            0
        })
}

/// Ids ordered by the time from which they may be forgotten.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct IdleIndex {
    by_time: BTreeSet<(Micros, String)>,
    at: HashMap<String, Micros>,
}

impl IdleIndex {
    pub fn set(&mut self, id: &str, at: Micros) {
        match self.at.get_mut(id) {
            Some(old) if *old == at => {}
            Some(old) => {
                self.by_time.remove(&(*old, id.to_owned()));
                *old = at;
                self.by_time.insert((at, id.to_owned()));
            }
            None => {
                self.at.insert(id.to_owned(), at);
                self.by_time.insert((at, id.to_owned()));
            }
        }
    }

    pub fn get(&self, id: &str) -> Option<Micros> {
        self.at.get(id).copied()
    }

    pub fn remove(&mut self, id: &str) {
        if let Some(at) = self.at.remove(id) {
            self.by_time.remove(&(at, id.to_owned()));
        }
    }

    /// Takes out one id that may be forgotten at `now`, earliest first.
    pub fn pop_due(&mut self, now: Micros) -> Option<String> {
        let (at, _) = self.by_time.first()?;
        if *at > now {
            return None;
        }
        let (_, id) = self.by_time.pop_first()?;
        self.at.remove(&id);
        Some(id)
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
}
