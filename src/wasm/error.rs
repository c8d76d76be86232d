//! Core errors become JS `Error`s with a string `code` and, where the code
//! has them, structured fields (`key`, `observed`, `limit`,
//! `cooldownUntilMs`). An exception JS raised into the core (from `fetch`
//! or a user callback) travels in the error as its cause and is handed back
//! as the same value, or, when the core wrapped its message ("penalize
//! failed for <bucket>: ..."), as a coded error with that message and the
//! exception as its `cause`.

use js_sys::Reflect;
use wasm_bindgen::JsValue;

#[cfg(feature = "pacer")]
use crate::error::ErrorCode;
use crate::error::{Detail, Error, HostCause};
#[cfg(feature = "governor")]
use crate::protocol::BudgetKind;

/// A JS value an error carries as its cause.
struct Kept {
    value: JsValue,
    /// For an exception, the message the core read from it: while the
    /// error still says exactly that, the exception itself is the error.
    said: Option<String>,
}

#[cfg(feature = "pacer")]
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
    let cause = HostCause::new(Kept {
        value: thrown,
        said: Some(message.clone()),
    });
    Error::new(code, message).with_detail(Detail::Cause(cause))
}

/// Wraps a JS value (an abort reason, what a getter threw) for an error to
/// carry back out as its `cause`.
pub(crate) fn keep(value: JsValue) -> HostCause {
    HostCause::new(Kept { value, said: None })
}

#[cfg(feature = "governor")]
/// A budget kind by the name `chargeBudget` takes.
pub(crate) fn budget_kind(kind: &str) -> crate::error::Result<BudgetKind> {
    BudgetKind::from_key(kind).ok_or_else(|| {
        Error::invalid(format!(
            "budget kind must be playCall, toolCall, retry, descendant or waterfallStep, got {}",
            crate::json::quoted(kind)
        ))
    })
}

/// The `createGovernor` policy field that sets a budget key's limit, for
/// the message of its `BUDGET_EXCEEDED`.
#[cfg(feature = "governor")]
fn budget_setting(key: &str) -> Option<&'static str> {
    if let Some(kind) = BudgetKind::from_key(key) {
        return Some(kind.limit_name());
    }
    Some(match key {
        "depth" => "maxDepth",
        k if k.starts_with("childPerParent") => "maxChildPlayCallsPerParent",
        _ => return None,
    })
}

/// The message JS sees. A `BUDGET_EXCEEDED` also names the governor's
/// setting that raises the limit; a module without the governor has no
/// budgets to exceed, and no such setting.
fn message_of(e: &Error) -> String {
    #[cfg(feature = "governor")]
    if let (ErrorCode::BudgetExceeded, Some(Detail::Budget { key, .. })) = (&e.code, &e.detail) {
        if let Some(field) = budget_setting(key) {
            return format!(
                "{} Raise policy.budgets.{field} in createGovernor's options to allow more.",
                e.message
            );
        }
    }
    e.message.clone()
}

fn set(target: &JsValue, key: &str, value: JsValue) {
    // Setting a plain data property on a fresh Error cannot throw.
    let _ = Reflect::set(target, &JsValue::from_str(key), &value);
}

impl From<Error> for JsValue {
    fn from(e: Error) -> JsValue {
        let kept = match &e.detail {
            Some(Detail::Cause(cause)) => cause.get::<Kept>(),
            _ => None,
        };
        let mut cause = None;
        // `new Error(message, { cause })` for a kept value; a wrapped
        // exception is set on the error afterwards.
        let options = js_sys::Object::new();
        match kept {
            Some(Kept {
                value,
                said: Some(said),
            }) => {
                if *said == e.message {
                    return value.clone();
                }
                cause = Some(value.clone());
            }
            Some(Kept { value, said: None }) => set(&options, "cause", value.clone()),
            None => {}
        }
        let js = js_sys::Error::new_with_options(&message_of(&e), &options);
        js.set_name("PacelineError");
        let target: JsValue = js.into();
        set(&target, "code", JsValue::from_str(e.code.as_str()));
        if let Some(cause) = cause {
            set(&target, "cause", cause);
        }
        match &e.detail {
            Some(Detail::Budget {
                key,
                observed,
                limit,
            }) => {
                set(&target, "key", JsValue::from_str(key));
                set(&target, "observed", JsValue::from_f64(*observed as f64));
                set(&target, "limit", JsValue::from_f64(*limit as f64));
            }
            Some(Detail::Cooldown { until_ms }) => {
                set(
                    &target,
                    "cooldownUntilMs",
                    JsValue::from_f64(*until_ms as f64),
                );
            }
            Some(Detail::Cause(_)) | None => {}
        }
        target
    }
}
