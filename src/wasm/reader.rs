//! The one way the bindings read what JS hands them. Callers are hostile:
//! a getter or a Proxy trap may throw, a number may be a string, an array
//! may claim two billion items. So every property read goes through a
//! catch, every type is checked and never coerced, and a value is measured
//! before it is copied into the wasm; each failure is `INVALID_INPUT`
//! naming the field. Wire-shaped data is written to JSON inside a catch,
//! measured, then validated by the wire decoder; functions, signals and
//! states are read field by field.

use js_sys::{JsString, Reflect};
use wasm_bindgen::prelude::*;

use super::error::keep;
use crate::error::{Detail, Error, Result};
use crate::protocol::limits;
// What only the pacer's options and callbacks read: rules and promises.
#[cfg(feature = "pacer")]
use {
    crate::json::as_object,
    crate::json_value::Value,
    crate::protocol::{rules_from, PacingRule},
    js_sys::{Array, Function, Promise},
    wasm_bindgen_futures::JsFuture,
};

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(catch, js_namespace = Object, js_name = keys)]
    fn object_keys(value: &JsValue) -> std::result::Result<js_sys::Array, JsValue>;
}

/// The latest time an argument may name: 10000-01-01T00:00:00Z. Far enough
/// for any real clock, and far from 2^53, where milliseconds stop adding up.
#[cfg(feature = "gateway-host")]
pub(crate) const MAX_TIME_MS: u64 = 253_402_300_800_000;

/// The largest integer a JS number holds exactly.
pub(crate) const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// `INVALID_INPUT` for a read that threw; what was thrown is the cause.
fn unreadable(path: &str, thrown: JsValue) -> Error {
    Error::invalid(format!(
        "{path} could not be read: a getter or Proxy trap threw (see cause)"
    ))
    .with_detail(Detail::Cause(keep(thrown)))
}

/// What a value is, for an error message; never calls the value's code.
fn kind(value: &JsValue) -> String {
    if value.is_null() {
        "null".to_owned()
    } else {
        value.js_typeof().as_string().unwrap_or_default()
    }
}

/// Where a read value came from, written out only when an error names it:
/// a successful read formats nothing.
#[derive(Clone, Copy)]
pub(crate) enum Path<'a> {
    /// A path as given: `options`, `body`.
    Given(&'a str),
    /// A field of an object: `options.maxWaitMs`.
    Field(&'a str, &'a str),
    /// The names of an object's fields.
    KeyOf(&'a str),
}

impl Path<'_> {
    pub fn text(self) -> String {
        match self {
            Path::Given(path) => path.to_owned(),
            Path::Field(object, key) => format!("{object}.{key}"),
            Path::KeyOf(object) => format!("a field name of {object}"),
        }
    }
}

fn wrong(path: Path, expected: &str, got: &JsValue) -> Error {
    Error::invalid(format!(
        "{} must be {expected}, got {}",
        path.text(),
        kind(got)
    ))
}

fn absent(value: &JsValue) -> bool {
    value.is_undefined() || value.is_null()
}

/// A string argument, refused unread past `max_bytes` (UTF-16 units can
/// only grow in UTF-8, so the length is checked before the copy).
#[cfg(any(feature = "wire-decoder", feature = "gateway-host"))]
pub(crate) fn string(value: &JsValue, path: &str, max_bytes: usize) -> Result<String> {
    string_at(value, Path::Given(path), max_bytes)
}

pub(crate) fn string_at(value: &JsValue, path: Path, max_bytes: usize) -> Result<String> {
    if !value.is_string() {
        return Err(wrong(path, "a string", value));
    }
    let units = value.unchecked_ref::<JsString>().length() as usize;
    if units > max_bytes {
        return Err(too_long(path, max_bytes));
    }
    let text = value.as_string().unwrap_or_default();
    if text.len() > max_bytes {
        return Err(too_long(path, max_bytes));
    }
    Ok(text)
}

fn too_long(path: Path, max_bytes: usize) -> Error {
    Error::invalid(format!(
        "{} is over {max_bytes} bytes; the limit is {max_bytes}",
        path.text()
    ))
}

/// An integer number in `0..=max`: no strings, no fractions, no NaN.
fn integer_at(value: &JsValue, path: Path, max: u64) -> Result<u64> {
    match value.as_f64() {
        Some(n) if n.fract() == 0.0 && n >= 0.0 && n <= max as f64 => Ok(n as u64),
        Some(_) => Err(Error::invalid(format!(
            "{} must be an integer from 0 to {max}, got {}",
            path.text(),
            number_words(value)
        ))),
        None => Err(wrong(path, "a number", value)),
    }
}

