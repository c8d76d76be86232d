//! `createGovernor`: its options, read by the typed reader, become the
//! core's `GovernorConfig`, with the JS callbacks for pacing and rate
//! scopes wrapped as the core's resolvers.

use std::rc::Rc;

use js_sys::{Function, Reflect};
use wasm_bindgen::prelude::*;

use super::error::foreign;
use super::governor::JsGovernor;
use super::js::random_seed;
use super::reader::{message as from_js, settle, ObjectArg};
use super::registry::{budget_state, rate_state};
use super::runtime::JsRuntime;
use crate::error::{Error, ErrorCode, Result};
use crate::governor::{
    Adapter, GovernanceSnapshot, Governor, GovernorConfig, PacingDeclaration, PacingTable,
    PolicyOverrides, RateScope, RunScope, ToolLatencies,
};
use crate::protocol::limits::{MAX_ID_BYTES, MAX_TOKEN_BYTES};
use crate::rt::{LocalBoxFuture, Runtime};

#[wasm_bindgen(typescript_custom_section)]
const TS_GOVERNOR_OPTIONS: &'static str = r#"
export type BudgetKind = "playCall" | "toolCall" | "retry" | "descendant" | "waterfallStep";
/** A tool's provider and limits. A blank provider is none (the tool gets a bucket of its own); no rules is the policy's default pace. */
export interface DeclaredPacing { provider: string; rules?: PacingRuleInit[] }
/** The tool calls nothing rate-limited: it takes no permit at all. */
export interface UnpacedTool { unpaced: true }
/**
 * What `resolvePacing` answers for a tool. **`null` is not "no pacing"**: it means nothing is
 * known, and the tool gets the policy's default pace in a bucket of its own. To take no permit
 * at all, answer `{ unpaced: true }`.
 */
export type PacingDeclaration = DeclaredPacing | UnpacedTool | null;
/** Without a `bucketId`, the org's bucket of the provider. */
export interface RateScopeInit { bucketId?: string | null; rateScopeToken?: string | null }
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
  /** The policy defaults' runtime; by default `esm_workers` in a Worker, else `cjs_node20`. */
  adapter?: "esm_workers" | "cjs_node20";
  /** Whose buckets (`<orgId>:<provider>`) and which run's budgets; by default org `default` and a fresh run id. */
  scope?: { orgId?: string; rootRunId?: string };
  rateState: GatewayRateState | LocalRateState;
  budgetState?: GatewayBudgetState | LocalBudgetState;
  /** See `PacingDeclaration`: `null` is the default pace, `{ unpaced: true }` no pacing. */
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
  /**
   * A Worker's `ctx.waitUntil.bind(ctx)`: every release this governor makes (a tool lease's,
   * and the ones `callTool` makes inside) is registered with it, so the end of the request
   * does not strand a lease.
   */
  waitUntil?: (promise: Promise<unknown>) => void;
}
"#;

const OPTIONS: [&str; 12] = [
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
    "waitUntil",
];

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

fn absent(v: &JsValue) -> bool {
    v.is_undefined() || v.is_null()
}

/// The adapter of the host this runs in: workerd says so in its user agent.
fn host_adapter() -> Adapter {
    let agent = Reflect::get(&js_sys::global(), &"navigator".into())
        .ok()
        .filter(JsValue::is_object)
        .and_then(|n| Reflect::get(&n, &"userAgent".into()).ok())
        .and_then(|a| a.as_string());
    if agent.as_deref() == Some("Cloudflare-Workers") {
        Adapter::EsmWorkers
    } else {
        Adapter::CjsNode20
    }
}

fn adapter(o: &ObjectArg) -> Result<Adapter> {
    match o.opt_string("adapter", 32)? {
        None => Ok(host_adapter()),
        Some(name) => Adapter::from_name(&name).ok_or_else(|| {
            Error::invalid(format!(
                "options.adapter must be \"esm_workers\" or \"cjs_node20\", got {}",
                crate::json::quoted(&name)
            ))
        }),
    }
}

/// A run id nobody else has: the governor's run when no scope names one.
fn fresh_run_id() -> Result<String> {
    Ok(format!(
        "run-{:016x}",
        random_seed("createGovernor without a scope")?
    ))
}

