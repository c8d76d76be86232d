//! `GatewayRateState` and `LocalRateState` for JS: promises of permits,
//! `AbortSignal`s honoured, and permits due now handed out synchronously.

use std::rc::Rc;

use js_sys::Function;
use wasm_bindgen::prelude::*;

use super::clock::JsClock;
use super::js::{promise, rejected, timers_allowed};
use super::permit::permit_value;
use super::port::JsPort;
use super::rate_input::{
    observe_headers_input, observe_success_input, pacer_options, penalize_input, AcquireInput,
    BucketRef,
};
use super::rate_input_cache::InputCache;
#[cfg(feature = "governor")]
use super::registry::Registration;
use super::runtime::{AbortBridge, JsRuntime};
use crate::client::{GatewayPort, GatewayRateState, NotYet};
use crate::rt::Runtime;
use crate::time::Clock;

/// In a module without `LocalRateState` (the client module), typings that
/// name it (a limiter's `state`) read as `GatewayRateState` alone.
#[cfg(not(feature = "local-rate-state"))]
#[wasm_bindgen(typescript_custom_section)]
const TS_NO_LOCAL_RATE_STATE: &'static str = r#"
/** Not in this module: paceline/client's rate states pace through a shared gateway (LocalRateState is in "paceline"). */
export type LocalRateState = never;
"#;

/// The block-leasing pacer against a shared gateway.
#[wasm_bindgen(js_name = GatewayRateState)]
pub struct JsGatewayRateState {
    pub(crate) inner: GatewayRateState,
    #[cfg(feature = "governor")]
    registration: Registration,
    inputs: InputCache,
}

/// The same contract with a scheduler in this isolate's memory.
#[cfg(feature = "local-rate-state")]
#[wasm_bindgen(js_name = LocalRateState)]
pub struct JsLocalRateState {
    pub(crate) inner: GatewayRateState,
    #[cfg(feature = "governor")]
    registration: Registration,
    inputs: InputCache,
}

fn runtime(wait_until: Option<Function>) -> Rc<dyn Runtime> {
    Rc::new(JsRuntime::new(wait_until))
}

/// The methods both rate-state classes share; only their constructors
/// differ (a shared gateway, or a scheduler in this isolate).
macro_rules! rate_state_methods {
    ($name:ident, $js:ident) => {
        #[wasm_bindgen(js_class = $js)]
        impl $name {
            /// How `createGovernor` finds this state: a token only this
            /// object hands out. The build takes this method off the class
            /// and keeps it module-private (see `registry`).
            #[cfg(feature = "governor")]
            #[wasm_bindgen(js_name = pacelineStateToken, skip_typescript)]
            pub fn state_token(&self) -> JsValue {
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
                match self.inputs.read(&input, true) {
                    Ok(input) => acquire_promise(&self.inner, input),
                    Err(e) => rejected(e),
                }
            }

            /// A permit due now, or a `PermitRefusal` saying when to ask
            /// again; never waits. With nothing cached it starts fetching
            /// more, so asking again then finds them. Throws
            /// `INVALID_INPUT` for a malformed input or where the host
            /// refuses timers (workerd's top level), and a refill's
            /// failure (e.g. `PROVIDER_EXHAUSTED`) once.
            #[wasm_bindgen(js_name = tryAcquire, unchecked_return_type = "Permit | PermitRefusal")]
            pub fn try_acquire(
                &self,
                #[wasm_bindgen(unchecked_param_type = "TryAcquireInput")] input: JsValue,
            ) -> Result<JsValue, JsValue> {
                let input = self.inputs.read(&input, false)?;
                // With nothing cached it starts a refill, which retries
                // and waits on timers.
                timers_allowed("tryAcquire")?;
                match self.inner.try_acquire(input.request(None))? {
                    Ok(permit) => Ok(permit_value(permit)),
                    Err(not_yet) => Ok(refusal(not_yet)),
                }
            }

            /// A provider's 429: drops the cached permits inside the
            /// cooldown, then tells the scheduler.
            #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
            pub fn penalize(
                &self,
                #[wasm_bindgen(unchecked_param_type = "PenalizeInput")] input: JsValue,
            ) -> js_sys::Promise {
                let (bucket, cooldown_ms, sent_at) = match penalize_input(&input) {
                    Ok(read) => read,
                    Err(e) => return rejected(e),
                };
                let pacer = self.inner.clone();
                promise(async move {
                    let token = bucket.rate_scope_token.as_deref();
                    pacer
                        .penalize(&bucket.bucket_id, token, cooldown_ms, sent_at)
                        .await?;
                    Ok(JsValue::UNDEFINED)
                })
            }

            /// A provider call that went through: counted toward the
            /// bucket's next acquire.
            #[wasm_bindgen(js_name = observeSuccess)]
            pub fn observe_success(
                &self,
                #[wasm_bindgen(unchecked_param_type = "BucketRef")] input: JsValue,
            ) -> Result<(), JsValue> {
                let bucket = observe_success_input(&input)?;
                self.inner.observe_success(&bucket.bucket_id);
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
            ) -> Result<(), JsValue> {
                let (
                    BucketRef {
                        bucket_id,
                        rate_scope_token,
                    },
                    headers,
                ) = observe_headers_input(&input)?;
                let now = JsClock.now_ms();
                if let Some(report) = headers.report(now) {
                    self.inner
                        .observe_quota(&bucket_id, rate_scope_token.as_deref(), report);
                }
                Ok(())
            }
        }

        impl $name {
            fn keep(inner: GatewayRateState) -> Self {
                $name {
                    #[cfg(feature = "governor")]
                    registration: Registration::rate(&inner),
                    inner,
                    inputs: InputCache::default(),
                }
            }
        }
    };
}

