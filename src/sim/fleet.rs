//! A fleet of isolates, each with its own pacer and budget state and many
//! concurrent callers, sharing one gateway and one provider, on virtual
//! time. The same run is a test (its invariants) and a benchmark (its
//! figures).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use super::arrivals::Arrival;
use super::executor::SimRuntime;
use super::provider::{Answer, Provider, ProviderModel};
use crate::client::{
    BudgetState, GatewayBudgetState, GatewayPort, GatewayRateState, InProcessGateway,
    LocalBoxFuture, PacerOptions, PermitRequest, Runtime,
};
use crate::error::{Error, Result};
use crate::gateway::{GatewayConfig, GatewayCore};
use crate::governor::retry_after_ms;
use crate::protocol::{
    AcquireRequest, AcquireResponse, BudgetCharge, ChargeRequest, ChargeResponse, ObserveRequest,
    ObserveResponse, PacingRule, PenalizeRequest, PenalizeResponse, ReleaseRequest,
    ReleaseResponse,
};
use crate::time::{Clock, Millis};

pub const START_MS: Millis = 1_767_225_600_000;
const BUCKET: &str = "org:provider";
const RUN: &str = "run";

#[derive(Debug, Clone)]
pub struct FleetConfig {
    pub isolates: usize,
    pub callers_per_isolate: usize,
    pub rule: PacingRule,
    pub duration_ms: Millis,
    /// How long the provider takes to answer a call.
    pub call_latency_ms: Millis,
    /// One gateway round trip.
    pub gateway_latency_ms: Millis,
    /// The provider's true limit: from each offset (ms since start) on,
    /// this many requests per second.
    pub true_limit: Vec<(Millis, u64)>,
    pub true_max_concurrency: Option<u64>,
    /// Offsets `[from, to)` during which the gateway refuses connections.
    pub gateway_outages: Vec<(Millis, Millis)>,
    /// `(isolate, offset)`: the isolate dies then, holding whatever it holds.
    pub deaths: Vec<(usize, Millis)>,
    pub gateway: GatewayConfig,
    pub pacer: PacerOptions,
    /// Charge one `toolCall` budget unit per call through the gateway.
    pub budget_limit: Option<u64>,
    /// Open-loop traffic: each call arrives at its time at its isolate
    /// (`isolates` and `callers_per_isolate` are then unused; an isolate
    /// exists from its first call and is evicted after its last, leaving
    /// whatever it holds). `None`: every isolate runs
    /// `callers_per_isolate` callers that call back to back.
    pub arrivals: Option<Vec<Arrival>>,
    /// Every call builds its own rate state (a Worker that makes one per
    /// request) instead of sharing its isolate's.
    pub per_request_state: bool,
    /// How the provider refuses and what headers it sends, on top of
    /// `true_limit`.
    pub provider: ProviderModel,
}

