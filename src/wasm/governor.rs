//! `createGovernor` and the `Governor` class: the seeds' governor surface
//! over the core's, with JS callbacks for pacing and rate-scope resolution
//! and `callTool` over any provider call that returns a `Response`.

use std::rc::Rc;

use js_sys::{Function, Promise, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use super::error::foreign;
use super::js::{from_js, promise, to_js};
use super::pacer::header_of;
use super::registry::{budget_state, rate_state};
use super::runtime::{AbortBridge, JsAbortSignal, JsRuntime};
use crate::client::{LocalBoxFuture, Runtime};
use crate::error::{Error, ErrorCode, Result};
use crate::governor::{
    Adapter, BudgetKind, CallError, CallOptions, GovernanceSnapshot, Governor, GovernorConfig,
    PolicyOverrides, ProviderResponse, QuotaHeaders, RateScope, RunScope, ToolLease, ToolPacing,
};
use crate::protocol::DeclaredPacing;

#[wasm_bindgen(typescript_custom_section)]
const TS_GOVERNOR: &'static str = r#"
export type BudgetKind = "playCall" | "toolCall" | "retry" | "descendant" | "waterfallStep";
export interface DeclaredPacing { provider: string; rules: PacingRuleInit[] }
export interface RateScopeInit { bucketId: string; token: string }
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
  pacing?: { defaultProviderRequestsPerSecond?: number; typicalToolCallMs?: number };
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
  resolvePacing: (toolId: string) => Promise<DeclaredPacing | null> | DeclaredPacing | null;
  resolveRateScope?: (toolId: string, provider: string) => Promise<RateScopeInit | null> | RateScopeInit | null;
  resume?: GovernanceSnapshot;
  policy?: GovernorPolicy;
}
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
    JsFuture::from(Promise::resolve(&returned))
        .await
        .map_err(|e| foreign(e, ErrorCode::InvalidInput))
}

fn state_handle(obj: &JsValue, what: &str) -> Result<u32> {
    field(obj, "stateHandle")
        .as_f64()
        .map(|h| h as u32)
        .ok_or_else(|| {
            Error::invalid(format!(
                "{what} must be a paceline {what} (new GatewayRateState(...), ...)"
            ))
        })
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
    let rate_state = rate_state(state_handle(&rate, "rateState")?)
        .ok_or_else(|| Error::invalid("rateState is not a paceline rate state"))?;
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
            move |tool_id: &str| -> LocalBoxFuture<'static, Result<Option<ToolPacing>>> {
                let (f, tool) = (pacing_fn.clone(), JsValue::from_str(tool_id));
                Box::pin(async move {
                    let answer = invoke(&f, &[tool]).await?;
                    match present(answer) {
                        None => Ok(None),
                        Some(v) => {
                            let p: DeclaredPacing = from_js(&v)?;
                            Ok(Some(ToolPacing {
                                provider: p.provider,
                                rules: p.rules,
                            }))
                        }
                    }
                })
            },
        ),
        runtime,
    );
    if let Some(b) = present(field(options, "budgetState")) {
        config.budget_state = Some(
            budget_state(state_handle(&b, "budgetState")?)
                .ok_or_else(|| Error::invalid("budgetState is not a paceline budget state"))?,
        );
    }
    if let Some(scope_fn) = callback(options, "resolveRateScope")? {
        config.resolve_rate_scope = Some(Box::new(move |tool_id: &str, provider: &str| {
            let f = scope_fn.clone();
            let args = [JsValue::from_str(tool_id), JsValue::from_str(provider)];
            Box::pin(async move {
                let answer = invoke(&f, &args).await?;
                Ok(present(answer).map(|v| RateScope {
                    bucket_id: field(&v, "bucketId").as_string().unwrap_or_default(),
                    token: field(&v, "token").as_string(),
                }))
            })
        }));
    }
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

