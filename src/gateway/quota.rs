//! What a provider says about its own quota, as the bucket uses it: "this
//! many calls left until this time". The gateway turns it into an allowance
//! of permits before the reset; once they are granted, the next permit
//! waits for the reset. That is a pause the provider announced, not a cut:
//! the adaptive rate does not move.
//!
//! A report is about the instant the provider counted the call it answered,
//! and it reaches the gateway later, on a client's next request. Permits
//! granted in between were not in the provider's count, so the allowance is
//! what remains after them: the bucket keeps the times it granted lately,
//! once it has heard a report (a bucket whose provider never reports pays
//! nothing for this).

use super::timeline::Micros;

/// Grant times kept for reports to be counted against. Past it the oldest
/// go, and a report older than the ones kept is too late to use.
pub(crate) const MAX_LOGGED_GRANTS: usize = 256;
/// A report older than this when it arrives is ignored: the permits granted
/// since may no longer be in the log.
pub(crate) const MAX_REPORT_AGE_US: Micros = 10_000_000;
/// A report from further ahead of the gateway's clock than this is refused
/// as a time on the wrong clock.
pub(crate) const MAX_REPORT_LEAD_US: Micros = 2_000_000;
/// The longest a reset may hold the bucket: a provider's far-future reset
/// cannot park it past what clients are willing to wait.
pub(crate) const MAX_RESET_PAUSE_US: Micros = 60_000_000;

/// Permits left until the provider's reset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QuotaWindow {
    pub observed_at: Micros,
    pub reset_at: Micros,
    pub allowance: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Quota {
    /// `None` until the first report: granted times, oldest first.
    pub log: Option<Vec<Micros>>,
    /// The log holds every grant from this time on.
    pub complete_from: Micros,
    pub window: Option<QuotaWindow>,
}

impl Quota {
    /// A permit was granted at `at`.
    pub fn take(&mut self, at: Micros) {
        if let Some(log) = &mut self.log {
            while log.len() >= MAX_LOGGED_GRANTS {
                let dropped = log.remove(0);
                self.complete_from = self.complete_from.max(dropped.saturating_add(1));
            }
            log.push(at);
        }
        if let Some(w) = &mut self.window {
            if at < w.reset_at {
                w.allowance = w.allowance.saturating_sub(1);
            }
        }
    }

    /// The earliest a permit may be placed if `at` is too early: the reset,
    /// once the allowance before it is spent.
    pub fn blocked_until(&self, at: Micros) -> Option<Micros> {
        self.window
            .as_ref()
            .filter(|w| w.allowance == 0 && at < w.reset_at)
            .map(|w| w.reset_at)
    }

    /// Forgets a window whose reset has passed.
    pub fn expire(&mut self, now: Micros) {
        if self.window.as_ref().is_some_and(|w| w.reset_at <= now) {
            self.window = None;
        }
        if let Some(log) = &mut self.log {
            let horizon = now.saturating_sub(MAX_REPORT_AGE_US);
            let stale = log.iter().take_while(|&&t| t < horizon).count();
            if stale > 0 {
                log.drain(..stale);
                self.complete_from = self.complete_from.max(horizon);
            }
        }
    }

    /// From when forgetting the quota would change nothing: its reset.
    pub fn idle_from(&self) -> Micros {
        self.window.as_ref().map_or(0, |w| w.reset_at)
    }

    /// The provider said `remaining` calls are left until `reset_at`, as of
    /// `observed_at`. Reports too old, from the future or out of order are
    /// ignored; a reset is held to [`MAX_RESET_PAUSE_US`] from now.
    pub fn observe(&mut self, observed_at: Micros, remaining: u64, reset_at: Micros, now: Micros) {
        let Some(log) = &self.log else {
            // The first report: from now on grants are logged, so the next
            // one can be counted.
            self.log = Some(Vec::new());
            self.complete_from = now;
            return;
        };
        let fresh = observed_at.saturating_add(MAX_REPORT_AGE_US) >= now
            && observed_at <= now.saturating_add(MAX_REPORT_LEAD_US)
            && observed_at >= self.complete_from;
        let reset_at = reset_at.min(now.saturating_add(MAX_RESET_PAUSE_US));
        if !fresh || reset_at <= now || reset_at <= observed_at {
            return;
        }
        if let Some(w) = &self.window {
            if w.reset_at == reset_at && w.observed_at > observed_at {
                return;
            }
        }
        let since = log
            .iter()
            .filter(|&&t| t > observed_at && t < reset_at)
            .count() as u64;
        self.window = Some(QuotaWindow {
            observed_at,
            reset_at,
            allowance: remaining.saturating_sub(since),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Micros = 1_000_000;

    fn heard(now: Micros) -> Quota {
        let mut q = Quota::default();
        q.observe(now, 100, now + 10 * S, now);
        q
    }

    #[test]
    fn the_first_report_only_starts_the_log() {
        let q = heard(5 * S);
        assert!(q.window.is_none());
        assert!(q.log.is_some());
    }

    #[test]
    fn permits_granted_after_the_report_s_instant_come_off_its_remaining() {
        let mut q = heard(0);
        for i in 0..5 {
            q.take(S + i * 100_000);
        }
        q.observe(S + 150_000, 3, 10 * S, 2 * S);
        assert_eq!(
            q.window.as_ref().unwrap().allowance,
            0,
            "3 left, 3 granted since"
        );
        assert_eq!(q.blocked_until(2 * S), Some(10 * S));
        assert_eq!(q.blocked_until(10 * S), None);
    }

    #[test]
    fn the_allowance_is_spent_by_grants_before_the_reset_only() {
        let mut q = heard(0);
        q.observe(S, 2, 3 * S, S);
        q.take(2 * S);
        assert_eq!(q.blocked_until(2 * S), None);
        q.take(4 * S);
        assert_eq!(
            q.blocked_until(2 * S),
            None,
            "a grant past the reset spends nothing"
        );
        q.take(2 * S + 1);
        assert_eq!(q.blocked_until(2 * S), Some(3 * S));
        q.expire(3 * S);
        assert!(q.window.is_none());
    }

    #[test]
    fn a_far_reset_parks_the_bucket_no_longer_than_the_cap() {
        let mut q = heard(0);
        q.observe(S, 0, 86_400 * S, S);
        assert_eq!(q.blocked_until(S), Some(S + MAX_RESET_PAUSE_US));
    }

    #[test]
    fn stale_future_and_out_of_order_reports_are_ignored() {
        let mut q = heard(0);
        q.observe(20 * S, 0, 30 * S, 20 * S);
        assert!(q.window.is_some());
        let before = q.window.clone();
        q.observe(19 * S, 5, 30 * S, 20 * S);
        assert_eq!(q.window, before, "older than the window's report");
        let mut q = heard(0);
        q.observe(S, 0, 30 * S, 20 * S);
        assert!(q.window.is_none(), "19 s old");
        q.observe(25 * S, 0, 30 * S, 20 * S);
        assert!(q.window.is_none(), "5 s ahead of the gateway");
    }

    #[test]
    fn a_full_log_stops_counting_reports_older_than_it() {
        let mut q = heard(0);
        for i in 0..(MAX_LOGGED_GRANTS as u64 + 10) {
            q.take(S + i);
        }
        q.observe(S + 5, 1_000, 5 * S, 2 * S);
        assert!(
            q.window.is_none(),
            "the grants after it are no longer all known"
        );
    }
}
