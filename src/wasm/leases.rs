//! `ToolLease` and `WorkLease`: what a governor hands out, for JS. Both
//! `release()`s return a promise, so a caller treats every release alike.

use js_sys::Promise;
use wasm_bindgen::prelude::*;

use super::runtime::JsRuntime;
use crate::governor::ToolLease;
use crate::rt::SlotPermit;

/// A cleared tool call: its provider permit and its tool slot. `release()`
/// when the call is done (idempotent).
#[wasm_bindgen(js_name = ToolLease)]
pub struct JsToolLease {
    lease: ToolLease,
    runtime: JsRuntime,
}

impl JsToolLease {
    pub(crate) fn new(lease: ToolLease, runtime: JsRuntime) -> Self {
        JsToolLease { lease, runtime }
    }
}

#[wasm_bindgen(js_class = ToolLease)]
impl JsToolLease {
    /// Frees the slot at once (idempotent); the promise settles when the
    /// permit's lease is back at the gateway, and is registered with the
    /// governor's `waitUntil` when it has one.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn release(&mut self) -> Promise {
        self.runtime.keep_alive(self.lease.release_settled())
    }

    /// The provider the call goes to; `undefined` for an unpaced tool.
    #[wasm_bindgen(getter)]
    pub fn provider(&self) -> Option<String> {
        self.lease.provider().map(str::to_owned)
    }
}

/// A map-row slot; `release()` when the row is done (idempotent).
#[wasm_bindgen(js_name = WorkLease)]
pub struct JsWorkLease {
    slot: SlotPermit,
}

impl JsWorkLease {
    pub(crate) fn new(slot: SlotPermit) -> Self {
        JsWorkLease { slot }
    }
}

#[wasm_bindgen(js_class = WorkLease)]
impl JsWorkLease {
    /// Frees the row slot (idempotent). A row slot lives in this isolate,
    /// so the promise is already settled; it is one for the same `await`
    /// as every other release.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn release(&mut self) -> Promise {
        self.slot.release();
        Promise::resolve(&JsValue::UNDEFINED)
    }
}
