//! `Permit`: one provider call's clearance, for JS.

use std::cell::OnceCell;

use js_sys::{Function, Object, Reflect};
use wasm_bindgen::prelude::*;

use super::global::Global;
use super::js::{run, undefined_after};
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
        match self.permit.release_pending() {
            None => js_sys::Promise::resolve(&JsValue::UNDEFINED),
            Some(settled) => run(undefined_after(settled)),
        }
    }

    /// The concurrency lease this permit holds, if its rules bound concurrency.
    #[wasm_bindgen(getter, js_name = leaseId)]
    pub fn lease_id(&self) -> Option<String> {
        self.permit.lease_id().map(str::to_owned)
    }
}

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = Object, js_name = create)]
    fn create(proto: &JsValue) -> JsValue;
    #[wasm_bindgen(js_namespace = Object, js_name = create)]
    fn create_with(proto: &JsValue, properties: &Object) -> JsValue;
}

/// A permit as JS. One with nothing behind it (pure-rate rules: no lease
/// to hand back) is a plain object whose `release()` resolves at once and
/// whose `free()` does nothing, inherited from a frozen template on
/// `Permit.prototype` (so it is still `instanceof Permit`): it holds no
/// wasm memory, so it needs no finaliser, which is most of what making a
/// wasm-bindgen object costs on the hot path.
pub(crate) fn permit_value(permit: Permit) -> JsValue {
    if permit.holds_nothing() {
        EMPTY_PERMIT.with(|e| create(&e.get_or_init(EmptyPermit::new).0))
    } else {
        JsPermit::new(permit).into()
    }
}

/// The template every permit with nothing behind it inherits from.
struct EmptyPermit(JsValue);

static EMPTY_PERMIT: Global<OnceCell<EmptyPermit>> = Global::new(OnceCell::new());

impl EmptyPermit {
    fn new() -> Self {
        let sample: JsValue = JsPermit::new(Permit::unpaced()).into();
        let proto: JsValue = Object::get_prototype_of(&sample).into();
        let global: JsValue = js_sys::global().into();
        let get = |target: &JsValue, key: &str| {
            Reflect::get(target, &JsValue::from_str(key)).unwrap_or_default()
        };
        let promise_class = get(&global, "Promise");
        // `Promise.resolve` bound to `undefined`: a release that runs no
        // wasm. `Function.prototype` returns undefined: a free that does
        // nothing.
        let release = get(&promise_class, "resolve")
            .unchecked_into::<Function>()
            .bind1(&promise_class, &JsValue::UNDEFINED);
        let noop = get(&get(&global, "Function"), "prototype");
        let properties = Object::new();
        let define = |key: &JsValue, value: &JsValue| {
            let descriptor = Object::new();
            let _ = Reflect::set(&descriptor, &JsValue::from_str("value"), value);
            let _ = Reflect::set(&properties, key, &descriptor);
        };
        define(&JsValue::from_str("release"), &release);
        define(&JsValue::from_str("free"), &noop);
        define(&JsValue::from_str("leaseId"), &JsValue::UNDEFINED);
        let dispose = get(&get(&global, "Symbol"), "dispose");
        if !dispose.is_undefined() {
            define(&dispose, &noop);
        }
        EmptyPermit(Object::freeze(&create_with(&proto, &properties).into()).into())
    }
}
