//! The isolate's kept leases, for a bucket whose gateway streams its
//! concurrency slots (it answers with `leaseSpacingMs`). A call that ends
//! hands its lease to a caller here waiting on the same bucket, so a busy
//! isolate keeps its slots without a round trip per call. Calls started on
//! one lease are at least the spacing apart, which is what keeps every
//! rule's windows within their limits however the slots are held.
//!
//! A lease goes back to the gateway (see `pool_return`) when nobody here
//! wants it, when the gateway would not renew it (others have waited while
//! its chain ran), when this isolate knows others wait and its chain has
//! run its length, or when it is not renewed in time.

pub(super) use super::lease_pool::{InCall, KeptLease, LeasePool, Place};
use super::refill::Target;
use super::{GatewayRateState, REFILL_POLL_MS};
use crate::error::Result;
use crate::protocol::LEASE_CHAIN_MS;
use crate::queue::take_front;
use crate::rt::{AbortSignal, LocalBoxFuture};
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
        ticket: u64,
        signal: Option<&AbortSignal>,
    ) -> Option<Result<KeptLease>> {
        let now = self.inner.rt.now_ms();
        let mut lapsed = Vec::new();
        let taken = self.pool(bucket_id, |p| {
            if !p.may_take(ticket, now) {
                return None;
            }
            let lease = p.take(now, &mut lapsed)?;
            p.leave(ticket);
            let start = lease.next_at.max(p.cooldown_until).max(now);
            // Counted as in a call from now, so callers behind this one
            // wait for it to be handed on, and a renewal carries it.
            p.in_call.insert(
                lease.id.clone(),
                InCall {
                    lease: lease.clone(),
                    since: start,
                    keep: true,
                },
            );
            Some((lease, start))
        });
        self.lapsed(bucket_id, lapsed);
        let (lease, start) = taken.flatten()?;
        if start > now {
            let sleep = self.inner.rt.sleep(start - now);
            let waited = super::permit_sleep(sleep, bucket_id, signal).await;
            if let Err(e) = waited {
                self.untake(bucket_id, &lease, None);
                return Some(Err(e));
            }
        }
        let now = self.inner.rt.now_ms();
        let started = self.pool(bucket_id, |p| {
            let call = p.in_call.get_mut(&lease.id)?;
            if now < p.cooldown_until || now > call.lease.start_by {
                return Some(false);
            }
            call.since = now;
            Some(true)
        });
        match started.flatten() {
            Some(true) => Some(Ok(lease)),
            // A cooldown or a lapse was learned while it waited: the caller
            // keeps its turn.
            Some(false) => {
                self.untake(bucket_id, &lease, Some(ticket));
                None
            }
            // The pool was dissolved meanwhile: the lease goes back, after
            // its one call if the pool let calls waiting for their start
            // make it.
            None if self.start_dissolved(bucket_id, &lease, start, now) => Some(Ok(lease)),
            None => {
                drop(self.end_call(bucket_id, &lease.id));
                None
            }
        }
    }

    /// Whether a lease of a dissolved pool, taken for a call due at `due`,
    /// may start it now: its pool let waiting calls start, and its lease is
    /// still good. Its slot's spacing then runs from now.
    fn start_dissolved(
        &self,
        bucket_id: &str,
        lease: &KeptLease,
        due: Millis,
        now: Millis,
    ) -> bool {
        self.state(bucket_id, |s| {
            let (_, _, busy) = s.dissolved.as_mut()?;
            let (_, ready, waiting) = busy.iter_mut().find(|(id, _, _)| *id == lease.id)?;
            if !*waiting || now > lease.start_by {
                return None;
            }
            *waiting = false;
            *ready += now.saturating_sub(due);
            Some(())
        })
        .is_some()
    }

    /// A kept lease that may start a call now (its next start has come,
    /// and no cooldown holds the bucket), taken into a call starting now.
    pub(super) fn take_free_kept(&self, bucket_id: &str, now: Millis) -> Option<KeptLease> {
        let mut lapsed = Vec::new();
        let taken = self.pool(bucket_id, |p| {
            if now < p.cooldown_until {
                return None;
            }
            let lease = p.take(now, &mut lapsed)?;
            if lease.next_at > now {
                p.idle.push(lease);
                return None;
            }
            p.in_call.insert(
                lease.id.clone(),
                InCall {
                    lease: lease.clone(),
                    since: now,
                    keep: true,
                },
            );
            Some(lease)
        });
        self.lapsed(bucket_id, lapsed);
        taken.flatten()
    }

    /// A lease taken for a call that did not start: idle again, its taker
    /// (if it still waits) first in the queue. If the pool was dissolved
    /// meanwhile, the lease goes back.
    fn untake(&self, bucket_id: &str, lease: &KeptLease, ticket: Option<u64>) {
        let now = self.inner.rt.now_ms();
        let kept = self.pool(bucket_id, |p| {
            let call = p.in_call.remove(&lease.id)?;
            let mut lease = call.lease;
            lease.idle_since = now;
            p.idle.push(lease);
            if let Some(ticket) = ticket {
                p.queue.insert(0, Place { ticket, seen: now });
            }
            Some(())
        });
        if kept.flatten().is_none() {
            drop(self.end_call(bucket_id, &lease.id));
        }
        self.watch_pool(bucket_id);
    }

    /// A call on a kept lease ended: the lease waits idle for a caller here
    /// (see [`IDLE_KEEP_MS`]), or goes back to the gateway once its spacing
    /// has passed when it may not be kept.
    pub(super) fn end_call(&self, bucket_id: &str, lease_id: &str) -> LocalBoxFuture<'static, ()> {
        let now = self.inner.rt.now_ms();
        // A call on a lease of a pool since dissolved: the lease goes back.
        let orphan = self.state(bucket_id, |s| {
            let (token, rules, busy) = s.dissolved.as_mut()?;
            let i = busy.iter().position(|(id, _, _)| id == lease_id)?;
            // One that never started its call frees its slot at once.
            let (_, ready, never_called) = busy.swap_remove(i);
            let ready = if never_called { 0 } else { ready };
            let scope = (token.clone(), rules.clone(), ready);
            if busy.is_empty() {
                s.dissolved = None;
            }
            Some(scope)
        });
        if let Some((token, rules, ready)) = orphan {
            return self.release_spaced(bucket_id, token, rules, lease_id.to_owned(), ready);
        }
        let wrong_kind = self.state(bucket_id, |s| {
            let p = s.pool.as_ref()?;
            let call = p.in_call.get(lease_id)?;
            s.hold.record(now.saturating_sub(call.since));
            Some(match p.paced() {
                true => s.hold.streams_pay(&p.rules),
                false => s.hold.too_short_for(p.spacing_ms),
            })
        });
        if wrong_kind == Some(true) {
            // Calls here are too short to use a slot per spacing, or long
            // enough that streamed slots need no permit per call: the pool
            // goes back (this lease once its call is over, just below) and
            // the next request asks for the other kind.
            self.dissolve_pool(bucket_id, true);
            return self.end_call(bucket_id, lease_id);
        }
        let back = self.pool(bucket_id, |p| {
            let sheds = p.sheds();
            let call = p.in_call.remove(lease_id)?;
            let mut lease = call.lease;
            lease.next_at = call.since + p.spacing_ms;
            lease.last_start = Some(call.since);
            // Others, holding fewer, have waited while this chain ran its
            // length: the slot is theirs, whatever the last renewal said.
            let chain_over = sheds && now.saturating_sub(lease.granted_at) >= LEASE_CHAIN_MS;
            if call.keep && !chain_over && lease.start_by >= now {
                lease.idle_since = now;
                p.idle.push(lease);
                return None;
            }
            Some(lease)
        });
        let id = lease_id.to_owned();
        let paced = self.pool(bucket_id, |p| p.paced()).unwrap_or(false);
        match back.flatten() {
            Some(lease) => self.give_back_kept(bucket_id, vec![lease]),
            // The watch gives it back if it idles out its keep.
            None if paced => {
                self.watch_pool(bucket_id);
                self.settled_kept(bucket_id, vec![id])
            }
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
        let waited = super::permit_sleep(sleep, bucket_id, signal).await;
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
                    // A paced pool keeps the slots the permits its block
                    // still holds, or its callers hold for their time,
                    // need: without them they would die unused.
                    let waiters = this.state(&bucket_id, |s| {
                        let block_left = s.block.as_ref().is_some_and(|b| !b.slots.is_empty());
                        let permits_left = block_left || s.paced_due > 0;
                        match s.pool.as_ref().filter(|p| p.paced() && permits_left) {
                            Some(p) => s.waiters + s.hold.paced_slots(&p.rules),
                            None => s.waiters,
                        }
                    });
                    let found = this.pool(&bucket_id, |p| {
                        p.drop_lapsed(now, &mut lapsed);
                        // Idle past the keep with nobody here to take it.
                        let keep = p.idle_keep_ms();
                        let unwanted = p.idle.len().saturating_sub(waiters as usize);
                        crate::sort::sort_by_time(&mut p.idle, |l| l.idle_since);
                        let stale = p
                            .idle
                            .iter()
                            .take(unwanted)
                            .take_while(|l| l.idle_since + keep <= now)
                            .count();
                        let spare = take_front(&mut p.idle, stale);
                        let mut next = None;
                        for l in &p.idle {
                            let at = l.start_by.min(l.idle_since + keep);
                            next = Some(next.map_or(at, |next: Millis| next.min(at)));
                        }
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
    /// on rather than ask the gateway: a lease is coming, and either one
    /// is idle for a caller ahead of it, others wait for slots while this
    /// isolate holds its share, the gateway booked this isolate a turn, or
    /// this isolate's first call
    /// has not yet run long enough to tell which kind of slot pays (more
    /// streamed slots for calls that turn out short would go back after
    /// one call each, and keep the fleet from turning to paced slots).
    pub(super) fn handoff_expected(&self, bucket_id: &str) -> bool {
        let now = self.inner.rt.now_ms();
        self.state(bucket_id, |s| {
            s.pool.as_ref().is_some_and(|p| {
                let mut undecided = false;
                if !p.paced() {
                    for c in p.in_call.values() {
                        if s.hold.undecided(now.saturating_sub(c.since), p.spacing_ms) {
                            undecided = true;
                            break;
                        }
                    }
                }
                p.coming() > 0
                    && (!p.idle.is_empty()
                        || p.holds_its_share()
                        || s.refill.not_before > now
                        || undecided)
            })
        })
    }

    /// Whether this isolate holds leases of the bucket's pool, idle or in
    /// calls: its callers then wait for one handed on.
    pub(super) fn holds_leases(&self, bucket_id: &str) -> bool {
        self.pool(bucket_id, |p| p.coming() > 0).unwrap_or(false)
    }

    /// Asks the gateway for more slots in the background, unless a request
    /// is in flight or the gateway asked this isolate to wait. A paced pool
    /// left with no slot for the permits it holds asks at once: its turn
    /// for permits is no reason to let them die.
    pub(super) fn grow_pool(&self, target: &Target) {
        let now = self.inner.rt.now_ms();
        let generation = self.state(&target.bucket_id, |s| {
            let stranded = s
                .pool
                .as_ref()
                .is_some_and(|p| p.paced() && p.coming() == 0);
            match stranded {
                true => s.refill.begin_unless_running(now),
                false => s.refill.begin_if_free(now),
            }
        });
        if let Some(generation) = generation {
            self.spawn_refill(generation, target);
        }
    }

    /// A place for the caller at the back of the bucket's queue for kept
    /// leases; it leaves the queue when dropped.
    pub(super) fn queue_place(&self, bucket_id: &str) -> QueuePlace {
        let ticket = self.inner.next_ticket.get();
        self.inner.next_ticket.set(ticket + 1);
        let now = self.inner.rt.now_ms();
        self.pool(bucket_id, |p| p.queue.push(Place { ticket, seen: now }));
        QueuePlace {
            state: self.clone(),
            bucket_id: bucket_id.to_owned(),
            ticket,
        }
    }

    #[inline(always)]
    pub(super) fn pool<T>(
        &self,
        bucket_id: &str,
        f: impl FnOnce(&mut LeasePool) -> T,
    ) -> Option<T> {
        self.state(bucket_id, |s| s.pool.as_mut().map(f))
    }
}

/// A caller's place in a pool's queue, given up when the caller returns,
/// fails or is dropped.
pub(super) struct QueuePlace {
    state: GatewayRateState,
    bucket_id: String,
    pub ticket: u64,
}

impl Drop for QueuePlace {
    fn drop(&mut self) {
        self.state.pool(&self.bucket_id, |p| p.leave(self.ticket));
    }
}
