//! Permits handed out without waiting: a cached permit whose time has come
//! needs no timer and no task, so a caller that only wants one now (or
//! wants to know when to ask again) gets its answer synchronously.

use super::refill::Target;
use super::{GatewayRateState, PermitRequest};
use crate::client::permit::Permit;
use crate::error::Result;
use crate::protocol::has_concurrency;
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
    /// [`GatewayRateState::acquire`].
    pub fn take_due(&self, req: PermitRequest<'_>) -> Result<Option<Permit>> {
        if req.rules.is_empty() {
            return Ok(Some(Permit::unpaced()));
        }
        if let Some(e) = self.inner.release_failure.borrow_mut().take() {
            return Err(e);
        }
        let target = self.target(&req);
        let now = self.inner.rt.now_ms();
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
                return Ok(self.take_kept_now(&target, now));
            }
        }
        // A permit drawn at `now` is alive at `now`, so it is good to send;
        // under a concurrency bound, only with a lease.
        let permit = self.draw(&target, now, now).map(|(_, _, permit)| permit);
        Ok(permit.filter(|p| p.lease_id().is_some() || !has_concurrency(&target.rules)))
    }

    /// A kept lease's permit due now: a streamed lease whose next start has
    /// come, or a paced slot with a permit due now.
    fn take_kept_now(&self, target: &Target, now: Millis) -> Option<Permit> {
        let bucket_id = target.bucket_id.as_str();
        if self.paced_pool(bucket_id) {
            if !self.paced_slot_free(bucket_id, now) {
                return None;
            }
            let (_, _, permit) = self.draw(target, now, now)?;
            if permit.lease_id().is_some() {
                return Some(permit);
            }
        }
        let lease = self.take_free_kept(bucket_id, now)?;
        Some(self.kept_permit(bucket_id, lease.id))
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
            let bucket_id = target.bucket_id.as_str();
            let paced = self.paced_pool(bucket_id);
            if paced && self.paced_slot_free(bucket_id, now) {
                // A slot is free; the permit is what is missing.
            } else {
                // No slot free now: one is handed on when a call here ends;
                // with none idle, one more is asked for (the refill asks
                // for a slot per caller missing one, and a caller polling
                // here is no waiter).
                let next = self.pool(bucket_id, |p| {
                    let mut next_start = None;
                    for l in &p.idle {
                        let at = l.next_at.max(p.cooldown_until);
                        next_start = Some(next_start.map_or(at, |next: Millis| next.min(at)));
                    }
                    if p.idle.is_empty() {
                        p.missed = p.missed.max(1);
                    }
                    (p.idle.is_empty(), next_start)
                });
                let (grow, next_start) = next.unwrap_or((true, None));
                if grow {
                    self.grow_pool(&target);
                }
                let wait = next_start.map_or(super::REFILL_POLL_MS, |at| at.saturating_sub(now));
                return later(wait);
            }
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