impl FleetConfig {
    /// 32 isolates x 8 callers against a 20 req/s rule the provider honours.
    pub fn saturated() -> Self {
        FleetConfig {
            isolates: 32,
            callers_per_isolate: 8,
            rule: PacingRule::new(20, 1_000),
            duration_ms: 120_000,
            call_latency_ms: 40,
            gateway_latency_ms: 10,
            true_limit: vec![(0, 20)],
            true_max_concurrency: None,
            gateway_outages: Vec::new(),
            deaths: Vec::new(),
            gateway: GatewayConfig::default(),
            pacer: PacerOptions::default(),
            budget_limit: None,
            arrivals: None,
            per_request_state: false,
            provider: ProviderModel::default(),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct FleetReport {
    /// Every provider dispatch, ms since start.
    pub dispatches: Vec<Millis>,
    /// Dispatches the provider answered 429.
    pub rejections: Vec<Millis>,
    /// Every time the gateway granted, ms since start.
    pub granted: Vec<Millis>,
    pub gateway_round_trips: u64,
    /// Gateway calls by endpoint (`acquire`, `release`, `penalize`, `charge`).
    pub round_trips_by_kind: BTreeMap<&'static str, u64>,
    /// Each dispatched call's wait from its arrival to its dispatch, ms.
    pub waits: Vec<f64>,
    /// Calls that arrived (open loop) or were attempted (closed loop).
    pub calls: u64,
    pub max_in_flight: u64,
    /// Errors callers saw, by code.
    pub errors: BTreeMap<&'static str, u64>,
    /// `(ms since start, effective req/s)` after every acquire the gateway answered.
    pub effective_rps: Vec<(Millis, f64)>,
    /// Calls each isolate dispatched, by isolate.
    pub dispatches_by_isolate: Vec<u64>,
    /// The budget: calls charged locally, and the gateway's counter.
    pub budget_used: u64,
    pub budget_counter_at_gateway: u64,
    pub budget_reserved_unused: u64,
}

impl FleetReport {
    /// Sliding windows `[t, t + window)` starting at a dispatch that hold
    /// more than `limit` dispatches.
    pub fn windows_over(&self, limit: u64, window_ms: Millis) -> usize {
        self.window_counts(window_ms).filter(|&n| n > limit).count()
    }

    /// The most dispatches in any half-open window of `window_ms`.
    pub fn densest_window(&self, window_ms: Millis) -> u64 {
        self.window_counts(window_ms).max().unwrap_or(0)
    }

    /// How many dispatches each window `[t, t + window_ms)` starting at a
    /// dispatch holds.
    fn window_counts(&self, window_ms: Millis) -> impl Iterator<Item = u64> + '_ {
        let d = &self.dispatches;
        let mut end = 0;
        (0..d.len()).map(move |start| {
            end = end.max(start);
            while end < d.len() && d[end] < d[start] + window_ms {
                end += 1;
            }
            (end - start) as u64
        })
    }

    pub fn dispatches_between(&self, from: Millis, to: Millis) -> usize {
        self.dispatches
            .iter()
            .filter(|&&t| t >= from && t < to)
            .count()
    }

    pub fn accepted_between(&self, from: Millis, to: Millis) -> usize {
        self.dispatches_between(from, to)
            - self
                .rejections
                .iter()
                .filter(|&&t| t >= from && t < to)
                .count()
    }

    pub fn rejection_share(&self, from: Millis, to: Millis) -> f64 {
        let all = self.dispatches_between(from, to);
        let rejected = self
            .rejections
            .iter()
            .filter(|&&t| t >= from && t < to)
            .count();
        if all == 0 {
            0.0
        } else {
            rejected as f64 / all as f64
        }
    }

    pub fn round_trips_per_permit(&self) -> f64 {
        self.gateway_round_trips as f64 / self.dispatches.len().max(1) as f64
    }

    /// Whether every dispatch used a time the gateway granted, at or after it.
    pub fn every_dispatch_had_a_reserved_time(&self) -> bool {
        let mut granted = self.granted.clone();
        granted.sort_unstable();
        let mut dispatches = self.dispatches.clone();
        dispatches.sort_unstable();
        let mut next = 0;
        dispatches.iter().all(|&d| {
            if next < granted.len() && granted[next] <= d {
                next += 1;
                true
            } else {
                false
            }
        })
    }
}

/// The gateway as one isolate reaches it: a round trip of latency, refused
/// during outages, silent once the isolate is dead.
struct SimPort {
    gateway: InProcessGateway,
    rt: SimRuntime,
    latency_ms: Millis,
    outages: Rc<Vec<(Millis, Millis)>>,
    alive: Rc<Cell<bool>>,
    round_trips: Rc<RefCell<BTreeMap<&'static str, u64>>>,
    granted: Rc<RefCell<Vec<Millis>>>,
    effective: Rc<RefCell<Vec<(Millis, f64)>>>,
}

impl SimPort {
    async fn call<T>(
        &self,
        kind: &'static str,
        f: impl FnOnce(&InProcessGateway) -> LocalBoxFuture<'_, Result<T>>,
    ) -> Result<T> {
        if !self.alive.get() {
            return std::future::pending().await;
        }
        *self.round_trips.borrow_mut().entry(kind).or_default() += 1;
        self.rt.sleep(self.latency_ms / 2).await;
        let offset = self.rt.now_ms() - START_MS;
        if self
            .outages
            .iter()
            .any(|&(from, to)| offset >= from && offset < to)
        {
            self.rt.sleep(self.latency_ms - self.latency_ms / 2).await;
            return Err(Error::unavailable("connection refused"));
        }
        let result = f(&self.gateway).await;
        self.rt.sleep(self.latency_ms - self.latency_ms / 2).await;
        if !self.alive.get() {
            return std::future::pending().await;
        }
        result
    }
}

impl GatewayPort for SimPort {
    fn acquire(&self, req: AcquireRequest) -> LocalBoxFuture<'_, Result<AcquireResponse>> {
        Box::pin(async move {
            let r = self.call("acquire", |g| g.acquire(req)).await?;
            let offset = self.rt.now_ms() - START_MS;
            if let Some(times) = &r.scheduled_at_ms {
                self.granted
                    .borrow_mut()
                    .extend(times.iter().map(|t| t - START_MS));
            }
            if let Some(rps) = r.effective_requests_per_second {
                self.effective.borrow_mut().push((offset, rps));
            }
            Ok(r)
        })
    }

    fn release(&self, req: ReleaseRequest) -> LocalBoxFuture<'_, Result<ReleaseResponse>> {
        Box::pin(self.call("release", |g| g.release(req)))
    }

