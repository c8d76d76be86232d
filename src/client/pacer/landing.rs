//! A refill's answer landing: what the gateway said of the bucket, and
//! its grant merged into the bucket's block (or, for streamed slots, its
//! pool).

use super::block::{validate_grant, Block, Slot, LEGACY_TOLERANCE_MS};
use super::pool::{KeptLease, LeasePool, RENEW_EVERY_MS};
use super::refill::Target;
use super::GatewayRateState;
use crate::error::{Detail, Error, ErrorCode, Result};
use crate::protocol::AcquireResponse;
use crate::queue::Queue;
use crate::time::Millis;

impl GatewayRateState {
    /// Records what a gateway answer says about the bucket, and merges a
    /// grant into its block.
    pub(super) fn land(
        &self,
        target: &Target,
        response: AcquireResponse,
        sent: Millis,
        received: Millis,
    ) -> Result<()> {
        let bucket_id = target.bucket_id.as_str();
        let slots = validate_grant(bucket_id, &target.rules, &response)?;
        match response.lease_spacing_ms {
            Some(spacing) => self.land_kept(target, &response, spacing, &slots, sent, received),
            None => self.dissolve_pool(bucket_id, false),
        }
        let max_wait = self.inner.options.max_wait_ms;
        let mut buckets = self.inner.buckets.borrow_mut();
        let state = buckets
            .get_mut(bucket_id)
            .expect("landing on a known bucket");
        state.clock.sample(response.server_now_ms, sent, received);
        *self.inner.clock_seed.borrow_mut() = state.clock.clone();
        if let Some(rps) = response.effective_requests_per_second {
            state.effective_rps = Some(rps);
        }
        state.refill.not_before = received.saturating_add(response.wait_ms);
        state.refill.turn_ticket = response.turn_ticket;
        if response.slot_claim.is_some() {
            state.refill.slot_claim = response.slot_claim;
        }
        state.refill.answered = true;
        if response.granted > 0 {
            state.refill.draining = false;
            state.refill.ever_granted = true;
            // Time spent waiting for permits is not time without demand:
            // an isolate queued behind the fleet draws nothing because it
            // has nothing to draw.
            state
                .draw_rate
                .skip(received.saturating_sub(state.refill.started_at));
        }
        // Another isolate met a 429: cached permits inside the cooldown
        // would reach a provider that is refusing, so they go unsent (their
        // leases back; their times are void), and so do permits callers
        // already drew, checked once more when their time comes.
        if let Some(until) = response.cooldown_until_ms {
            state.cancel_dissolved_starts();
            state.unsent_before = state.unsent_before.max(state.clock.to_local(until));
        }
        if let (Some(block), Some(until)) = (&mut state.block, response.cooldown_until_ms) {
            let voided = block.take_where(&mut |s| s.at.is_some_and(|at| at < until));
            if !voided.is_empty() {
                let (token, rules) = (block.token.clone(), block.rules.clone());
                self.void(bucket_id, token, &rules, voided);
            }
        }
        if response.granted == 0 {
            if response.wait_ms > max_wait {
                let until = response
                    .cooldown_until_ms
                    .unwrap_or(received.saturating_add(response.wait_ms));
                return Err(Error::new(
                    ErrorCode::ProviderExhausted,
                    format!(
                        "provider bucket {bucket_id} asks to wait {} ms, past the {max_wait} ms \
                         limit (raise maxWaitMs to wait longer)",
                        response.wait_ms
                    ),
                )
                .with_detail(Detail::Cooldown { until_ms: until }));
            }
            return Ok(());
        }
        if response.lease_spacing_ms.is_some_and(|spacing| spacing > 0) {
            // The leases went to the pool; their times are first starts.
            return Ok(());
        }
        let tolerance_ms = response
            .dispatch_tolerance_ms
            .unwrap_or(LEGACY_TOLERANCE_MS);
        let stale = match &mut state.block {
            Some(block) if block.serves(target) => {
                block.slots.extend(slots);
                crate::sort::sort_by_time(block.slots.make_contiguous(), |s| s.at.unwrap_or(0));
                block.tolerance_ms = tolerance_ms;
                None
            }
            slot => slot.replace(Block {
                slots,
                rules_key: target.rules_key.clone(),
                rules: target.rules.clone(),
                token: target.token.clone(),
                tolerance_ms,
                opened_at: received,
                drawn: 0,
            }),
        };
        let gateway_now = response.server_now_ms.unwrap_or(0);
        drop(buckets);
        if let Some(stale) = stale {
            self.give_back(
                bucket_id,
                stale.token,
                &stale.rules,
                stale.slots.into(),
                gateway_now,
            );
        }
        self.fit_paced_slots(bucket_id, received);
        Ok(())
    }
}

impl GatewayRateState {
    /// Takes a streamed grant into the bucket's pool: renewals, new leases
    /// with their first starts, what the gateway said of others waiting
    /// and of a cooldown. Leases not renewed go back.
    fn land_kept(
        &self,
        target: &Target,
        response: &AcquireResponse,
        spacing: Millis,
        slots: &Queue<Slot>,
        sent: Millis,
        received: Millis,
    ) {
        let ttl = response.lease_ttl_ms.unwrap_or(RENEW_EVERY_MS * 2);
        let start_by = sent.saturating_add((ttl / 2).min(RENEW_EVERY_MS));
        let kept = response.kept_lease_ids.clone().unwrap_or_default();
        // A pool of the other kind goes back first (its calls are on no
        // stream, or on no permit, of this one).
        let other_kind = self.pool(&target.bucket_id, |p| p.paced() != (spacing == 0));
        if other_kind == Some(true) {
            self.dissolve_pool(&target.bucket_id, false);
        }
        let back = self.state(&target.bucket_id, |s| {
            let clock = s.clock.clone();
            let pool = s.pool.get_or_insert_with(|| {
                LeasePool::new(spacing, target.token.clone(), target.rules.clone())
            });
            pool.spacing_ms = spacing;
            pool.others_wait = response.slot_waiters;
            pool.share = response.slot_share;
            pool.keep = response.slot_keep;
            if let Some(until) = response.cooldown_until_ms {
                pool.cooldown_until = pool.cooldown_until.max(clock.to_local(until));
            }
            let asked = std::mem::take(&mut pool.renewing);
            let restarts = response.slot_keep.map(|_| sent);
            let back = pool.renewed(&asked, &kept, start_by, restarts);
            if pool.paced() {
                // New paced slots are the kept ones this client did not
                // hold: free for a call at once.
                let new = kept.iter().filter(|id| !asked.contains(id));
                for id in new {
                    pool.idle.push(KeptLease {
                        id: id.clone(),
                        next_at: received,
                        last_start: None,
                        start_by,
                        granted_at: received,
                        idle_since: received,
                    });
                }
            }
            let streamed = !pool.paced();
            for slot in slots.iter().filter(|_| streamed) {
                if let Some(id) = &slot.lease {
                    pool.idle.push(KeptLease {
                        id: id.clone(),
                        next_at: slot.at.map_or(received, |at| clock.to_local(at)),
                        last_start: None,
                        start_by,
                        granted_at: received,
                        idle_since: received,
                    });
                }
            }
            back
        });
        if !back.is_empty() {
            drop(self.give_back_kept(&target.bucket_id, back));
        }
        self.watch_pool(&target.bucket_id);
    }
}
