//! The isolate's kept leases, for a bucket whose gateway streams its
//! concurrency slots (it answers with `leaseSpacingMs`). A call that ends
//! hands its lease to a caller here waiting on the same bucket, so a busy
//! isolate keeps its slots without a round trip per call. Calls started on
//! one lease are at least the spacing apart, which is what keeps every
//! rule's windows within their limits however the slots are held.
//!
//! A lease goes back to the gateway when nobody here wants it, when the
//! gateway would not renew it (others have waited while its chain ran),
//! when this isolate knows others wait and its chain has run its length,
//! or when it is not renewed in time. It goes back no sooner than the
//! spacing after its last call started: the gateway lets the next holder
//! start a call on the slot as soon as the release arrives.

pub(super) use super::lease_pool::{InCall, KeptLease, LeasePool};
use super::{GatewayRateState, REFILL_POLL_MS};
use crate::error::Result;
use crate::protocol::LEASE_CHAIN_MS;
use crate::rt::{abortable, AbortSignal, LocalBoxFuture};
use crate::time::Millis;

/// A kept lease is renewed this often (on an acquire that carries it), so
/// a cooldown another isolate met reaches this one within about as long.
pub const RENEW_EVERY_MS: Millis = 4_000;

/// A lease whose call ended waits this long idle for a caller here (most
/// callers come straight back for another call) before it goes back.
pub const IDLE_KEEP_MS: Millis = 20;

impl GatewayRateState {
    /// Waits for a kept lease of the bucket and its next start, and takes
    /// it into a call. `None` when none is idle: the caller then waits for
    /// one handed on or asks the gateway.
    pub(super) async fn take_kept(
        &self,
        bucket_id: &str,
        signal: Option<&AbortSignal>,
    ) -> Option<Result<KeptLease>> {
        let now = self.inner.rt.now_ms();
        let mut lapsed = Vec::new();
        let taken = self.pool(bucket_id, |p| {
            let lease = p.take(now, &mut lapsed)?;
            Some((lease, p.cooldown_until))
        });
        self.lapsed(bucket_id, lapsed);
        let (lease, cooldown) = taken.flatten()?;
        let start = lease.next_at.max(cooldown);
        if start > now {
            let sleep = self.inner.rt.sleep(start - now);
            let waited = abortable(signal, || super::permit_wait(bucket_id), async {
                sleep.await;
                Ok(())
            })
            .await;
            if let Err(e) = waited {
                self.pool(bucket_id, |p| p.idle.push(lease));
                return Some(Err(e));
            }
        }
        let now = self.inner.rt.now_ms();
        let started = self.pool(bucket_id, |p| {
            if now < p.cooldown_until || now > lease.start_by {
                // A cooldown or a lapse was learned while it waited.
                p.idle.push(lease.clone());
                return false;
            }
            p.in_call.insert(
                lease.id.clone(),
                InCall {
                    lease: lease.clone(),
                    since: now,
                    keep: true,
                },
            );
            true
        });
        started.filter(|&s| s).map(|_| Ok(lease))
    }