rate_state_methods!(JsGatewayRateState, GatewayRateState);
#[cfg(feature = "local-rate-state")]
rate_state_methods!(JsLocalRateState, LocalRateState);

#[wasm_bindgen(js_class = GatewayRateState)]
impl JsGatewayRateState {
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "GatewayTransport")] port: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "PacerOptions")] options: JsValue,
    ) -> Result<JsGatewayRateState, JsValue> {
        let port: Rc<dyn GatewayPort> = Rc::new(JsPort::new(port)?);
        let (options, wait_until) = pacer_options(&options)?;
        Ok(Self::keep(GatewayRateState::new(
            port,
            runtime(wait_until),
            options,
        )))
    }
}

#[cfg(feature = "local-rate-state")]
#[wasm_bindgen(js_class = LocalRateState)]
impl JsLocalRateState {
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_optional_param_type = "PacerOptions")] options: JsValue,
    ) -> Result<JsLocalRateState, JsValue> {
        let (options, wait_until) = pacer_options(&options)?;
        Ok(Self::keep(GatewayRateState::local(
            runtime(wait_until),
            options,
            local_seed(),
        )))
    }
}

/// The lease-id seed of a scheduler inside this isolate. Its ids never
/// leave its own state, so they need to be distinct, not unpredictable:
/// a count, not a random draw. That keeps the constructor free of
/// `crypto.getRandomValues`, which workerd refuses at a module's top
/// level, so a Worker can build its state there, during startup.
#[cfg(feature = "local-rate-state")]
fn local_seed() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static MADE: AtomicU64 = AtomicU64::new(0);
    MADE.fetch_add(1, Ordering::Relaxed)
}

/// A permit already due resolves at once, with no timer and no task; any
/// other waits in the pacer, on timers, so where the host refuses timers
/// it is refused at once. A signal that has aborted takes the waiting
/// path, which rejects it.
fn acquire_promise(pacer: &GatewayRateState, mut input: AcquireInput) -> js_sys::Promise {
    if input.signal.as_ref().is_none_or(|s| !s.is_aborted()) {
        match pacer.take_due(input.request(None)) {
            Ok(Some(permit)) => {
                return js_sys::Promise::resolve(&permit_value(permit));
            }
            Ok(None) => {}
            Err(e) => return rejected(e),
        }
    }
    if let Err(e) = timers_allowed("acquire") {
        return rejected(e);
    }
    let pacer = pacer.clone();
    promise(async move {
        let abort = AbortBridge::new(input.signal.take());
        let permit = pacer.acquire(input.request(abort.signal())).await?;
        Ok(permit_value(permit))
    })
}

/// `{ retryAfterMs }`: when a refused `tryAcquire` is worth asking again.
fn refusal(not_yet: NotYet) -> JsValue {
    let refusal = js_sys::Object::new();
    // Setting a data property on a fresh plain object cannot throw.
    let _ = js_sys::Reflect::set(
        &refusal,
        &JsValue::from_str("retryAfterMs"),
        &JsValue::from_f64(not_yet.retry_after_ms as f64),
    );
    refusal.into()
}
