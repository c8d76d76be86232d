//! The gateway port as JS hands it in: any object with `acquire`, `release`,
//! `penalize` and `charge` methods that take a wire request object and
//! return (a promise of) the wire response. `fetchPort(...)` makes one over
//! `fetch`; a test can pass a `GatewayCore` wrapper.

use js_sys::{Function, Reflect};
use serde::Serialize;
use wasm_bindgen::prelude::*;

use super::error::foreign;
use super::js::to_js;
use super::reader::{message, settle};
use crate::client::GatewayPort;
use crate::error::{Error, ErrorCode, Result};
use crate::protocol::{
    AcquireRequest, AcquireResponse, ChargeRequest, ChargeResponse, Message, ObserveRequest,
    ObserveResponse, PenalizeRequest, PenalizeResponse, ReleaseRequest, ReleaseResponse,
};
use crate::rt::LocalBoxFuture;

pub(crate) struct JsPort {
    port: JsValue,
}

impl JsPort {
    pub fn new(port: JsValue) -> Result<Self> {
        if !port.is_object() {
            return Err(Error::invalid(
                "the gateway port must be an object (fetchPort({ fetch, baseUrl }) makes one)",
            ));
        }
        for method in ["acquire", "release", "penalize", "charge"] {
            let f = Reflect::get(&port, &JsValue::from_str(method)).unwrap_or(JsValue::UNDEFINED);
            if !f.is_function() {
                return Err(Error::invalid(format!(
                    "the gateway port must have a {method}(request) method (fetchPort({{ fetch, baseUrl }}) makes one)"
                )));
            }
        }
        Ok(JsPort { port })
    }

    async fn call<Req: Serialize, Res: Message>(&self, method: &str, req: Req) -> Result<Res> {
        let f: Function = Reflect::get(&self.port, &JsValue::from_str(method))
            .unwrap_or(JsValue::UNDEFINED)
            .unchecked_into();
        let arg = to_js(&req).map_err(|_| Error::invalid("a request did not encode"))?;
        // A port that throws or rejects failed as transport unless its error
        // carries one of our codes.
        let returned = f
            .call1(&self.port, &arg)
            .map_err(|e| foreign(e, ErrorCode::GatewayUnavailable))?;
        let value = settle(returned)
            .await
            .map_err(|e| foreign(e, ErrorCode::GatewayUnavailable))?;
        message(&value).map_err(|e| {
            Error::unavailable(format!(
                "the gateway's {method} answer is malformed: {}",
                e.message
            ))
        })
    }
}

impl GatewayPort for JsPort {
    fn acquire(&self, req: AcquireRequest) -> LocalBoxFuture<'_, Result<AcquireResponse>> {
        Box::pin(self.call("acquire", req))
    }

    fn release(&self, req: ReleaseRequest) -> LocalBoxFuture<'_, Result<ReleaseResponse>> {
        Box::pin(self.call("release", req))
    }

    fn penalize(&self, req: PenalizeRequest) -> LocalBoxFuture<'_, Result<PenalizeResponse>> {
        Box::pin(self.call("penalize", req))
    }

    fn charge(&self, req: ChargeRequest) -> LocalBoxFuture<'_, Result<ChargeResponse>> {
        Box::pin(self.call("charge", req))
    }

    /// `observe` is optional on a port: without it, quota reports ride on
    /// acquires.
    fn observe(&self, req: ObserveRequest) -> LocalBoxFuture<'_, Result<ObserveResponse>> {
        let has =
            Reflect::get(&self.port, &JsValue::from_str("observe")).is_ok_and(|f| f.is_function());
        Box::pin(async move {
            if !has {
                return Err(Error::invalid("the gateway port has no observe method"));
            }
            self.call("observe", req).await
        })
    }
}
