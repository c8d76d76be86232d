//! Reading the governor's own JS inputs: optional strings, latencies and
//! fork requests, each wrong one an `INVALID_INPUT` naming it.

use js_sys::Reflect;
use wasm_bindgen::prelude::*;

use super::error::foreign;
use crate::error::{Error, ErrorCode, Result};
use crate::time::Millis;

/// What a getter or a Proxy threw while `name` was read: `INVALID_INPUT`,
/// with the exception as its `cause`.
fn threw_reading(name: &str, thrown: JsValue) -> Error {
    let e = foreign(thrown, ErrorCode::InvalidInput);
    Error {
        code: ErrorCode::InvalidInput,
        message: format!("reading {name} threw: {}", e.message),
        ..e
    }
}

/// `obj[name]`, `None` when it is undefined or null.
fn present_field(obj: &JsValue, name: &str) -> Result<Option<JsValue>> {
    let value = Reflect::get(obj, &JsValue::from_str(name)).map_err(|e| threw_reading(name, e))?;
    Ok((!value.is_undefined() && !value.is_null()).then_some(value))
}

/// `obj[name]` as a string of at most `max_len` bytes, absent when
/// undefined or null.
pub(super) fn opt_string(
    obj: &JsValue,
    name: &str,
    max_len: usize,
    what: &str,
) -> Result<Option<String>> {
    match present_field(obj, name)? {
        None => Ok(None),
        Some(v) => match v.as_string() {
            Some(s) if s.len() <= max_len => Ok(Some(s)),
            _ => Err(Error::invalid(format!(
                "{name} in {what} must be a string of at most {max_len} bytes"
            ))),
        },
    }
}

/// A latency in milliseconds, rounded to the nearest whole one.
fn latency_ms(v: &JsValue) -> Option<Millis> {
    v.as_f64()
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| ms.round() as Millis)
}

/// `input.latencyMs`: absent, or a latency.
pub(super) fn opt_latency(input: &JsValue) -> Result<Option<Millis>> {
    match present_field(input, "latencyMs")? {
        None => Ok(None),
        Some(v) => latency_ms(&v)
            .map(Some)
            .ok_or_else(|| Error::invalid("latencyMs must be a finite number >= 0")),
    }
}

/// `{childPlayName, childRunId}`, for forkChild and forkInlineChild.
pub(super) fn fork_input(input: &JsValue) -> Result<(String, String)> {
    let name = present_field(input, "childPlayName")?.and_then(|v| v.as_string());
    let run = present_field(input, "childRunId")?.and_then(|v| v.as_string());
    name.zip(run)
        .ok_or_else(|| Error::invalid("a fork takes {childPlayName, childRunId} (strings)"))
}
