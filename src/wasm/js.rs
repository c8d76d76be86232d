//! Crossing back to JS: promises, answers as plain objects and the random
//! seed. (What JS hands in is read by `reader`.)

use wasm_bindgen::prelude::*;

use crate::error::{Detail, Error};
#[cfg(feature = "pacer")]
use crate::rt::LocalBoxFuture;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(catch, js_namespace = crypto, js_name = getRandomValues)]
    fn get_random_values(buf: &mut [u8]) -> Result<(), JsValue>;
}

#[cfg(feature = "pacer")]
/// Runs `work` as a JS promise. Every async method goes through this one
/// instance of `future_to_promise` (over a boxed future): one per method
/// would copy its task machinery a dozen times into the wasm.
pub(crate) fn promise(
    work: impl std::future::Future<Output = Result<JsValue, JsValue>> + 'static,
) -> js_sys::Promise {
    run(Box::pin(work))
}

#[cfg(feature = "pacer")]
/// A promise's work: `task`, then `undefined`. One async block for the
/// background tasks, leases' releases and permits' releases alike.
pub(crate) fn undefined_after(task: LocalBoxFuture<'static, ()>) -> PromiseWork {
    Box::pin(async move {
        task.await;
        Ok(JsValue::UNDEFINED)
    })
}

#[cfg(feature = "pacer")]
pub(crate) type PromiseWork = LocalBoxFuture<'static, Result<JsValue, JsValue>>;

#[cfg(feature = "pacer")]
/// Where the host refuses timers (workerd, at a module's top level) the
/// work could wait forever, its retries and waits never woken, so it is
/// refused instead.
pub(crate) fn run(work: PromiseWork) -> js_sys::Promise {
    match timers_allowed("this call") {
        Ok(()) => wasm_bindgen_futures::future_to_promise(work),
        Err(e) => rejected(e),
    }
}

#[cfg(feature = "pacer")]
/// `INVALID_INPUT` naming `what` if the host refuses timers here, which
/// it needs to wait or to retry.
pub(crate) fn timers_allowed(what: &str) -> Result<(), Error> {
    match super::timers::timers_refused() {
        None => Ok(()),
        Some(thrown) => Err(Error::invalid(format!(
            "{what} waits on timers, which this host refused here (workerd allows them only \
             inside a handler, not at a module's top level): call it from a handler"
        ))
        .with_detail(Detail::Cause(super::error::keep(thrown)))),
    }
}

#[cfg(any(feature = "governor", feature = "gateway-host"))]
/// Fills `buf` from `crypto.getRandomValues`. workerd refuses random
/// values outside a handler (at a module's top level); `what` names the
/// operation that needed them, so the error says what to move.
fn fill_random(buf: &mut [u8], what: &str) -> Result<(), Error> {
    get_random_values(buf).map_err(|e| {
        Error::invalid(format!(
            "{what} draws random values, which this host refused here (workerd allows them \
             only inside a handler, not at a module's top level): call it from a handler"
        ))
        .with_detail(Detail::Cause(super::error::keep(e)))
    })
}

#[cfg(feature = "governor")]
/// Eight bytes from `crypto.getRandomValues`.
pub(crate) fn random_seed(what: &str) -> Result<u64, Error> {
    let mut buf = [0u8; 8];
    fill_random(&mut buf, what)?;
    Ok(u64::from_le_bytes(buf))
}

/// 32 bytes from `crypto.getRandomValues`: a key nobody can guess.
#[cfg(feature = "gateway-host")]
pub(crate) fn random_key(what: &str) -> Result<[u8; 32], Error> {
    let mut key = [0u8; 32];
    fill_random(&mut key, what)?;
    Ok(key)
}

#[cfg(any(feature = "governor", feature = "gateway-host"))]
pub(crate) fn to_js<T: crate::json_write::Encode + ?Sized>(value: &T) -> Result<JsValue, JsValue> {
    parsed(&crate::json_write::to_text(value))
}

#[cfg(any(feature = "governor", feature = "gateway-host"))]
fn parsed(text: &str) -> Result<JsValue, JsValue> {
    js_sys::JSON::parse(text)
        .map_err(|_| Error::invalid("a response did not encode as JSON").into())
}

#[cfg(feature = "pacer")]
/// A promise already rejected with `e`: an async method refuses its
/// arguments as a rejection, read at the call, before anything waits.
pub(crate) fn rejected(e: Error) -> js_sys::Promise {
    js_sys::Promise::reject(&e.into())
}
