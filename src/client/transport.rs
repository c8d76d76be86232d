//! The client's only way to a gateway: a transport that posts a request's
//! bytes to an endpoint's path and hands back the status and bytes of the
//! answer. What the bytes mean is the codec's business (`codec.rs`), so a
//! transport is one method: the bindings implement it over the injected JS
//! port, tests and the simulation over a `GatewayCore` in process.

use std::cell::RefCell;
use std::rc::Rc;

use crate::error::Result;
use crate::gateway::{self, GatewayCore};
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