/// A number as JS writes it ("NaN", "1.5"), so no float formatter is
/// needed in the wasm.
fn number_words(value: &JsValue) -> String {
    value
        .unchecked_ref::<js_sys::Number>()
        .to_string_with_radix(10)
        .ok()
        .and_then(|s| s.as_string())
        .unwrap_or_default()
}

/// A time in milliseconds since the epoch, as a host clock gives it.
#[cfg(feature = "gateway-host")]
pub(crate) fn time(value: &JsValue, path: &str) -> Result<u64> {
    integer_at(value, Path::Given(path), MAX_TIME_MS)
}

/// Writes `value` as JSON text inside a catch (a throwing getter, a
/// Proxy trap, a cycle or a BigInt is `INVALID_INPUT`), refusing more than
/// a request body's worth before it is copied into the wasm. NaN and the
/// infinities become `null`, which the decoder refuses by name.
fn json_text(value: &JsValue, path: Path) -> Result<String> {
    let name = match path {
        Path::Given("") => Path::Given("the argument"),
        path => path,
    };
    let text = js_sys::JSON::stringify(value).map_err(|e| unreadable(&name.text(), e))?;
    if !text.is_string() {
        return Err(wrong(name, "JSON data", value));
    }
    string_at(&text.into(), path, limits::MAX_BODY_BYTES)
}

#[cfg(feature = "governor")]
/// `value` as a JSON value; `undefined`, functions and symbols are refused.
pub(crate) fn json(value: &JsValue, path: &str) -> Result<Value> {
    json_at(value, Path::Given(path))
}

#[cfg(feature = "pacer")]
fn json_at(value: &JsValue, path: Path) -> Result<Value> {
    let text = json_text(value, path)?;
    Ok(crate::json_parse::parse(text.as_bytes()).unwrap_or(Value::Null))
}

#[cfg(any(feature = "governor", feature = "gateway-host"))]
/// Reads and validates one protocol message (a wire request, a grant).
pub(crate) fn message<M: crate::json::Decode>(value: &JsValue) -> Result<M> {
    crate::protocol::decode(json_text(value, Path::Given(""))?.as_bytes())
}

/// An object argument whose fields are read one at a time, by name.
pub(crate) struct ObjectArg {
    value: JsValue,
    /// Every object argument's name is written in the bindings, so it is
    /// kept as it is there rather than copied.
    path: &'static str,
}

impl ObjectArg {
    /// `value` as an object; `path` names it in errors. (An array passes
    /// here; `only` then refuses its items as unknown fields.)
    pub fn new(value: &JsValue, path: &'static str) -> Result<ObjectArg> {
        if !value.is_object() {
            return Err(wrong(Path::Given(path), "an object", value));
        }
        Ok(ObjectArg {
            value: value.clone(),
            path,
        })
    }

    /// `None` for `undefined` or `null`.
    pub fn optional(value: &JsValue, path: &'static str) -> Result<Option<ObjectArg>> {
        if absent(value) {
            Ok(None)
        } else {
            ObjectArg::new(value, path).map(Some)
        }
    }

    pub fn name(&self, key: &str) -> String {
        self.field(key).text()
    }

    pub fn field<'a>(&'a self, key: &'a str) -> Path<'a> {
        Path::Field(self.path, key)
    }

    /// Refuses any field not in `known` (see [`unknown_field`]).
    pub fn only(&self, known: &[&str]) -> Result<()> {
        let keys = object_keys(&self.value).map_err(|e| unreadable(self.path, e))?;
        for key in keys.iter() {
            let key = string_at(&key, Path::KeyOf(self.path), 64)?;
            if !known.contains(&key.as_str()) {
                return Err(unknown_field(&self.name(&key), known));
            }
        }
        Ok(())
    }

    /// The field's value; `None` when it is `undefined` or `null`.
    pub fn get(&self, key: &str) -> Result<Option<JsValue>> {
        let value =
            Reflect::get(&self.value, &key.into()).map_err(|e| unreadable(&self.name(key), e))?;
        Ok((!absent(&value)).then_some(value))
    }

    pub fn opt_string(&self, key: &str, max_bytes: usize) -> Result<Option<String>> {
        self.get(key)?
            .map(|v| string_at(&v, self.field(key), max_bytes))
            .transpose()
    }

