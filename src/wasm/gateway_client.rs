//! `GatewayClient`: the gateway's calls one at a time over a transport,
//! for a host that talks to the gateway itself rather than pacing through
//! it. Part of the gateway-host bindings, so the client module leaves it out.

use std::rc::Rc;

use wasm_bindgen::prelude::*;

use super::js::{promise, rejected, to_js};
use super::port::JsPort;
use super::reader::message;
use crate::client::GatewayPort;
use crate::error::Result;
use crate::protocol::{
    AcquireRequest, ChargeRequest, Endpoint, ObserveRequest, PenalizeRequest, ReleaseRequest,
};
use crate::rt::LocalBoxFuture;

/// The gateway's calls one by one, over a transport, for a host that talks
/// to the gateway itself (an admin tool, a test): requests and answers in
/// the wire protocol's shapes, encoded, decoded and error-mapped by the same
/// codec the rate and budget states use.
#[wasm_bindgen(js_name = GatewayClient)]
pub struct JsGatewayClient {
    port: Rc<JsPort>,
}

impl JsGatewayClient {
    fn send<E: Endpoint + 'static>(
        &self,
        request: &JsValue,
        call: fn(&JsPort, E) -> LocalBoxFuture<'_, Result<E::Response>>,
    ) -> js_sys::Promise {
        let request: E = match message(request) {
            Ok(r) => r,
            Err(e) => return rejected(e),
        };
        let port = self.port.clone();
        promise(async move { to_js(&call(&port, request).await?) })
    }
}

#[wasm_bindgen(js_class = GatewayClient)]
impl JsGatewayClient {
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "GatewayTransport")] transport: JsValue,
    ) -> std::result::Result<JsGatewayClient, JsValue> {
        Ok(JsGatewayClient {
            port: Rc::new(JsPort::new(transport)?),
        })
    }

    #[wasm_bindgen(unchecked_return_type = "Promise<WireAcquireResponse>")]
    pub fn acquire(
        &self,
        #[wasm_bindgen(unchecked_param_type = "WireAcquireRequest")] request: JsValue,
    ) -> js_sys::Promise {
        self.send::<AcquireRequest>(&request, |p, r| p.acquire(r))
    }

    #[wasm_bindgen(unchecked_return_type = "Promise<WireReleaseResponse>")]
    pub fn release(
        &self,
        #[wasm_bindgen(unchecked_param_type = "WireReleaseRequest")] request: JsValue,
    ) -> js_sys::Promise {
        self.send::<ReleaseRequest>(&request, |p, r| p.release(r))
    }

    #[wasm_bindgen(unchecked_return_type = "Promise<WirePenalizeResponse>")]
    pub fn penalize(
        &self,
        #[wasm_bindgen(unchecked_param_type = "WirePenalizeRequest")] request: JsValue,
    ) -> js_sys::Promise {
        self.send::<PenalizeRequest>(&request, |p, r| p.penalize(r))
    }

    #[wasm_bindgen(unchecked_return_type = "Promise<WireObserveResponse>")]
    pub fn observe(
        &self,
        #[wasm_bindgen(unchecked_param_type = "WireObserveRequest")] request: JsValue,
    ) -> js_sys::Promise {
        self.send::<ObserveRequest>(&request, |p, r| p.observe(r))
    }

    #[wasm_bindgen(unchecked_return_type = "Promise<WireChargeResponse>")]
    pub fn charge(
        &self,
        #[wasm_bindgen(unchecked_param_type = "WireChargeRequest")] request: JsValue,
    ) -> js_sys::Promise {
        self.send::<ChargeRequest>(&request, |p, r| p.charge(r))
    }
}
