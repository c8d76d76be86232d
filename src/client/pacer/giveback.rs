//! What an isolate hands back to the gateway: concurrency leases its calls
//! are done with, and granted times it will not use. Both wait a moment in
//! a per-bucket batch (calls end one by one, and a gateway call per lease
//! would cost a round trip per permit); returned times also ride on the
//! bucket's next acquire when one goes out first, and a batch goes alone
//! only when nothing else carried it.

use super::block::{leases_and_times, Slot};
use super::{GatewayRateState, Inner};
use crate::client::retry::with_retries;
use crate::protocol::{limits, rules_signature, PacingRule, ReleaseRequest};
use crate::queue::take_front;
use crate::rt::LocalBoxFuture;
use crate::time::Millis;

pub(super) struct PendingBatch {
    bucket_id: String,
    token: Option<String>,
    rules: Vec<PacingRule>,
    /// Leases with their place in the state's one sequence of releases.
    lease_ids: Vec<(u64, String)>,
    returned: Vec<Millis>,
    flushing: bool,
    /// Every lease of this batch up to this place has had its gateway call.
    settled_upto: u64,
}

/// What an acquire carries back for the bucket.
#[derive(Default)]
pub(super) struct Riders {
    pub returned: Vec<Millis>,
    /// Leases with their place in the state's sequence of releases.
    pub leases: Vec<(u64, String)>,
}

/// Where a released lease stands: its batch key and its place in the
/// state's sequence of releases (places only grow, so a batch made anew
/// after one was dropped never confuses an older ticket).
pub(super) type Ticket = (String, u64);

fn batch_key(bucket_id: &str, rules_key: &str) -> String {
    // Joined, not formatted: every acquire that goes to the gateway looks
    // up its batch, and `format!` would compile core's formatter there.
    crate::json::joined(&[bucket_id, rules_key], "\0")
}

impl GatewayRateState {
    /// Queues the slots of permits this isolate gives up: their leases go
    /// back, and their times too while still ahead of `now` (a time
    /// already passed is of no use to anyone).
    pub(super) fn give_back(
        &self,
        bucket_id: &str,
        token: Option<String>,
        rules: &[PacingRule],
        slots: Vec<Slot>,
        now_on_gateway: Millis,
    ) {
        let (leases, times) = leases_and_times(slots, now_on_gateway);
        self.queue(bucket_id, token, rules, leases, times);
    }

    /// Queues the leases of permits that may not be sent (dead, or inside
    /// a cooldown): their times are void, only the leases go back.
    pub(super) fn void(
        &self,
        bucket_id: &str,
        token: Option<String>,
        rules: &[PacingRule],
        slots: impl IntoIterator<Item = Slot>,
    ) {
        let mut leases = Vec::new();
        for slot in slots {
            if let Some(id) = slot.lease {
                leases.push(id);
            }
        }
        self.queue(bucket_id, token, rules, leases, Vec::new());
    }

    /// Queues leases and returned times for the bucket's batch and starts
    /// its flush if none is running. Returns the leases' ticket.
    pub(super) fn queue(
        &self,
        bucket_id: &str,
        token: Option<String>,
        rules: &[PacingRule],
        lease_ids: Vec<String>,
        mut returned: Vec<Millis>,
    ) -> Option<Ticket> {
        if lease_ids.is_empty() && returned.is_empty() {
            return None;
        }
        let key = batch_key(bucket_id, &rules_signature(rules));
        let seq = &self.inner.release_seq;
        let (start, place) = {
            let mut batches = self.inner.batches.borrow_mut();
            let pending = batches.get_or_insert_with(&key, || PendingBatch {
                bucket_id: bucket_id.to_owned(),
                token,
                rules: rules.to_vec(),
                lease_ids: Vec::new(),
                returned: Vec::new(),
                flushing: false,
                settled_upto: seq.get(),
            });
            for id in lease_ids {
                seq.set(seq.get() + 1);
                pending.lease_ids.push((seq.get(), id));
            }
            pending.returned.append(&mut returned);
            (!std::mem::replace(&mut pending.flushing, true), seq.get())
        };
        if start {
            let this = self.clone();
            let key = key.clone();
            self.inner.rt.spawn(Box::pin(this.flush(key)));
        }
        Some((key, place))
    }

    /// What waits in the bucket's batch under these rules, taken to ride on
    /// an acquire that is about to go: returned times, and leases when the
    /// gateway is known to end leases that ride on acquires.
    pub(super) fn take_riders(&self, bucket_id: &str, rules_key: &str) -> Riders {
        let leases_too = self.inner.riders_welcome.get();
        let mut batches = self.inner.batches.borrow_mut();
        let Some(pending) = batches.get_mut(&batch_key(bucket_id, rules_key)) else {
            return Riders::default();
        };
        let take = pending.returned.len().min(limits::MAX_REQUESTED as usize);
        let returned = take_front(&mut pending.returned, take);
        let leases = if leases_too {
            let take = pending.lease_ids.len().min(limits::MAX_RELEASE_BATCH);
            take_front(&mut pending.lease_ids, take)
        } else {
            Vec::new()
        };
        Riders { returned, leases }
    }

