//! Paced slots: the kept leases of an isolate whose calls are short. A
//! stream would leave each slot idle between its spaced calls while the
//! rate allows more, so a paced lease is a bare slot: each call takes a
//! permit from the bucket's timeline, as under a rule with no concurrency
//! bound, and at that permit's time a slot this isolate keeps. Blocks of
//! permits and the renewal of the slots ride on the same requests, so a
//! busy isolate pays a round trip per block, not per call.
//!
//! A slot is taken at its permit's time, not before: held only for calls,
//! few serve an isolate, and those it does not need idle out and go back.
//! A caller that finds none free asks for one more and waits for one
//! handed on while its permit is good; a permit that dies unused is lost
//! like any permit sent too late. So when a block lands, the permits no
//! slot here will be free for (calls outlasting the permits' spacing) go
//! back while another isolate can still take them, and a refill asks for
//! no more than its slots serve in a horizon.

use super::refill::Target;
use super::{GatewayRateState, REFILL_POLL_MS};
use crate::client::permit::Permit;
use crate::error::Result;
use crate::rt::AbortSignal;
use crate::time::Millis;

impl GatewayRateState {
    /// Whether the bucket's kept leases are paced slots.
    pub(super) fn paced_pool(&self, bucket_id: &str) -> bool {
        self.pool(bucket_id, |p| p.paced()).unwrap_or(false)
    }

    /// Waits for a drawn permit's time `due` and takes a slot for its call,
    /// while the permit is good (until `deadline`). `None` when no slot came
    /// in time, or the bucket keeps no paced slots here (any more): the
    /// permit is dead, and the caller draws another.
    pub(super) async fn paced_call(
        &self,
        target: &Target,
        due: Millis,
        deadline: Millis,
        signal: Option<&AbortSignal>,
    ) -> Result<Option<Permit>> {
        let bucket_id = target.bucket_id.as_str();
        let _due = PacedDue::count(self, bucket_id);
        let rt = &self.inner.rt;
        let mut missed = false;
        loop {
            let now = rt.now_ms();
            if now > deadline || !self.paced_pool(bucket_id) {
                return Ok(None);
            }
            if now >= due {
                if let Some(lease) = self.take_free_kept(bucket_id, now) {
                    self.renew_ahead(target);
                    return Ok(Some(self.kept_permit(bucket_id, lease.id)));
                }
                if !std::mem::replace(&mut missed, true) {
                    self.pool(bucket_id, |p| p.missed += 1);
                }
                self.grow_pool(target);
            }
            let wake = match now < due {
                true => due,
                false => deadline.min(now + REFILL_POLL_MS),
            };
            let sleep = rt.sleep(wake.saturating_sub(now).max(1));
            super::permit_sleep(sleep, bucket_id, signal).await?;
        }
    }

    /// Whether a paced slot is free for a call now.
    pub(super) fn paced_slot_free(&self, bucket_id: &str, now: Millis) -> bool {
        self.pool(bucket_id, |p| {
            now >= p.cooldown_until && p.idle.iter().any(|l| l.start_by >= now)
        })
        .unwrap_or(false)
    }

    /// Gives back the permits of the block that no paced slot kept here
    /// will be free for: calls longer than the permits' spacing keep a few
    /// slots busy across many of a block's permits, and each permit that
    /// finds none free would die unsent. A slot is free now when idle, or
    /// a usual hold after its call began.
    pub(super) fn fit_paced_slots(&self, bucket_id: &str, now: Millis) {
        let unserved = self.state(bucket_id, |s| {
            let pool = s.pool.as_ref().filter(|p| p.paced())?;
            let hold = s.hold.usual_ms()?;
            let mut free = Vec::new();
            for _ in &pool.idle {
                free.push(now);
            }
            for call in pool.in_call.values() {
                free.push(call.since + hold);
            }
            let reach = s.clock.give_back_reach_ms();
            let block = s.block.as_mut()?;
            let back = block.unserved(&s.clock, &mut free, hold, now + reach);
            if back.is_empty() {
                return None;
            }
            let scope = (block.token.clone(), block.rules.clone());
            Some((scope, back, s.clock.to_gateway(now)))
        });
        if let Some(((token, rules), back, gateway_now)) = unserved {
            self.give_back(bucket_id, token, &rules, back, gateway_now);
        }
    }
}

/// Counts a caller in `paced_call` for as long as it is there, however it
/// leaves (its permit used or dead, or its wait aborted and dropped).
struct PacedDue<'a> {
    state: &'a GatewayRateState,
    bucket_id: &'a str,
}

impl<'a> PacedDue<'a> {
    fn count(state: &'a GatewayRateState, bucket_id: &'a str) -> Self {
        state.state(bucket_id, |s| s.paced_due += 1);
        PacedDue { state, bucket_id }
    }
}

impl Drop for PacedDue<'_> {
    fn drop(&mut self) {
        self.state.state(self.bucket_id, |s| {
            s.paced_due = s.paced_due.saturating_sub(1)
        });
    }
}
