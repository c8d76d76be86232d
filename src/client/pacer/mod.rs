//! The block-leasing pacer: each isolate pays one gateway round trip per
//! block of permits, and still dispatches every call at a time the gateway
//! reserved for it on the bucket's one global timeline.
//!
//! Its parts: [`bucket_state`] (what it knows of one bucket), [`block`]
//! (the permits of one refill and which are still good), [`refill`] (the
//! single-flight request for a block), [`landing`] (what its answer
//! changes), [`demand`] (how large a block to ask for), [`clock`] (the
//! gateway's clock as seen from here), [`due`] (permits handed out without
//! waiting), [`giveback`] (leases and unused times going back in batches),
//! [`surplus`] (noticing permits this isolate will not use while they can
//! still serve another), [`calls`] (the calls its callers are in, and how
//! long they take), [`penalty`] (a provider's 429), and the kept
//! leases of a bucket with a concurrency bound: [`pool`] (handing them
//! between callers here), [`lease_pool`] (their bookkeeping),
//! [`pool_return`] (their way back), [`hold`] (whether calls here are long
//! enough to keep them streamed), [`paced`] (slots for short calls, each
//! call also taking a timeline permit) and [`permits`] (the permits that
//! hold them).

mod block;
mod bucket_state;
mod calls;
mod clock;
mod demand;
mod due;
mod giveback;
mod hold;
mod landing;
mod lease_pool;
mod paced;
mod penalty;
mod permits;
mod pool;
mod pool_return;
mod quota;
mod refill;
mod request;
mod surplus;

use std::cell::{Cell, RefMut};

use crate::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

use super::permit::Permit;
use super::port::{GatewayPort, LocalGateway};
use crate::by_name::ByName;
use crate::error::{Error, Result};
use crate::gateway::{GatewayConfig, GatewayCore};
use crate::protocol::{has_concurrency, limits, rules_signature, PacingRule};
use crate::rt::{abortable_sleep, AbortSignal, LocalBoxFuture, Runtime};
use crate::time::Millis;
use bucket_state::BucketState;
use clock::ClockSync;
use giveback::PendingBatch;
pub use pool::IDLE_KEEP_MS;
pub use quota::{QUOTA_REPORT_INTERVAL_MS, QUOTA_URGENT_MS};
use refill::Target;

pub use clock::DEFAULT_LEAD_MS;
pub use due::NotYet;

/// How often a caller waiting on another caller's refill looks again (see
/// [`GatewayRateState::acquire`] on why it is not woken instead).
pub const REFILL_POLL_MS: Millis = 5;

/// A refill that has not landed this long after it was due is given up
/// (the request that started it may have ended, taking its I/O along) and
/// the next waiter starts another.
pub const REFILL_TIMEOUT_MS: Millis = 30_000;

/// The window guard of the in-memory scheduler behind `LocalRateState`:
/// JS timers fire a little late, and a permit may be sent this late.
pub const LOCAL_WINDOW_GUARD_MS: Millis = 25;

/// Past this many buckets, idle ones (nothing cached, waited on or owed)
/// are forgotten.
pub const MAX_IDLE_BUCKETS: usize = 1_024;

#[derive(Debug, Clone, PartialEq)]
pub struct PacerOptions {
    /// The gateway's horizon: a block never asks for more than this much
    /// time's worth of permits at the configured rate.
    pub block_horizon_ms: Millis,
    /// A gateway refusal that asks to wait longer than this fails fast with
    /// `PROVIDER_EXHAUSTED` instead of parking callers.
    pub max_wait_ms: Millis,
    /// A released lease or returned time waits this long for others to go
    /// back with it in one gateway call.
    pub release_linger_ms: Millis,
    pub scheduler_schema: Option<String>,
    /// Under rules that bound concurrency, keeps the leases this isolate
    /// is granted and hands them between its callers (see `pool`) instead
    /// of one lease per permit: streamed slots while its calls hold a slot
    /// about as long as the slot's spacing (see `hold`), paced slots beside
    /// the timeline's permits when they are shorter (see `paced`). On by
    /// default. Off, each permit comes with a lease of its own and a
    /// refused isolate takes turn tickets: a round trip or two per call.
    pub keep_leases: bool,
}

