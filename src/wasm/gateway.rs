//! `GatewayCore` for JS: the scheduler a Durable Object or a Node server
//! hosts. Requests and responses cross as plain objects in the wire
//! protocol's shapes; every call takes an explicit `nowMs`.

use js_sys::Uint8Array;
use wasm_bindgen::prelude::*;

use super::js::{random_key, to_js};
use super::reader::{message, string, time, ObjectArg, MAX_SAFE_INTEGER};
use crate::client::LOCAL_WINDOW_GUARD_MS;
use crate::error::{Detail, Error};
use crate::gateway::{self, GatewayConfig};
use crate::protocol::{
    self, encode, limits, AcquireRequest, ChargeRequest, ErrorBody, PenalizeRequest, ReleaseRequest,
};

#[wasm_bindgen(typescript_custom_section)]
const TS_GATEWAY: &'static str = r#"
export interface GatewayCoreOptions {
  /** With a secret, every rate call must carry a token from mintRateScopeToken, every charge one from mintRunScopeToken. */
  secret?: string;
  /** How far ahead a dispatch time may be granted (default 1000). */
  horizonMs?: number;
  /** How long a concurrency lease lives past its dispatch time (default 60000). */
  leaseTtlMs?: number;
  /** The most buckets held; past it idle ones are forgotten, and with none idle a new bucket is refused with GATEWAY_UNAVAILABLE (default 10000). */
  maxBuckets?: number;
  /** The same for run ledgers, which are also forgotten a day after their last charge (default 10000). */
  maxRuns?: number;
  /** Schedule every rule window as if this much longer, absorbing timer and network jitter (default 25). Half of it is the dispatch tolerance: a permit sent later than that after its time is dead; the other half is for the call's way to the provider. */
  windowGuardMs?: number;
}
export interface GatewayHttpResponse { status: number; body: Uint8Array }
import type {
  AcquireRequest, AcquireResponse, ReleaseRequest, ReleaseResponse, PenalizeRequest,
  PenalizeResponse, ChargeRequest, ChargeResponse, PacingRule,
} from "./glue/fetch-port.js";
export interface BucketView {
  bucketId: string;
  rules: PacingRule[];
  configuredRequestsPerSecond?: number;
  effectiveRequestsPerSecond?: number;
  nextFreeAtMs: number;
  cooldownUntilMs?: number;
  liveLeases: number;
  maxConcurrency?: number;
  reportedSuccesses: number;
  serverNowMs: number;
}
"#;

/// The core is made at its first use, not by the constructor: its lease
/// key comes from `crypto.getRandomValues`, which workerd refuses at a
/// module's top level, and a Worker should be able to build its gateway
/// there, during startup. Until then `config` (already validated) waits.
#[wasm_bindgen(js_name = GatewayCore)]
pub struct JsGatewayCore {
    core: Option<gateway::GatewayCore>,
    config: GatewayConfig,
}

impl JsGatewayCore {
    fn ready(core: gateway::GatewayCore) -> Self {
        JsGatewayCore {
            config: core.config().clone(),
            core: Some(core),
        }
    }

    fn core(&mut self) -> Result<&mut gateway::GatewayCore, Error> {
        let core = match self.core.take() {
            Some(core) => core,
            None => gateway::GatewayCore::new(
                self.config.clone(),
                random_key("a GatewayCore's first call")?,
            )?,
        };
        Ok(self.core.insert(core))
    }
}

/// The longest request path (with its query) `handle` reads; a longer one
/// is answered 400 without being copied in.
const MAX_PATH_BYTES: usize = 8 * 1024;

/// The largest snapshot `restore` copies in: far above what a gateway with
/// bounded tables writes, far below what would exhaust the wasm memory.
const MAX_SNAPSHOT_BYTES: u32 = 64 * 1024 * 1024;

fn config_from(options: &JsValue) -> Result<GatewayConfig, Error> {
    let defaults = GatewayConfig::default();
    let Some(o) = ObjectArg::optional(options, "options")? else {
        return Ok(defaults);
    };
    o.only(&[
        "secret",
        "horizonMs",
        "leaseTtlMs",
        "maxBuckets",
        "maxRuns",
        "windowGuardMs",
    ])?;
    let millis = |key: &str| o.opt_integer(key, MAX_SAFE_INTEGER);
    Ok(GatewayConfig {
        secret: o
            .opt_string("secret", limits::MAX_TOKEN_BYTES)?
            .map(String::into_bytes),
        horizon_ms: millis("horizonMs")?.unwrap_or(defaults.horizon_ms),
        lease_ttl_ms: millis("leaseTtlMs")?.unwrap_or(defaults.lease_ttl_ms),
        max_buckets: o
            .opt_integer("maxBuckets", MAX_SAFE_INTEGER)?
            .map_or(defaults.max_buckets, |n| n as usize),
        max_runs: o
            .opt_integer("maxRuns", MAX_SAFE_INTEGER)?
            .map_or(defaults.max_runs, |n| n as usize),
        // A JS host's clients wake on JS timers, which fire a little late:
        // with no guard, a permit a millisecond late is dead.
        window_guard_ms: millis("windowGuardMs")?.unwrap_or(LOCAL_WINDOW_GUARD_MS),
        dispatch_tolerance_ms: None,
    })
}

