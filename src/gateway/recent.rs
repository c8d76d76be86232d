//! How many permits a bucket placed lately, in bounded memory, so a rule
//! that starts binding mid-stream (clients changed or disagree about the
//! rules) can count the permits already placed in its first window.
//!
//! Each grant is one entry: its latest permit's time and its size. Past
//! [`MAX_ENTRIES`] the two neighbouring entries closest in time merge into
//! one at the later time, so the log keeps fine detail where grants are
//! sparse and recent, and coarse totals elsewhere. A merged entry counts in
//! full for any window that holds its time, so a count is never low.

use super::timeline::{micros, Micros};
use crate::protocol::limits::MAX_WINDOW_MS;

pub(crate) const MAX_ENTRIES: usize = 64;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RecentPermits {
    /// `(latest permit of a grant, permits in it)`, oldest first.
    pub entries: Vec<(Micros, u64)>,
}

impl RecentPermits {
    /// A grant of `n` permits whose latest is at `last`.
    pub fn record(&mut self, last: Micros, n: u64) {
        let last = self
            .entries
            .last()
            .map_or(last, |&(prev, _)| last.max(prev));
        self.entries.push((last, n));
        let horizon = last.saturating_sub(micros(MAX_WINDOW_MS) * 2);
        self.entries.retain(|&(at, _)| at >= horizon);
        if self.entries.len() > MAX_ENTRIES {
            let closest = (1..self.entries.len())
                .min_by_key(|&i| self.entries[i].0 - self.entries[i - 1].0)
                .expect("more than one entry");
            let (_, older) = self.entries.remove(closest - 1);
            self.entries[closest - 1].1 = self.entries[closest - 1].1.saturating_add(older);
        }
    }

    /// An upper bound on the permits placed after `from`.
    pub fn count_after(&self, from: Micros) -> u64 {
        self.entries
            .iter()
            .rev()
            .take_while(|&&(at, _)| at > from)
            .fold(0, |sum, &(_, n)| sum.saturating_add(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_grants_after_a_time_and_never_undercounts_once_merged() {
        let mut recent = RecentPermits::default();
        for i in 0..1_000u64 {
            recent.record(i * 1_000_000, 3);
        }
        assert_eq!(recent.entries.len(), MAX_ENTRIES);
        for from in [0, 500_000_000, 990_000_000, 998_500_000] {
            let exact = (0..1_000u64).filter(|i| i * 1_000_000 > from).count() as u64 * 3;
            let counted = recent.count_after(from);
            assert!(counted >= exact, "after {from}: {counted} < {exact}");
        }
        assert_eq!(recent.count_after(998_500_000), 3, "the latest stay exact");
    }
}
