//! `PacingRule`: "at most `requestsPerWindow` calls in any `windowMs`", with an
//! optional cap on calls in flight and an optional ceiling for adaptive
//! recovery.

use serde::Serialize;

use super::limits;
use crate::error::{Error, Result};
use crate::json::{number_text, read_items, Fields};
use crate::json_write::push_decimal;

/// `Serialize` is for the governor's snapshots and the bucket view, which
/// hold rules; the wire writes them by hand (`encode.rs`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PacingRule {
    pub requests_per_window: u64,
    pub window_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adaptive_max_rps: Option<f64>,
}

impl PacingRule {
    pub fn new(requests_per_window: u64, window_ms: u64) -> Self {
        PacingRule {
            requests_per_window,
            window_ms,
            max_concurrency: None,
            adaptive_max_rps: None,
        }
    }

    pub fn with_max_concurrency(mut self, max: u64) -> Self {
        self.max_concurrency = Some(max);
        self
    }

    pub fn with_adaptive_max_rps(mut self, rps: f64) -> Self {
        self.adaptive_max_rps = Some(rps);
        self
    }

    /// The rule's rate in requests per second.
    pub fn requests_per_second(&self) -> f64 {
        self.requests_per_window as f64 * 1_000.0 / self.window_ms as f64
    }

    fn from_fields(f: &Fields<'_>) -> Result<Self> {
        let adaptive_max_rps = f.opt_positive_number("adaptiveMaxRps", limits::MAX_RPS)?;
        if let Some(rps) = adaptive_max_rps.filter(|&r| r < limits::MIN_ADAPTIVE_MAX_RPS) {
            return Err(Error::invalid(format!(
                "{} must be at least {} (one call in 1000 s), got {}",
                f.name("adaptiveMaxRps"),
                number_text(limits::MIN_ADAPTIVE_MAX_RPS),
                number_text(rps)
            )));
        }
        Ok(PacingRule {
            requests_per_window: f.integer(
                "requestsPerWindow",
                1,
                limits::MAX_REQUESTS_PER_WINDOW,
            )?,
            window_ms: f.integer("windowMs", 1, limits::MAX_WINDOW_MS)?,
            max_concurrency: f.opt_integer("maxConcurrency", 1, limits::MAX_CONCURRENCY)?,
            adaptive_max_rps,
        })
    }
}

pub(crate) fn rules_from(f: &Fields<'_>, field: &str) -> Result<Vec<PacingRule>> {
    read_items(f.array(field, 1, limits::MAX_RULES)?, |i, v| {
        PacingRule::from_fields(&f.item(field, i, v)?)
    })
}

/// A canonical text for a set of rules, independent of their order, so two
/// requests that describe the same limits map to the same bucket state.
pub fn rules_signature(rules: &[PacingRule]) -> String {
    // Written piece by piece rather than with `format!`: a pacer writes a
    // signature for its first permit, which would otherwise compile core's
    // formatter on the success path.
    let mut parts = Vec::with_capacity(rules.len());
    for r in rules {
        let mut part = String::new();
        push_decimal(&mut part, r.requests_per_window);
        part.push('/');
        push_decimal(&mut part, r.window_ms);
        part.push(':');
        if let Some(c) = r.max_concurrency {
            push_decimal(&mut part, c);
        }
        part.push(':');
        if let Some(rps) = r.adaptive_max_rps {
            part.push_str(&number_text(rps));
        }
        parts.push(part);
    }
    crate::sort::heap_sort_by(&mut parts, |a, b| a < b);
    // Joined by hand: `join` on `String`s is a copy of its own in the wasm.
    let mut signature = String::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            signature.push('|');
        }
        signature.push_str(part);
    }
    signature
}

/// The rate the strictest of `rules` allows, in requests per second
/// (infinite for none).
pub fn strictest_rps(rules: &[PacingRule]) -> f64 {
    let mut rps = f64::INFINITY;
    for rule in rules {
        rps = rps.min(rule.requests_per_second());
    }
    rps
}

/// Whether any rule bounds calls in flight, which makes every permit carry a
/// lease that must be released.
pub fn has_concurrency(rules: &[PacingRule]) -> bool {
    rules.iter().any(|r| r.max_concurrency.is_some())
}
