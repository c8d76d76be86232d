//! The gateway's calls as the pacer and the budget states make them. Over
//! a transport (`transport.rs`) each is encoded, posted and decoded by the
//! one codec; `LocalRateState`'s scheduler in the same isolate answers them
//! without the bytes.

use std::cell::RefCell;
use std::rc::Rc;

use super::codec::call;
use super::transport::GatewayTransport;
use crate::error::Result;
use crate::gateway::GatewayCore;
use crate::protocol::{
    decode, encode, AcquireRequest, AcquireResponse, ChargeRequest, ChargeResponse, Endpoint,
    ObserveRequest, ObserveResponse, PenalizeRequest, PenalizeResponse, ReleaseRequest,
    ReleaseResponse,
};
use crate::rt::LocalBoxFuture;
use crate::time::Clock;

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
