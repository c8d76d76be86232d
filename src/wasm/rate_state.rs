//! `GatewayRateState` and `LocalRateState` for JS: promises of permits,
//! `AbortSignal`s honoured.

use std::rc::Rc;

use wasm_bindgen::prelude::*;

use super::js::{promise, random_seed, rejected};
use super::port::JsPort;
use super::reader::{message, string, ObjectArg, MAX_SAFE_INTEGER};
use super::registry::Registration;
use super::runtime::{AbortBridge, JsAbortSignal, JsRuntime};
use js_sys::{Function, Reflect};

use crate::client::{GatewayPort, GatewayRateState, PacerOptions, Permit, PermitRequest, Runtime};
use crate::error::{Error, Result};
use crate::governor::QuotaHeaders;
use crate::protocol::{limits, PenalizeRequest, PermitTarget};

#[wasm_bindgen(typescript_custom_section)]
const TS_PACER: &'static str = r#"
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
}
export interface AcquireInput {
  bucketId: string;
  rateScopeToken?: string | null;
  rules: PacingRuleInit[];
  signal?: AbortSignal;
}
export interface PenalizeInput {
  bucketId: string;
  rateScopeToken?: string | null;
  cooldownMs: number;
}
export interface ObserveHeadersInput {
  bucketId: string;
  rateScopeToken?: string | null;
  /** The provider response's headers: a `Headers` or a plain record. */
  headers: Headers | Record<string, string>;
}
export interface GatewayPortLike {
  acquire(request: unknown): Promise<unknown> | unknown;
  release(request: unknown): Promise<unknown> | unknown;
  penalize(request: unknown): Promise<unknown> | unknown;
  charge(request: unknown): Promise<unknown> | unknown;
  /** Optional: `POST /v1/rate/observe` (quota headers sent on their own). */
  observe?(request: unknown): Promise<unknown> | unknown;
}
"#;

pub(crate) fn pacer_options(options: &JsValue) -> Result<PacerOptions> {
    let d = PacerOptions::default();
    let Some(o) = ObjectArg::optional(options, "options")? else {
        return Ok(d);
    };
    o.only(&[
        "blockHorizonMs",
        "maxWaitMs",
        "releaseLingerMs",
        "schedulerSchema",
    ])?;
    let millis = |key: &str| o.opt_integer(key, MAX_SAFE_INTEGER);
    Ok(PacerOptions {
        block_horizon_ms: millis("blockHorizonMs")?.unwrap_or(d.block_horizon_ms),
        max_wait_ms: millis("maxWaitMs")?.unwrap_or(d.max_wait_ms),
        release_linger_ms: millis("releaseLingerMs")?.unwrap_or(d.release_linger_ms),
        scheduler_schema: o
            .opt_string("schedulerSchema", limits::MAX_ID_BYTES)?
            .or(d.scheduler_schema),
    })
}

/// Reads `{bucketId, rateScopeToken?, rules, signal?}`: the wire
/// validation for the first three, the `signal` checked to be one.
fn acquire_input(input: &JsValue) -> Result<(PermitTarget, Option<JsAbortSignal>)> {
    let o = ObjectArg::new(input, "input")?;
    o.only(&["bucketId", "rateScopeToken", "rules", "signal"])?;
    let signal = JsAbortSignal::read(o.get("signal")?, "input.signal")?;
    // The signal writes as `{}`, a field the decoder does not read.
    Ok((message(input)?, signal))
}

fn penalize_input(input: &JsValue) -> Result<PenalizeRequest> {
    let o = ObjectArg::new(input, "input")?;
    o.only(&["bucketId", "rateScopeToken", "cooldownMs"])?;
    message(input)
}

/// A permit to call a provider once. Call `release()` when the call is done
/// (it hands back the concurrency lease, if the rules have one).
#[wasm_bindgen(js_name = Permit)]
pub struct JsPermit {
    permit: Permit,
}

#[wasm_bindgen(js_class = Permit)]
impl JsPermit {
    /// Hands the lease back (idempotent). The promise settles when the
    /// gateway has it: in a Worker, pass it to `ctx.waitUntil` so the
    /// request outlives the batched release.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn release(&mut self) -> js_sys::Promise {
        let settled = self.permit.release_settled();
        promise(async move {
            settled.await;
            Ok(JsValue::UNDEFINED)
        })
    }

    #[wasm_bindgen(getter, js_name = leaseId)]
    pub fn lease_id(&self) -> Option<String> {
        self.permit.lease_id().map(str::to_owned)
    }
}

fn runtime() -> Rc<dyn Runtime> {
    Rc::new(JsRuntime)
}

