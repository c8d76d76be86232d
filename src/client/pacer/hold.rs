//! How long this isolate's calls hold a concurrency slot, and so which
//! kind of kept leases pays. A streamed lease starts at most one call per
//! spacing of its slot (see `pool`); when calls hold their slot about that
//! long or longer, the slots bind, and streaming them needs no permit per
//! call. When calls are short, the rate binds: a streamed lease would sit
//! idle between its spaced calls while the rate allows more, so slots are
//! paced (see `paced`), each call taking a permit of the timeline's, which
//! uses the whole rate.

use crate::protocol::PacingRule;
use crate::time::Millis;

/// Leases are kept once calls hold a slot for this share of its spacing.
const KEEP_FROM: f64 = 0.75;

/// A pool goes back once calls hold a slot for less than this share (a
/// band below `KEEP_FROM`, so the choice does not flap).
const DISSOLVE_BELOW: f64 = 0.5;

/// A moving mean of how long calls held their slot, and a peak: the
/// longest recent hold, rising at once and falling slowly.
#[derive(Debug, Default, Clone)]
pub(super) struct HoldTime {
    mean_ms: Option<f64>,
    peak_ms: f64,
}

impl HoldTime {
    /// A call's hold moves the mean by at most what four times the mean
    /// would: one call held up for seconds among short ones is not how
    /// long calls here take, and the mean sizes what paced slots serve.
    /// A lasting change comes through about a call later than without
    /// the bound.
    pub fn record(&mut self, held_ms: Millis) {
        let held = held_ms as f64;
        self.mean_ms = Some(match self.mean_ms {
            None => held,
            Some(mean) => mean + (held.min(4.0 * mean + 1.0) - mean) / 8.0,
        });
        self.peak_ms = match held >= self.peak_ms {
            true => held,
            false => self.peak_ms - (self.peak_ms - held) / 64.0,
        };
    }

    /// How many paced slots this isolate's permits need: permits of a
    /// block come at least a permit's spacing apart, and a call on one
    /// still holds its slot when the next is due if calls last longer.
    /// A permit that finds no slot free dies, so the count follows the
    /// longest recent calls, not the usual ones.
    pub fn paced_slots(&self, rules: &[PacingRule]) -> u64 {
        let mut gap: f64 = 0.0;
        for r in rules {
            gap = gap.max(r.window_ms as f64 / r.requests_per_window.max(1) as f64);
        }
        match gap > 0.0 {
            true => ((self.peak_ms / gap).ceil() as u64).max(1),
            false => 1,
        }
    }

    /// How long calls here usually hold their slot, once one was seen.
    pub fn usual_ms(&self) -> Option<Millis> {
        self.mean_ms.map(|m| m as Millis)
    }

    /// Whether a call was seen to end.
    pub fn seen(&self) -> bool {
        self.mean_ms.is_some()
    }

    /// Whether streamed slots pay: calls here were seen to hold a slot
    /// about as long as its spacing. Until a call is seen (see `seen`),
    /// this isolate takes whichever kind the bucket hands out.
    pub fn streams_pay(&self, rules: &[PacingRule]) -> bool {
        self.share_of(slot_spacing_ms(rules))
            .is_some_and(|share| share >= KEEP_FROM)
    }

    /// Whether a call that has held its slot `running_ms` so far, with no
    /// call seen to end yet, leaves open which kind of slot pays: it has
    /// not yet held a streamed slot long enough for streams to pay.
    pub fn undecided(&self, running_ms: Millis, spacing_ms: Millis) -> bool {
        !self.seen() && (running_ms as f64) < KEEP_FROM * spacing_ms as f64
    }

    /// Whether a pool whose slots are streamed `spacing_ms` apart should
    /// go back: its calls are too short to use them.
    pub fn too_short_for(&self, spacing_ms: Millis) -> bool {
        self.share_of(Some(spacing_ms as f64))
            .is_some_and(|share| share < DISSOLVE_BELOW)
    }

    fn share_of(&self, spacing_ms: Option<f64>) -> Option<f64> {
        let (mean, spacing) = (self.mean_ms?, spacing_ms?);
        Some(if spacing > 0.0 {
            mean / spacing
        } else {
            f64::INFINITY
        })
    }
}

/// About the spacing a gateway streams each slot at: the widest over the
/// rules of `window / floor(limit / M)` (the gateway adds its window guard).
fn slot_spacing_ms(rules: &[PacingRule]) -> Option<f64> {
    let slots = rules.iter().filter_map(|r| r.max_concurrency).min()?.max(1);
    let mut widest = None;
    for r in rules {
        let spacing = r.window_ms as f64 / (r.requests_per_window / slots).max(1) as f64;
        widest = Some(widest.map_or(spacing, |w: f64| w.max(spacing)));
    }
    widest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_as_long_as_the_spacing_stream_their_slots_and_short_ones_do_not() {
        let rules = [PacingRule::new(20, 1_000).with_max_concurrency(5)];
        let mut long = HoldTime::default();
        assert!(!long.seen() && !long.streams_pay(&rules));
        long.record(300);
        assert!(long.streams_pay(&rules), "300 ms against a 250 ms spacing");
        let mut short = HoldTime::default();
        short.record(40);
        assert!(!short.streams_pay(&rules));
        assert!(short.too_short_for(250));
        assert!(!long.too_short_for(250));
    }

    #[test]
    fn calls_longer_than_a_permits_spacing_need_a_second_paced_slot() {
        let rules = [PacingRule::new(20, 1_000).with_max_concurrency(10)];
        let mut hold = HoldTime::default();
        for held in [30, 40, 35, 45] {
            hold.record(held);
        }
        assert_eq!(hold.paced_slots(&rules), 1, "every call ends within 50 ms");
        hold.record(58);
        assert_eq!(
            hold.paced_slots(&rules),
            2,
            "one call outlasted the spacing"
        );
        for _ in 0..8 {
            hold.record(40);
        }
        assert_eq!(hold.paced_slots(&rules), 2, "the peak falls slowly");
        for _ in 0..64 {
            hold.record(40);
        }
        assert_eq!(hold.paced_slots(&rules), 1, "long calls were long ago");
    }

    #[test]
    fn one_call_held_up_for_seconds_barely_moves_the_usual_hold() {
        let mut hold = HoldTime::default();
        for _ in 0..16 {
            hold.record(40);
        }
        hold.record(2_000);
        let usual = hold.usual_ms().unwrap();
        assert!((50..=60).contains(&usual), "{usual} ms after one 2 s call");
        for _ in 0..16 {
            hold.record(290);
        }
        let usual = hold.usual_ms().unwrap();
        assert!(usual >= 250, "calls now take 290 ms: {usual} ms");
    }

    #[test]
    fn a_first_call_leaves_the_kind_open_until_it_has_held_its_slot_long_enough_for_streams() {
        let mut hold = HoldTime::default();
        assert!(hold.undecided(300, 500), "300 ms of a 500 ms spacing");
        assert!(
            !hold.undecided(375, 500),
            "three quarters of it: streams pay"
        );
        hold.record(40);
        assert!(!hold.undecided(0, 500), "a call seen to end decides");
    }

    #[test]
    fn the_widest_rule_sets_the_spacing() {
        let rules = [
            PacingRule::new(100, 1_000).with_max_concurrency(10),
            PacingRule::new(600, 60_000),
        ];
        assert_eq!(slot_spacing_ms(&rules), Some(1_000.0));
        assert_eq!(slot_spacing_ms(&[PacingRule::new(100, 1_000)]), None);
    }
}
