//! A fleet of isolates, each with its own pacer and budget state and many
//! concurrent callers, sharing one gateway and one provider, on virtual
//! time. The same run is a test (its invariants) and a benchmark (its
//! figures).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use super::arrivals::Arrival;
use super::executor::SimRuntime;
use super::faulty_port::FaultyPort;
use super::jitter::{Delays, IsolateRuntime, Jitter};
use super::provider::{Answer, Provider, ProviderModel};
use super::report::FleetReport;
use crate::client::{
    BudgetState, GatewayBudgetState, GatewayPort, GatewayRateState, InProcessGateway, PacerOptions,
    PermitRequest,
};
use crate::error::Result;
use crate::gateway::{GatewayConfig, GatewayCore};
use crate::governor::retry_after_ms;
use crate::protocol::{
    decode, AcquireRequest, AcquireResponse, BudgetCharge, Endpoint, PacingRule,
};
use crate::rt::Runtime;
use crate::time::{Clock, Millis};

use super::T0 as START_MS;
const BUCKET: &str = "org:provider";
const RUN: &str = "run";

#[derive(Debug, Clone)]
pub struct FleetConfig {
    pub isolates: usize,
    pub callers_per_isolate: usize,
    pub rule: PacingRule,
    pub duration_ms: Millis,
    /// How long the provider takes to answer a call it accepts.
    pub call_latency_ms: Millis,
    /// How long an answer takes to travel back to the caller, on top of
    /// the way there (`jitter`'s transit): 0 for a provider next door, a
    /// few hundred ms for one across an ocean. A call holds the provider
    /// only while it is there (`call_latency_ms` for an accepted one, none
    /// for a refused one).
    pub answer_latency_ms: Millis,
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
    /// Delays between a permit's time and the provider's count of it.
    pub jitter: Jitter,
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
            answer_latency_ms: 0,
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
            jitter: Jitter::default(),
        }
    }
}

/// The gateway as one isolate reaches it: a round trip of latency, refused
/// during outages, silent once the isolate is dead; every grant it reads is
/// recorded for the report.
fn isolate_port(
    gateway: &InProcessGateway,
    rt: &SimRuntime,
    config: &FleetConfig,
    alive: &Rc<Cell<bool>>,
    ways: &Delays,
    round_trips: &Rc<RefCell<BTreeMap<&'static str, u64>>>,
    on_grant: impl Fn(&AcquireResponse) + 'static,
) -> FaultyPort {
    let mut port = FaultyPort::over(gateway.clone(), rt);
    port.latency_ms = config.gateway_latency_ms;
    port.outages = config
        .gateway_outages
        .iter()
        .map(|&(from, to)| (START_MS + from, START_MS + to))
        .collect();
    port.alive = alive.clone();
    port.round_trips = round_trips.clone();
    port.way_delays = (!ways.is_none()).then(|| ways.clone());
    port.on_answer = Some(Box::new(move |name, reply| {
        if name == AcquireRequest::ROUTE.name {
            if let Ok(grant) = decode::<AcquireResponse>(&reply.body) {
                on_grant(&grant);
            }
        }
    }));
    port
}

