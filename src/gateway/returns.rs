//! Returned permits: times a client was granted and gives back unused while
//! they are still ahead. The gateway hands them to the next acquirer before
//! it extends the timeline, so a block sized for more than an isolate used
//! costs the rest of the fleet nothing.
//!
//! A time is taken back only if this gateway granted it and nobody has
//! returned it since (`outstanding` counts granted times still ahead), so a
//! time is never live twice: a repeated or invented return is ignored.
//! Every time in the pool was placed by the timelines under the bucket's
//! current rules and rate, so granting it again keeps every window's count;
//! a rules change or a rate cut empties the pool. The pool is not part of
//! the snapshot: a restarted gateway forgets it, which only wastes those
//! times.

use std::collections::BTreeMap;

use super::bucket::Bucket;
use super::timeline::{micros, Micros};

/// Granted times tracked per bucket for returns. Past it, new grants are
/// not tracked and their returns are ignored, which is always safe.
pub(crate) const MAX_TRACKED_TIMES: usize = 4_096;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ReturnPool {
    /// Granted times (ms on the wire) still ahead, with how many permits
    /// hold each.
    outstanding: BTreeMap<u64, u32>,
    /// Returned times waiting for an acquirer, likewise.
    pooled: BTreeMap<u64, u32>,
    tracked: usize,
}

impl ReturnPool {
    /// Forgets times before `now_ms`: nobody can dispatch them any more.
    fn prune(&mut self, now_ms: u64) {
        for map in [&mut self.outstanding, &mut self.pooled] {
            while let Some(entry) = map.first_entry() {
                if *entry.key() >= now_ms {
                    break;
                }
                self.tracked -= entry.remove() as usize;
            }
        }
    }

    /// Remembers a granted time so it may come back.
    pub fn granted(&mut self, at_ms: u64) {
        if self.tracked < MAX_TRACKED_TIMES {
            *self.outstanding.entry(at_ms).or_default() += 1;
            self.tracked += 1;
        }
    }

    /// Forgets the times that have passed, then takes back the times a
    /// client will not use; ignores any this gateway did not grant, already
    /// has back, or that are not ahead of `now_ms`. Returns how many it
    /// took.
    pub fn give_back(&mut self, times: &[u64], now_ms: u64) -> u64 {
        self.prune(now_ms);
        let mut taken = 0;
        for &at in times.iter().filter(|&&at| at > now_ms) {
            if take_one(&mut self.outstanding, at) {
                *self.pooled.entry(at).or_default() += 1;
                taken += 1;
            }
        }
        taken
    }

    /// The earliest returned time in `[from_ms, to_ms]`, taken out of the
    /// pool and tracked as granted again.
    pub fn take(&mut self, from_ms: u64, to_ms: u64) -> Option<u64> {
        if from_ms > to_ms {
            return None;
        }
        let at = *self.pooled.range(from_ms..=to_ms).next()?.0;
        take_one(&mut self.pooled, at);
        *self.outstanding.entry(at).or_default() += 1;
        Some(at)
    }

    /// Forgets every granted and returned time: the rules changed or the
    /// rate was cut, so their spacing may no longer hold, and a time granted
    /// before must not come back into the pool after.
    pub fn clear(&mut self) {
        self.pooled.clear();
        self.outstanding.clear();
        self.tracked = 0;
    }

    pub fn pooled(&self) -> usize {
        count(&self.pooled)
    }
}

fn take_one(map: &mut BTreeMap<u64, u32>, at: u64) -> bool {
    match map.get_mut(&at) {
        Some(n) if *n > 1 => {
            *n -= 1;
            true
        }
        Some(_) => {
            map.remove(&at);
            true
        }
        None => false,
    }
}

fn count(map: &BTreeMap<u64, u32>) -> usize {
    map.values().map(|&n| n as usize).sum()
}

