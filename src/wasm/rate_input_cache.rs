//! `acquire`'s input read once per shape: callers of a bucket pass the
//! same bucket and rules call after call, so the last ones read are kept
//! with the JS values they came from. A call whose values are the same
//! (`===`; for the rules, the same JSON text) takes them as read; any other
//! is read and checked in full. Every field is still read on every call,
//! inside a catch, and what is used is what that read returned.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Array, JsString, Reflect};
use wasm_bindgen::prelude::*;

use super::rate_input::{acquire_input, try_acquire_input, AcquireInput, BucketRef};
use super::runtime::JsAbortSignal;
use crate::error::Result;
use crate::protocol::{limits, PacingRule};

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(catch, js_namespace = Object, js_name = keys)]
    fn own_keys(value: &JsValue) -> std::result::Result<Array, JsValue>;
}

/// The field names as JS strings, made once: a name passed from Rust
/// would be decoded into a new JS string on every read.
struct Names {
    bucket_id: JsValue,
    rate_scope_token: JsValue,
    rules: JsValue,
    signal: JsValue,
}

struct Last {
    bucket_id: JsValue,
    token: JsValue,
    rules_text: JsValue,
    bucket: Rc<BucketRef>,
    rules: Rc<[PacingRule]>,
}

pub(crate) struct InputCache {
    names: Names,
    last: RefCell<Option<Last>>,
}

impl Default for InputCache {
    fn default() -> Self {
        InputCache {
            names: Names {
                bucket_id: JsValue::from_str("bucketId"),
                rate_scope_token: JsValue::from_str("rateScopeToken"),
                rules: JsValue::from_str("rules"),
                signal: JsValue::from_str("signal"),
            },
            last: RefCell::new(None),
        }
    }
}

/// The values of one read of the input's fields.
struct Read {
    bucket_id: JsValue,
    token: JsValue,
    rules_text: JsValue,
    signal: JsValue,
}

impl InputCache {
    /// `acquire`'s input (`with_signal`) or `tryAcquire`'s.
    pub fn read(&self, input: &JsValue, with_signal: bool) -> Result<AcquireInput> {
        let Some(read) = self.read_fields(input, with_signal) else {
            // Not the plain shape (or a read threw): the full reader
            // names what is wrong.
            return if with_signal {
                acquire_input(input)
            } else {
                try_acquire_input(input)
            };
        };
        let absent = |v: &JsValue| (!v.is_undefined() && !v.is_null()).then(|| v.clone());
        let (bucket, rules) = self.bucket_and_rules(read.bucket_id, read.token, read.rules_text)?;
        let signal = match with_signal {
            true => JsAbortSignal::read(absent(&read.signal), "input.signal")?,
            false => None,
        };
        Ok(AcquireInput {
            bucket,
            rules,
            signal,
        })
    }

    /// The bucket and rules these values hold: the last ones read when
    /// they are the same values.
    fn bucket_and_rules(
        &self,
        bucket_id: JsValue,
        token: JsValue,
        rules_text: JsValue,
    ) -> Result<(Rc<BucketRef>, Rc<[PacingRule]>)> {
        if let Some(last) = &*self.last.borrow() {
            if bucket_id == last.bucket_id && token == last.token && rules_text == last.rules_text {
                return Ok((last.bucket.clone(), last.rules.clone()));
            }
        }
        let absent = |v: &JsValue| (!v.is_undefined() && !v.is_null()).then(|| v.clone());
        let bucket = Rc::new(BucketRef::from_values(
            absent(&bucket_id),
            absent(&token),
            "input.bucketId",
            "input.rateScopeToken",
        )?);
        let rules: Rc<[PacingRule]> = rules_from_text(&rules_text)?.into();
        *self.last.borrow_mut() = Some(Last {
            bucket_id,
            token,
            rules_text,
            bucket: bucket.clone(),
            rules: rules.clone(),
        });
        Ok((bucket, rules))
    }

    /// One read of each field, for an object with no field but the known
    /// ones and a `rules` that writes as JSON; `None` otherwise.
    fn read_fields(&self, input: &JsValue, with_signal: bool) -> Option<Read> {
        if !input.is_object() {
            return None;
        }
        let n = &self.names;
        let known = |key: &JsValue| {
            *key == n.bucket_id
                || *key == n.rate_scope_token
                || *key == n.rules
                || (with_signal && *key == n.signal)
        };
        if !own_keys(input).ok()?.iter().all(|key| known(&key)) {
            return None;
        }
        let get = |name: &JsValue| Reflect::get(input, name).ok();
        let bucket_id = get(&n.bucket_id)?;
        let token = get(&n.rate_scope_token)?;
        let rules = get(&n.rules)?;
        let signal = if with_signal {
            get(&n.signal)?
        } else {
            JsValue::UNDEFINED
        };
        if rules.is_undefined() || rules.is_null() {
            return None;
        }
        let rules_text = js_sys::JSON::stringify(&rules).ok()?;
        let units = rules_text.unchecked_ref::<JsString>().length() as usize;
        if !rules_text.is_string() || units > limits::MAX_BODY_BYTES {
            return None;
        }
        Some(Read {
            bucket_id,
            token,
            rules_text: rules_text.into(),
            signal,
        })
    }
}

/// The rules from their JSON text, checked as the wire checks a request's.
fn rules_from_text(text: &JsValue) -> Result<Vec<PacingRule>> {
    let text = text.as_string().unwrap_or_default();
    let value = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
    let mut wrapped = serde_json::Map::new();
    wrapped.insert("rules".to_owned(), value);
    let wrapped = serde_json::Value::Object(wrapped);
    crate::protocol::rules_from(&crate::json::as_object(&wrapped, "input")?, "rules")
}
