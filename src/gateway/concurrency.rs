//! Concurrency limits clients named recently. Clients of one bucket may
//! disagree about a provider's `maxConcurrency` (a deploy in progress, a
//! misconfigured isolate); the strictest limit any of them named binds every
//! grant for one window of the rule that named it, as a dropped rate rule
//! does through its retiring timeline. Alternating lax and strict requests
//! then never lift the live leases to the lax limit.

use super::timeline::{micros, Micros};
use crate::protocol::PacingRule;

/// The most live leases one bucket holds: rules naming a larger
/// `maxConcurrency` are refused. At 16 bytes of id and about 8 of expiry a
/// lease, a full table is some 24 KiB of a bucket's stored record, far
/// below a Durable Object's 128 KiB limit on one value.
pub const MAX_LIVE_LEASES: u64 = 1_024;

/// Distinct limits remembered at once. Past it the laxest is forgotten,
/// which can never loosen the limit that binds now.
pub(crate) const MAX_NAMED_LIMITS: usize = 32;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ConcurrencyLimits {
    /// `(maxConcurrency, binds until)`, one entry per distinct limit.
    pub named: Vec<(u64, Micros)>,
}

impl ConcurrencyLimits {
    /// Records the limits `rules` name at `now` and forgets those whose
    /// window has passed.
    pub fn observe(&mut self, rules: &[PacingRule], now: Micros) {
        self.named.retain(|&(_, until)| until > now);
        for rule in rules {
            let Some(max) = rule.max_concurrency else {
                continue;
            };
            let until = now.saturating_add(micros(rule.window_ms));
            match self.named.iter_mut().find(|(m, _)| *m == max) {
                Some((_, at)) => *at = (*at).max(until),
                None => self.named.push((max, until)),
            }
        }
        while self.named.len() > MAX_NAMED_LIMITS {
            let laxest = (0..self.named.len())
                .max_by_key(|&i| self.named[i].0)
                .expect("not empty");
            self.named.swap_remove(laxest);
        }
    }

    /// The strictest limit still binding (as of the last `observe`).
    pub fn strictest(&self) -> Option<u64> {
        self.named.iter().map(|&(max, _)| max).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(max: u64) -> PacingRule {
        PacingRule::new(10, 1_000).with_max_concurrency(max)
    }

    #[test]
    fn the_strictest_limit_named_binds_for_one_window_of_its_rule() {
        let mut limits = ConcurrencyLimits::default();
        limits.observe(&[rule(5)], 0);
        limits.observe(&[rule(50)], 500_000);
        assert_eq!(limits.strictest(), Some(5));
        limits.observe(&[rule(50)], 999_999);
        assert_eq!(limits.strictest(), Some(5));
        limits.observe(&[rule(50)], 1_000_000);
        assert_eq!(limits.strictest(), Some(50));
        limits.observe(&[PacingRule::new(10, 1_000)], 1_000_001);
        assert_eq!(limits.strictest(), Some(50), "still within 50's window");
        limits.observe(&[PacingRule::new(10, 1_000)], 2_000_000);
        assert_eq!(limits.strictest(), None);
    }

    #[test]
    fn many_distinct_limits_keep_the_strictest() {
        let mut limits = ConcurrencyLimits::default();
        for max in (1..=100).rev() {
            limits.observe(&[rule(max)], 0);
        }
        assert_eq!(limits.named.len(), MAX_NAMED_LIMITS);
        assert_eq!(limits.strictest(), Some(1));
    }
}
