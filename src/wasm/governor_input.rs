//! Reading the governor's own JS inputs: per-tool tables, optional strings,
//! latencies and fork requests, each wrong one an `INVALID_INPUT` naming it.

use std::collections::HashMap;

use js_sys::Reflect;
use wasm_bindgen::prelude::*;

use super::error::foreign;
use crate::error::{Error, ErrorCode, Result};
use crate::protocol::limits;
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

/// `options[name]` as a string, absent when undefined or null.
pub(super) fn opt_string(obj: &JsValue, name: &str, what: &str) -> Result<Option<String>> {
    match present_field(obj, name)? {
        None => Ok(None),
        Some(v) => match v.as_string() {
            Some(s) if s.len() <= limits::MAX_ID_BYTES => Ok(Some(s)),
            _ => Err(Error::invalid(format!(
                "{name} in {what} must be a string of at most {} bytes",
                limits::MAX_ID_BYTES
            ))),
        },
    }
}

/// Tools a per-tool option may name; a run's catalogue is far smaller.
const MAX_TABLE_TOOLS: usize = 10_000;

/// `options[name]`, an object keyed by tool id, each value read by `read`.
pub(super) fn table<T>(
    options: &JsValue,
    name: &str,
    read: impl Fn(&str, JsValue) -> Result<T>,
) -> Result<HashMap<String, T>> {
    let Some(obj) = present_field(options, name)? else {
        return Ok(Default::default());
    };
    let not_a_table = || Error::invalid(format!("{name} must be an object keyed by tool id"));
    if !obj.is_object() || js_sys::Array::is_array(&obj) {
        return Err(not_a_table());
    }
    let obj: js_sys::Object = obj.unchecked_into();
    let keys = Reflect::own_keys(&obj).map_err(|e| threw_reading(name, e))?;
    if keys.length() as usize > MAX_TABLE_TOOLS {
        return Err(Error::invalid(format!(
            "{name} may name at most {MAX_TABLE_TOOLS} tools"
        )));
    }
    let mut out = HashMap::new();
    for key in keys.iter() {
        let Some(tool) = key.as_string() else {
            continue;
        };
        let value = Reflect::get(&obj, &key).map_err(|e| threw_reading(&tool, e))?;
        out.insert(tool.clone(), read(&tool, value)?);
    }
    Ok(out)
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

/// One entry of `toolLatencyMs`.
pub(super) fn tool_latency(tool: &str, v: JsValue) -> Result<Millis> {
    latency_ms(&v).ok_or_else(|| {
        Error::invalid(format!(
            "toolLatencyMs.{tool} must be a finite number of milliseconds >= 0"
        ))
    })
}

pub(super) fn fork_input(input: &JsValue, method: &str) -> Result<(String, String)> {
    let name = present_field(input, "childPlayName")?.and_then(|v| v.as_string());
    let run = present_field(input, "childRunId")?.and_then(|v| v.as_string());
    match (name, run) {
        (Some(name), Some(run)) => Ok((name, run)),
        _ => Err(Error::invalid(format!(
            "{method} takes {{childPlayName, childRunId}} (strings)"
        ))),
    }
}
