//! The `Governor` class: one play run's slots, pacing, budgets and lineage
//! over the core's, with `callTool` over any provider call that returns a
//! `Response`. (`createGovernor` reads its options in `governor_options`.)

use js_sys::{Function, Promise};
use wasm_bindgen::prelude::*;

use super::error::budget_kind;
use super::js::{promise, rejected, to_js};
use super::leases::{JsToolLease, JsWorkLease};
use super::rate_input::header_of;
use super::reader::{integer, settle, string, ObjectArg};
use super::runtime::{AbortBridge, JsAbortSignal, JsRuntime};
use crate::error::{Error, Result};
use crate::governor::{CallError, CallOptions, Governor, ProviderResponse, QuotaHeaders};
use crate::protocol::limits::MAX_ID_BYTES;

#[wasm_bindgen(typescript_custom_section)]
const TS_GOVERNOR: &'static str = r#"
export interface ForkChildInput { childPlayName: string; childRunId: string }
/** What a provider call answers: a `Response`, or anything with a `status` and `headers.get`. */
export interface ProviderAnswer { status: number; headers?: { get(name: string): string | null } }
export interface CallToolOptions { retrySafe?: boolean; maxAttempts?: number; signal?: AbortSignal }
export interface Governor {
  /**
   * One governed provider call: `call(attempt)` makes it and returns (a promise of) a `Response`
   * or any `ProviderAnswer`. 429s are reported and retried; 5xx and transport failures only for a
   * `retrySafe` call. Resolves with the last answer, typed as `call` returns it; a transport
   * failure rejects with what `call` threw.
   */
  callTool<T extends ProviderAnswer>(
    toolId: string,
    call: (attempt: number) => Promise<T> | T,
    options?: CallToolOptions,
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

/// Reads `{ signal? }` (and, for `callTool`, its other `known` options):
/// a signal that is not an `AbortSignal` is refused before anything waits.
fn signal_of(options: &JsValue, known: &[&str]) -> Result<Option<JsAbortSignal>> {
    let Some(o) = ObjectArg::optional(options, "options")? else {
        return Ok(None);
    };
    o.only(known)?;
    JsAbortSignal::read(o.get("signal")?, "options.signal")
}

fn tool_arg(tool_id: &JsValue) -> Result<String> {
    string(tool_id, "toolId", MAX_ID_BYTES)
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
        #[wasm_bindgen(js_name = toolId, unchecked_param_type = "string")] tool_id: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "{ signal?: AbortSignal }")]
        options: JsValue,
    ) -> Promise {
        let (tool_id, signal) = match (tool_arg(&tool_id), signal_of(&options, &["signal"])) {
            (Ok(tool_id), Ok(signal)) => (tool_id, signal),
            (Err(e), _) | (_, Err(e)) => return rejected(e),
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
        let signal = match signal_of(&options, &["signal"]) {
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
        #[wasm_bindgen(unchecked_param_type = "BudgetKind")] kind: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] amount: JsValue,
    ) -> Promise {
        let g = self.inner.clone();
        promise(async move {
            let kind = budget_kind(&string(&kind, "kind", 32)?)?;
            // Zero is nothing to charge, as in the TypeScript runtime; a
            // negative amount would un-spend a budget, so it is refused.
            let amount = if amount.is_undefined() {
                1
            } else {
                integer(&amount, "amount", u32::MAX.into())?
            };
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
            to_js(&g.fork_child(&name, &run).await?)
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

    /// A provider's 429 seen outside `callTool`: its `Retry-After` (ms)
    /// cools the bucket the tool's calls go to.
    #[wasm_bindgen(js_name = reportProviderBackpressure, unchecked_return_type = "Promise<void>")]
    pub fn report_provider_backpressure(
        &self,
        #[wasm_bindgen(
            unchecked_param_type = "{ provider: string; toolId?: string; retryAfterMs: number }"
        )]
        input: JsValue,
    ) -> Promise {
        let read = || -> Result<_> {
            let o = ObjectArg::new(&input, "input")?;
            o.only(&["provider", "toolId", "retryAfterMs"])?;
            // Rounded up: a wait the provider asked for is never cut short.
            let retry_after = o
                .opt_duration("retryAfterMs")?
                .ok_or_else(|| Error::invalid("input.retryAfterMs is required (ms)"))?
                .ceil() as u64;
            Ok((
                o.string("provider", MAX_ID_BYTES)?,
                o.opt_string("toolId", MAX_ID_BYTES)?,
                retry_after,
            ))
        };
        let (provider, tool, retry_after) = match read() {
            Ok(read) => read,
            Err(e) => return rejected(e),
        };
        let g = self.inner.clone();
        promise(async move {
            g.report_provider_backpressure(&provider, tool.as_deref(), retry_after)
                .await?;
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
        let o = ObjectArg::new(&input, "input")?;
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
        let o = ObjectArg::new(&input, "input")?;
        o.only(&["toolId", "latencyMs"])?;
        let tool = o.string("toolId", MAX_ID_BYTES)?;
        self.inner
            .observe_tool_success(&tool, o.opt_millis("latencyMs")?);
        Ok(())
    }

    #[wasm_bindgen(js_name = suggestedParallelism, unchecked_return_type = "Promise<number>")]
    pub fn suggested_parallelism(
        &self,
        #[wasm_bindgen(js_name = toolId, unchecked_param_type = "string")] tool_id: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] fallback: JsValue,
    ) -> Promise {
        let g = self.inner.clone();
        promise(async move {
            let tool_id = tool_arg(&tool_id)?;
            let fallback = integer(&fallback, "fallback", u32::MAX.into())?;
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
    pub fn call_tool(&self, tool_id: JsValue, call: JsValue, options: JsValue) -> Promise {
        let read = || -> Result<_> {
            let tool_id = tool_arg(&tool_id)?;
            if !call.is_function() {
                return Err(Error::invalid(
                    "call must be a function (attempt) => Response",
                ));
            }
            let known = ["retrySafe", "maxAttempts", "signal"];
            let signal = signal_of(&options, &known)?;
            let o = ObjectArg::optional(&options, "options")?;
            let (retry_safe, max_attempts) = match &o {
                Some(o) => (o.opt_bool("retrySafe")?, o.opt_integer("maxAttempts", 100)?),
                None => (None, None),
            };
            Ok((tool_id, signal, retry_safe, max_attempts))
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