fn signal_of(options: &JsValue) -> Option<JsAbortSignal> {
    present(field(options, "signal")).map(JsCast::unchecked_into)
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
        tool_id: String,
        #[wasm_bindgen(unchecked_optional_param_type = "{ signal?: AbortSignal }")] options: Option<
            js_sys::Object,
        >,
    ) -> Promise {
        let options: JsValue = options.map_or(JsValue::UNDEFINED, Into::into);
        let g = self.inner.clone();
        promise(async move {
            let abort = AbortBridge::new(signal_of(&options));
            let lease = g.acquire_tool_slot(&tool_id, abort.signal()).await?;
            Ok(JsToolLease { lease }.into())
        })
    }

    #[wasm_bindgen(js_name = acquireRowSlot, unchecked_return_type = "Promise<WorkLease>")]
    pub fn acquire_row_slot(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "{ signal?: AbortSignal }")] options: Option<
            js_sys::Object,
        >,
    ) -> Promise {
        let options: JsValue = options.map_or(JsValue::UNDEFINED, Into::into);
        let g = self.inner.clone();
        promise(async move {
            let abort = AbortBridge::new(signal_of(&options));
            let slot = g.acquire_row_slot(abort.signal()).await?;
            Ok(JsWorkLease { slot }.into())
        })
    }

    #[wasm_bindgen(js_name = chargeBudget, unchecked_return_type = "Promise<void>")]
    pub fn charge_budget(
        &self,
        #[wasm_bindgen(unchecked_param_type = "BudgetKind")] kind: String,
        amount: Option<f64>,
    ) -> Promise {
        let g = self.inner.clone();
        promise(async move {
            let amount = amount.unwrap_or(1.0);
            if !(amount.is_finite() && amount >= 1.0 && amount.fract() == 0.0) {
                return Err(Error::invalid("amount must be a positive integer").into());
            }
            g.charge_budget(budget_kind(&kind)?, amount as u64).await?;
            Ok(JsValue::UNDEFINED)
        })
    }

    #[wasm_bindgen(js_name = forkChild, unchecked_return_type = "Promise<GovernanceSnapshot>")]
    pub fn fork_child(
        &self,
        #[wasm_bindgen(unchecked_param_type = "{ childPlayName: string; childRunId: string }")]
        input: JsValue,
    ) -> Promise {
        let g = self.inner.clone();
        promise(async move {
            let name = field(&input, "childPlayName").as_string();
            let run = field(&input, "childRunId").as_string();
            let (Some(name), Some(run)) = (name, run) else {
                return Err(Error::invalid("forkChild takes {childPlayName, childRunId}").into());
            };
            to_js(&g.fork_child(&name, &run).await?)
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
        #[wasm_bindgen(unchecked_param_type = "{ provider: string; toolId?: string }")]
        input: JsValue,
    ) {
        if let Some(provider) = field(&input, "provider").as_string() {
            self.inner.observe_provider_success(
                &provider,
                field(&input, "toolId").as_string().as_deref(),
            );
        }
    }

    #[wasm_bindgen(js_name = observeToolSuccess)]
    pub fn observe_tool_success(
        &self,
        #[wasm_bindgen(unchecked_param_type = "{ toolId: string }")] input: JsValue,
    ) {
        if let Some(tool) = field(&input, "toolId").as_string() {
            self.inner.observe_tool_success(&tool);
        }
    }

    #[wasm_bindgen(js_name = suggestedParallelism, unchecked_return_type = "Promise<number>")]
    pub fn suggested_parallelism(&self, tool_id: String, fallback: u32) -> Promise {
        let g = self.inner.clone();
        promise(async move {
            let n = g.suggested_parallelism(&tool_id, fallback as usize).await?;
            Ok(JsValue::from_f64(n as f64))
        })
    }

    #[wasm_bindgen(js_name = resolveRowConcurrency)]
    pub fn resolve_row_concurrency(&self, requested: Option<u32>) -> u32 {
        self.inner
            .resolve_row_concurrency(requested.map(|n| n as usize)) as u32
    }

    /// One governed provider call: `call(attempt)` makes it and returns
    /// (a promise of) a `Response` or anything with `status` and
    /// `headers.get`. 429s are reported and retried; 5xx and transport
    /// failures only for a `retrySafe` call. Resolves with the last answer;
    /// a transport failure rejects with what `call` threw.
    #[wasm_bindgen(js_name = callTool, unchecked_return_type = "Promise<ProviderAnswer>")]
    pub fn call_tool(
        &self,
        tool_id: String,
        #[wasm_bindgen(
            unchecked_param_type = "(attempt: number) => Promise<ProviderAnswer> | ProviderAnswer"
        )]
        call: Function,
        #[wasm_bindgen(unchecked_optional_param_type = "CallToolOptions")] options: Option<
            js_sys::Object,
        >,
    ) -> Promise {
        let options: JsValue = options.map_or(JsValue::UNDEFINED, Into::into);
        let g = self.inner.clone();
        promise(async move {
            let abort = AbortBridge::new(signal_of(&options));
            let defaults = CallOptions::default();
            let max_attempts = field(&options, "maxAttempts")
                .as_f64()
                .map_or(defaults.max_attempts, |n| n.max(1.0) as u32);
            let call_options = CallOptions {
                retry_safe: field(&options, "retrySafe").as_bool().unwrap_or(false),
                max_attempts,
                signal: abort.signal(),
            };
            let outcome = g
                .call_tool(&tool_id, call_options, |attempt| {
                    let call = call.clone();
                    async move {
                        let returned = call.call1(&JsValue::NULL, &JsValue::from(attempt))?;
                        let answer = JsFuture::from(Promise::resolve(&returned)).await?;
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