#[wasm_bindgen(js_class = GatewayCore)]
impl JsGatewayCore {
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_optional_param_type = "GatewayCoreOptions")] options: JsValue,
    ) -> Result<JsGatewayCore, JsValue> {
        let config = config_from(&options)?;
        config.validate()?;
        Ok(JsGatewayCore { core: None, config })
    }

    #[wasm_bindgen(unchecked_return_type = "AcquireResponse")]
    pub fn acquire(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "AcquireRequest")] req: JsValue,
        #[wasm_bindgen(js_name = nowMs, unchecked_param_type = "number")] now_ms: JsValue,
    ) -> Result<JsValue, JsValue> {
        let (req, now): (AcquireRequest, _) = (message(&req)?, time(&now_ms, "nowMs")?);
        respond(self.core()?.acquire(&req, now))
    }

    #[wasm_bindgen(unchecked_return_type = "ReleaseResponse")]
    pub fn release(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "ReleaseRequest")] req: JsValue,
        #[wasm_bindgen(js_name = nowMs, unchecked_param_type = "number")] now_ms: JsValue,
    ) -> Result<JsValue, JsValue> {
        let (req, now): (ReleaseRequest, _) = (message(&req)?, time(&now_ms, "nowMs")?);
        respond(self.core()?.release(&req, now))
    }

    #[wasm_bindgen(unchecked_return_type = "PenalizeResponse")]
    pub fn penalize(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "PenalizeRequest")] req: JsValue,
        #[wasm_bindgen(js_name = nowMs, unchecked_param_type = "number")] now_ms: JsValue,
    ) -> Result<JsValue, JsValue> {
        let (req, now): (PenalizeRequest, _) = (message(&req)?, time(&now_ms, "nowMs")?);
        respond(self.core()?.penalize(&req, now))
    }

    #[wasm_bindgen(unchecked_return_type = "ChargeResponse")]
    pub fn charge(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "ChargeRequest")] req: JsValue,
        #[wasm_bindgen(js_name = nowMs, unchecked_param_type = "number")] now_ms: JsValue,
    ) -> Result<JsValue, JsValue> {
        let (req, now): (ChargeRequest, _) = (message(&req)?, time(&now_ms, "nowMs")?);
        respond(self.core()?.charge(&req, now))
    }

    /// The bucket's live state, or `null` if the gateway holds none.
    #[wasm_bindgen(unchecked_return_type = "BucketView | null")]
    pub fn bucket(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "BucketRef")] bucket: JsValue,
        #[wasm_bindgen(js_name = nowMs, unchecked_param_type = "number")] now_ms: JsValue,
    ) -> Result<JsValue, JsValue> {
        let o = ObjectArg::new(&bucket, "bucket")?;
        o.only(&["bucketId", "rateScopeToken"])?;
        let bucket_id = o.string("bucketId", limits::MAX_ID_BYTES)?;
        let token = o.opt_string("rateScopeToken", limits::MAX_TOKEN_BYTES)?;
        let now = time(&now_ms, "nowMs")?;
        match self.core()?.bucket(&bucket_id, token.as_deref(), now)? {
            Some(view) => to_js(&view),
            None => Ok(JsValue::NULL),
        }
    }

    /// Serves one HTTP request of the wire protocol; never throws for a bad
    /// request (that is a 4xx response), only for arguments of the wrong
    /// type. The body may be bytes or text; the answer's body is bytes. A
    /// body or path over its limit is answered without being copied into
    /// the wasm.
    #[wasm_bindgen(unchecked_return_type = "GatewayHttpResponse")]
    pub fn handle(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string")] method: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] path: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Uint8Array | string")] body: JsValue,
        #[wasm_bindgen(js_name = nowMs, unchecked_param_type = "number")] now_ms: JsValue,
    ) -> Result<JsValue, JsValue> {
        let method = string(&method, "method", 16)?;
        let now = time(&now_ms, "nowMs")?;
        if !path.is_string() {
            return Err(Error::invalid("path must be a string").into());
        }
        let bytes = body.dyn_ref::<Uint8Array>();
        if bytes.is_none() && !body.is_string() {
            return Err(Error::invalid("body must be a Uint8Array or a string").into());
        }
        let body = match bytes {
            Some(b) if b.length() as usize > limits::MAX_BODY_BYTES => {
                Err(Error::invalid(format!(
                    "body is {} bytes; the limit is {}",
                    b.length(),
                    limits::MAX_BODY_BYTES
                )))
            }
            Some(b) => Ok(b.to_vec()),
            None => string(&body, "body", limits::MAX_BODY_BYTES).map(String::into_bytes),
        };
        let (status, answer) = match (string(&path, "path", MAX_PATH_BYTES), body, self.core()) {
            (Ok(path), Ok(body), Ok(core)) => {
                let r = gateway::handle(core, &method, &path, &body, now);
                (r.status, r.body)
            }
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                (e.code.http_status(), encode(&ErrorBody::from(&e)))
            }
        };
        let out = js_sys::Object::new();
        let set = |key: &str, value: &JsValue| {
            // A plain data property on a fresh object cannot throw.
            let _ = js_sys::Reflect::set(&out, &JsValue::from_str(key), value);
        };
        set("status", &JsValue::from_f64(f64::from(status)));
        set("body", &Uint8Array::from(answer.as_bytes()).into());
        Ok(out.into())
    }

    pub fn snapshot(&mut self) -> Result<Vec<u8>, JsValue> {
        Ok(self.core()?.snapshot())
    }

    /// Every record of the state, `[key, bytes]`, to store under its key.
    #[wasm_bindgen(unchecked_return_type = "[string, Uint8Array][]")]
    pub fn records(&mut self) -> Result<js_sys::Array, JsValue> {
        Ok(self
            .core()?
            .records()
            .into_iter()
            .map(|(key, bytes)| record_pair(&key, Some(&bytes)))
            .collect())
    }

    /// The records changed since the last call, `[key, bytes]` to store or
    /// `[key, null]` to delete; empty when nothing changed.
    #[wasm_bindgen(
        js_name = takeChangedRecords,
        unchecked_return_type = "[string, Uint8Array | null][]"
    )]
    pub fn take_changed_records(&mut self) -> Result<js_sys::Array, JsValue> {
        Ok(self
            .core()?
            .take_changed_records()
            .into_iter()
            .map(|(key, bytes)| record_pair(&key, bytes.as_deref()))
            .collect())
    }

    /// A core continuing from stored records (`[key, bytes]` pairs in any
    /// order, as `records` and `takeChangedRecords` gave them; a `Map`
    /// works).
    #[wasm_bindgen(js_name = restoreRecords)]
    pub fn restore_records(
        #[wasm_bindgen(unchecked_param_type = "Iterable<[string, Uint8Array]>")] records: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "GatewayCoreOptions")] options: JsValue,
    ) -> Result<JsGatewayCore, JsValue> {
        let config = config_from(&options)?;
        // Only an iterable, walked one pair at a time: Array.from would also
        // take an array-like (one claiming a length of 2^31 exhausts the JS
        // heap), and would never return from an endless iterator.
        let not_iterable = || {
            Error::invalid(
                "records must be an iterable of [key, bytes] pairs, such as a Map or an array",
            )
        };
        let pairs = js_sys::try_iter(&records)
            .map_err(|e| not_iterable().with_detail(Detail::Cause(super::error::keep(e))))?
            .ok_or_else(not_iterable)?;
        // A gateway stores its meta record and one per bucket and run.
        let max_records = 1 + config.max_buckets + config.max_runs;
        let mut owned = Vec::new();
        let mut total: u64 = 0;
        for pair in pairs {
            let pair =
                pair.map_err(|e| not_iterable().with_detail(Detail::Cause(super::error::keep(e))))?;
            if owned.len() >= max_records {
                return Err(Error::invalid(format!(
                    "the records are more than {max_records}, the most a gateway with maxBuckets {} \
                     and maxRuns {} stores",
                    config.max_buckets, config.max_runs
                ))
                .into());
            }
            let key = js_sys::Reflect::get_u32(&pair, 0).unwrap_or(JsValue::UNDEFINED);
            let key = string(&key, "a record's key", 4 * limits::MAX_ID_BYTES)?;
            let bytes = js_sys::Reflect::get_u32(&pair, 1)
                .ok()
                .and_then(|b| b.dyn_into::<Uint8Array>().ok())
                .ok_or_else(|| Error::invalid(format!("record {key} must be a Uint8Array")))?;
            total += u64::from(bytes.length());
            if total > u64::from(MAX_SNAPSHOT_BYTES) {
                return Err(Error::invalid(format!(
                    "the records are over {MAX_SNAPSHOT_BYTES} bytes"
                ))
                .into());
            }
            owned.push((key, bytes.to_vec()));
        }
        let core = gateway::GatewayCore::restore_records(
            owned.iter().map(|(k, v)| (k.as_str(), v.as_slice())),
            config,
        )?;
        Ok(JsGatewayCore::ready(core))
    }

    pub fn restore(
        #[wasm_bindgen(unchecked_param_type = "Uint8Array")] bytes: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "GatewayCoreOptions")] options: JsValue,
    ) -> Result<JsGatewayCore, JsValue> {
        let bytes = bytes
            .dyn_into::<Uint8Array>()
            .map_err(|_| Error::invalid("the snapshot must be a Uint8Array"))?;
        if bytes.length() > MAX_SNAPSHOT_BYTES {
            return Err(Error::invalid(format!(
                "the snapshot is {} bytes; the limit is {MAX_SNAPSHOT_BYTES}",
                bytes.length()
            ))
            .into());
        }
        let core = gateway::GatewayCore::restore(&bytes.to_vec(), config_from(&options)?)?;
        Ok(JsGatewayCore::ready(core))
    }
}

