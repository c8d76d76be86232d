//! `Permit`: one provider call's clearance, for JS.

use wasm_bindgen::prelude::*;

use super::js::promise;
use crate::client::Permit;

/// A permit to call a provider once. Call `release()` when the call is done
/// (it hands back the concurrency lease, if the rules have one).
#[wasm_bindgen(js_name = Permit)]
pub struct JsPermit {
    permit: Permit,
}

impl JsPermit {
    pub(crate) fn new(permit: Permit) -> Self {
        JsPermit { permit }
    }
}

#[wasm_bindgen(js_class = Permit)]
impl JsPermit {
    /// Hands the lease back (idempotent). The promise settles when the
    /// gateway has it: in a Worker, pass it to `ctx.waitUntil` (or give the
    /// state a `waitUntil`) so the request outlives the batched release.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn release(&mut self) -> js_sys::Promise {
        let settled = self.permit.release_settled();
        promise(async move {
            settled.await;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// The concurrency lease this permit holds, if its rules bound concurrency.
    #[wasm_bindgen(getter, js_name = leaseId)]
    pub fn lease_id(&self) -> Option<String> {
        self.permit.lease_id().map(str::to_owned)
    }
}
