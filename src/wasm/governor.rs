//! The `Governor` class: one play run's slots, pacing, budgets and lineage
//! over the core's, with `callTool` over any provider call that returns a
//! `Response`. (`createGovernor` reads its options in `governor_options`.)

use js_sys::{Function, Promise};
use wasm_bindgen::prelude::*;

use super::error::budget_kind;
use super::js::{promise, rejected, to_js};
use super::leases::{JsToolLease, JsWorkLease};
use super::rate_input::header_of;
use super::reader::{settle, ObjectArg, MAX_SAFE_INTEGER};
use super::runtime::{AbortBridge, JsAbortSignal, JsRuntime};
use crate::error::{Error, Result};
use crate::governor::{CallError, CallOptions, Governor, ProviderResponse, QuotaHeaders};
use crate::protocol::limits::MAX_ID_BYTES;

#[wasm_bindgen(typescript_custom_section)]
const TS_GOVERNOR: &'static str = r#"
export interface ForkChildInput { childPlayName: string; childRunId: string }
/** What a provider call answers: a `Response`, or anything with a `status` and `headers.get`. */
export interface ProviderAnswer { status: number; headers?: { get(name: string): string | null } }
/** `callTool`'s options: the tool the call goes to, then how it is retried and cancelled. */
export interface CallToolOptions { toolId: string; retrySafe?: boolean; maxAttempts?: number; signal?: AbortSignal }
export interface Governor {
  /**
   * One governed provider call: `call(attempt)` makes it and returns (a promise of) a `Response`
   * or any `ProviderAnswer`. 429s are reported and retried; 5xx and transport failures only for a
   * `retrySafe` call. Resolves with the last answer, typed as `call` returns it; a transport
   * failure rejects with what `call` threw. The function to run comes first and the named fields
   * after it, as in a limiter's `schedule(fn, options)`.
   */
  callTool<T extends ProviderAnswer>(
    call: (attempt: number) => Promise<T> | T,
    options: CallToolOptions,
  ): Promise<T>;
}
"#;

/// One play run's governor: row and tool slots, pacing, budgets, lineage.
#[wasm_bindgen(js_name = Governor)]
pub struct JsGovernor {
    inner: Governor,
    runtime: JsRuntime,
}

impl JsGovernor {
    pub(crate) fn new(inner: Governor, runtime: JsRuntime) -> Self {
        JsGovernor { inner, runtime }
    }
}

/// Reads `{ signal? }`: a signal that is not an `AbortSignal` is refused
/// before anything waits.
fn signal_of(options: &JsValue) -> Result<Option<JsAbortSignal>> {
    let Some(o) = ObjectArg::optional(options, "options")? else {
        return Ok(None);
    };
    o.only(&["signal"])?;
    JsAbortSignal::read(o.get("signal")?, "options.signal")
}

/// A method's one object of named fields. Passing the tool id or budget
/// kind by itself (the TypeScript runtime's positional shape) is refused
/// with the shape to use instead.
fn input_of(value: &JsValue, shape: &str) -> Result<ObjectArg> {
    if value.is_string() {
        return Err(Error::invalid(format!(
            "input must be an object {shape}, got a string: every governor method takes its fields by name"
        )));
    }
    ObjectArg::new(value, "input")
}

/// A provider's answer: `status` must be an HTTP status (a missing one
/// would otherwise count as a success).
fn provider_answer(answer: JsValue) -> Result<ProviderResponse<JsValue>> {
    let o = ObjectArg::new(&answer, "the call's answer")?;
    let status = o
        .opt_integer("status", 599)?
        .filter(|s| *s >= 100)
        .ok_or_else(|| {
            Error::invalid("the call's answer must have a status from 100 to 599 (a Response has)")
        })?;
    let headers = o.get("headers")?.unwrap_or_default();
    Ok(ProviderResponse {
        status: status as u16,
        retry_after: header_of(&headers, "retry-after"),
        quota_headers: QuotaHeaders::from_lookup(|name| header_of(&headers, name)),
        body: answer,
    })
}