fn record_pair(key: &str, bytes: Option<&[u8]>) -> JsValue {
    let value = bytes.map_or(JsValue::NULL, |b| Uint8Array::from(b).into());
    js_sys::Array::of2(&JsValue::from_str(key), &value).into()
}

fn respond<T: crate::json_write::Encode>(result: Result<T, Error>) -> Result<JsValue, JsValue> {
    to_js(&result?)
}

/// A token for the rate calls on the bucket `bucketId`, for a gateway with
/// `secret`; it must expire at most 7 days after it is used.
#[wasm_bindgen(js_name = mintRateScopeToken)]
pub fn mint_rate_scope_token(
    #[wasm_bindgen(
        unchecked_param_type = "{ secret: string; bucketId: string; expiresAtMs: number }"
    )]
    input: JsValue,
) -> Result<String, JsValue> {
    mint(gateway::mint_rate_scope_token, &input, "bucketId")
}

/// A token for the budget charges of the run `rootRunId`, for a gateway
/// with `secret`; it must expire at most 7 days after it is used.
#[wasm_bindgen(js_name = mintRunScopeToken)]
pub fn mint_run_scope_token(
    #[wasm_bindgen(
        unchecked_param_type = "{ secret: string; rootRunId: string; expiresAtMs: number }"
    )]
    input: JsValue,
) -> Result<String, JsValue> {
    mint(gateway::mint_run_scope_token, &input, "rootRunId")
}

