//! Core errors become JS `Error`s with a string `code` and, where the code
//! has them, structured fields (`key`, `observed`, `limit`, `cooldownUntilMs`).

use js_sys::Reflect;
use wasm_bindgen::JsValue;

use crate::error::{Detail, Error};

fn set(target: &JsValue, key: &str, value: JsValue) {
    // Setting a plain data property on a fresh Error cannot throw.
    let _ = Reflect::set(target, &JsValue::from_str(key), &value);
}

impl From<Error> for JsValue {
    fn from(e: Error) -> JsValue {
        let js = js_sys::Error::new(&e.message);
        js.set_name("PacelineError");
        let target: JsValue = js.into();
        set(&target, "code", JsValue::from_str(e.code.as_str()));
        match e.detail {
            Some(Detail::Budget {
                key,
                observed,
                limit,
            }) => {
                set(&target, "key", JsValue::from_str(&key));
                set(&target, "observed", JsValue::from_f64(observed as f64));
                set(&target, "limit", JsValue::from_f64(limit as f64));
            }
            Some(Detail::Cooldown { until_ms }) => {
                set(
                    &target,
                    "cooldownUntilMs",
                    JsValue::from_f64(until_ms as f64),
                );
            }
            Some(Detail::Status(status)) => {
                set(&target, "status", JsValue::from_f64(f64::from(status)));
            }
            None => {}
        }
        target
    }
}
