//! A gateway port for client tests: the real scheduler in process, plus
//! scripted faults (refused connections, lost answers, rewritten grants),
//! a server clock offset, and a log of every call.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use paceline::client::{GatewayPort, InProcessGateway};
use paceline::gateway::{GatewayConfig, GatewayCore};
use paceline::protocol::{
    AcquireRequest, AcquireResponse, ChargeRequest, ChargeResponse, PenalizeRequest,
    PenalizeResponse, ReleaseRequest, ReleaseResponse,
};
use paceline::rt::LocalBoxFuture;
use paceline::sim::SimRuntime;
use paceline::time::{Clock, Millis};
use paceline::{Error, Result};

pub type Rewrite = Box<dyn Fn(AcquireResponse) -> AcquireResponse>;

pub struct ScriptedPort {
    pub gateway: InProcessGateway,
    /// The next this many calls fail as refused connections.
    pub refuse: Cell<u32>,
    /// The next this many calls reach the gateway, but their answer is lost.
    pub lose_answer: Cell<u32>,
    pub rewrite: RefCell<Option<Rewrite>>,
    pub acquires: RefCell<Vec<AcquireRequest>>,
    pub releases: RefCell<Vec<ReleaseRequest>>,
    pub charges: RefCell<Vec<ChargeRequest>>,
    pub calls: Cell<u32>,
}

/// The gateway's clock: the test's, moved by `skew_ms`.
struct Skewed(SimRuntime, i64);

impl Clock for Skewed {
    fn now_ms(&self) -> Millis {
        (self.0.now_ms() as i64 + self.1) as Millis
    }
}

impl ScriptedPort {
    pub fn new(rt: &SimRuntime, skew_ms: i64) -> Rc<Self> {
        let core = GatewayCore::new(GatewayConfig::default(), 3).unwrap();
        Rc::new(ScriptedPort {
            gateway: InProcessGateway::new(core, Rc::new(Skewed(rt.clone(), skew_ms))),
            refuse: Cell::new(0),
            lose_answer: Cell::new(0),
            rewrite: RefCell::new(None),
            acquires: RefCell::default(),
            releases: RefCell::default(),
            charges: RefCell::default(),
            calls: Cell::new(0),
        })
    }

    fn fault(&self) -> Option<Error> {
        self.calls.set(self.calls.get() + 1);
        let refused = self.refuse.get();
        if refused > 0 {
            self.refuse.set(refused - 1);
            return Some(Error::unavailable("connection refused"));
        }
        None
    }

    fn lost<T>(&self, result: Result<T>) -> Result<T> {
        let lose = self.lose_answer.get();
        if lose > 0 {
            self.lose_answer.set(lose - 1);
            return Err(Error::unavailable(
                "the connection closed before the answer",
            ));
        }
        result
    }
}

fn ready<'a, T: 'a>(r: Result<T>) -> LocalBoxFuture<'a, Result<T>> {
    Box::pin(std::future::ready(r))
}

impl GatewayPort for ScriptedPort {
    fn acquire(&self, req: AcquireRequest) -> LocalBoxFuture<'_, Result<AcquireResponse>> {
        self.acquires.borrow_mut().push(req.clone());
        if let Some(e) = self.fault() {
            return ready(Err(e));
        }
        let now = self.gateway.clock.now_ms();
        let mut result = self.gateway.core.borrow_mut().acquire(&req, now);
        if let (Ok(r), Some(rewrite)) = (&mut result, &*self.rewrite.borrow()) {
            *r = rewrite(r.clone());
        }
        ready(self.lost(result))
    }

    fn release(&self, req: ReleaseRequest) -> LocalBoxFuture<'_, Result<ReleaseResponse>> {
        self.releases.borrow_mut().push(req.clone());
        if let Some(e) = self.fault() {
            return ready(Err(e));
        }
        let now = self.gateway.clock.now_ms();
        let result = self.gateway.core.borrow_mut().release(&req, now);
        ready(self.lost(result))
    }

    fn penalize(&self, req: PenalizeRequest) -> LocalBoxFuture<'_, Result<PenalizeResponse>> {
        if let Some(e) = self.fault() {
            return ready(Err(e));
        }
        let now = self.gateway.clock.now_ms();
        let result = self.gateway.core.borrow_mut().penalize(&req, now);
        ready(self.lost(result))
    }

    fn charge(&self, req: ChargeRequest) -> LocalBoxFuture<'_, Result<ChargeResponse>> {
        self.charges.borrow_mut().push(req.clone());
        if let Some(e) = self.fault() {
            return ready(Err(e));
        }
        let now = self.gateway.clock.now_ms();
        let result = self.gateway.core.borrow_mut().charge(&req, now);
        ready(self.lost(result))
    }
}

/// Spawns `work` on the simulation and returns a handle to its result.
pub fn spawn<T: 'static>(
    rt: &SimRuntime,
    work: impl std::future::Future<Output = T> + 'static,
) -> Rc<RefCell<Option<T>>> {
    use paceline::rt::Runtime;
    let out = Rc::new(RefCell::new(None));
    let slot = out.clone();
    rt.spawn(Box::pin(async move {
        *slot.borrow_mut() = Some(work.await);
    }));
    out
}

/// Runs `work` to completion on virtual time.
pub fn block_on<T: 'static>(
    rt: &SimRuntime,
    work: impl std::future::Future<Output = T> + 'static,
) -> T {
    let out = spawn(rt, work);
    rt.run_to_completion();
    let result = out.borrow_mut().take();
    result.expect("the work finished")
}
