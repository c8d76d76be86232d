//! `createGovernor` and the `Governor` class: the seeds' governor surface
//! over the core's, with JS callbacks for pacing and rate-scope resolution
//! and `callTool` over any provider call that returns a `Response`.

use std::rc::Rc;

use js_sys::{Function, Promise, Reflect};
use wasm_bindgen::prelude::*;

use super::error::foreign;
use super::governor_input::{fork_input, opt_latency, opt_string};
use super::js::{promise, rejected, to_js};
use super::rate_state::header_of;
use super::reader::{message as from_js, settle, string, ObjectArg};
use super::registry::{budget_state, rate_state};
use super::runtime::{AbortBridge, JsAbortSignal, JsRuntime};
use crate::client::{LocalBoxFuture, Runtime};
use crate::error::{Error, ErrorCode, Result};
use crate::governor::{
    Adapter, BudgetKind, CallError, CallOptions, GovernanceSnapshot, Governor, GovernorConfig,
    PacingDeclaration, PacingTable, PolicyOverrides, ProviderResponse, QuotaHeaders, RateScope,
    RunScope, ToolLatencies, ToolLease,
};
use crate::protocol::limits::{MAX_ID_BYTES, MAX_TOKEN_BYTES};

#[wasm_bindgen(typescript_custom_section)]
const TS_GOVERNOR: &'static str = r#"
export type BudgetKind = "playCall" | "toolCall" | "retry" | "descendant" | "waterfallStep";
/** A tool's provider and limits. A blank provider is none (the tool gets a bucket of its own); no rules is the policy's default pace. */
export interface DeclaredPacing { provider: string; rules?: PacingRuleInit[] }
/** The tool calls nothing rate-limited: it takes no permit at all. */
export interface UnpacedTool { unpaced: true }
/** `null` means nothing is known: the policy's default pace, in the tool's own bucket. */
export type PacingDeclaration = DeclaredPacing | UnpacedTool | null;
/** Without a `bucketId`, the org's bucket of the provider. */
export interface RateScopeInit { bucketId?: string | null; token?: string | null }
export interface GovernanceSnapshot {
  rootRunId: string;
  currentRunId: string;
  currentPlayId?: string;
  ancestryPlayIds: string[];
  depth: number;
  playCallCount: number;
  toolCallCount: number;
  retryCount: number;
  descendantCount: number;
  waterfallStepExecutions: number;
  parentChildCalls: Record<string, number>;
}
export interface GovernorPolicy {
  concurrency?: { defaultRowConcurrency?: number; maxRowConcurrency?: number; maxToolConcurrency?: number };
  pacing?: { defaultProviderRequestsPerSecond?: number; typicalToolCallMs?: number; suggestedMaxParallelism?: number };
  budgets?: {
    maxPlayCallCount?: number; maxToolCallCount?: number; maxRetryCount?: number; maxDescendants?: number;
    maxWaterfallStepExecutions?: number; maxChildPlayCallsPerParent?: number; maxDepth?: number;
  };
}
export interface CreateGovernorOptions {
  adapter: "esm_workers" | "cjs_node20";
  scope: { orgId: string; rootRunId: string };
  rateState: GatewayRateState | LocalRateState;
  budgetState?: GatewayBudgetState | LocalBudgetState;
  resolvePacing: (toolId: string) => Promise<PacingDeclaration> | PacingDeclaration;
  resolveRateScope?: (toolId: string, provider: string) => Promise<RateScopeInit | null> | RateScopeInit | null;
  /** Pacing the host knows better than any tool's declaration, by tool id. */
  builtinPacing?: Record<string, DeclaredPacing | UnpacedTool>;
  /** How long each tool's calls usually take (ms), for suggestedParallelism until its calls are seen. */
  toolLatencyMs?: Record<string, number>;
  /** The play this run executes, so a child calling it is a cycle. With `resume`, the snapshot's own. */
  playId?: string;
  resume?: GovernanceSnapshot;
  policy?: GovernorPolicy;
}
export interface ForkChildInput { childPlayName: string; childRunId: string }
export interface ProviderAnswer { status: number; headers?: { get(name: string): string | null } }
export interface CallToolOptions { retrySafe?: boolean; maxAttempts?: number; signal?: AbortSignal }
"#;

