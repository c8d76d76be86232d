//! `GatewayCore` for JS: the scheduler a Durable Object or a Node server
//! hosts. Requests and responses cross as plain objects in the wire
//! protocol's shapes; every call takes an explicit `nowMs`.

use serde::Serialize;
use wasm_bindgen::prelude::*;

use super::js::{from_js, now_arg, random_key, to_js, Options};
use crate::error::Error;
use crate::gateway::{self, GatewayConfig};
use crate::protocol::{AcquireRequest, ChargeRequest, PenalizeRequest, ReleaseRequest};

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
  /** Schedule every rule window as if this much longer, absorbing network jitter (default 0). */
  windowGuardMs?: number;
}
export interface GatewayHttpResponse { status: number; body: string }
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

#[wasm_bindgen(js_name = GatewayCore)]
pub struct JsGatewayCore {
    core: gateway::GatewayCore,
}

fn config_from(options: &JsValue) -> Result<GatewayConfig, Error> {
    let options = Options::read(options)?;
    let defaults = GatewayConfig::default();
    Ok(GatewayConfig {
        secret: options.field::<String>("secret")?.map(String::into_bytes),
        horizon_ms: options.field("horizonMs")?.unwrap_or(defaults.horizon_ms),
        lease_ttl_ms: options
            .field("leaseTtlMs")?
            .unwrap_or(defaults.lease_ttl_ms),
        max_buckets: options.field("maxBuckets")?.unwrap_or(defaults.max_buckets),
        max_runs: options.field("maxRuns")?.unwrap_or(defaults.max_runs),
        window_guard_ms: options
            .field("windowGuardMs")?
            .unwrap_or(defaults.window_guard_ms),
    })
}

#[wasm_bindgen(js_class = GatewayCore)]
impl JsGatewayCore {
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_optional_param_type = "GatewayCoreOptions")] options: Option<
            js_sys::Object,
        >,
    ) -> Result<JsGatewayCore, JsValue> {
        let options: JsValue = options.map_or(JsValue::UNDEFINED, Into::into);
        let core = gateway::GatewayCore::new(config_from(&options)?, random_key())?;
        Ok(JsGatewayCore { core })
    }

    #[wasm_bindgen(unchecked_return_type = "AcquireResponse")]
    pub fn acquire(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "AcquireRequest")] req: JsValue,
        now_ms: f64,
    ) -> Result<JsValue, JsValue> {
        let req: AcquireRequest = from_js(&req)?;
        respond(self.core.acquire(&req, now_arg(now_ms)?))
    }

    #[wasm_bindgen(unchecked_return_type = "ReleaseResponse")]
    pub fn release(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "ReleaseRequest")] req: JsValue,
        now_ms: f64,
    ) -> Result<JsValue, JsValue> {
        let req: ReleaseRequest = from_js(&req)?;
        respond(self.core.release(&req, now_arg(now_ms)?))
    }

    #[wasm_bindgen(unchecked_return_type = "PenalizeResponse")]
    pub fn penalize(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "PenalizeRequest")] req: JsValue,
        now_ms: f64,
    ) -> Result<JsValue, JsValue> {
        let req: PenalizeRequest = from_js(&req)?;
        respond(self.core.penalize(&req, now_arg(now_ms)?))
    }

    #[wasm_bindgen(unchecked_return_type = "ChargeResponse")]
    pub fn charge(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "ChargeRequest")] req: JsValue,
        now_ms: f64,
    ) -> Result<JsValue, JsValue> {
        let req: ChargeRequest = from_js(&req)?;
        respond(self.core.charge(&req, now_arg(now_ms)?))
    }

    /// The bucket's live state, or `null` if the gateway holds none.
    #[wasm_bindgen(unchecked_return_type = "BucketView | null")]
    pub fn bucket(
        &mut self,
        bucket_id: &str,
        now_ms: f64,
        token: Option<String>,
    ) -> Result<JsValue, JsValue> {
        let view = self
            .core
            .bucket(bucket_id, token.as_deref(), now_arg(now_ms)?)?;
        match view {
            Some(view) => to_js(&view),
            None => Ok(JsValue::NULL),
        }
    }

    /// Serves one HTTP request of the wire protocol; never throws for a bad
    /// request (that is a 4xx response).
    #[wasm_bindgen(unchecked_return_type = "GatewayHttpResponse")]
    pub fn handle(
        &mut self,
        method: &str,
        path: &str,
        body: &str,
        now_ms: f64,
    ) -> Result<JsValue, JsValue> {
        let r = gateway::handle(
            &mut self.core,
            method,
            path,
            body.as_bytes(),
            now_arg(now_ms)?,
        );
        to_js(&HttpOut {
            status: r.status,
            body: r.body,
        })
    }

    pub fn snapshot(&self) -> Vec<u8> {
        self.core.snapshot()
    }

    pub fn restore(
        bytes: &[u8],
        #[wasm_bindgen(unchecked_optional_param_type = "GatewayCoreOptions")] options: Option<
            js_sys::Object,
        >,
    ) -> Result<JsGatewayCore, JsValue> {
        let options: JsValue = options.map_or(JsValue::UNDEFINED, Into::into);
        let core = gateway::GatewayCore::restore(bytes, config_from(&options)?)?;
        Ok(JsGatewayCore { core })
    }
}

#[derive(Serialize)]
struct HttpOut {
    status: u16,
    body: String,
}

fn respond<T: Serialize>(result: Result<T, Error>) -> Result<JsValue, JsValue> {
    to_js(&result?)
}

#[wasm_bindgen(js_name = mintRateScopeToken)]
pub fn mint_rate_scope_token(
    secret: &str,
    bucket_id: &str,
    expires_at_ms: f64,
) -> Result<String, JsValue> {
    Ok(gateway::mint_rate_scope_token(
        secret.as_bytes(),
        bucket_id,
        now_arg(expires_at_ms)?,
    ))
}

/// A token for the budget charges of the run `rootRunId`, for a gateway
/// with `secret`; it must expire at most 7 days after it is used.
#[wasm_bindgen(js_name = mintRunScopeToken)]
pub fn mint_run_scope_token(
    secret: &str,
    root_run_id: &str,
    expires_at_ms: f64,
) -> Result<String, JsValue> {
    Ok(gateway::mint_run_scope_token(
        secret.as_bytes(),
        root_run_id,
        now_arg(expires_at_ms)?,
    ))
}
