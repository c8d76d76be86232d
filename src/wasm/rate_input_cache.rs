//! `acquire`'s input read once per shape: callers of a bucket pass the
//! same bucket and rules call after call, so the last ones read are kept.
//! Whether a call's input still holds them is checked in one JS function
//! (every property read from the wasm is a crossing of its own, and a
//! check made of a dozen crossings cost more than the pacer's work for a
//! permit). Anything that does not match, or a read that throws, goes to
//! the full reader, which names what is wrong.

use crate::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::prelude::*;

use super::rate_input::{acquire_input, try_acquire_input, AcquireInput, BucketRef};
use super::runtime::JsAbortSignal;
use crate::error::Result;
use crate::protocol::{encode, PacingRule};

// `remember` keeps what the full reader accepted, its rules as the wire
// writes them (so the comparison is with what the pacer uses, not with a
// second read of the caller's objects). `same` reads each field of the
// input once, inside a catch, and compares it with that: an own field the
// full reader would refuse, a field that changed, a rule that is no plain
// object, or a `toJSON` (the full reader writes rules as JSON) all answer
// `null`, "read it in full". Otherwise it answers the input's signal, or
// `undefined` for none; the signal is then checked as the full reader
// checks it. A rule's fields may come in any order: they mean the same
// rule.
#[wasm_bindgen(inline_js = r#"
export function remember(bucketId, token, rulesText) {
  const rules = JSON.parse(rulesText);
  return { bucketId, token, rules, counts: rules.map((r) => Object.keys(r).length) };
}
export function same(input, last, withSignal) {
  try {
    if (typeof input !== "object" || input === null) return null;
    for (const key of Object.keys(input)) {
      if (key !== "bucketId" && key !== "rateScopeToken" && key !== "rules" && !(withSignal && key === "signal")) {
        return null;
      }
    }
    if (input.bucketId !== last.bucketId) return null;
    const token = input.rateScopeToken;
    if (token === undefined || token === null ? last.token !== undefined : token !== last.token) return null;
    const rules = input.rules;
    if (!Array.isArray(rules) || rules.toJSON !== undefined || rules.length !== last.rules.length) return null;
    for (let i = 0; i < last.rules.length; i++) {
      const rule = rules[i];
      const was = last.rules[i];
      if (typeof rule !== "object" || rule === null || rule.toJSON !== undefined) return null;
      const keys = Object.keys(rule);
      if (keys.length !== last.counts[i]) return null;
      for (const key of keys) {
        if (!Object.hasOwn(was, key) || rule[key] !== was[key]) return null;
      }
    }
    if (!withSignal) return undefined;
    const signal = input.signal;
    return signal === null ? undefined : signal;
  } catch {
    return null;
  }
}
"#)]
extern "C" {
    fn remember(bucket_id: &str, token: Option<String>, rules_text: &str) -> JsValue;
    fn same(input: &JsValue, last: &JsValue, with_signal: bool) -> JsValue;
}

struct Last {
    /// What `remember` made of it.
    seen: JsValue,
    bucket: Rc<BucketRef>,
    rules: Rc<[PacingRule]>,
}

#[derive(Default)]
pub(crate) struct InputCache {
    last: RefCell<Option<Last>>,
}

impl InputCache {
    /// `acquire`'s input (`with_signal`) or `tryAcquire`'s.
    pub fn read(&self, input: &JsValue, with_signal: bool) -> Result<AcquireInput> {
        if let Some(last) = &*self.last.borrow() {
            let signal = same(input, &last.seen, with_signal);
            if !signal.is_null() {
                let signal = (!signal.is_undefined()).then_some(signal);
                return Ok(AcquireInput {
                    bucket: last.bucket.clone(),
                    rules: last.rules.clone(),
                    signal: JsAbortSignal::read(signal, "input.signal")?,
                });
            }
        }
        let read = match with_signal {
            true => acquire_input(input)?,
            false => try_acquire_input(input)?,
        };
        let bucket = &read.bucket;
        *self.last.borrow_mut() = Some(Last {
            seen: remember(
                &bucket.bucket_id,
                bucket.rate_scope_token.clone(),
                &encode(&*read.rules),
            ),
            bucket: read.bucket.clone(),
            rules: read.rules.clone(),
        });
        Ok(read)
    }
}
