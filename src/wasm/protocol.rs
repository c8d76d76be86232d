//! Protocol helpers exported to JS: the package's version and the decoder a
//! client uses on a gateway's grant.

use wasm_bindgen::prelude::*;

use super::reader::string;
use crate::error::Error;
use crate::protocol::{decode, encode, limits, AcquireResponse};

#[wasm_bindgen]
pub fn version() -> String {
    crate::VERSION.to_owned()
}

/// Validates a gateway's acquire response (the JSON text of its body) and
/// returns it normalised: times rounded up to whole milliseconds, absent
/// optional fields left out. Throws an `Error` with `code: "INVALID_INPUT"`
/// naming the first bad field.
#[wasm_bindgen(js_name = decodeAcquireResponse, unchecked_return_type = "WireAcquireResponse")]
pub fn decode_acquire_response(
    #[wasm_bindgen(unchecked_param_type = "string")] body: JsValue,
) -> Result<JsValue, JsValue> {
    let body = string(&body, "body", limits::MAX_BODY_BYTES)?;
    let response: AcquireResponse = decode(body.as_bytes())?;
    js_sys::JSON::parse(&encode(&response))
        .map_err(|_| Error::invalid("the decoded grant did not re-encode as JSON").into())
}