impl Default for PacerOptions {
    fn default() -> Self {
        PacerOptions {
            block_horizon_ms: 1_000,
            max_wait_ms: 120_000,
            release_linger_ms: 20,
            scheduler_schema: None,
            keep_leases: true,
        }
    }
}

/// What a caller asks the pacer for.
#[derive(Clone, Copy)]
pub struct PermitRequest<'a> {
    pub bucket_id: &'a str,
    pub rate_scope_token: Option<&'a str>,
    pub rules: &'a [PacingRule],
    pub signal: Option<&'a AbortSignal>,
}

struct Inner {
    port: Rc<dyn GatewayPort>,
    rt: Rc<dyn Runtime>,
    options: PacerOptions,
    buckets: RefCell<ByName<BucketState>>,
    batches: RefCell<ByName<PendingBatch>>,
    release_seq: Cell<u64>,
    /// A batched release failed in the background; the next acquire
    /// surfaces it.
    release_failure: RefCell<Option<Error>>,
    /// The port or the gateway refused an observe: quota reports ride on
    /// acquires only.
    observe_refused: Cell<bool>,
    /// The gateway announced a dispatch tolerance, so it is one that ends
    /// leases riding on an acquire.
    riders_welcome: Cell<bool>,
    /// The latest clock estimate of any bucket: a bucket met for the first
    /// time starts from it (its gateway is the same port), so its first
    /// permit needs no guessed lead.
    clock_seed: RefCell<ClockSync>,
    /// The target of the last acquire (see [`GatewayRateState::target`]).
    last_target: RefCell<Option<Rc<Target>>>,
    /// The next caller's ticket in a pool's queue.
    next_ticket: Cell<u64>,
}

/// Client side of the rate contract against a shared gateway.
#[derive(Clone)]
pub struct GatewayRateState {
    inner: Rc<Inner>,
}

impl GatewayRateState {
    pub fn new(port: Rc<dyn GatewayPort>, rt: Rc<dyn Runtime>, options: PacerOptions) -> Self {
        GatewayRateState {
            inner: Rc::new(Inner {
                port,
                rt,
                options,
                buckets: RefCell::new(ByName::default()),
                batches: RefCell::new(ByName::default()),
                release_seq: Cell::new(0),
                release_failure: RefCell::new(None),
                observe_refused: Cell::new(false),
                riders_welcome: Cell::new(false),
                clock_seed: RefCell::new(ClockSync::default()),
                last_target: RefCell::new(None),
                next_ticket: Cell::new(0),
            }),
        }
    }

    /// `LocalRateState`: the same contract with a scheduler of its own in
    /// this isolate's memory, for one isolate or for tests.
    pub fn local(rt: Rc<dyn Runtime>, options: PacerOptions, seed: u64) -> Self {
        let clock: Rc<dyn crate::time::Clock> = Rc::new(RuntimeClock(rt.clone()));
        let config = GatewayConfig {
            window_guard_ms: LOCAL_WINDOW_GUARD_MS,
            ..GatewayConfig::default()
        };
        let core = GatewayCore::new(config, seed).expect("the local config is valid");
        let port: Rc<dyn GatewayPort> = Rc::new(LocalGateway::new(core, clock));
        let state = Self::new(port, rt, options);
        // The scheduler shares this clock and answers at once: no lead.
        *state.inner.clock_seed.borrow_mut() = ClockSync::same_clock();
        state
    }

