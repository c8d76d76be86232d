//! Crossing back to JS: promises, answers as plain objects, and the random
//! seed. (What JS hands in is read by `reader`.)

use serde::Serialize;
use wasm_bindgen::prelude::*;

use crate::error::Error;
use crate::protocol::encode;

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
#[cfg(feature = "gateway-host")]
pub(crate) fn random_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    get_random_values(&mut key);
    key
}

pub(crate) fn to_js<T: Serialize>(value: &T) -> Result<JsValue, JsValue> {
    js_sys::JSON::parse(&encode(value))
        .map_err(|_| Error::invalid("a response did not encode as JSON").into())
}

/// A promise already rejected with `e`: an async method refuses its
/// arguments as a rejection, read at the call, before anything waits.
pub(crate) fn rejected(e: Error) -> js_sys::Promise {
    js_sys::Promise::reject(&e.into())
}
