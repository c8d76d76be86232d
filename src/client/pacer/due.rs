//! Permits handed out without waiting: a cached permit whose time has come
//! needs no timer and no task, so a caller that only wants one now (or
//! wants to know when to ask again) gets its answer synchronously.

use super::{GatewayRateState, PermitRequest};
use crate::client::permit::Permit;
use crate::error::Result;
use crate::time::Millis;

/// No permit is due now: ask again after `retry_after_ms`. It is the wait
/// for the next cached permit, or, with none cached, for the refill this
/// refusal started (or one already on its way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotYet {
    pub retry_after_ms: Millis,
}

impl GatewayRateState {
    /// A permit that is due now, if one is cached for the request: never
    /// waits and starts nothing. `None` sends the caller to
    /// [`GatewayRateState::acquire`]. A bucket whose leases are kept hands
    /// them out there only.
    pub fn take_due(&self, req: PermitRequest<'_>) -> Result<Option<Permit>> {
        if req.rules.is_empty() {
            return Ok(Some(Permit::unpaced()));
        }
        if let Some(e) = self.inner.release_failure.borrow_mut().take() {
            return Err(e);
        }
        let target = self.target(&req);
        // Only a state that keeps leases ever has a pool: the others skip
        // a second lookup of the bucket per permit.
        if self.inner.options.keep_leases {
            let pool = self
                .inner
                .buckets
                .borrow()
                .get(&target.bucket_id)
                .map(|s| s.pool.is_some());
            if pool == Some(true) && self.pooled(&target) {
                return Ok(None);
            }
        }
        let now = self.inner.rt.now_ms();
        // A permit drawn at `now` is alive at `now`, so it is good to send.
        Ok(self.draw(&target, now, now).map(|(_, _, permit)| permit))
    }

    /// A permit due now, or when to ask again. With nothing cached it
    /// starts the bucket's refill (unless one is on its way), so the
    /// permits are here by then; a refill that failed is this call's error,
    /// once.
    pub fn try_acquire(
        &self,
        req: PermitRequest<'_>,
    ) -> Result<std::result::Result<Permit, NotYet>> {
        if let Some(permit) = self.take_due(req)? {
            return Ok(Ok(permit));
        }
        let target = self.target(&req);
        let now = self.inner.rt.now_ms();
        let later = |ms: Millis| {
            Ok(Err(NotYet {
                retry_after_ms: ms.max(1),
            }))
        };
        if self.pooled(&target) {
            return later(super::REFILL_POLL_MS);
        }
        let next = self.state(&target.bucket_id, |s| {
            if let Some(due) = s.block.as_ref().and_then(|b| b.next_due(&s.clock)) {
                return Ok(Some(due.saturating_sub(now)));
            }
            // Callers of `acquire` woken by that refill read its failure too.
            match s.refill.failure(s.waiters == 0) {
                Some(e) => Err(e),
                None => Ok(None),
            }
        })?;
        if let Some(wait) = next {
            return later(wait);
        }
        let (generation, wait) = self.state(&target.bucket_id, |s| {
            let r = &mut s.refill;
            let wait = r.not_before.saturating_sub(now).max(s.clock.rtt_ms());
            (r.begin_unless_running(now), wait)
        });
        if let Some(generation) = generation {
            self.spawn_refill(generation, &target);
        }
        later(wait)
    }
}