    /// Waits for a permit of `req.bucket_id` and until its dispatch time.
    /// An abort during the wait hands the permit's lease back. A permit
    /// whose caller wakes past its tolerance is dead: it is dropped (its
    /// lease going back) and the caller is served from a fresh one.
    pub async fn acquire(&self, req: PermitRequest<'_>) -> Result<Permit> {
        if req.rules.is_empty() {
            return Ok(Permit::unpaced());
        }
        let target = self.target(&req);
        let mut place = None;
        loop {
            if let Some(signal) = req.signal {
                signal.check(|| permit_wait(req.bucket_id))?;
            }
            if let Some(e) = self.inner.release_failure.borrow_mut().take() {
                return Err(e);
            }
            if self.pooled(&target) && !self.paced_pool(&target.bucket_id) {
                let ticket = place
                    .get_or_insert_with(|| self.queue_place(&target.bucket_id))
                    .ticket;
                if let Some(lease) = self.take_kept(&target.bucket_id, ticket, req.signal).await {
                    return Ok(self.kept_permit(&target.bucket_id, lease?.id));
                }
                self.renew_ahead(&target);
                if self.holds_leases(&target.bucket_id) {
                    // Callers here look for a handed-on lease on their own
                    // poll, in arrival order; more slots are asked for
                    // beside them.
                    if !self.handoff_expected(&target.bucket_id) {
                        self.grow_pool(&target);
                    }
                    self.await_handoff(&target.bucket_id, req.signal).await?;
                    continue;
                }
            } else if let Some((due, deadline, permit)) =
                self.draw(&target, self.inner.rt.now_ms(), Millis::MAX)
            {
                // Under a concurrency bound a permit without a lease needs
                // one of the paced slots kept here (none: it is dead).
                if permit.lease_id().is_none() && has_concurrency(&target.rules) {
                    match self.paced_call(&target, due, deadline, req.signal).await? {
                        Some(permit) => return Ok(permit),
                        None => continue,
                    }
                }
                let wait = due.saturating_sub(self.inner.rt.now_ms());
                if wait > 0 {
                    let sleep = self.inner.rt.sleep(wait);
                    // On abort `permit` drops here, releasing its lease.
                    permit_sleep(sleep, req.bucket_id, req.signal).await?;
                }
                if self.inner.rt.now_ms() <= deadline && !self.unsent(&target.bucket_id, due) {
                    return Ok(permit);
                }
                continue;
            }
            self.await_refill(&target, req.signal).await?;
        }
    }

    /// The refill target a request names. Callers of one bucket ask with
    /// the same rules again and again, so the last target is kept rather
    /// than its rules' signature written anew for every permit.
    fn target(&self, req: &PermitRequest<'_>) -> Rc<Target> {
        let token = req
            .rate_scope_token
            .map(str::trim)
            .filter(|t| !t.is_empty());
        let mut last = self.inner.last_target.borrow_mut();
        match &*last {
            Some(t)
                if t.bucket_id == req.bucket_id
                    && t.token.as_deref() == token
                    && t.rules == req.rules =>
            {
                t.clone()
            }
            _ => {
                let target = Rc::new(Target {
                    bucket_id: req.bucket_id.to_owned(),
                    token: token.map(str::to_owned),
                    rules: req.rules.to_vec(),
                    rules_key: rules_signature(req.rules),
                });
                *last = Some(target.clone());
                target
            }
        }
    }

    /// The earliest good permit cached for the target, with its local due
    /// time and deadline, if it is due by `due_by`. Dead permits met on the
    /// way give their leases back.
    fn draw(
        &self,
        target: &Target,
        now: Millis,
        due_by: Millis,
    ) -> Option<(Millis, Millis, Permit)> {
        let mut dead = Vec::new();
        let mut buckets = self.inner.buckets.borrow_mut();
        let state = buckets.get_mut(&target.bucket_id)?;
        if state.block.as_ref().is_some_and(|b| !b.serves(target)) {
            // The caller's rules or scope token changed: the old block is not
            // for them (a permit bought with one token never serves a caller
            // that brings another).
            let stale = state.block.take().expect("checked");
            let gateway_now = state.clock.to_gateway(now);
            drop(buckets);
            self.give_back(
                &target.bucket_id,
                stale.token,
                &stale.rules,
                stale.slots.into(),
                gateway_now,
            );
            return None;
        }
        let block = state.block.as_mut()?;
        let drawn = block.draw(now, due_by, &state.clock, &mut dead);
        // Only a lease needs the block's scope to go back: a pure-rate
        // permit, the hot path, takes nothing from it.
        let leased = !dead.is_empty() || drawn.as_ref().is_some_and(|d| d.slot.lease.is_some());
        let scope = leased.then(|| (block.token.clone(), block.rules.clone()));
        if block.slots.is_empty() {
            state.block = None;
            // Drained by a caller while nobody else waited: the block ran out
            // just as demand caught up with it (not emptied by permits that
            // died unused, nor short of callers it never served).
            if drawn.is_some() && state.waiters == 0 {
                state.refill.exhausted_at = Some(now);
            }
        }
        let mut ahead = None;
        if let Some(d) = &drawn {
            state.draw_rate.draw(now);
            state.calls.begin(d.due.max(now));
            ahead = refill::ahead(state, target, now);
        }
        drop(buckets);
        if let Some(generation) = ahead {
            self.spawn_refill(generation, target);
        }
        let Some((token, rules)) = scope else {
            let drawn = drawn?;
            return Some((drawn.due, drawn.deadline, Permit::new(None, None)));
        };
        if !dead.is_empty() {
            self.void(&target.bucket_id, token.clone(), &rules, dead);
        }
        let drawn = drawn?;
        let permit = match drawn.slot.lease {
            Some(lease_id) => {
                self.leased_permit(&target.bucket_id, token, rules, lease_id, drawn.due)
            }
            None => Permit::new(None, None),
        };
        Some((drawn.due, drawn.deadline, permit))
    }

