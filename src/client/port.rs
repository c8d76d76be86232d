//! The client's only way to the gateway. The bindings implement it over the
//! injected JS `fetch`; tests and the simulation call a `GatewayCore` in
//! process.

use std::cell::RefCell;
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::gateway::GatewayCore;
use crate::protocol::{
    AcquireRequest, AcquireResponse, ChargeRequest, ChargeResponse, ObserveRequest,
    ObserveResponse, PenalizeRequest, PenalizeResponse, ReleaseRequest, ReleaseResponse,
};
use crate::rt::LocalBoxFuture;
use crate::time::Clock;

pub trait GatewayPort {
    fn acquire(&self, req: AcquireRequest) -> LocalBoxFuture<'_, Result<AcquireResponse>>;
    fn release(&self, req: ReleaseRequest) -> LocalBoxFuture<'_, Result<ReleaseResponse>>;
    fn penalize(&self, req: PenalizeRequest) -> LocalBoxFuture<'_, Result<PenalizeResponse>>;
    fn charge(&self, req: ChargeRequest) -> LocalBoxFuture<'_, Result<ChargeResponse>>;
    /// Relays a provider's quota headers. Optional: a port without it (or
    /// an older gateway) leaves the report for the bucket's next acquire.
    fn observe(&self, req: ObserveRequest) -> LocalBoxFuture<'_, Result<ObserveResponse>> {
        let _ = req;
        Box::pin(std::future::ready(Err(Error::invalid(
            "this gateway port does not relay quota reports",
        ))))
    }
}

/// A gateway in the same process, answering at once with the clock's time.
#[derive(Clone)]
pub struct InProcessGateway {
    pub core: Rc<RefCell<GatewayCore>>,
    pub clock: Rc<dyn Clock>,
}

impl InProcessGateway {
    pub fn new(core: GatewayCore, clock: Rc<dyn Clock>) -> Self {
        InProcessGateway {
            core: Rc::new(RefCell::new(core)),
            clock,
        }
    }
}

impl GatewayPort for InProcessGateway {
    fn acquire(&self, req: AcquireRequest) -> LocalBoxFuture<'_, Result<AcquireResponse>> {
        let result = self.core.borrow_mut().acquire(&req, self.clock.now_ms());
        Box::pin(std::future::ready(result))
    }

    fn release(&self, req: ReleaseRequest) -> LocalBoxFuture<'_, Result<ReleaseResponse>> {
        let result = self.core.borrow_mut().release(&req, self.clock.now_ms());
        Box::pin(std::future::ready(result))
    }

    fn penalize(&self, req: PenalizeRequest) -> LocalBoxFuture<'_, Result<PenalizeResponse>> {
        let result = self.core.borrow_mut().penalize(&req, self.clock.now_ms());
        Box::pin(std::future::ready(result))
    }

    fn charge(&self, req: ChargeRequest) -> LocalBoxFuture<'_, Result<ChargeResponse>> {
        let result = self.core.borrow_mut().charge(&req, self.clock.now_ms());
        Box::pin(std::future::ready(result))
    }

    fn observe(&self, req: ObserveRequest) -> LocalBoxFuture<'_, Result<ObserveResponse>> {
        let result = self.core.borrow_mut().observe(&req, self.clock.now_ms());
        Box::pin(std::future::ready(result))
    }
}
