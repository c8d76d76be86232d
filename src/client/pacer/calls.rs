//! The calls this isolate's callers are in: a permit drawn starts one at
//! its time, the outcome its caller reports (a success or a 429) ends the
//! oldest, and the ends measure how long calls here take. A caller in a
//! call is not waiting for a permit, yet a caller that loops comes back
//! for the next as soon as its call ends; the surplus watch asks whether
//! one will be back by a permit's deadline before it takes an empty queue
//! for falling demand.
//!
//! Callers need not report outcomes: with none reported, no call is
//! expected back, and a call is remembered for a bounded time only.

use crate::time::Millis;

/// How long a call is taken to be running without an outcome reported:
/// a caller in a longer call is not back within a block's permits anyway.
const CALL_MEMORY_MS: Millis = 2_000;

/// The most calls remembered: past this many without an outcome each,
/// the calls are forgotten (their callers report none).
const MAX_CALLS: usize = 64;

#[derive(Default)]
pub(super) struct CallsInFlight {
    /// When each call began, in time order (permits are drawn in time
    /// order); those from `ended` on are still running.
    started: Vec<Millis>,
    ended: usize,
    /// A moving mean of how long calls took (a quarter weight on the
    /// latest), once one has ended.
    typical_ms: Option<Millis>,
}

impl CallsInFlight {
    /// A caller drew a permit due `at`: its call begins then.
    pub fn begin(&mut self, at: Millis) {
        if self.started.len() == MAX_CALLS {
            self.started.clear();
            self.ended = 0;
        }
        self.started.push(at);
    }

    /// An outcome came back: the oldest call within the memory ended
    /// (which one did is not known, and only when the others began
    /// matters). Calls past the memory had no outcome and measure nothing.
    pub fn end(&mut self, now: Millis) {
        let oldest = self.oldest_running(now);
        self.ended = oldest.map_or(self.started.len(), |(i, _)| i + 1);
        if self.ended == self.started.len() {
            self.started.clear();
            self.ended = 0;
        }
        if let Some((_, began)) = oldest {
            let took = now.saturating_sub(began);
            let mean = self.typical_ms.unwrap_or(took);
            self.typical_ms = Some(mean - mean / 4 + took / 4);
        }
    }

    /// Whether a caller in a call begun within the memory is expected back
    /// by `by`, its call taking as long as calls here usually do.
    pub fn back_by(&self, now: Millis, by: Millis) -> bool {
        match (self.oldest_running(now), self.typical_ms) {
            (Some((_, began)), Some(typical)) => began.saturating_add(typical) <= by,
            _ => false,
        }
    }

    /// The oldest call not ended and begun within the memory: its place
    /// and when it began.
    fn oldest_running(&self, now: Millis) -> Option<(usize, Millis)> {
        let mut i = self.ended;
        while let Some(&began) = self.started.get(i) {
            if began.saturating_add(CALL_MEMORY_MS) > now {
                return Some((i, began));
            }
            i += 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_is_expected_back_after_the_usual_call_length() {
        let mut calls = CallsInFlight::default();
        calls.begin(0);
        calls.end(80);
        calls.begin(100);
        assert!(calls.back_by(120, 180), "back at 180");
        assert!(!calls.back_by(120, 179), "not before");
    }

    #[test]
    fn no_caller_is_expected_back_until_a_call_has_ended() {
        let mut calls = CallsInFlight::default();
        calls.begin(0);
        assert!(!calls.back_by(10, 1_000), "no call length known");
        calls.end(50);
        assert!(!calls.back_by(60, 1_000), "no call running");
        calls.end(70);
        calls.begin(80);
        assert!(
            calls.back_by(90, 130),
            "an outcome with no call open measures nothing"
        );
    }

    #[test]
    fn each_outcome_ends_the_oldest_call() {
        let mut calls = CallsInFlight::default();
        calls.begin(0);
        calls.end(100);
        calls.begin(200);
        calls.begin(250);
        calls.end(300);
        assert!(calls.back_by(310, 350), "the call begun at 250 runs");
        calls.end(320);
        assert!(!calls.back_by(330, 10_000), "both ended");
    }

    #[test]
    fn a_call_with_no_outcome_is_forgotten_after_the_memory() {
        let mut calls = CallsInFlight::default();
        calls.begin(0);
        calls.end(10);
        calls.begin(1_000);
        assert!(calls.back_by(1_000 + CALL_MEMORY_MS - 1, Millis::MAX));
        assert!(!calls.back_by(1_000 + CALL_MEMORY_MS, Millis::MAX));
    }

    #[test]
    fn an_outcome_ends_a_call_within_the_memory_not_one_past_it() {
        let mut calls = CallsInFlight::default();
        calls.begin(0);
        calls.begin(CALL_MEMORY_MS + 100);
        calls.begin(CALL_MEMORY_MS + 150);
        calls.end(CALL_MEMORY_MS + 200);
        assert!(
            calls.back_by(CALL_MEMORY_MS + 200, CALL_MEMORY_MS + 250),
            "the call begun at +150 runs, expected back after the 100 ms the ended one took"
        );
        assert!(!calls.back_by(CALL_MEMORY_MS + 200, CALL_MEMORY_MS + 249));
    }

    #[test]
    fn calls_past_the_most_remembered_are_forgotten() {
        let mut calls = CallsInFlight::default();
        calls.begin(0);
        calls.end(0);
        for at in 0..=MAX_CALLS as Millis {
            calls.begin(at);
        }
        let now = MAX_CALLS as Millis;
        assert!(calls.back_by(now, Millis::MAX), "the latest call runs");
        calls.end(now);
        assert!(
            !calls.back_by(now, Millis::MAX),
            "the calls before it, none reported, were dropped"
        );
    }
}
