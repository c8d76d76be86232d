//! Crossing between JS values and the core's types. Objects cross as JSON
//! text, so a JS caller's object is validated by the same decoder a gateway
//! uses on a request body (NaN and Infinity become `null` and are refused
//! by name).

use serde::Serialize;
use serde_json::Value;
use wasm_bindgen::prelude::*;

use crate::error::Error;
use crate::protocol::{encode, Message};

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = crypto, js_name = getRandomValues)]
    fn get_random_values(buf: &mut [u8]);
}

/// Runs `work` as a JS promise. Every async method goes through this one
/// instance of `future_to_promise` (over a boxed future): one per method
/// would copy its task machinery a dozen times into the wasm.
pub(crate) fn promise(
    work: impl std::future::Future<Output = Result<JsValue, JsValue>> + 'static,
) -> js_sys::Promise {
    let boxed: std::pin::Pin<Box<dyn std::future::Future<Output = Result<JsValue, JsValue>>>> =
        Box::pin(work);
    wasm_bindgen_futures::future_to_promise(boxed)
}

/// Eight bytes from `crypto.getRandomValues`.
pub(crate) fn random_seed() -> u64 {
    let mut buf = [0u8; 8];
    get_random_values(&mut buf);
    u64::from_le_bytes(buf)
}

/// 32 bytes from `crypto.getRandomValues`: a key nobody can guess.
pub(crate) fn random_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    get_random_values(&mut key);
    key
}

fn json_text(value: &JsValue) -> Result<String, Error> {
    js_sys::JSON::stringify(value)
        .ok()
        .and_then(|s| s.as_string())
        .ok_or_else(|| {
            Error::invalid("the argument cannot be written as JSON (a cycle or a BigInt?)")
        })
}

pub(crate) fn from_js<M: Message>(value: &JsValue) -> Result<M, Error> {
    let text = json_text(value)?;
    crate::protocol::decode(text.as_bytes())
}

pub(crate) fn to_js<T: Serialize>(value: &T) -> Result<JsValue, JsValue> {
    js_sys::JSON::parse(&encode(value))
        .map_err(|_| Error::invalid("a response did not encode as JSON").into())
}

/// A time argument in milliseconds: finite and not negative.
pub(crate) fn now_arg(ms: f64) -> Result<u64, Error> {
    if ms.is_finite() && ms >= 0.0 {
        Ok(ms.ceil() as u64)
    } else {
        Err(Error::invalid(format!(
            "nowMs must be a finite number of milliseconds >= 0, got {}",
            Value::from(ms)
        )))
    }
}

/// A value an options object may hold. Read by hand rather than through
/// serde: a serde reader brings core's float formatter into the wasm for
/// its error messages.
pub(crate) trait OptionValue: Sized {
    fn read(value: &Value) -> Option<Self>;
}

impl OptionValue for u64 {
    fn read(value: &Value) -> Option<Self> {
        value.as_u64()
    }
}

impl OptionValue for usize {
    fn read(value: &Value) -> Option<Self> {
        value.as_u64().and_then(|n| usize::try_from(n).ok())
    }
}

impl OptionValue for String {
    fn read(value: &Value) -> Option<Self> {
        value.as_str().map(str::to_owned)
    }
}

/// An options object, crossed into JSON once (`undefined` or `null`
/// options hold no fields).
pub(crate) struct Options(Option<Value>);

impl Options {
    pub fn read(options: &JsValue) -> Result<Self, Error> {
        if options.is_undefined() || options.is_null() {
            return Ok(Options(None));
        }
        let text = json_text(options)?;
        serde_json::from_str(&text)
            .map(|value| Options(Some(value)))
            .map_err(|e| Error::invalid(format!("options are not a JSON object: {e}")))
    }

    /// An optional field; present with the wrong type is an error.
    pub fn field<T: OptionValue>(&self, field: &str) -> Result<Option<T>, Error> {
        match self.0.as_ref().and_then(|o| o.get(field)) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => T::read(v)
                .map(Some)
                .ok_or_else(|| Error::invalid(format!("options.{field} has the wrong type: {v}"))),
        }
    }
}