    fn penalize(&self, req: PenalizeRequest) -> LocalBoxFuture<'_, Result<PenalizeResponse>> {
        Box::pin(self.call("penalize", |g| g.penalize(req)))
    }

    fn charge(&self, req: ChargeRequest) -> LocalBoxFuture<'_, Result<ChargeResponse>> {
        Box::pin(self.call("charge", |g| g.charge(req)))
    }

    fn observe(&self, req: ObserveRequest) -> LocalBoxFuture<'_, Result<ObserveResponse>> {
        Box::pin(self.call("observe", |g| g.observe(req)))
    }
}

pub fn run_fleet(config: &FleetConfig) -> FleetReport {
    let rt = SimRuntime::new(START_MS);
    let clock: Rc<dyn Clock> = Rc::new(rt.clone());
    let gateway = InProcessGateway::new(
        GatewayCore::new(config.gateway.clone(), 7).expect("valid gateway config"),
        clock,
    );
    let limits = config.true_limit.clone();
    let provider = Rc::new(Provider::with_model(
        move |now| {
            let offset = now - START_MS;
            limits
                .iter()
                .rev()
                .find(|(from, _)| offset >= *from)
                .map_or(u64::MAX, |(_, n)| *n)
        },
        config.true_max_concurrency,
        config.provider.clone(),
    ));
    let round_trips: Rc<RefCell<BTreeMap<&'static str, u64>>> = Rc::default();
    let granted = Rc::new(RefCell::new(Vec::new()));
    let effective = Rc::new(RefCell::new(Vec::new()));
    let outages = Rc::new(config.gateway_outages.clone());
    let end = START_MS + config.duration_ms;
    let shared = Rc::new(Shared {
        rt: rt.clone(),
        provider: provider.clone(),
        rules: vec![config.rule.clone()],
        budget_limit: config.budget_limit,
        call_latency_ms: config.call_latency_ms,
        end,
        pacer_options: config.pacer.clone(),
        per_request_state: config.per_request_state,
        errors: RefCell::default(),
        budget_used: Cell::new(0),
        waits: RefCell::default(),
        calls: Cell::new(0),
    });
    let isolate_count = match &config.arrivals {
        Some(arrivals) => arrivals.iter().map(|a| a.isolate + 1).max().unwrap_or(0),
        None => config.isolates,
    };
    let isolates: Vec<Rc<Isolate>> = (0..isolate_count)
        .map(|i| {
            let alive = Rc::new(Cell::new(true));
            let port: Rc<dyn GatewayPort> = Rc::new(SimPort {
                gateway: gateway.clone(),
                rt: rt.clone(),
                latency_ms: config.gateway_latency_ms,
                outages: outages.clone(),
                alive: alive.clone(),
                round_trips: round_trips.clone(),
                granted: granted.clone(),
                effective: effective.clone(),
            });
            let runtime: Rc<dyn Runtime> = Rc::new(rt.clone());
            Rc::new(Isolate {
                pacer: GatewayRateState::new(port.clone(), runtime.clone(), config.pacer.clone()),
                budget: Rc::new(GatewayBudgetState::new(port.clone(), runtime, i as u64 + 1)),
                port,
                alive,
                calls_left: Cell::new(0),
                dispatched: Cell::new(0),
            })
        })
        .collect();
    for &(i, at) in &config.deaths {
        let (rt2, alive) = (rt.clone(), isolates[i].alive.clone());
        rt.spawn(Box::pin(async move {
            rt2.sleep(at).await;
            alive.set(false);
        }));
    }
    match &config.arrivals {
        None => {
            for isolate in &isolates {
                for _ in 0..config.callers_per_isolate {
                    let (shared, isolate) = (shared.clone(), isolate.clone());
                    rt.spawn(Box::pin(
                        async move { shared.call_back_to_back(&isolate).await },
                    ));
                }
            }
        }
        Some(arrivals) => {
            for a in arrivals {
                let isolate = isolates[a.isolate].clone();
                isolate.calls_left.set(isolate.calls_left.get() + 1);
                let (shared, at) = (shared.clone(), a.at);
                rt.spawn(Box::pin(async move {
                    shared.rt.sleep(at).await;
                    shared.call_once(&isolate).await;
                    // Evicted after its last call, holding what it holds.
                    isolate.calls_left.set(isolate.calls_left.get() - 1);
                    if isolate.calls_left.get() == 0 {
                        isolate.alive.set(false);
                    }
                }));
            }
        }
    }
    rt.run_until(end);

    let budget_counter_at_gateway = gateway.core.borrow().budget_counter(RUN, "toolCall");
    let to_offsets = |v: Vec<Millis>| v.into_iter().map(|t| t - START_MS).collect::<Vec<_>>();
    let mut dispatches = to_offsets(provider.dispatches());
    dispatches.sort_unstable();
    let round_trips_by_kind = round_trips.borrow().clone();
    let report = FleetReport {
        dispatches,
        rejections: to_offsets(provider.rejections()),
        granted: granted.borrow().clone(),
        gateway_round_trips: round_trips_by_kind.values().sum(),
        round_trips_by_kind,
        waits: shared.waits.borrow().clone(),
        calls: shared.calls.get(),
        max_in_flight: provider.max_in_flight(),
        errors: shared.errors.borrow().clone(),
        effective_rps: effective.borrow().clone(),
        dispatches_by_isolate: isolates.iter().map(|i| i.dispatched.get()).collect(),
        budget_used: shared.budget_used.get(),
        budget_counter_at_gateway,
        budget_reserved_unused: isolates
            .iter()
            .map(|i| i.budget.reserved_unused(RUN, "toolCall"))
            .sum(),
    };
    report
}

