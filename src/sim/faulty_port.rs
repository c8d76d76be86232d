//! The gateway as a client reaches it over an unreliable network: the real
//! scheduler in process behind a round trip of latency, with refused
//! connections (scripted or during outages), lost answers, rewritten
//! grants, an isolate that dies mid-call, and a log of what was sent. The
//! client tests and the fleet simulation inject their faults through this
//! one transport.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use super::executor::SimRuntime;
use super::jitter::Delays;
use crate::client::{GatewayReply, GatewayTransport, InProcessGateway};
use crate::error::{Error, Result};
use crate::gateway::{GatewayConfig, GatewayCore};
use crate::protocol::{
    decode, encode, route, AcquireRequest, AcquireResponse, ChargeRequest, Endpoint, Message,
    PenalizeRequest, ReleaseRequest,
};
use crate::rt::{LocalBoxFuture, Runtime};
use crate::time::{Clock, Millis};

pub type Rewrite = Box<dyn Fn(AcquireResponse) -> AcquireResponse>;
/// Sees every answer that reaches the client, by endpoint name.
pub type AnswerHook = Box<dyn Fn(&'static str, &GatewayReply)>;

pub struct FaultyPort {
    pub gateway: InProcessGateway,
    rt: SimRuntime,
    /// One round trip; half of it passes before the gateway answers.
    pub latency_ms: Millis,
    /// Each way of a trip takes a drawn delay longer, so its two halves
    /// differ.
    pub way_delays: Option<Delays>,
    /// Times `[from, to)` during which connections are refused.
    pub outages: Vec<(Millis, Millis)>,
    /// Once false, calls never settle: the isolate is gone.
    pub alive: Rc<Cell<bool>>,
    /// The next this many calls fail as refused connections.
    pub refuse: Cell<u32>,
    /// The next this many calls reach the gateway, but their answer is lost.
    pub lose_answer: Cell<u32>,
    /// Rewrites each acquire's grant before the client reads it.
    pub rewrite: RefCell<Option<Rewrite>>,
    pub on_answer: Option<AnswerHook>,
    pub acquires: RefCell<Vec<AcquireRequest>>,
    pub releases: RefCell<Vec<ReleaseRequest>>,
    pub penalties: RefCell<Vec<PenalizeRequest>>,
    pub charges: RefCell<Vec<ChargeRequest>>,
    /// Calls made, by endpoint name.
    pub round_trips: Rc<RefCell<BTreeMap<&'static str, u64>>>,
    pub calls: Cell<u32>,
}

/// The gateway's clock: the client's, moved by `skew_ms`.
struct Skewed(SimRuntime, i64);

impl Clock for Skewed {
    fn now_ms(&self) -> Millis {
        (self.0.now_ms() as i64 + self.1) as Millis
    }
}

impl FaultyPort {
    /// A port with no latency and no faults (until scripted) to a fresh
    /// gateway whose clock runs `skew_ms` off the client's.
    pub fn new(rt: &SimRuntime, skew_ms: i64) -> Rc<Self> {
        let core = GatewayCore::new(GatewayConfig::default(), 3).expect("the default config");
        let clock = Rc::new(Skewed(rt.clone(), skew_ms));
        Rc::new(FaultyPort::over(InProcessGateway::new(core, clock), rt))
    }

    /// A port with no latency and no faults to `gateway`.
    pub fn over(gateway: InProcessGateway, rt: &SimRuntime) -> Self {
        FaultyPort {
            gateway,
            rt: rt.clone(),
            latency_ms: 0,
            way_delays: None,
            outages: Vec::new(),
            alive: Rc::new(Cell::new(true)),
            refuse: Cell::new(0),
            lose_answer: Cell::new(0),
            rewrite: RefCell::new(None),
            on_answer: None,
            acquires: RefCell::default(),
            releases: RefCell::default(),
            penalties: RefCell::default(),
            charges: RefCell::default(),
            round_trips: Rc::default(),
            calls: Cell::new(0),
        }
    }

    fn log(&self, path: &str, body: &[u8]) {
        fn push<M: Message>(log: &RefCell<Vec<M>>, body: &[u8]) {
            if let Ok(m) = decode(body) {
                log.borrow_mut().push(m);
            }
        }
        match path {
            p if p == AcquireRequest::ROUTE.path => push(&self.acquires, body),
            p if p == ReleaseRequest::ROUTE.path => push(&self.releases, body),
            p if p == PenalizeRequest::ROUTE.path => push(&self.penalties, body),
            p if p == ChargeRequest::ROUTE.path => push(&self.charges, body),
            _ => {}
        }
    }

    fn refused(&self) -> bool {
        let refuse = self.refuse.get();
        if refuse > 0 {
            self.refuse.set(refuse - 1);
            return true;
        }
        let now = self.rt.now_ms();
        self.outages
            .iter()
            .any(|&(from, to)| now >= from && now < to)
    }

    fn rewritten(&self, path: &str, reply: GatewayReply) -> GatewayReply {
        let rewrite = self.rewrite.borrow();
        let Some(rewrite) = rewrite.as_ref() else {
            return reply;
        };
        if path != AcquireRequest::ROUTE.path || reply.status != 200 {
            return reply;
        }
        let grant: AcquireResponse = decode(&reply.body).expect("the gateway's own answer");
        GatewayReply {
            status: reply.status,
            body: encode(&rewrite(grant)).into_bytes(),
        }
    }

    async fn travel(&self, ms: Millis) {
        let ms = ms + self.way_delays.as_ref().map_or(0, Delays::draw);
        if ms > 0 {
            self.rt.sleep(ms).await;
        }
    }

    async fn round_trip(&self, path: &'static str, body: Vec<u8>) -> Result<GatewayReply> {
        if !self.alive.get() {
            return std::future::pending().await;
        }
        self.calls.set(self.calls.get() + 1);
        let name = route(path).map_or(path, |r| r.name);
        *self.round_trips.borrow_mut().entry(name).or_default() += 1;
        self.log(path, &body);
        let there = self.latency_ms / 2;
        self.travel(there).await;
        if self.refused() {
            self.travel(self.latency_ms - there).await;
            return Err(Error::unavailable("connection refused"));
        }
        let reply = self.rewritten(path, self.gateway.answer(path, &body));
        self.travel(self.latency_ms - there).await;
        if !self.alive.get() {
            return std::future::pending().await;
        }
        let lose = self.lose_answer.get();
        if lose > 0 {
            self.lose_answer.set(lose - 1);
            return Err(Error::unavailable(
                "the connection closed before the answer",
            ));
        }
        if let Some(hook) = &self.on_answer {
            hook(name, &reply);
        }
        Ok(reply)
    }
}

impl GatewayTransport for FaultyPort {
    fn post(&self, path: &'static str, body: Vec<u8>) -> LocalBoxFuture<'_, Result<GatewayReply>> {
        Box::pin(self.round_trip(path, body))
    }
}