fn field(obj: &JsValue, key: &str) -> JsValue {
    Reflect::get(obj, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
}

fn present(v: JsValue) -> Option<JsValue> {
    (!v.is_undefined() && !v.is_null()).then_some(v)
}

fn callback(options: &JsValue, name: &str) -> Result<Option<Function>> {
    match present(field(options, name)) {
        None => Ok(None),
        Some(f) if f.is_function() => Ok(Some(f.unchecked_into())),
        Some(_) => Err(Error::invalid(format!("{name} must be a function"))),
    }
}

/// Calls a user callback and awaits what it returns; what it throws or
/// rejects with reaches the caller unchanged.
async fn invoke(f: &Function, args: &[JsValue]) -> Result<JsValue> {
    let returned = match args {
        [a] => f.call1(&JsValue::NULL, a),
        [a, b] => f.call2(&JsValue::NULL, a, b),
        _ => f.call0(&JsValue::NULL),
    }
    .map_err(|e| foreign(e, ErrorCode::InvalidInput))?;
    settle(returned)
        .await
        .map_err(|e| foreign(e, ErrorCode::InvalidInput))
}

fn config_from(options: &JsValue) -> Result<GovernorConfig> {
    let adapter = field(options, "adapter")
        .as_string()
        .and_then(|name| Adapter::from_name(&name))
        .ok_or_else(|| Error::invalid("adapter is required: \"esm_workers\" or \"cjs_node20\""))?;
    let scope = field(options, "scope");
    let (Some(org_id), Some(root_run_id)) = (
        field(&scope, "orgId").as_string(),
        field(&scope, "rootRunId").as_string(),
    ) else {
        return Err(Error::invalid(
            "scope is required: {orgId, rootRunId} (strings)",
        ));
    };
    let rate = present(field(options, "rateState"))
        .ok_or_else(|| Error::invalid("rateState is required"))?;
    let rate_state = rate_state(&rate, "rateState")?;
    let pacing_fn = callback(options, "resolvePacing")?.ok_or_else(|| {
        Error::invalid("resolvePacing is required: (toolId) => {provider, rules} | null")
    })?;
    let runtime: Rc<dyn Runtime> = Rc::new(JsRuntime);
    let mut config = GovernorConfig::new(
        adapter,
        RunScope {
            org_id,
            root_run_id,
        },
        rate_state,
        Box::new(
            move |tool_id: &str| -> LocalBoxFuture<'static, Result<PacingDeclaration>> {
                let (f, tool) = (pacing_fn.clone(), JsValue::from_str(tool_id));
                Box::pin(async move {
                    let answer = invoke(&f, &[tool]).await?;
                    match present(answer) {
                        None => Ok(PacingDeclaration::Undeclared),
                        Some(v) => from_js(&v),
                    }
                })
            },
        ),
        runtime,
    );
    if let Some(b) = present(field(options, "budgetState")) {
        config.budget_state = Some(budget_state(&b, "budgetState")?);
    }
    if let Some(scope_fn) = callback(options, "resolveRateScope")? {
        const ANSWER: &str = "resolveRateScope's answer";
        config.resolve_rate_scope = Some(Box::new(move |tool_id: &str, provider: &str| {
            let f = scope_fn.clone();
            let args = [JsValue::from_str(tool_id), JsValue::from_str(provider)];
            Box::pin(async move {
                let answer = invoke(&f, &args).await?;
                let Some(v) = present(answer) else {
                    return Ok(None);
                };
                // A scope without a bucketId is the org's bucket, as in the
                // TypeScript runtime; the pacing core reads blank that way.
                Ok(Some(RateScope {
                    bucket_id: opt_string(&v, "bucketId", MAX_ID_BYTES, ANSWER)?
                        .unwrap_or_default(),
                    token: opt_string(&v, "token", MAX_TOKEN_BYTES, ANSWER)?,
                }))
            })
        }));
    }
    if let Some(v) = present(field(options, "builtinPacing")) {
        config.builtin_pacing = from_js::<PacingTable>(&v)?.0;
    }
    if let Some(v) = present(field(options, "toolLatencyMs")) {
        config.tool_latency_ms = from_js::<ToolLatencies>(&v)?.0;
    }
    config.play_id = opt_string(options, "playId", MAX_ID_BYTES, "createGovernor's options")?;
    config.resume = present(field(options, "resume"))
        .map(|v| from_js::<GovernanceSnapshot>(&v))
        .transpose()?;
    config.policy = present(field(options, "policy"))
        .map(|v| from_js::<PolicyOverrides>(&v))
        .transpose()?
        .unwrap_or_default();
    Ok(config)
}