    #[cfg(feature = "pacer")]
    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>> {
        self.get(key)?
            .map(|v| {
                v.as_bool()
                    .ok_or_else(|| wrong(self.field(key), "a boolean", &v))
            })
            .transpose()
    }

    pub fn opt_integer(&self, key: &str, max: u64) -> Result<Option<u64>> {
        self.get(key)?
            .map(|v| integer_at(&v, self.field(key), max))
            .transpose()
    }

    #[cfg(any(feature = "governor", feature = "gateway-host"))]
    /// A required string field.
    pub fn string(&self, key: &str, max_bytes: usize) -> Result<String> {
        self.opt_string(key, max_bytes)?.ok_or_else(|| {
            Error::invalid(format!("{} must be a string, got nothing", self.name(key)))
        })
    }

    #[cfg(feature = "pacer")]
    pub fn opt_function(&self, key: &str) -> Result<Option<Function>> {
        self.get(key)?
            .map(|v| {
                if v.is_function() {
                    Ok(v.unchecked_into())
                } else {
                    Err(wrong(self.field(key), "a function", &v))
                }
            })
            .transpose()
    }

    #[cfg(feature = "governor")]
    /// A duration in milliseconds: a finite number >= 0, as given.
    pub fn opt_duration(&self, key: &str) -> Result<Option<f64>> {
        self.get(key)?
            .map(|v| match v.as_f64() {
                Some(ms) if ms.is_finite() && ms >= 0.0 => Ok(ms),
                _ => Err(wrong(self.field(key), "a finite number >= 0", &v)),
            })
            .transpose()
    }

    #[cfg(feature = "governor")]
    /// A measured duration (a latency), rounded to the nearest millisecond.
    pub fn opt_millis(&self, key: &str) -> Result<Option<crate::time::Millis>> {
        Ok(self
            .opt_duration(key)?
            .map(|ms| ms.round() as crate::time::Millis))
    }

    #[cfg(feature = "pacer")]
    /// A list of pacing rules, checked as the wire checks a request's, and
    /// refused if a rule has a field no rule has.
    pub fn rules(&self, key: &str) -> Result<Vec<PacingRule>> {
        let value = self.get(key)?.ok_or_else(|| {
            Error::invalid(format!("{} is required (a list of rules)", self.name(key)))
        })?;
        let list = json_at(&value, self.field(key))?;
        // The wire ignores fields it does not know, so that additions stay
        // compatible; a caller's own rules do not: a misspelt
        // `maxConcurency` would silently drop the concurrency bound.
        for (i, rule) in list.as_array().into_iter().flatten().enumerate() {
            let unknown = rule.as_object().and_then(|r| r.key_outside(&RULE_FIELDS));
            if let Some(field) = unknown {
                let name = format!("{}[{i}].{field}", self.name(key));
                return Err(unknown_field(&name, &RULE_FIELDS));
            }
        }
        let mut wrapped = crate::json_value::Map::new();
        wrapped.insert(key.to_owned(), list);
        let wrapped = Value::Object(wrapped);
        rules_from(&as_object(&wrapped, self.path)?, key)
    }

    #[cfg(feature = "governor")]
    /// A whole field read as a protocol value.
    pub fn message<M: crate::json::Decode>(&self, key: &str) -> Result<Option<M>> {
        self.get(key)?.map(|v| message(&v)).transpose()
    }
}

/// A field no object of its kind has: a misspelt name would otherwise
/// silently not apply.
fn unknown_field(name: &str, known: &[&str]) -> Error {
    Error::invalid(format!(
        "{name} is not a known field; known here: {}",
        crate::json::joined(known, ", ")
    ))
}

#[cfg(feature = "pacer")]
/// The fields of a pacing rule a caller may write.
const RULE_FIELDS: [&str; 4] = [
    "requestsPerWindow",
    "windowMs",
    "maxConcurrency",
    "adaptiveMaxRps",
];

#[cfg(feature = "pacer")]
/// Awaits whatever a caller's callback returned: a value, a promise or a
/// thenable. `Promise.all` hands back a fresh promise and turns a hostile
/// `then` or `constructor` into its rejection, where awaiting the value
/// itself would call them from inside the wasm.
pub(crate) async fn settle(value: JsValue) -> std::result::Result<JsValue, JsValue> {
    let all = JsFuture::from(Promise::all(&Array::of1(&value))).await?;
    Reflect::get_u32(&all, 0)
}