    /// A call on a kept lease ended: the lease waits idle for a caller here
    /// (see [`IDLE_KEEP_MS`]), or goes back to the gateway once its spacing
    /// has passed when it may not be kept.
    pub(super) fn end_call(&self, bucket_id: &str, lease_id: &str) -> LocalBoxFuture<'static, ()> {
        let now = self.inner.rt.now_ms();
        // A call on a lease of a pool since dissolved: the lease goes back.
        let orphan = self.state(bucket_id, |s| {
            let (token, rules, busy) = s.dissolved.as_mut()?;
            let i = busy.iter().position(|id| id == lease_id)?;
            busy.swap_remove(i);
            let scope = (token.clone(), rules.clone());
            if busy.is_empty() {
                s.dissolved = None;
            }
            Some(scope)
        });
        if let Some((token, rules)) = orphan {
            return self.release_settled(bucket_id, token, &rules, vec![lease_id.to_owned()]);
        }
        let back = self.pool(bucket_id, |p| {
            let call = p.in_call.remove(lease_id)?;
            let mut lease = call.lease;
            lease.next_at = call.since + p.spacing_ms;
            lease.last_start = Some(call.since);
            // Others have waited while this chain ran its length: the slot
            // is theirs, whatever the last renewal said.
            let chain_over =
                p.others_wait && now.saturating_sub(lease.granted_at) >= LEASE_CHAIN_MS;
            if call.keep && !chain_over && lease.start_by >= now {
                lease.idle_since = now;
                p.idle.push(lease);
                return None;
            }
            Some(lease)
        });
        let id = lease_id.to_owned();
        match back.flatten() {
            Some(lease) => self.give_back_kept(bucket_id, vec![lease]),
            None => {
                // Nobody here took it within the keep: it goes back (the
                // watch does the same should this task not run).
                self.watch_pool(bucket_id);
                let (this, bucket) = (self.clone(), bucket_id.to_owned());
                let keep = self.inner.rt.sleep(IDLE_KEEP_MS + 1);
                let lease_id = id.clone();
                self.inner.rt.spawn(Box::pin(async move {
                    keep.await;
                    let waiters = this.state(&bucket, |s| s.waiters);
                    let unwanted = this.pool(&bucket, |p| {
                        let i = p.idle.iter().position(|l| l.id == lease_id)?;
                        (p.idle.len() as u64 > waiters).then(|| p.idle.swap_remove(i))
                    });
                    if let Some(lease) = unwanted.flatten() {
                        drop(this.give_back_kept(&bucket, vec![lease]));
                    }
                }));
                self.settled_kept(bucket_id, vec![id])
            }
        }
    }

    /// Settles once none of `ids` is idle here or on its way back: each was
    /// taken by a caller here, or the gateway has it. A host that waits on
    /// it (`waitUntil`) keeps its request alive until the slot is safe.
    fn settled_kept(&self, bucket_id: &str, ids: Vec<String>) -> LocalBoxFuture<'static, ()> {
        let (this, bucket_id) = (self.clone(), bucket_id.to_owned());
        Box::pin(async move {
            loop {
                let pending = this
                    .pool(&bucket_id, |p| {
                        ids.iter().any(|id| {
                            p.returning.contains(id) || p.idle.iter().any(|l| &l.id == id)
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
        let ids: Vec<String> = leases.into_iter().map(|l| l.id).collect();
        self.pool(bucket_id, |p| p.returning.extend(ids.iter().cloned()));
        let settled = self.settled_kept(bucket_id, ids.clone());
        let now = self.inner.rt.now_ms();
        // Queued at once when its spacing has passed, so an acquire this
        // isolate sends next carries it.
        let ticket = (ready <= now)
            .then(|| self.queue(bucket_id, token.clone(), &rules, ids.clone(), Vec::new()));
        let (this, bucket_id) = (self.clone(), bucket_id.to_owned());
        let wait = self.inner.rt.sleep(ready.saturating_sub(now));
        self.inner.rt.spawn(Box::pin(async move {
            let ticket = match ticket {
                Some(ticket) => ticket,
                None => {
                    wait.await;
                    this.queue(&bucket_id, token, &rules, ids.clone(), Vec::new())
                }
            };
            if let Some(ticket) = ticket {
                this.settled(ticket).await;
            }
            this.pool(&bucket_id, |p| {
                for id in &ids {
                    p.returning.remove(id);
                }
            });
        }));
        settled
    }

    /// Kept leases that lapsed unrenewed: the gateway may have let them go
    /// already, so they are only handed back, never used.
    fn lapsed(&self, bucket_id: &str, ids: Vec<String>) {
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
    /// end, and permits come one lease each again.
    pub(super) fn dissolve_pool(&self, bucket_id: &str) {
        let pool = self.state(bucket_id, |s| s.pool.take());
        let Some(pool) = pool else { return };
        let busy: Vec<String> = pool.in_call.keys().cloned().collect();
        self.state(bucket_id, |s| {
            s.dissolved = Some((pool.token.clone(), pool.rules.clone(), busy));
        });
        let ids: Vec<String> = pool.idle.into_iter().map(|l| l.id).collect();
        if !ids.is_empty() {
            self.queue(bucket_id, pool.token, &pool.rules, ids, Vec::new());
        }
    }

    /// Waits a poll for a lease handed on. Not woken by the call that ends:
    /// in workerd that call may belong to another request, whose end would
    /// take this caller's continuation with it.
    pub(super) async fn await_handoff(
        &self,
        bucket_id: &str,
        signal: Option<&AbortSignal>,
    ) -> Result<()> {
        self.state(bucket_id, |s| s.waiters += 1);
        let sleep = self.inner.rt.sleep(REFILL_POLL_MS);
        let waited = abortable(signal, || super::permit_wait(bucket_id), async {
            sleep.await;
            Ok(())
        })
        .await;
        let waiters = self.state(bucket_id, |s| {
            s.waiters -= 1;
            s.waiters
        });
        if waited.is_err() {
            self.spare(bucket_id, waiters);
        }
        waited
    }

    /// A caller gave up waiting: leases handed on for callers that are no
    /// longer here go back.
    pub(super) fn spare(&self, bucket_id: &str, waiters: u64) {
        let spare = self
            .pool(bucket_id, |p| p.beyond(waiters))
            .unwrap_or_default();
        if !spare.is_empty() {
            drop(self.give_back_kept(bucket_id, spare));
        }
    }

    /// Starts the pool's watch if it has idle leases and none runs: an idle
    /// lease nobody takes before its renewal lapses goes back then, so a
    /// quiet isolate holds no slot for longer than a renewal period.
    pub(super) fn watch_pool(&self, bucket_id: &str) {
        let start = self
            .pool(bucket_id, |p| {
                !p.idle.is_empty() && !std::mem::replace(&mut p.watching, true)
            })
            .unwrap_or(false);
        if start {
            let (this, bucket_id) = (self.clone(), bucket_id.to_owned());
            self.inner.rt.spawn(Box::pin(async move {
                loop {
                    let now = this.inner.rt.now_ms();
                    let mut lapsed = Vec::new();
                    let waiters = this.state(&bucket_id, |s| s.waiters);
                    let found = this.pool(&bucket_id, |p| {
                        p.drop_lapsed(now, &mut lapsed);
                        // Idle past the keep with nobody here to take it.
                        let unwanted = p.idle.len().saturating_sub(waiters as usize);
                        crate::sort::sort_by_time(&mut p.idle, |l| l.idle_since);
                        let stale = p
                            .idle
                            .iter()
                            .take(unwanted)
                            .take_while(|l| l.idle_since + IDLE_KEEP_MS <= now)
                            .count();
                        let spare: Vec<KeptLease> = p.idle.drain(..stale).collect();
                        let next = p
                            .idle
                            .iter()
                            .map(|l| l.start_by.min(l.idle_since + IDLE_KEEP_MS))
                            .min();
                        p.watching = next.is_some();
                        (spare, next)
                    });
                    this.lapsed(&bucket_id, lapsed);
                    let Some((spare, next)) = found else { return };
                    if !spare.is_empty() {
                        drop(this.give_back_kept(&bucket_id, spare));
                    }
                    match next {
                        Some(at) => this.inner.rt.sleep(at.max(now) + 1 - now).await,
                        None => return,
                    }
                }
            }));
        }
    }

    /// Whether a caller here without a lease should wait for one handed
    /// on rather than ask the gateway: a lease is coming, and either
    /// others wait for slots or the gateway booked this isolate a turn.
    pub(super) fn handoff_expected(&self, bucket_id: &str) -> bool {
        let now = self.inner.rt.now_ms();
        self.state(bucket_id, |s| {
            s.pool
                .as_ref()
                .is_some_and(|p| p.coming() > 0 && (p.others_wait || s.refill.not_before > now))
        })
    }

    pub(super) fn pool<T>(
        &self,
        bucket_id: &str,
        f: impl FnOnce(&mut LeasePool) -> T,
    ) -> Option<T> {
        self.state(bucket_id, |s| s.pool.as_mut().map(f))
    }
}
