//! The client's only way to the gateway: a transport that posts a request's
//! bytes to an endpoint's path and hands back the status and bytes of the
//! answer. What the bytes mean is the codec's business (`codec.rs`), so a
//! transport is one method: the bindings implement it over the injected JS
//! port, tests and the simulation over a `GatewayCore` in process.

use std::cell::RefCell;
use std::rc::Rc;

use super::codec::call;
use crate::error::Result;
use crate::gateway::{self, GatewayCore};
use crate::protocol::{
    decode, encode, AcquireRequest, AcquireResponse, ChargeRequest, ChargeResponse, Endpoint,
    ObserveRequest, ObserveResponse, PenalizeRequest, PenalizeResponse, ReleaseRequest,
    ReleaseResponse,
};
use crate::rt::LocalBoxFuture;
use crate::time::Clock;

/// An answer as it came back: HTTP status and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayReply {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Posts bytes, returns status and bytes. An `Err` means no answer came
/// (refused connection, lost answer); an error answer is an `Ok` reply with
/// its status.
pub trait GatewayTransport {
    fn post(&self, path: &'static str, body: Vec<u8>) -> LocalBoxFuture<'_, Result<GatewayReply>>;
}

/// The gateway's calls as the pacer and the budget states make them. Every
/// transport is a port: each call is encoded, posted and decoded by the one
/// codec.
pub trait GatewayPort {
    fn acquire(&self, req: AcquireRequest) -> LocalBoxFuture<'_, Result<AcquireResponse>>;
    fn release(&self, req: ReleaseRequest) -> LocalBoxFuture<'_, Result<ReleaseResponse>>;
    fn penalize(&self, req: PenalizeRequest) -> LocalBoxFuture<'_, Result<PenalizeResponse>>;
    fn charge(&self, req: ChargeRequest) -> LocalBoxFuture<'_, Result<ChargeResponse>>;
    /// Relays a provider's quota headers. A gateway without the endpoint
    /// refuses it as bad input, and the report waits for the bucket's next
    /// acquire.
    fn observe(&self, req: ObserveRequest) -> LocalBoxFuture<'_, Result<ObserveResponse>>;
}

impl<T: GatewayTransport + ?Sized> GatewayPort for T {
    fn acquire(&self, req: AcquireRequest) -> LocalBoxFuture<'_, Result<AcquireResponse>> {
        call(self, req)
    }

    fn release(&self, req: ReleaseRequest) -> LocalBoxFuture<'_, Result<ReleaseResponse>> {
        call(self, req)
    }

    fn penalize(&self, req: PenalizeRequest) -> LocalBoxFuture<'_, Result<PenalizeResponse>> {
        call(self, req)
    }

    // Only budget states charge, and a wasm module built without the
    // governor has none: there the charge's codec (its encoder, its
    // answer's decoder, a map of counters) is left out of the module, since
    // the port's vtable would otherwise keep it.
    #[cfg(any(feature = "governor", not(target_arch = "wasm32")))]
    fn charge(&self, req: ChargeRequest) -> LocalBoxFuture<'_, Result<ChargeResponse>> {
        call(self, req)
    }

    #[cfg(not(any(feature = "governor", not(target_arch = "wasm32"))))]
    fn charge(&self, _req: ChargeRequest) -> LocalBoxFuture<'_, Result<ChargeResponse>> {
        // An async block, not `ready(Err(..))`: a `Ready` may hold an
        // answer, and its drop glue would keep the answer's (a map).
        Box::pin(async {
            Err(crate::error::Error::invalid(
                "budget charges need a module with budget states (paceline/client or paceline)",
            ))
        })
    }

    fn observe(&self, req: ObserveRequest) -> LocalBoxFuture<'_, Result<ObserveResponse>> {
        call(self, req)
    }
}

/// A gateway in the same process, answering at once with the clock's time,
/// through the same router a hosted gateway answers with.
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

    /// Serves one POST now.
    pub fn answer(&self, path: &str, body: &[u8]) -> GatewayReply {
        let now = self.clock.now_ms();
        let r = gateway::handle(&mut self.core.borrow_mut(), "POST", path, body, now);
        GatewayReply {
            status: r.status,
            body: r.body.into_bytes(),
        }
    }
}

impl GatewayTransport for InProcessGateway {
    fn post(&self, path: &'static str, body: Vec<u8>) -> LocalBoxFuture<'_, Result<GatewayReply>> {
        Box::pin(std::future::ready(Ok(self.answer(path, &body))))
    }
}

/// `LocalRateState`'s scheduler: a `GatewayCore` in the same isolate,
/// called with the pacer's requests. A request is still checked as the
/// wire checks it (the caller's bucket id, rules and cooldown reach the
/// core only through it), but the answer, a block's worth of dispatch
/// times, is handed over as the core made it: no encoding and no decoding
/// of the larger half of every refill.
pub struct LocalGateway {
    core: RefCell<GatewayCore>,
    clock: Rc<dyn Clock>,
}

impl LocalGateway {
    pub fn new(core: GatewayCore, clock: Rc<dyn Clock>) -> Self {
        LocalGateway {
            core: RefCell::new(core),
            clock,
        }
    }

    fn serve<E: Endpoint>(
        &self,
        req: E,
        f: impl FnOnce(&mut GatewayCore, &E, u64) -> Result<E::Response>,
    ) -> LocalBoxFuture<'_, Result<E::Response>>
    where
        E::Response: 'static,
    {
        let now = self.clock.now_ms();
        let answer = decode::<E>(encode(&req).as_bytes())
            .and_then(|req| f(&mut self.core.borrow_mut(), &req, now));
        Box::pin(std::future::ready(answer))
    }
}

impl GatewayPort for LocalGateway {
    fn acquire(&self, req: AcquireRequest) -> LocalBoxFuture<'_, Result<AcquireResponse>> {
        self.serve(req, |core, req, now| core.acquire(req, now))
    }

    fn release(&self, req: ReleaseRequest) -> LocalBoxFuture<'_, Result<ReleaseResponse>> {
        self.serve(req, |core, req, now| core.release(req, now))
    }

    fn penalize(&self, req: PenalizeRequest) -> LocalBoxFuture<'_, Result<PenalizeResponse>> {
        self.serve(req, |core, req, now| core.penalize(req, now))
    }

    fn charge(&self, req: ChargeRequest) -> LocalBoxFuture<'_, Result<ChargeResponse>> {
        self.serve(req, |core, req, now| core.charge(req, now))
    }

    fn observe(&self, req: ObserveRequest) -> LocalBoxFuture<'_, Result<ObserveResponse>> {
        self.serve(req, |core, req, now| core.observe(req, now))
    }
}