/// Keeps each grant's times and the rate it announced, as offsets from the
/// start.
fn record_grant(
    rt: &SimRuntime,
    granted: &Rc<RefCell<Vec<Millis>>>,
    effective: &Rc<RefCell<Vec<(Millis, f64)>>>,
) -> impl Fn(&AcquireResponse) + 'static {
    let (rt, granted, effective) = (rt.clone(), granted.clone(), effective.clone());
    move |r| {
        if let Some(times) = &r.scheduled_at_ms {
            granted
                .borrow_mut()
                .extend(times.iter().map(|t| t - START_MS));
        }
        if let Some(rps) = r.effective_requests_per_second {
            effective.borrow_mut().push((rt.now_ms() - START_MS, rps));
        }
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
    let end = START_MS + config.duration_ms;
    let (ways, lateness) = (config.jitter.gateway_ways(), config.jitter.timer_lateness());
    let mut skews = config.jitter.clock_skews();
    let shared = Rc::new(Shared {
        rt: rt.clone(),
        provider: provider.clone(),
        rules: vec![config.rule.clone()],
        budget_limit: config.budget_limit,
        call_latency_ms: config.call_latency_ms,
        answer_latency_ms: config.answer_latency_ms,
        end,
        pacer_options: config.pacer.clone(),
        per_request_state: config.per_request_state,
        errors: RefCell::default(),
        budget_used: Cell::new(0),
        waits: RefCell::default(),
        calls: Cell::new(0),
        dispatch_log: RefCell::default(),
        transit: config.jitter.transit(),
        call_holds: config.jitter.call_holds(),
    });
    let isolate_count = match &config.arrivals {
        Some(arrivals) => arrivals.iter().map(|a| a.isolate + 1).max().unwrap_or(0),
        None => config.isolates,
    };
    let isolates: Vec<Rc<Isolate>> = (0..isolate_count)
        .map(|i| {
            let alive = Rc::new(Cell::new(true));
            let port: Rc<dyn GatewayPort> = Rc::new(isolate_port(
                &gateway,
                &rt,
                config,
                &alive,
                &ways,
                &round_trips,
                record_grant(&rt, &granted, &effective),
            ));
            let skew = skews();
            let runtime: Rc<dyn Runtime> = if lateness.is_none() && skew == 0 {
                Rc::new(rt.clone())
            } else {
                Rc::new(IsolateRuntime::new(&rt, lateness.clone(), skew))
            };
            Rc::new(Isolate {
                pacer: GatewayRateState::new(port.clone(), runtime.clone(), config.pacer.clone()),
                budget: Rc::new(GatewayBudgetState::new(
                    port.clone(),
                    runtime.clone(),
                    i as u64 + 1,
                )),
                port,
                runtime,
                alive,
                calls_left: Cell::new(0),
                index: i,
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
        dispatch_log: shared.dispatch_log.take(),
        isolates: isolates.len(),
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
    /// Its clock and timers: skewed and late when the run has jitter.
    runtime: Rc<dyn Runtime>,
    pacer: GatewayRateState,
    budget: Rc<GatewayBudgetState>,
    alive: Rc<Cell<bool>>,
    /// Open loop: calls still to come; the isolate is evicted at zero.
    calls_left: Cell<u64>,
    index: usize,
}

/// What every call of the fleet shares.
struct Shared {
    rt: SimRuntime,
    provider: Rc<Provider>,
    rules: Vec<PacingRule>,
    budget_limit: Option<u64>,
    call_latency_ms: Millis,
    answer_latency_ms: Millis,
    end: Millis,
    pacer_options: PacerOptions,
    per_request_state: bool,
    errors: RefCell<BTreeMap<&'static str, u64>>,
    budget_used: Cell<u64>,
    waits: RefCell<Vec<f64>>,
    calls: Cell<u64>,
    dispatch_log: RefCell<Vec<(Millis, usize)>>,
    /// Each call's way from its permit to the provider.
    transit: Delays,
    /// Each accepted call's time at the provider past `call_latency_ms`.
    call_holds: Delays,
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

    /// Takes a sent call to the provider; the time it arrives there.
    async fn reach_provider(&self) -> Millis {
        let transit = self.transit.draw();
        if transit > 0 {
            self.rt.sleep(transit).await;
        }
        self.rt.now_ms()
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
            GatewayRateState::new(
                isolate.port.clone(),
                isolate.runtime.clone(),
                self.pacer_options.clone(),
            )
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
        self.dispatch_log
            .borrow_mut()
            .push((now - START_MS, isolate.index));
        // Quota headers are read against the isolate's own clock.
        let sent_by_isolate_clock = isolate.runtime.now_ms();
        let at_provider = self.reach_provider().await;
        let reply = self.provider.begin(at_provider);
        if reply.answer == Answer::Ok {
            self.rt
                .sleep(self.call_latency_ms + self.call_holds.draw())
                .await;
            self.provider.end();
        }
        if self.answer_latency_ms > 0 {
            self.rt.sleep(self.answer_latency_ms).await;
        }
        if !isolate.alive.get() {
            std::mem::forget(permit);
            return Ok(());
        }
        if let Some(quota) = reply.quota_headers.report(sent_by_isolate_clock) {
            pacer.observe_quota(BUCKET, None, quota);
        }
        match reply.answer {
            Answer::Ok => pacer.observe_success(BUCKET),
            Answer::TooManyRequests => {
                let cooldown = retry_after_ms(reply.retry_after.as_deref(), self.rt.now_ms());
                pacer
                    .penalize(BUCKET, None, cooldown, Some(sent_by_isolate_clock))
                    .await?
            }
        }
        drop(permit);
        Ok(())
    }
}