impl Bucket {
    /// Takes back the granted times a client will not use (see
    /// [`ReturnPool::give_back`]). Each one taken leaves the count of what
    /// the provider was sent, until it is granted again: counted, an
    /// unused permit read as one the provider accepted, and a cut read over
    /// a block its isolate could not use went to a limit above the
    /// provider's.
    ///
    /// A client gives back what its callers did not come for and forgets
    /// the turn it was booked for its next block, so while turns are sized
    /// by callers each time taken back also shortens the turns booked
    /// ahead by a permit's spacing: the next client booked takes the
    /// stretch nobody comes for instead of queueing behind it while the
    /// timeline idles there. Whole-horizon turns (the bucket's first
    /// second, and while its rate recovers from a cut) keep their tally:
    /// the adaptive rate is tuned on them, and in the fleet simulation
    /// shortening them there raised the 429s of a provider that takes 60%
    /// of the rule from 1.0% to 1.35%.
    pub(super) fn take_back(&mut self, times: &[u64], now_ms: u64) {
        let mut taken = 0;
        for &at in times {
            if self.returns.give_back(&[at], now_ms) == 1 {
                taken += 1;
                self.throughput.ungranted(micros(at));
                if let Some(a) = &mut self.adaptive {
                    a.on_return();
                }
            }
        }
        if taken > 0 && self.fair_turns.on {
            let spacing = self.turn_interval(self.adaptive_interval());
            self.turns_tat = self.turns_tat.saturating_sub(spacing.saturating_mul(taken));
        }
    }

    /// A time given back is granted again at `now`.
    pub(super) fn grant_again(&mut self, at_ms: u64, now: Micros) {
        self.throughput.granted(micros(at_ms), now);
        if let Some(a) = &mut self.adaptive {
            a.on_grant_again();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_granted_time_still_ahead_comes_back_and_only_once() {
        let mut pool = ReturnPool::default();
        pool.granted(1_050);
        pool.granted(1_100);
        assert_eq!(pool.give_back(&[1_050, 1_050, 1_075, 900], 1_000), 1);
        assert_eq!(pool.pooled(), 1);
        assert_eq!(pool.take(1_000, 2_000), Some(1_050));
        assert_eq!(pool.take(1_000, 2_000), None, "handed out once");
        assert_eq!(
            pool.give_back(&[1_050], 1_000),
            1,
            "granted again, so it may come back again"
        );
    }

    #[test]
    fn take_respects_the_earliest_and_latest_allowed_time() {
        let mut pool = ReturnPool::default();
        for at in [1_100, 1_200, 1_300] {
            pool.granted(at);
        }
        pool.give_back(&[1_100, 1_200, 1_300], 1_000);
        assert_eq!(pool.take(1_150, 1_250), Some(1_200));
        assert_eq!(pool.take(1_350, 2_000), None);
        assert_eq!(
            pool.take(1_400, 1_300),
            None,
            "a cooldown past the horizon leaves nothing to take, and no panic"
        );
    }

    #[test]
    fn pruning_forgets_past_times_and_clear_forgets_every_time() {
        let mut pool = ReturnPool::default();
        for at in [1_100, 1_200] {
            pool.granted(at);
        }
        pool.give_back(&[1_100, 1_200], 1_000);
        pool.prune(1_150);
        assert_eq!(pool.pooled(), 1);
        pool.granted(1_300);
        pool.clear();
        assert_eq!(pool.pooled(), 0);
        assert_eq!(pool.tracked, 0);
        assert_eq!(
            pool.give_back(&[1_300], 1_000),
            0,
            "a time granted before a cut never comes back after it"
        );
    }

    #[test]
    fn tracking_is_bounded() {
        let mut pool = ReturnPool::default();
        for at in 0..(MAX_TRACKED_TIMES as u64 + 10) {
            pool.granted(10_000 + at);
        }
        assert_eq!(pool.tracked, MAX_TRACKED_TIMES);
        let past_the_cap = 10_000 + MAX_TRACKED_TIMES as u64 + 5;
        assert_eq!(pool.give_back(&[past_the_cap], 0), 0);
    }
}