    /// The acquire that carried `leases` has answered (`delivered`) or
    /// failed: their tickets settle, or they go back in line for a release
    /// of their own.
    pub(super) fn riders_done(
        &self,
        bucket_id: &str,
        token: Option<String>,
        rules: &[PacingRule],
        leases: Vec<(u64, String)>,
        delivered: bool,
    ) {
        let Some(&(last, _)) = leases.last() else {
            return;
        };
        let key = batch_key(bucket_id, &rules_signature(rules));
        if delivered {
            if let Some(pending) = self.inner.batches.borrow_mut().get_mut(&key) {
                pending.settled_upto = pending.settled_upto.max(last);
            }
            return;
        }
        let mut ids = Vec::with_capacity(leases.len());
        for (_, id) in leases {
            ids.push(id);
        }
        self.queue(bucket_id, token, rules, ids, Vec::new());
    }

    /// Queues leases to go back and returns a future that settles once
    /// their batch has had its gateway call (at once if nothing was queued).
    pub(super) fn release_settled(
        &self,
        bucket_id: &str,
        token: Option<String>,
        rules: &[PacingRule],
        lease_ids: Vec<String>,
    ) -> LocalBoxFuture<'static, ()> {
        match self.queue(bucket_id, token, rules, lease_ids, Vec::new()) {
            Some(ticket) => Box::pin(self.clone().settled(ticket)),
            None => Box::pin(std::future::ready(())),
        }
    }

    /// Settles once the batch holding `ticket` has had its gateway call.
    /// It looks on its own timer: the flush may run in another request.
    pub(super) async fn settled(self, (key, place): Ticket) {
        loop {
            let done = self
                .inner
                .batches
                .borrow()
                .get(&key)
                .is_none_or(|p| p.settled_upto >= place);
            if done {
                return;
            }
            self.inner.rt.sleep(super::REFILL_POLL_MS).await;
        }
    }

    async fn flush(self, key: String) {
        let linger = self.inner.options.release_linger_ms;
        if linger > 0 {
            self.inner.rt.sleep(linger).await;
        }
        loop {
            let request = {
                let mut batches = self.inner.batches.borrow_mut();
                let pending = batches.get_mut(&key).expect("flushing a queued batch");
                if pending.lease_ids.is_empty() && pending.returned.is_empty() {
                    // Nothing is left to wait on it: a ticket that finds no
                    // batch is settled.
                    batches.remove(&key);
                    return;
                }
                let leases = pending.lease_ids.len().min(limits::MAX_RELEASE_BATCH);
                let times = pending.returned.len().min(limits::MAX_REQUESTED as usize);
                let last_place = leases
                    .checked_sub(1)
                    .and_then(|last| pending.lease_ids.get(last))
                    .map(|&(place, _)| place);
                let mut lease_ids = Vec::with_capacity(leases);
                for (_, id) in take_front(&mut pending.lease_ids, leases) {
                    lease_ids.push(id);
                }
                let request = ReleaseRequest {
                    bucket_id: pending.bucket_id.clone(),
                    rate_scope_token: pending.token.clone(),
                    rules: pending.rules.clone(),
                    lease_ids,
                    scheduler_schema: self.inner.options.scheduler_schema.clone(),
                    returned_at_ms: take_front(&mut pending.returned, times),
                };
                (request, last_place)
            };
            let (request, last_place) = request;
            let outcome =
                with_retries(&*self.inner.rt, || self.inner.port.release(request.clone())).await;
            if let (Some(place), Some(pending)) =
                (last_place, self.inner.batches.borrow_mut().get_mut(&key))
            {
                pending.settled_upto = pending.settled_upto.max(place);
            }
            if let Err(mut e) = outcome {
                if !request.lease_ids.is_empty() {
                    e.message = format!(
                        "releasing leases of {} failed: {}",
                        request.bucket_id, e.message
                    );
                    *self.inner.release_failure.borrow_mut() = Some(e);
                }
            }
        }
    }
}

impl Drop for Inner {
    /// A state that goes away (a request's state, a freed object) hands its
    /// cached permits back at once: their times to the fleet, their leases
    /// to the gateway's count.
    fn drop(&mut self) {
        let now = self.rt.now_ms();
        let mut requests = Vec::new();
        for (bucket_id, state) in self.buckets.get_mut().drain() {
            if let Some(pool) = state.pool.filter(|p| !p.idle.is_empty()) {
                // Kept leases go back at once: a call started on one less
                // than its spacing ago only lets the gateway's next holder
                // start a little early on that slot, once.
                let mut lease_ids = Vec::with_capacity(pool.idle.len());
                for lease in pool.idle {
                    lease_ids.push(lease.id);
                }
                requests.push(ReleaseRequest {
                    bucket_id: bucket_id.clone(),
                    rate_scope_token: pool.token,
                    rules: pool.rules,
                    lease_ids,
                    scheduler_schema: self.options.scheduler_schema.clone(),
                    returned_at_ms: Vec::new(),
                });
            }
            let Some(block) = state.block else { continue };
            let (lease_ids, returned_at_ms) =
                leases_and_times(block.slots, state.clock.to_gateway(now));
            if lease_ids.is_empty() && returned_at_ms.is_empty() {
                continue;
            }
            requests.push(ReleaseRequest {
                bucket_id,
                rate_scope_token: block.token,
                rules: block.rules,
                lease_ids,
                scheduler_schema: self.options.scheduler_schema.clone(),
                returned_at_ms,
            });
        }
        for request in requests {
            let port = self.port.clone();
            self.rt.spawn(Box::pin(async move {
                // Nobody is left to hear of a failure: the leases then come
                // back at their TTL and the times go unused.
                let _ = port.release(request).await;
            }));
        }
    }
}
