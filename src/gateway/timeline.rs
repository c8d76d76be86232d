//! One rule's timeline: GCRA ("virtual scheduling") with no burst tolerance.
//!
//! Times are microseconds. Each permit is placed at or after the theoretical
//! arrival time `tat`, and moves `tat` one emission interval past itself, so
//! consecutive permits are at least `interval_us` apart. With
//! `interval_us = ceil(windowMs * 1000 / requestsPerWindow)`, no half-open
//! window of `windowMs` can hold more than `requestsPerWindow` permits, and
//! rounding each time up to a whole millisecond on the wire keeps that true
//! (a monotone map sends a half-open window of whole milliseconds back onto a
//! window of the same length).

use crate::protocol::PacingRule;

pub(crate) type Micros = u64;

pub(crate) fn micros(ms: u64) -> Micros {
    ms.saturating_mul(1_000)
}

/// The whole millisecond at or after `us`.
pub(crate) fn ceil_ms(us: Micros) -> u64 {
    us.div_ceil(1_000)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Timeline {
    pub requests_per_window: u64,
    pub window_ms: u64,
    pub interval_us: Micros,
    /// The earliest time the next permit may be placed.
    pub tat: Micros,
    /// A timeline of rules no longer sent still binds every grant until this
    /// time, so a rules change never schedules faster than the old rules
    /// allowed within one of their windows.
    pub retire_at: Option<Micros>,
}

impl Timeline {
    /// `guard_ms` lengthens every window, so permits dispatched a little
    /// late or early (network jitter between an isolate and the provider)
    /// still fall within the provider's own count.
    pub fn for_rule(rule: &PacingRule, tat: Micros, guard_ms: u64) -> Self {
        Timeline {
            requests_per_window: rule.requests_per_window,
            window_ms: rule.window_ms,
            interval_us: micros(rule.window_ms + guard_ms).div_ceil(rule.requests_per_window),
            tat,
            retire_at: None,
        }
    }

    pub fn matches(&self, rule: &PacingRule) -> bool {
        self.requests_per_window == rule.requests_per_window && self.window_ms == rule.window_ms
    }

    /// Moves the timeline past a permit placed at `at` (never backwards).
    pub fn take(&mut self, at: Micros) {
        self.tat = self.tat.max(at.saturating_add(self.interval_us));
    }
}

/// The adaptive rate's own spacing, in microseconds per permit. Never more
/// than the longest rule window: no rule spaces permits further apart, and
/// one grant must not park a bucket for longer than a window.
pub(crate) fn interval_for_rps(rps: f64) -> Micros {
    ((1_000_000.0 / rps).ceil() as Micros).min(micros(crate::protocol::limits::MAX_WINDOW_MS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_rounds_up_so_spacing_never_undershoots_the_rule() {
        let t = Timeline::for_rule(&PacingRule::new(3, 1_000), 0, 0);
        assert_eq!(t.interval_us, 333_334);
        assert!(t.interval_us * 3 >= 1_000_000);
    }

    #[test]
    fn a_window_guard_spreads_the_permits_of_a_window_over_a_longer_one() {
        let t = Timeline::for_rule(&PacingRule::new(20, 1_000), 0, 20);
        assert_eq!(t.interval_us, 51_000);
    }

    #[test]
    fn take_moves_tat_one_interval_past_the_permit_and_never_back() {
        let mut t = Timeline::for_rule(&PacingRule::new(20, 1_000), 0, 0);
        t.take(1_000_000);
        assert_eq!(t.tat, 1_050_000);
        t.take(10);
        assert_eq!(t.tat, 1_050_000);
    }

    #[test]
    fn ceil_ms_rounds_partial_milliseconds_up() {
        assert_eq!(ceil_ms(1_000), 1);
        assert_eq!(ceil_ms(1_001), 2);
        assert_eq!(ceil_ms(0), 0);
    }
}
