//! The block-leasing pacer: each isolate pays one gateway round trip per
//! block of permits, and still dispatches every call at a time the gateway
//! reserved for it on the bucket's one global timeline.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::{Rc, Weak};

use super::permit::Permit;
use super::port::{GatewayPort, InProcessGateway};
use super::runtime::{abortable, AbortSignal, Runtime};
use crate::error::{Detail, Error, ErrorCode, Result};
use crate::gateway::{GatewayConfig, GatewayCore};
use crate::protocol::{
    has_concurrency, limits, rules_signature, AcquireRequest, AcquireResponse, ObserveRequest,
    PacingRule, PenalizeRequest, PenalizeResponse, QuotaReport, ReleaseRequest,
};
use crate::time::Millis;

/// A quota report goes to the gateway at once when fewer calls are left
/// than this long at the bucket's rate: the gateway grants about a horizon
/// ahead, so a report that waited for the next acquire would come after the
/// permits that spend the quota.
pub const QUOTA_URGENT_MS: Millis = 5_000;
/// The least time between two reports sent on their own from one isolate.
pub const QUOTA_REPORT_INTERVAL_MS: Millis = 250;

/// After a failed gateway call, retry after these delays, then surface it.
pub const STORE_RETRY_DELAYS_MS: [Millis; 2] = [100, 250];

/// How often a caller waiting on another caller's refill looks again. A
/// waiter wakes only on its own timer, never from the refilling caller's
/// I/O: in workerd every request must be woken by its own events, or its
/// continuation (and every timer it then sets) would belong to another
/// request and die with it.
pub const REFILL_POLL_MS: Millis = 5;

/// A refill that has not landed this long after it was due is given up
/// (the request that started it may have ended, taking its I/O along) and
/// the next waiter starts another.
pub const REFILL_TIMEOUT_MS: Millis = 30_000;

/// How many recent clock samples the skew estimate keeps per bucket.
const SKEW_SAMPLES: usize = 8;

#[derive(Debug, Clone, PartialEq)]
pub struct PacerOptions {
    /// The gateway's horizon; a pure-rate block asks for this much time's
    /// worth of permits at the live effective rate.
    pub block_horizon_ms: Millis,
    /// Undrawn permits of a block are given up this long after its last
    /// dispatch time (their leases released).
    pub block_ttl_ms: Millis,
    /// A gateway refusal that asks to wait longer than this fails fast with
    /// `PROVIDER_EXHAUSTED` instead of parking callers.
    pub max_wait_ms: Millis,
    /// A released lease waits this long for others to go back with it in
    /// one gateway call: calls end one by one, and a call per lease would
    /// cost a round trip per permit.
    pub release_linger_ms: Millis,
    pub scheduler_schema: Option<String>,
}