#[wasm_bindgen(js_name = createGovernor)]
pub fn create_governor(
    #[wasm_bindgen(unchecked_param_type = "CreateGovernorOptions")] options: JsValue,
) -> std::result::Result<JsGovernor, JsValue> {
    // A misspelt option would otherwise silently not apply.
    ObjectArg::new(&options, "options")?.only(&[
        "adapter",
        "scope",
        "rateState",
        "budgetState",
        "resolvePacing",
        "resolveRateScope",
        "resume",
        "policy",
        "builtinPacing",
        "toolLatencyMs",
        "playId",
    ])?;
    Ok(JsGovernor {
        inner: Governor::new(config_from(&options)?)?,
    })
}

/// One play run's governor: row and tool slots, pacing, budgets, lineage.
#[wasm_bindgen(js_name = Governor)]
pub struct JsGovernor {
    inner: Governor,
}

/// A cleared tool call: its provider permit and its tool slot. `release()`
/// when the call is done (idempotent).
#[wasm_bindgen(js_name = ToolLease)]
pub struct JsToolLease {
    lease: ToolLease,
}

#[wasm_bindgen(js_class = ToolLease)]
impl JsToolLease {
    /// Frees the slot at once (idempotent); the promise settles when the
    /// permit's lease is back at the gateway (`ctx.waitUntil` it).
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn release(&mut self) -> Promise {
        let settled = self.lease.release_settled();
        promise(async move {
            settled.await;
            Ok(JsValue::UNDEFINED)
        })
    }

    #[wasm_bindgen(getter)]
    pub fn provider(&self) -> Option<String> {
        self.lease.provider().map(str::to_owned)
    }
}

/// A map-row slot; `release()` when the row is done (idempotent).
#[wasm_bindgen(js_name = WorkLease)]
pub struct JsWorkLease {
    slot: crate::governor::SlotPermit,
}

