//! A float's shortest digits, from JS: the JSON writer lays them out, so
//! the module carries no digit-generation code or tables of its own.

use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    /// A JS number.
    type Float;

    #[wasm_bindgen(method, js_name = toExponential)]
    fn to_exponential(this: &Float) -> String;
}

/// `x` (finite, not negative) as JS's `toExponential()` writes it: the
/// shortest digits that read back as `x`, `d[.ddd]e[+|-]x`.
pub(crate) fn shortest_exponential(x: f64) -> String {
    JsValue::from_f64(x)
        .unchecked_into::<Float>()
        .to_exponential()
}
