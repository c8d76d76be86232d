//! What the rate-state classes read from JS: their options, and the one
//! bucket shape every method takes (`{ bucketId, rateScopeToken? }` plus
//! the method's own fields), each read by the typed reader.

use std::rc::Rc;

use js_sys::{Function, Reflect};
use wasm_bindgen::prelude::*;

use super::reader::{string_at, ObjectArg, Path, MAX_SAFE_INTEGER};
use super::runtime::JsAbortSignal;
use crate::client::{PacerOptions, PermitRequest};
use crate::error::{Error, Result};
use crate::governor::QuotaHeaders;
use crate::protocol::{limits, PacingRule};
use crate::rt::AbortSignal;

#[wasm_bindgen(typescript_custom_section)]
const TS_RATE_INPUT: &'static str = r#"
/** How the classes that talk to a gateway reach it: what `fetchPort`, `gatewayPort` and `coreTransport` return. */
import type { GatewayTransport } from "./glue/fetch-port.js";
export interface PacingRuleInit {
  requestsPerWindow: number;
  windowMs: number;
  maxConcurrency?: number;
  adaptiveMaxRps?: number;
}
export interface PacerOptions {
  /** The gateway's horizon: a block never asks for more than this much time's worth (default 1000). */
  blockHorizonMs?: number;
  /** A refusal asking to wait longer fails with PROVIDER_EXHAUSTED (default 120000). */
  maxWaitMs?: number;
  /** A released lease or an unused permit waits this long to go back with others in one call (default 20). */
  releaseLingerMs?: number;
  schedulerSchema?: string;
  /**
   * Keep concurrency leases and hand them between this state's callers without a gateway round
   * trip per call (default true). Calls that hold a slot about as long as the rule's spacing per
   * slot, `windowMs / floor(requestsPerWindow / maxConcurrency)`, or longer keep streamed slots;
   * shorter calls keep paced slots, each call also taking a permit of the block's. While a
   * provider's 429s cut the bucket's rate, every permit comes with a lease of its own. `false`:
   * always one lease per permit (a gateway round trip or two per call).
   */
  keepLeases?: boolean;
  /**
   * A Worker's `ctx.waitUntil.bind(ctx)`: every background flush this state starts (released
   * leases, returned times, refills) is registered with it, so the request's end does not cut
   * one off. Give it to a state made per request; a state kept across requests takes it from
   * each request's `createGovernor({ waitUntil })` or `permit.release()` instead.
   */
  waitUntil?: (promise: Promise<unknown>) => void;
}
export interface TryAcquireInput extends BucketRef {
  rules: PacingRuleInit[];
}
export interface AcquireInput extends TryAcquireInput {
  signal?: AbortSignal;
}
/** What `tryAcquire` returns when no permit is due now. */
export interface PermitRefusal {
  /** When asking again is worth it: the next cached permit's time, or the refill this call started. */
  retryAfterMs: number;
}
export interface PenalizeInput extends BucketRef {
  /** The wait the provider's 429 asked for (its Retry-After, in ms; 0 if none, and the 429 still cuts the rate); the gateway decides how long the bucket sits out (`cooldownUntilMs`). */
  cooldownMs: number;
  /**
   * When the refused call went out (`Date.now()` just before you sent it). The scheduler then
   * reads what the provider accepted in the second before that call, not before this report:
   * with slow answers, calls sent in between would make that second look fuller than the
   * provider allowed. A time in the future or more than a couple of seconds back is ignored.
   */
  sentAtMs?: number;
}
export interface ObserveHeadersInput extends BucketRef {
  /** The provider response's headers: a `Headers` or a plain record. */
  headers: Headers | Record<string, string>;
}
"#;

/// Reads a rate state's options; the `waitUntil` goes to its runtime.
pub(crate) fn pacer_options(options: &JsValue) -> Result<(PacerOptions, Option<Function>)> {
    let d = PacerOptions::default();
    let Some(o) = ObjectArg::optional(options, "options")? else {
        return Ok((d, None));
    };
    o.only(&[
        "blockHorizonMs",
        "maxWaitMs",
        "releaseLingerMs",
        "schedulerSchema",
        "keepLeases",
        "waitUntil",
    ])?;
    let millis = |key: &str| o.opt_integer(key, MAX_SAFE_INTEGER);
    let options = PacerOptions {
        block_horizon_ms: millis("blockHorizonMs")?.unwrap_or(d.block_horizon_ms),
        max_wait_ms: millis("maxWaitMs")?.unwrap_or(d.max_wait_ms),
        release_linger_ms: millis("releaseLingerMs")?.unwrap_or(d.release_linger_ms),
        scheduler_schema: o
            .opt_string("schedulerSchema", limits::MAX_ID_BYTES)?
            .or(d.scheduler_schema),
        keep_leases: o.opt_bool("keepLeases")?.unwrap_or(d.keep_leases),
    };
    Ok((options, o.opt_function("waitUntil")?))
}

/// A bucket and its scope token, as every rate-state method names them.
pub(crate) struct BucketRef {
    pub bucket_id: String,
    pub rate_scope_token: Option<String>,
}

const BUCKET_FIELDS: [&str; 2] = ["bucketId", "rateScopeToken"];

