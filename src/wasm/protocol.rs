//! Protocol helpers exported to JS: the package's version and the decoder a
//! client uses on a gateway's grant.

use wasm_bindgen::prelude::*;

#[wasm_bindgen]
pub fn version() -> String {
    crate::VERSION.to_owned()
}

/// Validates a gateway's acquire response (the JSON text of its body) and
/// returns it normalised: times rounded up to whole milliseconds, absent
/// optional fields left out. Throws an `Error` with `code: "INVALID_INPUT"`
/// naming the first bad field.
#[cfg(feature = "wire-decoder")]
#[wasm_bindgen(js_name = decodeAcquireResponse, unchecked_return_type = "WireAcquireResponse")]
pub fn decode_acquire_response(
    #[wasm_bindgen(unchecked_param_type = "string")] body: JsValue,
) -> Result<JsValue, JsValue> {
    use crate::protocol::{decode, encode, limits, AcquireResponse};
    let body = super::reader::string(&body, "body", limits::MAX_BODY_BYTES)?;
    let response: AcquireResponse = decode(body.as_bytes())?;
    js_sys::JSON::parse(&encode(&response)).map_err(|_| {
        crate::error::Error::invalid("the decoded grant did not re-encode as JSON").into()
    })
}