/// Reads a token's fields (`secret`, the `id_name` field, `expiresAtMs`)
/// as hostile JS values, then mints it. Named fields, not three positional
/// arguments: a secret and an id swapped would mint a token for the wrong
/// scope without a word.
fn mint(
    minter: fn(&[u8], &str, u64) -> String,
    input: &JsValue,
    id_name: &str,
) -> Result<String, JsValue> {
    let o = ObjectArg::new(input, "input")?;
    o.only(&["secret", id_name, "expiresAtMs"])?;
    let secret = o.string("secret", limits::MAX_TOKEN_BYTES)?;
    let id = o.string(id_name, limits::MAX_ID_BYTES)?;
    let expires = o
        .get("expiresAtMs")?
        .ok_or_else(|| Error::invalid("input.expiresAtMs is required (ms since the epoch)"))?;
    Ok(minter(
        secret.as_bytes(),
        &id,
        time(&expires, "input.expiresAtMs")?,
    ))
}

/// The name of the gateway object that owns a request to `path`: its
/// `bucketId`, or `"run:"` and its `rootRunId`. Throws `INVALID_INPUT` for
/// an unknown path or a body without the id.
#[wasm_bindgen(js_name = gatewayObjectName)]
pub fn gateway_object_name(
    #[wasm_bindgen(unchecked_param_type = "string")] path: JsValue,
    #[wasm_bindgen(unchecked_param_type = "Uint8Array")] body: JsValue,
) -> std::result::Result<String, JsValue> {
    let path = super::reader::string(&path, "path", 256)?;
    let route = protocol::route(&path)
        .ok_or_else(|| Error::invalid(format!("no gateway endpoint at POST {path}")))?;
    let body = body
        .dyn_into::<Uint8Array>()
        .map_err(|_| Error::invalid("body must be a Uint8Array"))?;
    if body.length() as usize > limits::MAX_BODY_BYTES {
        return Err(Error::invalid(format!(
            "body is {} bytes; the limit is {}",
            body.length(),
            limits::MAX_BODY_BYTES
        ))
        .into());
    }
    Ok(protocol::owner_name(route, &body.to_vec())?)
}
