//! Kept leases going back to the gateway: each no sooner than the
//! spacing after its last call started (the gateway lets the next holder
//! start a call on the slot as soon as the release arrives), with a future
//! that settles once the gateway has it, for hosts that wait on it.

use super::lease_pool::KeptLease;
use super::GatewayRateState;
use super::REFILL_POLL_MS;
use crate::protocol::PacingRule;
use crate::rt::{Event, LocalBoxFuture};
use crate::time::Millis;

impl GatewayRateState {
    /// Settles once none of `ids` is idle here or on its way back: each was
    /// taken by a caller here, or the gateway has it. A host that waits on
    /// it (`waitUntil`) keeps its request alive until the slot is safe.
    pub(super) fn settled_kept(
        &self,
        bucket_id: &str,
        ids: Vec<String>,
    ) -> LocalBoxFuture<'static, ()> {
        let (this, bucket_id) = (self.clone(), bucket_id.to_owned());
        Box::pin(async move {
            loop {
                let pending = this
                    .pool(&bucket_id, |p| {
                        ids.iter().any(|id| {
                            p.returning.contains_key(id) || p.idle.iter().any(|l| &l.id == id)
                        })
                    })
                    .unwrap_or(false);
                if !pending {
                    return;
                }
                this.inner.rt.sleep(REFILL_POLL_MS).await;
            }
        })
    }

    /// Gives kept leases back, each once its spacing has passed. The work
    /// runs on its own, so nothing is lost if the returned future is
    /// dropped; the future settles when the gateway has them.
    pub(super) fn give_back_kept(
        &self,
        bucket_id: &str,
        leases: Vec<KeptLease>,
    ) -> LocalBoxFuture<'static, ()> {
        let scope = self.pool(bucket_id, |p| (p.token.clone(), p.rules.clone()));
        let (Some((token, rules)), false) = (scope, leases.is_empty()) else {
            return Box::pin(std::future::ready(()));
        };
        // A lease never called on here frees its slot at once.
        let ready = leases
            .iter()
            .filter_map(|l| l.last_start.map(|_| l.next_at))
            .max()
            .unwrap_or(0);
        let mut ids = Vec::with_capacity(leases.len());
        for lease in leases {
            ids.push(lease.id);
        }
        self.pool(bucket_id, |p| {
            for id in &ids {
                p.returning.insert(id.clone(), 0);
            }
        });
        let settled = self.settled_kept(bucket_id, ids.clone());
        drop(self.release_from(bucket_id, token, rules, ids, ready, true));
        settled
    }

    /// Kept leases that lapsed unrenewed: the gateway may have let them go
    /// already, so they are only handed back, never used.
    pub(super) fn lapsed(&self, bucket_id: &str, ids: Vec<String>) {
        if ids.is_empty() {
            return;
        }
        let scope = self.pool(bucket_id, |p| (p.token.clone(), p.rules.clone()));
        if let Some((token, rules)) = scope {
            self.queue(bucket_id, token, &rules, ids, Vec::new());
        }
    }

    /// The gateway stopped streaming the bucket's slots (its rate was cut):
    /// kept leases go back, idle ones now and busy ones when their calls
    /// end, and permits come one lease each again. `calls_may_start`: the
    /// pool goes only because its calls turned out the other kind's, so a
    /// streamed lease already handed to a caller here for a start to come
    /// still makes that one call (its time is a timeline permit of its own,
    /// lost if the lease went back uncalled).
    pub(super) fn dissolve_pool(&self, bucket_id: &str, calls_may_start: bool) {
        let idle = self
            .pool(bucket_id, |p| std::mem::take(&mut p.idle))
            .unwrap_or_default();
        // Each once its spacing has passed, as any kept lease goes back.
        drop(self.give_back_kept(bucket_id, idle));
        let pool = self.state(bucket_id, |s| {
            // A keeper told to serve its callers with its own slots a
            // while has none now: it asks for the other kind at once.
            if calls_may_start {
                s.refill.not_before = 0;
            }
            s.pool.take()
        });
        let Some(pool) = pool else { return };
        let now = self.inner.rt.now_ms();
        if pool.paced() {
            // Its permits took their slots from the pool: their times go
            // back for another isolate.
            let stale = self.state(bucket_id, |s| {
                let block = s.block.take()?;
                Some((block, s.clock.to_gateway(now)))
            });
            if let Some((block, gateway_now)) = stale {
                let slots = block.slots.into();
                self.give_back(bucket_id, block.token, &block.rules, slots, gateway_now);
            }
        }
        // A lease taken for a call that has not started yet frees its slot
        // at once, as one never called on does, unless its call may still
        // start: its spacing then runs from that start (see `take_kept`).
        let may_start = calls_may_start && !pool.paced();
        let mut busy = Vec::with_capacity(pool.in_call.len());
        for (id, call) in pool.in_call.iter() {
            busy.push(match (call.since > now, may_start) {
                (true, false) => (id.clone(), 0, false),
                (waiting, _) => (id.clone(), call.since + pool.spacing_ms, waiting),
            });
        }
        self.state(bucket_id, |s| {
            s.dissolved = Some((pool.token, pool.rules, busy));
        });
    }

    /// Gives back a lease of a dissolved pool once its slot's spacing has
    /// passed (`ready`); the future settles when the gateway has it.
    pub(super) fn release_spaced(
        &self,
        bucket_id: &str,
        token: Option<String>,
        rules: Vec<PacingRule>,
        lease_id: String,
        ready: Millis,
    ) -> LocalBoxFuture<'static, ()> {
        self.release_from(bucket_id, token, rules, vec![lease_id], ready, false)
    }

    /// Releases `ids` once `ready` has passed: queued at once if it has, so
    /// an acquire this isolate sends next carries them. The work runs on its
    /// own, so nothing is lost if the returned future is dropped; it
    /// settles once the gateway has them, and they are then off the pool's
    /// `returning` list if they were on it (`returning`).
    fn release_from(
        &self,
        bucket_id: &str,
        token: Option<String>,
        rules: Vec<PacingRule>,
        ids: Vec<String>,
        ready: Millis,
        returning: bool,
    ) -> LocalBoxFuture<'static, ()> {
        let returned = match returning {
            true => ids.clone(),
            false => Vec::new(),
        };
        let now = self.inner.rt.now_ms();
        let ticket = (ready <= now)
            .then(|| self.queue(bucket_id, token.clone(), &rules, ids.clone(), Vec::new()));
        let done = Event::default();
        let settled = done.listen();
        let (this, bucket_id) = (self.clone(), bucket_id.to_owned());
        let wait = self.inner.rt.sleep(ready.saturating_sub(now));
        self.inner.rt.spawn(Box::pin(async move {
            let ticket = match ticket {
                Some(ticket) => ticket,
                None => {
                    wait.await;
                    this.queue(&bucket_id, token, &rules, ids, Vec::new())
                }
            };
            if let Some(ticket) = ticket {
                this.clone().settled(ticket).await;
            }
            if !returned.is_empty() {
                this.pool(&bucket_id, |p| {
                    for id in &returned {
                        p.returning.remove(id);
                    }
                });
            }
            done.notify();
        }));
        Box::pin(settled)
    }
}