impl Default for PacerOptions {
    fn default() -> Self {
        PacerOptions {
            block_horizon_ms: 1_000,
            block_ttl_ms: 5_000,
            max_wait_ms: 120_000,
            release_linger_ms: 20,
            scheduler_schema: None,
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

struct Block {
    /// `(dispatch time on the gateway's clock, lease)`, earliest first.
    permits: VecDeque<(Millis, Option<String>)>,
    expires_at: Millis,
    rules_key: String,
    rules: Vec<PacingRule>,
    token: Option<String>,
}

#[derive(Default)]
struct BucketState {
    block: Option<Block>,
    waiters: u64,
    refilling: bool,
    /// Refills are numbered; `refill_landed` is the latest that finished.
    refill_generation: u64,
    refill_landed: u64,
    /// When the refill in flight counts as lost.
    refill_deadline: Millis,
    /// The failure of the last refill, for the callers that waited on it.
    refill_error: Option<(u64, Error)>,
    /// The gateway asked this client not to refill before this local time.
    next_refill_at: Millis,
    /// The gateway's clock minus ours: the largest of the recent samples
    /// (`server_now - received_at`), which is the one the network delayed
    /// least. A steady estimate matters more than a fresh one: two blocks
    /// converted with different estimates would land closer together than
    /// the gateway spaced them.
    skew_ms: i64,
    skew_samples: VecDeque<i64>,
    /// Recent gateway round-trip time, for refilling a little early.
    rtt_ms: Millis,
    /// The last permit drawn: its time on the gateway's clock, and the local
    /// time it was handed out.
    last_drawn: Option<(Millis, Millis)>,
    cooldown_until_ms: Option<Millis>,
    effective_rps: Option<f64>,
    pending_successes: u64,
    /// The provider's latest word on its quota (gateway clock), for the
    /// bucket's next gateway request.
    pending_quota: Option<QuotaReport>,
    /// When a report last went out on its own, whether it is still out,
    /// and the limit it stated.
    quota_sent_at: Option<Millis>,
    quota_in_flight: bool,
    stated_limit: Option<(u64, Option<u64>)>,
}

struct PendingRelease {
    bucket_id: String,
    token: Option<String>,
    rules: Vec<PacingRule>,
    lease_ids: Vec<String>,
    flushing: bool,
    /// Leases ever queued under this key, and those whose gateway call has
    /// finished: a lease queued as the n-th is settled once `settled >= n`.
    queued: u64,
    settled: u64,
}

struct Inner {
    port: Rc<dyn GatewayPort>,
    rt: Rc<dyn Runtime>,
    options: PacerOptions,
    buckets: RefCell<HashMap<String, BucketState>>,
    releases: RefCell<HashMap<String, PendingRelease>>,
    /// A batched release failed in the background; the next acquire
    /// surfaces it.
    release_failure: RefCell<Option<Error>>,
    /// Whether the gateway behind the port is the shared authority (and so
    /// the only place the rate adapts), or this isolate's own.
    authoritative: bool,
    /// The port or the gateway refused an observe: reports ride on
    /// acquires only.
    observe_refused: std::cell::Cell<bool>,
}

/// Client side of the rate contract against a shared gateway.
#[derive(Clone)]
pub struct GatewayRateState {
    inner: Rc<Inner>,
}

impl GatewayRateState {
    pub fn new(port: Rc<dyn GatewayPort>, rt: Rc<dyn Runtime>, options: PacerOptions) -> Self {
        Self::build(port, rt, options, true)
    }

    /// `LocalRateState`: the same contract with a scheduler of its own in
    /// this isolate's memory, for one isolate or for tests.
    pub fn local(rt: Rc<dyn Runtime>, options: PacerOptions, seed: u64) -> Self {
        let clock: Rc<dyn crate::time::Clock> = Rc::new(RuntimeClock(rt.clone()));
        let core =
            GatewayCore::new(GatewayConfig::default(), seed).expect("the default config is valid");
        let port: Rc<dyn GatewayPort> = Rc::new(InProcessGateway::new(core, clock));
        Self::build(port, rt, options, false)
    }

    fn build(
        port: Rc<dyn GatewayPort>,
        rt: Rc<dyn Runtime>,
        options: PacerOptions,
        authoritative: bool,
    ) -> Self {
        GatewayRateState {
            inner: Rc::new(Inner {
                port,
                rt,
                options,
                buckets: RefCell::new(HashMap::new()),
                releases: RefCell::new(HashMap::new()),
                release_failure: RefCell::new(None),
                authoritative,
                observe_refused: std::cell::Cell::new(false),
            }),
        }
    }

    /// True for a shared gateway: backpressure and successes go only there.
    pub fn is_gateway_authoritative(&self) -> bool {
        self.inner.authoritative
    }

    /// Waits for a permit of `req.bucket_id` and until its dispatch time.
    /// An abort during the wait hands the permit's lease back.
    pub async fn acquire(&self, req: PermitRequest<'_>) -> Result<Permit> {
        if req.rules.is_empty() {
            return Ok(Permit::unpaced());
        }
        let rules_key = rules_signature(req.rules);
        let token = req
            .rate_scope_token
            .map(str::trim)
            .filter(|t| !t.is_empty());
        loop {
            if let Some(signal) = req.signal {
                signal.check()?;
            }
            if let Some(e) = self.inner.release_failure.borrow_mut().take() {
                return Err(e);
            }
            if let Some((due_local, permit)) = self.draw(req.bucket_id, &rules_key) {
                let wait = due_local.saturating_sub(self.inner.rt.now_ms());
                if wait > 0 {
                    let sleep = self.inner.rt.sleep(wait);
                    // On abort `permit` drops here, releasing its lease.
                    abortable(req.signal, async {
                        sleep.await;
                        Ok(())
                    })
                    .await?;
                }
                return Ok(permit);
            }
            self.await_refill(req.bucket_id, token, req.rules, &rules_key, req.signal)
                .await?;
        }
    }

    /// Joins (or starts) the bucket's one refill and waits for it to land.
    async fn await_refill(
        &self,
        bucket_id: &str,
        token: Option<&str>,
        rules: &[PacingRule],
        rules_key: &str,
        signal: Option<&AbortSignal>,
    ) -> Result<()> {
        let now = self.inner.rt.now_ms();
        let generation = self.state(bucket_id, |state| {
            state.waiters += 1;
            if !state.refilling {
                state.refilling = true;
                state.refill_generation += 1;
                state.refill_deadline = now.max(state.next_refill_at) + REFILL_TIMEOUT_MS;
                let this = self.clone();
                let generation = state.refill_generation;
                let (bucket_id, token) = (bucket_id.to_owned(), token.map(str::to_owned));
                let (rules, rules_key) = (rules.to_vec(), rules_key.to_owned());
                self.inner.rt.spawn(Box::pin(async move {
                    this.refill(generation, bucket_id, token, rules, rules_key)
                        .await;
                }));
            }
            state.refill_generation
        });
        let rt = &self.inner.rt;
        let waited = abortable(signal, async {
            loop {
                let now = rt.now_ms();
                let (landed, not_before, lost) = self.state(bucket_id, |s| {
                    let lost = s.refilling && now > s.refill_deadline;
                    if lost {
                        s.refilling = false;
                    }
                    (s.refill_landed >= generation, s.next_refill_at, lost)
                });
                if landed || lost {
                    return Ok(());
                }
                rt.sleep(not_before.saturating_sub(now).max(REFILL_POLL_MS))
                    .await;
            }
        })
        .await;
        self.state(bucket_id, |state| {
            state.waiters -= 1;
            waited?;
            match &state.refill_error {
                Some((g, e)) if *g == generation => Err(e.clone()),
                _ => Ok(()),
            }
        })
    }

    /// The single-flight refill of one bucket. Runs in the background so an
    /// aborted caller never strands a grant in flight.
    async fn refill(
        self,
        generation: u64,
        bucket_id: String,
        token: Option<String>,
        rules: Vec<PacingRule>,
        rules_key: String,
    ) {
        let result = self.request_block(&bucket_id, token.clone(), &rules).await;
        let result =
            result.and_then(|response| self.land(&bucket_id, token, &rules, rules_key, response));
        self.state(&bucket_id, |state| {
            if state.refill_generation == generation {
                state.refilling = false;
            }
            state.refill_landed = state.refill_landed.max(generation);
            if let Err(e) = result {
                state.refill_error = Some((generation, e));
            }
        });
    }

    async fn request_block(
        &self,
        bucket_id: &str,
        token: Option<String>,
        rules: &[PacingRule],
    ) -> Result<AcquireResponse> {
        // Ask early by a round trip and a poll, so the block is here before
        // its first permit is due: a block that lands late goes out late,
        // closer to the next block than the gateway spaced them.
        let (not_before, lead) =
            self.state(bucket_id, |s| (s.next_refill_at, s.rtt_ms + REFILL_POLL_MS));
        let now = self.inner.rt.now_ms();
        let start_at = not_before.saturating_sub(lead);
        if start_at > now {
            self.inner.rt.sleep(start_at - now).await;
        }
        let sent_at = self.inner.rt.now_ms();
        let (requested, observed_successes, quota) = self.state(bucket_id, |s| {
            (
                block_size(rules, s.waiters, &self.inner.options),
                s.pending_successes,
                s.pending_quota.take(),
            )
        });
        let request = AcquireRequest {
            bucket_id: bucket_id.to_owned(),
            rate_scope_token: token,
            rules: rules.to_vec(),
            requested,
            observed_successes,
            scheduler_schema: self.inner.options.scheduler_schema.clone(),
            quota,
        };
        let response = self
            .with_retries(|| self.inner.port.acquire(request.clone()))
            .await?;
        let rtt = self.inner.rt.now_ms().saturating_sub(sent_at);
        self.state(bucket_id, |s| {
            s.pending_successes = s.pending_successes.saturating_sub(observed_successes);
            // A slowly forgetting maximum: one slow answer widens the lead
            // at once, and it narrows again over a few refills.
            s.rtt_ms = rtt.max(s.rtt_ms - s.rtt_ms / 4);
        });
        Ok(response)
    }

    /// Calls the gateway, retrying transport failures after
    /// [`STORE_RETRY_DELAYS_MS`]. Refusals the gateway meant (bad input, a
    /// forbidden scope, a budget) are not retried.
    async fn with_retries<T, F>(&self, mut call: impl FnMut() -> F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        let mut delays = STORE_RETRY_DELAYS_MS.iter();
        loop {
            match call().await {
                Err(e) if e.code == ErrorCode::GatewayUnavailable => match delays.next() {
                    Some(&delay) => self.inner.rt.sleep(delay).await,
                    None => {
                        return Err(Error {
                            message: format!(
                                "the gateway failed {} times: {}",
                                STORE_RETRY_DELAYS_MS.len() + 1,
                                e.message
                            ),
                            ..e
                        })
                    }
                },
                other => return other,
            }
        }
    }

    /// Records what a gateway answer says about the bucket, and merges a
    /// grant into its block.
    fn land(
        &self,
        bucket_id: &str,
        token: Option<String>,
        rules: &[PacingRule],
        rules_key: String,
        response: AcquireResponse,
    ) -> Result<()> {
        let now = self.inner.rt.now_ms();
        let permits = validate_grant(bucket_id, rules, &response)?;
        let max_wait = self.inner.options.max_wait_ms;
        let mut buckets = self.inner.buckets.borrow_mut();
        let state = buckets
            .get_mut(bucket_id)
            .expect("landing on a known bucket");
        if let Some(server_now) = response.server_now_ms {
            if state.skew_samples.len() == SKEW_SAMPLES {
                state.skew_samples.pop_front();
            }
            state.skew_samples.push_back(server_now as i64 - now as i64);
            state.skew_ms = state.skew_samples.iter().copied().max().unwrap_or(0);
        }
        state.cooldown_until_ms = response.cooldown_until_ms;
        if let Some(rps) = response.effective_requests_per_second {
            state.effective_rps = Some(rps);
        }
        state.next_refill_at = now.saturating_add(response.wait_ms);
        if response.granted == 0 {
            if response.wait_ms > max_wait {
                let until = response
                    .cooldown_until_ms
                    .unwrap_or(now.saturating_add(response.wait_ms));
                return Err(Error::new(
                    ErrorCode::ProviderExhausted,
                    format!(
                        "provider bucket {bucket_id} asks to wait {} ms, past the {max_wait} ms limit",
                        response.wait_ms
                    ),
                )
                .with_detail(Detail::Cooldown { until_ms: until }));
            }
            return Ok(());
        }
        let last_local = permits
            .back()
            .map_or(now, |(at, _)| local_time(*at, state.skew_ms))
            .max(now);
        let expires_at = last_local + self.inner.options.block_ttl_ms;
        match &mut state.block {
            Some(block) if block.rules_key == rules_key && block.expires_at > now => {
                block.permits.extend(permits);
                block.permits.make_contiguous().sort_by_key(|(at, _)| *at);
                block.expires_at = block.expires_at.max(expires_at);
            }
            slot => {
                let stale = slot.replace(Block {
                    permits,
                    expires_at,
                    rules_key,
                    rules: rules.to_vec(),
                    token,
                });
                drop(buckets);
                if let Some(stale) = stale {
                    self.give_back(bucket_id, stale);
                }
            }
        }
        Ok(())
    }

    /// The earliest cached permit of the bucket, with its local due time.
    fn draw(&self, bucket_id: &str, rules_key: &str) -> Option<(Millis, Permit)> {
        let now = self.inner.rt.now_ms();
        let mut buckets = self.inner.buckets.borrow_mut();
        let state = buckets.get_mut(bucket_id)?;
        let usable = state
            .block
            .as_ref()
            .is_some_and(|b| b.rules_key == rules_key && b.expires_at > now);
        if !usable {
            let stale = state.block.take();
            drop(buckets);
            if let Some(stale) = stale {
                self.give_back(bucket_id, stale);
            }
            return None;
        }
        let block = state.block.as_mut().expect("usable");
        let (at, lease) = block.permits.pop_front()?;
        let (token, rules) = (block.token.clone(), block.rules.clone());
        if block.permits.is_empty() {
            state.block = None;
        }
        // A permit handed out late (its caller woke late) would land closer
        // to the next one than the gateway spaced them, and a provider
        // counting its own windows could see one too many. So each permit
        // keeps at least its scheduled gap to the one before.
        let mut due = local_time(at, state.skew_ms).max(now);
        if let Some((last_at, last_due)) = state.last_drawn {
            if at >= last_at {
                due = due.max(last_due + (at - last_at));
            }
        }
        state.last_drawn = Some((at, due));
        drop(buckets);
        Some((due, self.permit(bucket_id, token, rules, lease)))
    }

    fn permit(
        &self,
        bucket_id: &str,
        token: Option<String>,
        rules: Vec<PacingRule>,
        lease: Option<String>,
    ) -> Permit {
        let Some(lease_id) = lease else {
            return Permit::new(None, None);
        };
        let weak: Weak<Inner> = Rc::downgrade(&self.inner);
        let bucket_id = bucket_id.to_owned();
        let id = lease_id.clone();
        Permit::new(
            Some(lease_id),
            Some(Box::new(move || match weak.upgrade() {
                Some(inner) => {
                    let this = GatewayRateState { inner };
                    match this.release_leases(&bucket_id, token, &rules, vec![id]) {
                        Some(ticket) => Box::pin(async move { this.settled(ticket).await }),
                        None => Box::pin(std::future::ready(())),
                    }
                }
                None => Box::pin(std::future::ready(())),
            })),
        )
    }

    /// Releases a block's leases (its pure-rate permits are forfeited: the
    /// gateway already spent their times).
    fn give_back(&self, bucket_id: &str, block: Block) {
        let leases: Vec<String> = block.permits.into_iter().filter_map(|(_, l)| l).collect();
        self.release_leases(bucket_id, block.token, &block.rules, leases);
    }

    /// Queues leases for the bucket's batched release and starts a flush if
    /// none is running.
    /// Returns the release's ticket: its batch key and place in line.
    fn release_leases(
        &self,
        bucket_id: &str,
        token: Option<String>,
        rules: &[PacingRule],
        lease_ids: Vec<String>,
    ) -> Option<(String, u64)> {
        if lease_ids.is_empty() {
            return None;
        }
        let key = format!("{bucket_id}\0{}", rules_signature(rules));
        let (start, place) = {
            let mut releases = self.inner.releases.borrow_mut();
            let pending = releases
                .entry(key.clone())
                .or_insert_with(|| PendingRelease {
                    bucket_id: bucket_id.to_owned(),
                    token,
                    rules: rules.to_vec(),
                    lease_ids: Vec::new(),
                    flushing: false,
                    queued: 0,
                    settled: 0,
                });
            pending.queued += lease_ids.len() as u64;
            pending.lease_ids.extend(lease_ids);
            (
                !std::mem::replace(&mut pending.flushing, true),
                pending.queued,
            )
        };
        if start {
            let this = self.clone();
            let key = key.clone();
            self.inner
                .rt
                .spawn(Box::pin(async move { this.flush_releases(key).await }));
        }
        Some((key, place))
    }

    /// Settles once the release holding `ticket` has had its gateway call.
    /// It looks on its own timer: the flush may run in another request.
    async fn settled(&self, (key, place): (String, u64)) {
        loop {
            let done = self
                .inner
                .releases
                .borrow()
                .get(&key)
                .is_some_and(|p| p.settled >= place);
            if done {
                return;
            }
            self.inner.rt.sleep(REFILL_POLL_MS).await;
        }
    }

    async fn flush_releases(self, key: String) {
        let linger = self.inner.options.release_linger_ms;
        if linger > 0 {
            self.inner.rt.sleep(linger).await;
        }
        loop {
            let request = {
                let mut releases = self.inner.releases.borrow_mut();
                let pending = releases.get_mut(&key).expect("flushing a queued release");
                // The entry stays (one per bucket and rules) so its counters
                // keep counting for tickets still waiting on them.
                if pending.lease_ids.is_empty() {
                    pending.flushing = false;
                    return;
                }
                let take = pending.lease_ids.len().min(limits::MAX_RELEASE_BATCH);
                ReleaseRequest {
                    bucket_id: pending.bucket_id.clone(),
                    rate_scope_token: pending.token.clone(),
                    rules: pending.rules.clone(),
                    lease_ids: pending.lease_ids.drain(..take).collect(),
                    scheduler_schema: self.inner.options.scheduler_schema.clone(),
                }
            };
            let outcome = self
                .with_retries(|| self.inner.port.release(request.clone()))
                .await;
            if let Some(pending) = self.inner.releases.borrow_mut().get_mut(&key) {
                pending.settled += request.lease_ids.len() as u64;
            }
            if let Err(e) = outcome {
                *self.inner.release_failure.borrow_mut() = Some(Error {
                    message: format!(
                        "releasing leases of {} failed: {}",
                        request.bucket_id, e.message
                    ),
                    ..e
                });
            }
        }
    }

    /// A provider answered 429: tell the gateway, then drop the bucket's
    /// cached permits that fall inside the cooldown it answers with (so
    /// the cooldown applies to the very next call). A 429 the gateway takes
    /// for noise leaves the cooldown, and so the block, as it was; if the
    /// gateway cannot be told, the whole block goes.
    pub async fn penalize(
        &self,
        bucket_id: &str,
        rate_scope_token: Option<&str>,
        cooldown_ms: Millis,
    ) -> Result<()> {
        if cooldown_ms == 0 {
            return Ok(());
        }
        let outcome = self
            .tell_penalize(bucket_id, rate_scope_token, cooldown_ms)
            .await;
        let until = outcome
            .as_ref()
            .map_or(Millis::MAX, |r| r.cooldown_until_ms);
        let cut_to = outcome
            .as_ref()
            .ok()
            .and_then(|r| r.effective_requests_per_second);
        let stale = self
            .inner
            .buckets
            .borrow_mut()
            .get_mut(bucket_id)
            .and_then(|s| {
                let previous = s.effective_rps;
                let block = s.block.as_mut()?;
                let keep = block.permits.partition_point(|(at, _)| *at < until);
                let mut inside: VecDeque<_> = block.permits.drain(..keep).collect();
                // A cut also thins the permits already held to the new
                // rate: they were granted at the rate the provider refused.
                if let (Some(rps), Some(previous)) = (cut_to, previous) {
                    if rps < previous {
                        let spacing = (1_000.0 / rps) as Millis;
                        let mut last: Option<Millis> = None;
                        let mut kept = VecDeque::with_capacity(block.permits.len());
                        for permit in block.permits.drain(..) {
                            if last.is_none_or(|l| permit.0 >= l.saturating_add(spacing)) {
                                last = Some(permit.0);
                                kept.push_back(permit);
                            } else {
                                inside.push_back(permit);
                            }
                        }
                        block.permits = kept;
                    }
                }
                let (rules, token) = (block.rules.clone(), block.token.clone());
                if block.permits.is_empty() {
                    s.block = None;
                }
                Some(Block {
                    permits: inside,
                    expires_at: 0,
                    rules_key: String::new(),
                    rules,
                    token,
                })
            });
        if let Some(stale) = stale.filter(|b| !b.permits.is_empty()) {
            self.give_back(bucket_id, stale);
        }
        let response = outcome?;
        let mut buckets = self.inner.buckets.borrow_mut();
        let state = buckets.entry(bucket_id.to_owned()).or_default();
        state.cooldown_until_ms = Some(response.cooldown_until_ms);
        if let Some(rps) = response.effective_requests_per_second {
            state.effective_rps = Some(rps);
        }
        Ok(())
    }

    async fn tell_penalize(
        &self,
        bucket_id: &str,
        rate_scope_token: Option<&str>,
        cooldown_ms: Millis,
    ) -> Result<PenalizeResponse> {
        let request = PenalizeRequest {
            bucket_id: bucket_id.to_owned(),
            rate_scope_token: rate_scope_token.map(str::to_owned),
            cooldown_ms: cooldown_ms.min(limits::MAX_COOLDOWN_MS),
            scheduler_schema: self.inner.options.scheduler_schema.clone(),
            quota: self.state(bucket_id, |s| s.pending_quota.take()),
        };
        self.inner.port.penalize(request).await.map_err(|e| Error {
            message: format!("penalize failed for {bucket_id}: {}", e.message),
            ..e
        })
    }

    /// A provider call succeeded; the next acquire reports it so the gateway
    /// can raise the rate.
    pub fn observe_success(&self, bucket_id: &str) {
        let mut buckets = self.inner.buckets.borrow_mut();
        let state = buckets.entry(bucket_id.to_owned()).or_default();
        state.pending_successes = (state.pending_successes + 1).min(limits::MAX_OBSERVED_SUCCESSES);
    }

    /// What a provider's answer said about its quota (times on this
    /// isolate's clock, see `QuotaHeaders::report`). It rides on the
    /// bucket's next gateway request, on the gateway's clock; a newer
    /// report replaces an older one, keeping a limit only the older gave.
    /// A report that cannot wait (a new stated limit, or fewer calls left
    /// than [`QUOTA_URGENT_MS`] of the bucket's rate) goes at once on its
    /// own, at most one at a time and one per [`QUOTA_REPORT_INTERVAL_MS`].
    pub fn observe_quota(
        &self,
        bucket_id: &str,
        rate_scope_token: Option<&str>,
        mut report: QuotaReport,
    ) {
        if !report.is_useful() {
            return;
        }
        let now = self.inner.rt.now_ms();
        let send = self.state(bucket_id, |s| {
            let limit = report.limit.map(|l| (l, report.window_ms));
            let running_out = report.remaining.is_some_and(|left| {
                s.effective_rps
                    .is_none_or(|rps| (left as f64) < rps * QUOTA_URGENT_MS as f64 / 1e3)
            });
            let urgent = (limit.is_some() && limit != s.stated_limit) || running_out;
            let due = s
                .quota_sent_at
                .is_none_or(|at| now >= at.saturating_add(QUOTA_REPORT_INTERVAL_MS));
            let send = urgent && due && !s.quota_in_flight && !self.inner.observe_refused.get();
            if send {
                s.quota_in_flight = true;
                s.quota_sent_at = Some(now);
                s.stated_limit = limit.or(s.stated_limit);
            }
            let skew = s.skew_ms;
            report.observed_at_ms = server_time(report.observed_at_ms, skew);
            report.reset_at_ms = report.reset_at_ms.map(|t| server_time(t, skew));
            match &s.pending_quota {
                Some(old) if old.observed_at_ms > report.observed_at_ms => {}
                old => {
                    if report.limit.is_none() {
                        if let Some(old) = old {
                            (report.limit, report.window_ms) = (old.limit, old.window_ms);
                        }
                    }
                    s.pending_quota = Some(report);
                }
            }
            send
        });
        if send {
            let this = self.clone();
            let (bucket_id, token) = (bucket_id.to_owned(), rate_scope_token.map(str::to_owned));
            self.inner.rt.spawn(Box::pin(async move {
                this.send_quota(bucket_id, token).await;
            }));
        }
    }

    async fn send_quota(&self, bucket_id: String, token: Option<String>) {
        let Some(quota) = self.state(&bucket_id, |s| s.pending_quota.take()) else {
            return;
        };
        let request = ObserveRequest {
            bucket_id: bucket_id.clone(),
            rate_scope_token: token,
            quota,
            scheduler_schema: self.inner.options.scheduler_schema.clone(),
        };
        let quota = request.quota.clone();
        let outcome = self.inner.port.observe(request).await;
        self.state(&bucket_id, |s| {
            s.quota_in_flight = false;
            match &outcome {
                Ok(rps) => s.effective_rps = rps.effective_requests_per_second.or(s.effective_rps),
                // Not lost: it rides on the next acquire unless a newer
                // report took its place.
                Err(_) if s.pending_quota.is_none() => s.pending_quota = Some(quota),
                Err(_) => {}
            }
        });
        // A port or gateway without the endpoint refuses it as bad input.
        if outcome.is_err_and(|e| e.code == ErrorCode::InvalidInput) {
            self.inner.observe_refused.set(true);
        }
    }

    /// The live effective rate the gateway last reported for the bucket.
    pub fn effective_rps(&self, bucket_id: &str) -> Option<f64> {
        self.inner
            .buckets
            .borrow()
            .get(bucket_id)
            .and_then(|s| s.effective_rps)
    }

    fn state<T>(&self, bucket_id: &str, f: impl FnOnce(&mut BucketState) -> T) -> T {
        f(self
            .inner
            .buckets
            .borrow_mut()
            .entry(bucket_id.to_owned())
            .or_default())
    }
}

/// A runtime read as a clock, for the local scheduler.
struct RuntimeClock(Rc<dyn Runtime>);

impl crate::time::Clock for RuntimeClock {
    fn now_ms(&self) -> Millis {
        self.0.now_ms()
    }
}

fn server_time(local_ms: Millis, skew_ms: i64) -> Millis {
    (local_ms as i64).saturating_add(skew_ms).max(0) as Millis
}

fn local_time(server_ms: Millis, skew_ms: i64) -> Millis {
    (server_ms as i64 - skew_ms).max(0) as Millis
}

/// How many permits one refill asks for. Pure-rate permits are cheap to
/// hold (already spent on the gateway), so the block asks for a horizon's
/// worth at the configured rate and the gateway grants what its live rate
/// fits in the horizon: a client whose last-known rate is stale still gets
/// full blocks once the gateway's rate recovers. Concurrency permits hold
/// scarce slots, so only the waiting callers' worth.
fn block_size(rules: &[PacingRule], waiters: u64, options: &PacerOptions) -> u64 {
    let configured = rules
        .iter()
        .map(PacingRule::requests_per_second)
        .fold(f64::INFINITY, f64::min);
    // The gateway spaces every permit evenly, so a block may span more than
    // one rule window; only the horizon bounds it.
    let horizon_budget =
        (configured * options.block_horizon_ms as f64 / 1_000.0).floor() as u64 + 1;
    let budget = horizon_budget.clamp(1, limits::MAX_REQUESTED);
    match rules.iter().filter_map(|r| r.max_concurrency).min() {
        Some(max) => waiters.max(1).min(max).min(budget),
        None => budget.max(waiters).min(limits::MAX_REQUESTED),
    }
}

/// A grant must carry one lease per permit exactly when the rules bound
/// concurrency, and finite times; a grant without times (an older gateway)
/// is usable at once.
fn validate_grant(
    bucket_id: &str,
    rules: &[PacingRule],
    response: &AcquireResponse,
) -> Result<VecDeque<(Millis, Option<String>)>> {
    let granted = response.granted as usize;
    let leases = response.lease_ids.clone().unwrap_or_default();
    let concurrency = has_concurrency(rules);
    let bad = |message: String| Err(Error::new(ErrorCode::GatewayUnavailable, message));
    if concurrency && leases.len() != granted {
        return bad(format!(
            "the gateway granted {granted} concurrency permits for {bucket_id} with {} lease ids",
            leases.len()
        ));
    }
    if !concurrency && !leases.is_empty() {
        return bad(format!(
            "the gateway returned {} lease ids for pure-rate bucket {bucket_id}",
            leases.len()
        ));
    }
    let times = match &response.scheduled_at_ms {
        Some(times) if times.len() != granted => {
            return bad(format!(
                "the gateway granted {granted} permits for {bucket_id} with {} dispatch times",
                times.len()
            ))
        }
        Some(times) => times.clone(),
        None => vec![0; granted],
    };
    let mut leases = leases.into_iter().map(Some);
    Ok(times
        .into_iter()
        .map(|at| {
            (
                at,
                if concurrency {
                    leases.next().flatten()
                } else {
                    None
                },
            )
        })
        .collect())
}