#[wasm_bindgen(js_class = WorkLease)]
impl JsWorkLease {
    pub fn release(&mut self) {
        self.slot.release();
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

/// A tool id argument.
fn tool_arg(tool_id: &JsValue) -> Result<String> {
    string(tool_id, "toolId", crate::protocol::limits::MAX_ID_BYTES)
}

fn budget_kind(kind: &str) -> Result<BudgetKind> {
    Ok(match kind {
        "playCall" => BudgetKind::PlayCall,
        "toolCall" => BudgetKind::ToolCall,
        "retry" => BudgetKind::Retry,
        "descendant" => BudgetKind::Descendant,
        "waterfallStep" => BudgetKind::WaterfallStep,
        other => {
            return Err(Error::invalid(format!(
                "budget kind must be playCall, toolCall, retry, descendant or waterfallStep, got {other:?}"
            )))
        }
    })
}

#[wasm_bindgen(js_class = Governor)]
impl JsGovernor {
    #[wasm_bindgen(js_name = acquireToolSlot, unchecked_return_type = "Promise<ToolLease>")]
    pub fn acquire_tool_slot(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] tool_id: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "{ signal?: AbortSignal }")]
        options: JsValue,
    ) -> Promise {
        let (tool_id, signal) = match (tool_arg(&tool_id), signal_of(&options, &["signal"])) {
            (Ok(tool_id), Ok(signal)) => (tool_id, signal),
            (Err(e), _) | (_, Err(e)) => return rejected(e),
        };
        let g = self.inner.clone();
        promise(async move {
            let abort = AbortBridge::new(signal);
            let lease = g.acquire_tool_slot(&tool_id, abort.signal()).await?;
            Ok(JsToolLease { lease }.into())
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
            Ok(JsWorkLease { slot }.into())
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
            let kind = string(&kind, "kind", 32)?;
            let amount = if amount.is_undefined() {
                Some(1.0)
            } else {
                amount.as_f64()
            }
            .unwrap_or(f64::NAN);
            // Zero is nothing to charge, as in the TypeScript runtime; a
            // negative amount would un-spend a budget, so it is refused.
            if !(amount.is_finite() && amount >= 0.0 && amount.fract() == 0.0) {
                return Err(Error::invalid("amount must be an integer >= 0").into());
            }
            g.charge_budget(budget_kind(&kind)?, amount as u64).await?;
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
    /// governor, which shares this one's slots, pacer and budgets.
    #[wasm_bindgen(js_name = forkInlineChild, unchecked_return_type = "Promise<Governor>")]
    pub fn fork_inline_child(
        &self,
        #[wasm_bindgen(unchecked_param_type = "ForkChildInput")] input: JsValue,
    ) -> Promise {
        let g = self.inner.clone();
        promise(async move {
            let (name, run) = fork_input(&input)?;
            let inner = g.fork_inline_child(&name, &run).await?;
            Ok(JsGovernor { inner }.into())
        })
    }

    #[wasm_bindgen(unchecked_return_type = "GovernanceSnapshot")]
    pub fn snapshot(&self) -> std::result::Result<JsValue, JsValue> {
        to_js(&self.inner.snapshot())
    }

    #[wasm_bindgen(js_name = reportProviderBackpressure, unchecked_return_type = "Promise<void>")]
    pub fn report_provider_backpressure(
        &self,
        #[wasm_bindgen(
            unchecked_param_type = "{ provider: string; toolId?: string; retryAfterMs: number }"
        )]
        input: JsValue,
    ) -> Promise {
        let g = self.inner.clone();
        promise(async move {
            let provider = field(&input, "provider")
                .as_string()
                .ok_or_else(|| Error::invalid("provider is required"))?;
            let retry_after = field(&input, "retryAfterMs")
                .as_f64()
                .filter(|ms| ms.is_finite() && *ms >= 0.0);
            let retry_after =
                retry_after.ok_or_else(|| Error::invalid("retryAfterMs must be a number >= 0"))?;
            let tool = field(&input, "toolId").as_string();
            g.report_provider_backpressure(&provider, tool.as_deref(), retry_after.ceil() as u64)
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
        let latency = opt_latency(&input)?;
        if let Some(provider) = field(&input, "provider").as_string() {
            self.inner.observe_provider_success(
                &provider,
                field(&input, "toolId").as_string().as_deref(),
                latency,
            );
        }
        Ok(())
    }

    #[wasm_bindgen(js_name = observeToolSuccess)]
    pub fn observe_tool_success(
        &self,
        #[wasm_bindgen(unchecked_param_type = "{ toolId: string; latencyMs?: number | null }")]
        input: JsValue,
    ) -> std::result::Result<(), JsValue> {
        let latency = opt_latency(&input)?;
        if let Some(tool) = field(&input, "toolId").as_string() {
            self.inner.observe_tool_success(&tool, latency);
        }
        Ok(())
    }

    #[wasm_bindgen(js_name = suggestedParallelism, unchecked_return_type = "Promise<number>")]
    pub fn suggested_parallelism(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] tool_id: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] fallback: JsValue,
    ) -> Promise {
        let g = self.inner.clone();
        promise(async move {
            let tool_id = tool_arg(&tool_id)?;
            let fallback = super::reader::integer(&fallback, "fallback", u32::MAX.into())?;
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
        let requested = match present(requested) {
            None => None,
            // Clamped here, before the cast, so -1 is 1 and not a wrapped
            // huge count; the float-to-int cast saturates.
            Some(v) => match v.as_f64() {
                Some(n) if !n.is_nan() => Some(n.max(1.0) as usize),
                _ => return Err(Error::invalid("requested must be a number").into()),
            },
        };
        let rows = self.inner.resolve_row_concurrency(requested);
        Ok(u32::try_from(rows).unwrap_or(u32::MAX))
    }

    /// One governed provider call: `call(attempt)` makes it and returns
    /// (a promise of) a `Response` or anything with `status` and
    /// `headers.get`. 429s are reported and retried; 5xx and transport
    /// failures only for a `retrySafe` call. Resolves with the last answer;
    /// a transport failure rejects with what `call` threw.
    #[wasm_bindgen(js_name = callTool, unchecked_return_type = "Promise<ProviderAnswer>")]
    pub fn call_tool(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] tool_id: JsValue,
        #[wasm_bindgen(
            unchecked_param_type = "(attempt: number) => Promise<ProviderAnswer> | ProviderAnswer"
        )]
        call: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "CallToolOptions")] options: JsValue,
    ) -> Promise {
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
                        let answer = settle(returned).await?;
                        let status = field(&answer, "status").as_f64().unwrap_or(0.0) as u16;
                        let headers = field(&answer, "headers");
                        Ok(ProviderResponse {
                            status,
                            retry_after: header_of(&headers, "retry-after"),
                            quota_headers: QuotaHeaders::from_lookup(|name| {
                                header_of(&headers, name)
                            }),
                            body: answer,
                        })
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
