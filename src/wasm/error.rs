//! Core errors become JS `Error`s with a string `code` and, where the code
//! has them, structured fields (`key`, `observed`, `limit`,
//! `cooldownUntilMs`). An exception JS raised into the core (from `fetch`
//! or a user callback) is kept here and handed back as the same value, or,
//! when the core wrapped its message ("penalize failed for <bucket>: ..."),
//! as a coded error with that message and the exception as its `cause`.

use std::cell::RefCell;
use std::collections::HashMap;

use js_sys::Reflect;
use wasm_bindgen::JsValue;

use crate::error::{Detail, Error, ErrorCode};
use crate::governor::BudgetKind;

/// Kept exceptions. An error may be cloned to several waiters, so each
/// conversion reads (does not take) its exception; the oldest are dropped
/// past this many.
const KEPT_EXCEPTIONS: u64 = 256;

/// A kept value, and for an exception the message the core read from it.
type Kept = (JsValue, Option<String>);

thread_local! {
    static FOREIGN: RefCell<(u64, HashMap<u64, Kept>)> = RefCell::new((0, HashMap::new()));
}

/// Wraps a JS exception as a core error with `code`, remembering the value.
/// The message and code come from the exception when it has them, so the
/// core can still decide (retry a transport failure, not a refusal).
pub(crate) fn foreign(thrown: JsValue, default_code: ErrorCode) -> Error {
    let text = |key: &str| {
        Reflect::get(&thrown, &JsValue::from_str(key))
            .ok()
            .and_then(|v| v.as_string())
    };
    let code = text("code")
        .and_then(|c| ErrorCode::parse(&c))
        .unwrap_or(default_code);
    let message = text("message")
        .or_else(|| thrown.as_string())
        .unwrap_or_else(|| "a JS exception".into());
    let handle = store(thrown, Some(message.clone()));
    Error::new(code, message).with_detail(Detail::Foreign(handle))
}

/// Keeps a JS value (an abort reason, what a getter threw) for an error to
/// carry back out as its `cause`; returns its handle.
pub(crate) fn keep(value: JsValue) -> u64 {
    store(value, None)
}

fn store(value: JsValue, said: Option<String>) -> u64 {
    FOREIGN.with(|f| {
        let mut f = f.borrow_mut();
        f.0 += 1;
        let handle = f.0;
        f.1.insert(handle, (value, said));
        f.1.remove(&handle.wrapping_sub(KEPT_EXCEPTIONS));
        handle
    })
}

fn kept(handle: u64) -> Option<Kept> {
    FOREIGN.with(|f| f.borrow().1.get(&handle).cloned())
}

/// A budget kind by the name `chargeBudget` takes.
pub(crate) fn budget_kind(kind: &str) -> crate::error::Result<BudgetKind> {
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

/// The `createGovernor` policy field that sets a budget key's limit, for
/// the message of its `BUDGET_EXCEEDED`.
fn budget_setting(key: &str) -> Option<&'static str> {
    Some(match key {
        "playCall" => "maxPlayCallCount",
        "toolCall" => "maxToolCallCount",
        "retry" => "maxRetryCount",
        "descendant" => "maxDescendants",
        "waterfallStep" => "maxWaterfallStepExecutions",
        "depth" => "maxDepth",
        k if k.starts_with("childPerParent") => "maxChildPlayCallsPerParent",
        _ => return None,
    })
}

fn set(target: &JsValue, key: &str, value: JsValue) {
    // Setting a plain data property on a fresh Error cannot throw.
    let _ = Reflect::set(target, &JsValue::from_str(key), &value);
}

impl From<Error> for JsValue {
    fn from(e: Error) -> JsValue {
        let mut cause = None;
        if let Some(Detail::Foreign(handle)) = e.detail {
            if let Some((original, said)) = kept(handle) {
                if said.as_deref() == Some(e.message.as_str()) {
                    return original;
                }
                cause = Some(original);
            }
        }
        // `new Error(message, { cause })` for a kept cause.
        let options = js_sys::Object::new();
        if let Some(cause) = match e.detail {
            Some(Detail::Cause(handle)) => kept(handle).map(|(value, _)| value),
            _ => None,
        } {
            set(&options, "cause", cause);
        }
        let message = match (&e.code, &e.detail) {
            (ErrorCode::BudgetExceeded, Some(Detail::Budget { key, .. })) => {
                match budget_setting(key) {
                    Some(field) => format!(
                        "{} Raise policy.budgets.{field} in createGovernor's options to allow more.",
                        e.message
                    ),
                    None => e.message.clone(),
                }
            }
            _ => e.message.clone(),
        };
        let js = js_sys::Error::new_with_options(&message, &options);
        js.set_name("PacelineError");
        let target: JsValue = js.into();
        set(&target, "code", JsValue::from_str(e.code.as_str()));
        if let Some(cause) = cause {
            set(&target, "cause", cause);
        }
        match e.detail {
            Some(Detail::Budget {
                key,
                observed,
                limit,
            }) => {
                set(&target, "key", JsValue::from_str(&key));
                set(&target, "observed", JsValue::from_f64(observed as f64));
                set(&target, "limit", JsValue::from_f64(limit as f64));
            }
            Some(Detail::Cooldown { until_ms }) => {
                set(
                    &target,
                    "cooldownUntilMs",
                    JsValue::from_f64(until_ms as f64),
                );
            }
            Some(Detail::Status(status)) => {
                set(&target, "status", JsValue::from_f64(f64::from(status)));
            }
            Some(Detail::Cause(_) | Detail::Foreign(_)) | None => {}
        }
        target
    }
}