fn run_scope(o: &ObjectArg) -> Result<RunScope> {
    let Some(scope) = ObjectArg::optional(&o.get("scope")?.unwrap_or_default(), "options.scope")?
    else {
        return Ok(RunScope {
            org_id: "default".to_owned(),
            root_run_id: fresh_run_id()?,
        });
    };
    scope.only(&["orgId", "rootRunId"])?;
    Ok(RunScope {
        org_id: scope
            .opt_string("orgId", MAX_ID_BYTES)?
            .unwrap_or_else(|| "default".to_owned()),
        root_run_id: match scope.opt_string("rootRunId", MAX_ID_BYTES)? {
            Some(id) => id,
            None => fresh_run_id()?,
        },
    })
}

type PacingResolver = Box<dyn Fn(&str) -> LocalBoxFuture<'static, Result<PacingDeclaration>>>;

fn pacing_resolver(f: Function) -> PacingResolver {
    Box::new(move |tool_id: &str| {
        let (f, tool) = (f.clone(), JsValue::from_str(tool_id));
        Box::pin(async move {
            let answer = invoke(&f, &[tool]).await?;
            if absent(&answer) {
                Ok(PacingDeclaration::Undeclared)
            } else {
                from_js(&answer)
            }
        })
    })
}

/// A scope without a bucketId is the org's bucket, as in the TypeScript
/// runtime; the pacing core reads blank that way.
fn rate_scope_answer(answer: &JsValue) -> Result<Option<RateScope>> {
    let Some(o) = ObjectArg::optional(answer, "resolveRateScope's answer")? else {
        return Ok(None);
    };
    o.only(&["bucketId", "rateScopeToken"])?;
    Ok(Some(RateScope {
        bucket_id: o.opt_string("bucketId", MAX_ID_BYTES)?.unwrap_or_default(),
        token: o.opt_string("rateScopeToken", MAX_TOKEN_BYTES)?,
    }))
}

fn config_from(o: &ObjectArg, runtime: Rc<dyn Runtime>) -> Result<GovernorConfig> {
    let adapter = adapter(o)?;
    let scope = run_scope(o)?;
    let rate = o.get("rateState")?.ok_or_else(|| {
        Error::invalid("options.rateState is required: a GatewayRateState or LocalRateState")
    })?;
    let rate_state = rate_state(&rate, "options.rateState")?;
    let pacing_fn = o.opt_function("resolvePacing")?.ok_or_else(|| {
        Error::invalid(
            "options.resolvePacing is required: (toolId) => {provider, rules} | {unpaced: true} | null",
        )
    })?;
    let mut config = GovernorConfig::new(
        adapter,
        scope,
        rate_state,
        pacing_resolver(pacing_fn),
        runtime,
    );
    if let Some(b) = o.get("budgetState")? {
        config.budget_state = Some(budget_state(&b, "options.budgetState")?);
    }
    if let Some(scope_fn) = o.opt_function("resolveRateScope")? {
        config.resolve_rate_scope = Some(Box::new(move |tool_id: &str, provider: &str| {
            let f = scope_fn.clone();
            let args = [JsValue::from_str(tool_id), JsValue::from_str(provider)];
            Box::pin(async move { rate_scope_answer(&invoke(&f, &args).await?) })
        }));
    }
    if let Some(table) = o.message::<PacingTable>("builtinPacing")? {
        config.builtin_pacing = table;
    }
    if let Some(latencies) = o.message::<ToolLatencies>("toolLatencyMs")? {
        config.tool_latency_ms = latencies.0;
    }
    config.play_id = o.opt_string("playId", MAX_ID_BYTES)?;
    config.resume = o.message::<GovernanceSnapshot>("resume")?;
    config.policy = o.message::<PolicyOverrides>("policy")?.unwrap_or_default();
    Ok(config)
}

#[wasm_bindgen(js_name = createGovernor)]
pub fn create_governor(
    #[wasm_bindgen(unchecked_param_type = "CreateGovernorOptions")] options: JsValue,
) -> std::result::Result<JsGovernor, JsValue> {
    let o = ObjectArg::new(&options, "options")?;
    // A misspelt option would otherwise silently not apply.
    o.only(&OPTIONS)?;
    let runtime = JsRuntime::new(o.opt_function("waitUntil")?);
    let inner = Governor::new(config_from(&o, Rc::new(runtime.clone()))?)?;
    Ok(JsGovernor::new(inner, runtime))
}