#[wasm_bindgen(js_class = Governor)]
impl JsGovernor {
    #[wasm_bindgen(js_name = acquireToolSlot, unchecked_return_type = "Promise<ToolLease>")]
    pub fn acquire_tool_slot(
        &self,
        #[wasm_bindgen(unchecked_param_type = "{ toolId: string; signal?: AbortSignal }")]
        input: JsValue,
    ) -> Promise {
        let read = || -> Result<_> {
            let o = input_of(&input, "{ toolId, signal? }")?;
            o.only(&["toolId", "signal"])?;
            let tool_id = o.string("toolId", MAX_ID_BYTES)?;
            Ok((
                tool_id,
                JsAbortSignal::read(o.get("signal")?, "input.signal")?,
            ))
        };
        let (tool_id, signal) = match read() {
            Ok(read) => read,
            Err(e) => return rejected(e),
        };
        let (g, runtime) = (self.inner.clone(), self.runtime.clone());
        promise(async move {
            let abort = AbortBridge::new(signal);
            let lease = g.acquire_tool_slot(&tool_id, abort.signal()).await?;
            Ok(JsToolLease::new(lease, runtime).into())
        })
    }

    #[wasm_bindgen(js_name = acquireRowSlot, unchecked_return_type = "Promise<WorkLease>")]
    pub fn acquire_row_slot(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "{ signal?: AbortSignal }")]
        options: JsValue,
    ) -> Promise {
        let signal = match signal_of(&options) {
            Ok(signal) => signal,
            Err(e) => return rejected(e),
        };
        let g = self.inner.clone();
        promise(async move {
            let abort = AbortBridge::new(signal);
            let slot = g.acquire_row_slot(abort.signal()).await?;
            Ok(JsWorkLease::new(slot).into())
        })
    }

    #[wasm_bindgen(js_name = chargeBudget, unchecked_return_type = "Promise<void>")]
    pub fn charge_budget(
        &self,
        #[wasm_bindgen(unchecked_param_type = "{ kind: BudgetKind; amount?: number }")]
        input: JsValue,
    ) -> Promise {
        let g = self.inner.clone();
        promise(async move {
            let o = input_of(&input, "{ kind, amount? }")?;
            o.only(&["kind", "amount"])?;
            let kind = budget_kind(&o.string("kind", 32)?)?;
            // Zero is nothing to charge, as in the TypeScript runtime; a
            // negative amount would un-spend a budget, so it is refused.
            let amount = o.opt_integer("amount", u32::MAX.into())?.unwrap_or(1);
            g.charge_budget(kind, amount).await?;
            Ok(JsValue::UNDEFINED)
        })
    }

    #[wasm_bindgen(js_name = forkChild, unchecked_return_type = "Promise<GovernanceSnapshot>")]
    pub fn fork_child(
        &self,
        #[wasm_bindgen(unchecked_param_type = "ForkChildInput")] input: JsValue,
    ) -> Promise {
        let g = self.inner.clone();
        promise(async move {
            let (name, run) = fork_input(&input)?;
            // Governor::fork_child's steps, without its future round them.
            let child = g.fork_inline_child(&name, &run).await?;
            to_js(&child.snapshot())
        })
    }

    /// Admits a child play that runs in this isolate and returns its
    /// governor, which shares this one's slots, pacer, budgets and
    /// `waitUntil`.
    #[wasm_bindgen(js_name = forkInlineChild, unchecked_return_type = "Promise<Governor>")]
    pub fn fork_inline_child(
        &self,
        #[wasm_bindgen(unchecked_param_type = "ForkChildInput")] input: JsValue,
    ) -> Promise {
        let (g, runtime) = (self.inner.clone(), self.runtime.clone());
        promise(async move {
            let (name, run) = fork_input(&input)?;
            let inner = g.fork_inline_child(&name, &run).await?;
            Ok(JsGovernor { inner, runtime }.into())
        })
    }

    #[wasm_bindgen(unchecked_return_type = "GovernanceSnapshot")]
    pub fn snapshot(&self) -> std::result::Result<JsValue, JsValue> {
        to_js(&self.inner.snapshot())
    }

    /// A provider's 429 seen outside `callTool`: the cooldown it asked for
    /// (its `Retry-After`, in ms) goes to the bucket the tool's calls go to.
    /// A 429 that asked for no wait (0) still cuts the bucket's rate. With
    /// `sentAtMs` (this isolate's `Date.now()` when the refused call went
    /// out) the gateway weighs the 429 against what the provider accepted
    /// before that call, not before the report, which with slow answers
    /// would count calls sent after it.
    #[wasm_bindgen(js_name = reportProviderBackpressure, unchecked_return_type = "Promise<void>")]
    pub fn report_provider_backpressure(
        &self,
        #[wasm_bindgen(
            unchecked_param_type = "{ provider: string; toolId?: string; cooldownMs: number; sentAtMs?: number }"
        )]
        input: JsValue,
    ) -> Promise {
        let g = self.inner.clone();
        // Read in the promise's work, as chargeBudget's input is: a closure
        // that read the fields first cost the client module more bytes
        // than the fields themselves.
        promise(async move {
            let o = input_of(&input, "{ provider, toolId?, cooldownMs, sentAtMs? }")?;
            o.only(&["provider", "toolId", "cooldownMs", "sentAtMs"])?;
            // Rounded up: a wait the provider asked for is never cut short.
            let cooldown = o
                .opt_duration("cooldownMs")?
                .ok_or_else(|| Error::invalid("input.cooldownMs is required (ms)"))?
                .ceil() as u64;
            let provider = o.string("provider", MAX_ID_BYTES)?;
            let tool = o.opt_string("toolId", MAX_ID_BYTES)?;
            let sent_at = o.opt_integer("sentAtMs", MAX_SAFE_INTEGER)?;
            // Governor::report_provider_backpressure's two steps, without
            // its future round the pacer's.
            let scope = g.feedback_scope(&provider, tool.as_deref());
            g.penalize(&scope, cooldown, sent_at).await?;
            Ok(JsValue::UNDEFINED)
        })
    }

    #[wasm_bindgen(js_name = observeProviderSuccess)]
    pub fn observe_provider_success(
        &self,
        #[wasm_bindgen(
            unchecked_param_type = "{ provider: string; toolId?: string; latencyMs?: number | null }"
        )]
        input: JsValue,
    ) -> std::result::Result<(), JsValue> {
        let o = input_of(&input, "{ provider, toolId?, latencyMs? }")?;
        o.only(&["provider", "toolId", "latencyMs"])?;
        let provider = o.string("provider", MAX_ID_BYTES)?;
        let tool = o.opt_string("toolId", MAX_ID_BYTES)?;
        let latency = o.opt_millis("latencyMs")?;
        self.inner
            .observe_provider_success(&provider, tool.as_deref(), latency);
        Ok(())
    }

    #[wasm_bindgen(js_name = observeToolSuccess)]
    pub fn observe_tool_success(
        &self,
        #[wasm_bindgen(unchecked_param_type = "{ toolId: string; latencyMs?: number | null }")]
        input: JsValue,
    ) -> std::result::Result<(), JsValue> {
        let o = input_of(&input, "{ toolId, latencyMs? }")?;
        o.only(&["toolId", "latencyMs"])?;
        let tool = o.string("toolId", MAX_ID_BYTES)?;
        self.inner
            .observe_tool_success(&tool, o.opt_millis("latencyMs")?);
        Ok(())
    }

    #[wasm_bindgen(js_name = suggestedParallelism, unchecked_return_type = "Promise<number>")]
    pub fn suggested_parallelism(
        &self,
        #[wasm_bindgen(unchecked_param_type = "{ toolId: string; fallback: number }")]
        input: JsValue,
    ) -> Promise {
        let g = self.inner.clone();
        promise(async move {
            let o = input_of(&input, "{ toolId, fallback }")?;
            o.only(&["toolId", "fallback"])?;
            let tool_id = o.string("toolId", MAX_ID_BYTES)?;
            let fallback = o
                .opt_integer("fallback", u32::MAX.into())?
                .ok_or_else(|| Error::invalid("input.fallback is required (a count)"))?;
            let n = g.suggested_parallelism(&tool_id, fallback as usize).await?;
            Ok(JsValue::from_f64(n as f64))
        })
    }

    /// Rows to run at once: `requested` clamped to `[1, maxRowConcurrency]`
    /// (a negative or zero request is 1), or the policy's default.
    #[wasm_bindgen(js_name = resolveRowConcurrency)]
    pub fn resolve_row_concurrency(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] requested: JsValue,
    ) -> std::result::Result<u32, JsValue> {
        let requested = if requested.is_undefined() || requested.is_null() {
            None
        } else {
            // Clamped here, before the cast, so -1 is 1 and not a wrapped
            // huge count; the float-to-int cast saturates.
            match requested.as_f64() {
                Some(n) if !n.is_nan() => Some(n.max(1.0) as usize),
                _ => return Err(Error::invalid("requested must be a number").into()),
            }
        };
        let rows = self.inner.resolve_row_concurrency(requested);
        Ok(u32::try_from(rows).unwrap_or(u32::MAX))
    }

    /// Typed by the `Governor` interface above (generic over the answer).
    #[wasm_bindgen(js_name = callTool, skip_typescript)]
    pub fn call_tool(&self, call: JsValue, options: JsValue) -> Promise {
        let read = || -> Result<_> {
            if !call.is_function() {
                return Err(Error::invalid(
                    "call must be a function (attempt) => Response; callTool takes (call, { toolId, retrySafe?, maxAttempts?, signal? })",
                ));
            }
            let o = ObjectArg::new(&options, "options")?;
            o.only(&["toolId", "retrySafe", "maxAttempts", "signal"])?;
            Ok((
                o.string("toolId", MAX_ID_BYTES)?,
                JsAbortSignal::read(o.get("signal")?, "options.signal")?,
                o.opt_bool("retrySafe")?,
                o.opt_integer("maxAttempts", 100)?,
            ))
        };
        let (tool_id, signal, retry_safe, max_attempts) = match read() {
            Ok(read) => read,
            Err(e) => return rejected(e),
        };
        let call: Function = call.unchecked_into();
        let g = self.inner.clone();
        promise(async move {
            let abort = AbortBridge::new(signal);
            let defaults = CallOptions::default();
            let call_options = CallOptions {
                retry_safe: retry_safe.unwrap_or(false),
                max_attempts: max_attempts.map_or(defaults.max_attempts, |n| n.max(1) as u32),
                signal: abort.signal(),
            };
            let outcome = g
                .call_tool(&tool_id, call_options, |attempt| {
                    let call = call.clone();
                    async move {
                        let returned = call.call1(&JsValue::NULL, &JsValue::from(attempt))?;
                        provider_answer(settle(returned).await?).map_err(JsValue::from)
                    }
                })
                .await;
            match outcome {
                Ok(response) => Ok(response.body),
                Err(CallError::Governor(e)) => Err(e.into()),
                Err(CallError::Transport(thrown)) => Err(thrown),
            }
        })
    }
}

/// `{childPlayName, childRunId}`, for forkChild and forkInlineChild.
fn fork_input(input: &JsValue) -> Result<(String, String)> {
    let o = ObjectArg::new(input, "input")?;
    o.only(&["childPlayName", "childRunId"])?;
    Ok((
        o.string("childPlayName", MAX_ID_BYTES)?,
        o.string("childRunId", MAX_ID_BYTES)?,
    ))
}