    /// A provider call succeeded; the next acquire reports it so the gateway
    /// can raise the rate. Its caller's call has ended.
    pub fn observe_success(&self, bucket_id: &str) {
        let now = self.inner.rt.now_ms();
        self.state(bucket_id, |s| {
            s.pending_successes = (s.pending_successes + 1).min(limits::MAX_OBSERVED_SUCCESSES);
            s.calls.end(now);
        });
    }

    /// The live effective rate the gateway last reported for the bucket.
    pub fn effective_rps(&self, bucket_id: &str) -> Option<f64> {
        self.inner
            .buckets
            .borrow()
            .get(bucket_id)
            .and_then(|s| s.effective_rps)
    }

    /// Inlined, as is `pool`: each closure's body lands in its caller
    /// rather than in a copy of this wrapper per closure (62 of them).
    #[inline(always)]
    fn state<T>(&self, bucket_id: &str, f: impl FnOnce(&mut BucketState) -> T) -> T {
        f(&mut self.bucket(bucket_id))
    }

    /// The bucket's state, made at its first use. Not generic, so the wasm
    /// holds one copy of the lookup rather than one per caller of `state`.
    #[inline(never)]
    fn bucket(&self, bucket_id: &str) -> RefMut<'_, BucketState> {
        let mut buckets = self.inner.buckets.borrow_mut();
        if !buckets.contains_key(bucket_id) && buckets.len() >= MAX_IDLE_BUCKETS {
            buckets.retain(|_, s| !s.is_idle());
        }
        RefMut::map(buckets, |buckets| {
            buckets.get_or_insert_with(bucket_id, || BucketState {
                clock: self.inner.clock_seed.borrow().clone(),
                ..BucketState::default()
            })
        })
    }
}

/// What a permit wait names when it is aborted.
fn permit_wait(bucket_id: &str) -> String {
    format!("a permit of bucket {bucket_id}")
}

/// Waits out `sleep` unless `signal` aborts first: every timed wait for a
/// permit of `bucket_id`.
fn permit_sleep<'a>(
    sleep: LocalBoxFuture<'static, ()>,
    bucket_id: &'a str,
    signal: Option<&'a AbortSignal>,
) -> impl Future<Output = Result<()>> + 'a {
    abortable_sleep(sleep, signal, "a permit of bucket", bucket_id)
}

/// A runtime read as a clock, for the local scheduler.
struct RuntimeClock(Rc<dyn Runtime>);

impl crate::time::Clock for RuntimeClock {
    fn now_ms(&self) -> Millis {
        self.0.now_ms()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimRuntime;

    #[test]
    fn the_client_never_forgets_bug_idle_buckets_are_dropped_past_max_idle_buckets() {
        let rt = SimRuntime::new(1_767_225_600_000);
        let runtime: Rc<dyn Runtime> = Rc::new(rt.clone());
        let state = GatewayRateState::local(runtime, PacerOptions::default(), 1);
        for i in 0..3 * MAX_IDLE_BUCKETS {
            let rules = [PacingRule::new(1_000, 1_000)];
            let bucket = format!("b{i}");
            state.observe_success(&bucket);
            let (s, b) = (state.clone(), bucket.clone());
            rt.spawn(Box::pin(async move {
                drop(
                    s.acquire(PermitRequest {
                        bucket_id: &b,
                        rate_scope_token: None,
                        rules: &rules,
                        signal: None,
                    })
                    .await
                    .unwrap(),
                );
            }));
            rt.run_to_completion();
        }
        let held = state.inner.buckets.borrow().len();
        assert!(held <= MAX_IDLE_BUCKETS + 1, "{held} buckets held");
    }
}