struct Isolate {
    port: Rc<dyn GatewayPort>,
    pacer: GatewayRateState,
    budget: Rc<GatewayBudgetState>,
    alive: Rc<Cell<bool>>,
    /// Open loop: calls still to come; the isolate is evicted at zero.
    calls_left: Cell<u64>,
    dispatched: Cell<u64>,
}

/// What every call of the fleet shares.
struct Shared {
    rt: SimRuntime,
    provider: Rc<Provider>,
    rules: Vec<PacingRule>,
    budget_limit: Option<u64>,
    call_latency_ms: Millis,
    end: Millis,
    pacer_options: PacerOptions,
    per_request_state: bool,
    errors: RefCell<BTreeMap<&'static str, u64>>,
    budget_used: Cell<u64>,
    waits: RefCell<Vec<f64>>,
    calls: Cell<u64>,
}

impl Shared {
    async fn call_back_to_back(&self, isolate: &Isolate) {
        while self.rt.now_ms() < self.end && isolate.alive.get() {
            if !self.call_once(isolate).await {
                self.rt.sleep(100).await;
            }
        }
    }

    /// One call from its arrival now; false if it failed.
    async fn call_once(&self, isolate: &Isolate) -> bool {
        self.calls.set(self.calls.get() + 1);
        match self.one_call(isolate, self.rt.now_ms()).await {
            Ok(()) => true,
            Err(e) => {
                *self.errors.borrow_mut().entry(e.code.as_str()).or_default() += 1;
                false
            }
        }
    }

    async fn one_call(&self, isolate: &Isolate, arrived: Millis) -> Result<()> {
        // The budget is charged before the permit is drawn: a permit must be
        // used at its time, and a charge that waits out a gateway outage
        // would otherwise send the call late.
        if let Some(limit) = self.budget_limit {
            let charge = [BudgetCharge {
                key: "toolCall".into(),
                amount: 1,
                limit,
            }];
            isolate.budget.charge(RUN, &charge).await?;
            self.budget_used.set(self.budget_used.get() + 1);
        }
        let pacer = if self.per_request_state {
            let runtime: Rc<dyn Runtime> = Rc::new(self.rt.clone());
            GatewayRateState::new(isolate.port.clone(), runtime, self.pacer_options.clone())
        } else {
            isolate.pacer.clone()
        };
        let permit = pacer
            .acquire(PermitRequest {
                bucket_id: BUCKET,
                rate_scope_token: None,
                rules: &self.rules,
                signal: None,
            })
            .await?;
        if !isolate.alive.get() || self.rt.now_ms() >= self.end {
            // A dead isolate never hands anything back.
            std::mem::forget(permit);
            return Ok(());
        }
        let now = self.rt.now_ms();
        self.waits.borrow_mut().push((now - arrived) as f64);
        isolate.dispatched.set(isolate.dispatched.get() + 1);
        let reply = self.provider.begin(now);
        self.rt.sleep(self.call_latency_ms).await;
        self.provider.end();
        if !isolate.alive.get() {
            std::mem::forget(permit);
            return Ok(());
        }
        if let Some(quota) = reply.quota_headers.report(now) {
            pacer.observe_quota(BUCKET, None, quota);
        }
        match reply.answer {
            Answer::Ok => pacer.observe_success(BUCKET),
            Answer::TooManyRequests => {
                let cooldown = retry_after_ms(reply.retry_after.as_deref(), self.rt.now_ms());
                pacer.penalize(BUCKET, None, cooldown).await?
            }
        }
        drop(permit);
        Ok(())
    }
}