/// The methods both rate-state classes share; only their constructors
/// differ (a shared gateway, or a scheduler in this isolate).
macro_rules! rate_state_class {
    ($(#[$doc:meta])* $name:ident, $js:ident) => {
        $(#[$doc])*
        #[wasm_bindgen(js_name = $js)]
        pub struct $name {
            pub(crate) inner: GatewayRateState,
            registration: Registration,
        }

        #[wasm_bindgen(js_class = $js)]
        impl $name {
            /// How `createGovernor` finds this state: a token only this
            /// object hands out.
            #[wasm_bindgen(getter, js_name = stateHandle, skip_typescript)]
            pub fn state_handle(&self) -> JsValue {
                self.registration.token()
            }

            /// Resolves with a `Permit` at its dispatch time; rejects with
            /// `ABORTED` if `signal` aborts first (handing back whatever it
            /// held).
            #[wasm_bindgen(unchecked_return_type = "Promise<Permit>")]
            pub fn acquire(
                &self,
                #[wasm_bindgen(unchecked_param_type = "AcquireInput")] input: JsValue,
            ) -> js_sys::Promise {
                match acquire_input(&input) {
                    Ok((target, signal)) => acquire_promise(self.inner.clone(), target, signal),
                    Err(e) => rejected(e),
                }
            }

            /// A provider's 429: drops the cached block, then tells the
            /// scheduler.
            #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
            pub fn penalize(
                &self,
                #[wasm_bindgen(unchecked_param_type = "PenalizeInput")] input: JsValue,
            ) -> js_sys::Promise {
                match penalize_input(&input) {
                    Ok(p) => penalize_promise(self.inner.clone(), p),
                    Err(e) => rejected(e),
                }
            }

            #[wasm_bindgen(js_name = observeSuccess)]
            pub fn observe_success(
                &self,
                #[wasm_bindgen(unchecked_param_type = "string")] bucket_id: JsValue,
            ) -> std::result::Result<(), JsValue> {
                let bucket_id = string(&bucket_id, "bucketId", limits::MAX_ID_BYTES)?;
                self.inner.observe_success(&bucket_id);
                Ok(())
            }

            /// A provider's answer to a call the host made itself: its
            /// quota headers (`X-RateLimit-*`, `RateLimit`,
            /// `RateLimit-Policy`) go to the bucket's scheduler. Throws
            /// `INVALID_INPUT` for a malformed input; headers that say
            /// nothing usable are ignored.
            #[wasm_bindgen(js_name = observeHeaders)]
            pub fn observe_headers(
                &self,
                #[wasm_bindgen(unchecked_param_type = "ObserveHeadersInput")] input: JsValue,
            ) -> std::result::Result<(), JsValue> {
                let (bucket_id, token, headers) = observe_headers_input(&input)?;
                let now = runtime().now_ms();
                if let Some(report) = headers.report(now) {
                    self.inner.observe_quota(&bucket_id, token.as_deref(), report);
                }
                Ok(())
            }
        }

        impl $name {
            fn keep(inner: GatewayRateState) -> Self {
                let registration = Registration::rate(&inner);
                $name { inner, registration }
            }
        }
    };
}

rate_state_class!(
    /// The block-leasing pacer against a shared gateway.
    JsGatewayRateState,
    GatewayRateState
);

rate_state_class!(
    /// The same contract with a scheduler in this isolate's memory.
    JsLocalRateState,
    LocalRateState
);

#[wasm_bindgen(js_class = GatewayRateState)]
impl JsGatewayRateState {
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "GatewayPortLike")] port: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "PacerOptions")] options: JsValue,
    ) -> std::result::Result<JsGatewayRateState, JsValue> {
        let port: Rc<dyn GatewayPort> = Rc::new(JsPort::new(port)?);
        Ok(Self::keep(GatewayRateState::new(
            port,
            runtime(),
            pacer_options(&options)?,
        )))
    }
}

#[wasm_bindgen(js_class = LocalRateState)]
impl JsLocalRateState {
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_optional_param_type = "PacerOptions")] options: JsValue,
    ) -> std::result::Result<JsLocalRateState, JsValue> {
        Ok(Self::keep(GatewayRateState::local(
            runtime(),
            pacer_options(&options)?,
            random_seed(),
        )))
    }
}

fn observe_headers_input(input: &JsValue) -> Result<(String, Option<String>, QuotaHeaders)> {
    let o = ObjectArg::new(input, "input")?;
    o.only(&["bucketId", "rateScopeToken", "headers"])?;
    let bucket_id = o
        .opt_string("bucketId", limits::MAX_ID_BYTES)?
        .ok_or_else(|| Error::invalid(format!("{} is required", o.name("bucketId"))))?;
    let token = o.opt_string("rateScopeToken", limits::MAX_TOKEN_BYTES)?;
    let headers = o
        .get("headers")?
        .filter(JsValue::is_object)
        .ok_or_else(|| Error::invalid("headers must be a Headers object or a record of strings"))?;
    Ok((
        bucket_id,
        token,
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

fn acquire_promise(
    pacer: GatewayRateState,
    target: PermitTarget,
    signal: Option<JsAbortSignal>,
) -> js_sys::Promise {
    promise(async move {
        let abort = AbortBridge::new(signal);
        let permit = pacer
            .acquire(PermitRequest {
                bucket_id: &target.bucket_id,
                rate_scope_token: target.rate_scope_token.as_deref(),
                rules: &target.rules,
                signal: abort.signal(),
            })
            .await?;
        Ok(JsPermit { permit }.into())
    })
}

fn penalize_promise(pacer: GatewayRateState, p: PenalizeRequest) -> js_sys::Promise {
    promise(async move {
        pacer
            .penalize(&p.bucket_id, p.rate_scope_token.as_deref(), p.cooldown_ms)
            .await?;
        Ok(JsValue::UNDEFINED)
    })
}