impl BucketRef {
    /// Reads `{bucketId, rateScopeToken?, ...extra}`; any other field is
    /// refused by name. A blank token is none, as on the wire.
    pub fn read(o: &ObjectArg, extra: &[&str]) -> Result<BucketRef> {
        let mut known = BUCKET_FIELDS.to_vec();
        known.extend_from_slice(extra);
        o.only(&known)?;
        BucketRef::from_values(
            o.get("bucketId")?,
            o.get("rateScopeToken")?,
            o.field("bucketId"),
            o.field("rateScopeToken"),
        )
    }

    /// The two fields' values as read (`None`: undefined or null).
    pub fn from_values(
        bucket_id: Option<JsValue>,
        token: Option<JsValue>,
        id_path: Path,
        token_path: Path,
    ) -> Result<BucketRef> {
        let bucket_id = bucket_id
            .map(|v| string_at(&v, id_path, limits::MAX_ID_BYTES))
            .transpose()?
            .filter(|id| !id.is_empty());
        let Some(bucket_id) = bucket_id else {
            return Err(Error::invalid(
                id_path.text() + " must be a non-empty string",
            ));
        };
        let rate_scope_token = token
            .map(|t| string_at(&t, token_path, limits::MAX_TOKEN_BYTES))
            .transpose()?
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty());
        Ok(BucketRef {
            bucket_id,
            rate_scope_token,
        })
    }
}

/// `acquire`'s input: where, under which rules, until which signal.
pub(crate) struct AcquireInput {
    pub bucket: Rc<BucketRef>,
    pub rules: Rc<[PacingRule]>,
    pub signal: Option<JsAbortSignal>,
}

impl AcquireInput {
    pub fn request<'a>(&'a self, signal: Option<&'a AbortSignal>) -> PermitRequest<'a> {
        PermitRequest {
            bucket_id: &self.bucket.bucket_id,
            rate_scope_token: self.bucket.rate_scope_token.as_deref(),
            rules: &self.rules,
            signal,
        }
    }
}

pub(crate) fn acquire_input(input: &JsValue) -> Result<AcquireInput> {
    let o = ObjectArg::new(input, "input")?;
    let bucket = BucketRef::read(&o, &["rules", "signal"])?;
    Ok(AcquireInput {
        bucket: Rc::new(bucket),
        rules: o.rules("rules")?.into(),
        signal: JsAbortSignal::read(o.get("signal")?, "input.signal")?,
    })
}

/// `tryAcquire`'s input: `acquire`'s without a signal (it never waits).
pub(crate) fn try_acquire_input(input: &JsValue) -> Result<AcquireInput> {
    let o = ObjectArg::new(input, "input")?;
    let bucket = BucketRef::read(&o, &["rules"])?;
    Ok(AcquireInput {
        bucket: Rc::new(bucket),
        rules: o.rules("rules")?.into(),
        signal: None,
    })
}

// The message below writes the most out in full.
const _: () = assert!(limits::MAX_COOLDOWN_MS == 86_400_000);

/// A 429 report: the bucket, the provider's wait, and when the refused
/// call went out, if given.
pub(crate) fn penalize_input(input: &JsValue) -> Result<(BucketRef, u64, Option<u64>)> {
    let o = ObjectArg::new(input, "input")?;
    let bucket = BucketRef::read(&o, &["cooldownMs", "sentAtMs"])?;
    // 0 is a 429 that asked for no wait: it still cuts the rate.
    let Some(cooldown_ms) = o.opt_integer("cooldownMs", limits::MAX_COOLDOWN_MS)? else {
        return Err(Error::invalid(
            "input.cooldownMs is required: an integer from 0 to 86400000 (ms)",
        ));
    };
    let sent_at = o.opt_integer("sentAtMs", MAX_SAFE_INTEGER)?;
    Ok((bucket, cooldown_ms, sent_at))
}

pub(crate) fn observe_success_input(input: &JsValue) -> Result<BucketRef> {
    BucketRef::read(&ObjectArg::new(input, "input")?, &[])
}

pub(crate) fn observe_headers_input(input: &JsValue) -> Result<(BucketRef, QuotaHeaders)> {
    let o = ObjectArg::new(input, "input")?;
    let bucket = BucketRef::read(&o, &["headers"])?;
    let headers = o
        .get("headers")?
        .filter(JsValue::is_object)
        .ok_or_else(|| {
            Error::invalid("input.headers must be a Headers object or a record of strings")
        })?;
    Ok((
        bucket,
        QuotaHeaders::from_lookup(|name| header_of(&headers, name)),
    ))
}

/// A header of a `Headers`-like object (its `get`), or of a plain record
/// (any key that matches without regard to case). A getter or `get` that
/// throws, or a value that is no string, reads as absent.
pub(crate) fn header_of(headers: &JsValue, name: &str) -> Option<String> {
    let get = Reflect::get(headers, &JsValue::from_str("get")).ok()?;
    if get.is_function() {
        return get
            .unchecked_into::<Function>()
            .call1(headers, &JsValue::from_str(name))
            .ok()?
            .as_string();
    }
    let keys = Reflect::own_keys(headers).ok()?;
    let key = keys
        .iter()
        .find(|k| k.as_string().is_some_and(|k| k.eq_ignore_ascii_case(name)))?;
    Reflect::get(headers, &key).ok()?.as_string()
}
