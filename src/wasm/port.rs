//! The gateway transport as JS hands it in: any object with
//! `post(path, body)` that resolves to `{ status, body }`, bytes both ways.
//! `fetchPort(...)` makes one over `fetch`, `coreTransport(core)` one over a
//! `GatewayCore` in the same isolate.

use js_sys::{ArrayBuffer, Function, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;

use super::error::{foreign, keep};
use super::reader::settle;
use crate::client::{GatewayReply, GatewayTransport};
use crate::error::{Detail, Error, ErrorCode, Result};
use crate::protocol::limits;
use crate::rt::LocalBoxFuture;

pub(crate) struct JsPort {
    transport: JsValue,
    post: Function,
}

impl JsPort {
    pub fn new(transport: JsValue) -> Result<Self> {
        let shape = "the gateway port must be a transport, an object with post(path, body) \
                     (fetchPort({ fetch, baseUrl }) makes one)";
        if !transport.is_object() {
            return Err(Error::invalid(shape));
        }
        let post = Reflect::get(&transport, &JsValue::from_str("post")).map_err(|e| {
            Error::invalid(format!("{shape}; reading its post threw (see cause)"))
                .with_detail(Detail::Cause(keep(e)))
        })?;
        match post.dyn_into::<Function>() {
            Ok(post) => Ok(JsPort { transport, post }),
            Err(_) => Err(Error::invalid(shape)),
        }
    }

    async fn round_trip(&self, path: &'static str, body: Vec<u8>) -> Result<GatewayReply> {
        let bytes = Uint8Array::from(&body[..]);
        // An error that carries one of our codes (fetchPort's, an abort)
        // passes through; anything else a transport throws means no answer
        // came, and is kept as the cause.
        let failed = |thrown: JsValue| {
            let coded = Reflect::get(&thrown, &JsValue::from_str("code"))
                .ok()
                .and_then(|c| c.as_string())
                .is_some_and(|c| ErrorCode::parse(&c).is_some());
            let mut e = foreign(thrown.clone(), ErrorCode::GatewayUnavailable);
            if coded {
                e
            } else {
                Error::unavailable(std::mem::take(&mut e.message))
                    .with_detail(Detail::Cause(keep(thrown)))
            }
        };
        let returned = self
            .post
            .call2(&self.transport, &JsValue::from_str(path), &bytes)
            .map_err(failed)?;
        let value = settle(returned).await.map_err(failed)?;
        reply(&value).map_err(|what| {
            Error::unavailable(format!(
                "the gateway transport's answer to POST {path} is malformed: {what}"
            ))
        })
    }
}

/// Reads `{ status, body }`; the body is measured before it is copied in.
fn reply(value: &JsValue) -> std::result::Result<GatewayReply, String> {
    if !value.is_object() {
        return Err("it must be an object { status, body }".into());
    }
    let field = |key: &str| {
        Reflect::get(value, &JsValue::from_str(key)).map_err(|_| format!("reading its {key} threw"))
    };
    let status = field("status")?
        .as_f64()
        .filter(|s| s.fract() == 0.0 && (100.0..=599.0).contains(s))
        .ok_or("status must be an integer from 100 to 599")?;
    let body = field("body")?;
    let bytes = if let Some(buffer) = body.dyn_ref::<ArrayBuffer>() {
        Uint8Array::new(buffer)
    } else {
        body.dyn_into::<Uint8Array>()
            .map_err(|_| "body must be a Uint8Array")?
    };
    if bytes.length() as usize > limits::MAX_BODY_BYTES {
        return Err(format!(
            "its body is {} bytes; the limit is {}",
            bytes.length(),
            limits::MAX_BODY_BYTES
        ));
    }
    Ok(GatewayReply {
        status: status as u16,
        body: bytes.to_vec(),
    })
}

impl GatewayTransport for JsPort {
    fn post(&self, path: &'static str, body: Vec<u8>) -> LocalBoxFuture<'_, Result<GatewayReply>> {
        Box::pin(self.round_trip(path, body))
    }
}
