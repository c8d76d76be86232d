//! The wire protocol between clients and the gateway: JSON over HTTP, with
//! camelCase field names matching the TypeScript runtime's gateway, so its
//! clients can switch to this gateway without changing a message.
//!
//! Decoding validates: a message that comes back from [`decode`] is in range
//! and every bad field was reported by name. Unknown fields are ignored.

mod budget;
mod budget_kind;
mod counter_map;
mod encode;
mod endpoint;
mod error_body;
mod quota;
mod rate;
mod rule;

pub use budget::{BudgetCharge, ChargeRequest, ChargeResponse};
pub use budget_kind::{BudgetCounts, BudgetKind};
pub use counter_map::CounterMap;
pub use endpoint::{owner_name, route, Endpoint, Owner, Route, BUCKET_VIEW_PREFIX, ROUTES};
pub use error_body::{ErrorBody, ErrorFields};
pub use quota::{ObserveRequest, ObserveResponse, QuotaReport};
pub use rate::{
    AcquireRequest, AcquireResponse, PenalizeRequest, PenalizeResponse, ReleaseRequest,
    ReleaseResponse, SlotKind, LEASE_CHAIN_MS,
};
pub(crate) use rule::rules_from;
pub use rule::{has_concurrency, rules_signature, strictest_rps, PacingRule};

use crate::error::{Error, Result};
use crate::json::Decode;
use crate::json_value::Value;
use crate::json_write::Encode;

/// The bounds a message must stay inside. They keep one request from
/// costing the gateway unbounded memory or time.
pub mod limits {
    pub const MAX_BODY_BYTES: usize = 64 * 1024;
    pub const MAX_REQUESTED: u64 = 1_000;
    pub const MAX_RULES: usize = 8;
    pub const MAX_REQUESTS_PER_WINDOW: u64 = 1_000_000;
    /// 31 days: long enough for a monthly quota.
    pub const MAX_WINDOW_MS: u64 = 31 * 24 * 3_600_000;
    pub const MAX_CONCURRENCY: u64 = 100_000;
    pub const MAX_RPS: f64 = 1_000_000.0;
    /// One call in 1000 s. A lower `adaptiveMaxRps` would space permits so
    /// far apart that one grant parks a bucket for days; a provider called
    /// that rarely needs no adaptive ceiling.
    pub const MIN_ADAPTIVE_MAX_RPS: f64 = 0.001;
    pub const MAX_COOLDOWN_MS: u64 = 24 * 3_600_000;
    pub const MAX_ID_BYTES: usize = 256;
    pub const MAX_TOKEN_BYTES: usize = 1_024;
    pub const MAX_RELEASE_BATCH: usize = 1_000;
    pub const MAX_OBSERVED_SUCCESSES: u64 = 1_000_000;
    pub const MAX_CHARGES: usize = 16;
    /// Budget keys and reservation ids are kept per run; short ones keep a
    /// run's stored ledger small.
    pub const MAX_BUDGET_KEY_BYTES: usize = 64;
    pub const MAX_RESERVATION_ID_BYTES: usize = 64;
    /// A client sends a reservation id again (its answer lost) for at most
    /// this long after it first sent it: five minutes.
    pub const RESEND_HORIZON_MS: u64 = 5 * 60_000;
    /// A gateway answers a resent id it may have forgotten with a refusal
    /// for this long after it last forgot one: the client's horizon plus as
    /// much again for a request's time in transit.
    pub const RESENT_REACH_MS: u64 = 2 * RESEND_HORIZON_MS;
    pub const MAX_BUDGET: u64 = 1_000_000_000;
    pub const MAX_DISPATCH_LEAD_MS: u64 = 10_000;
    pub const MAX_DISPATCH_TOLERANCE_MS: u64 = 60_000;
    /// Turn tickets are counted per bucket from 1; JS numbers stay exact
    /// up to here.
    pub const MAX_TURN_TICKET: u64 = (1 << 53) - 1;
}

/// A message of the protocol: it decodes from JSON with validation and
/// encodes by hand (`json_write`).
pub trait Message: Encode + Decode {}

impl<T: Encode + Decode> Message for T {}

/// Decodes and validates one message from a request or response body.
pub fn decode<M: Decode>(body: &[u8]) -> Result<M> {
    M::from_value(&parse_body(body)?)
}

/// A body as JSON, within the body limit: one copy of the parser for every
/// message type (a copy per type costs the wasm kilobytes each).
#[inline(never)]
pub(crate) fn parse_body(body: &[u8]) -> Result<Value> {
    if body.len() > limits::MAX_BODY_BYTES {
        return Err(Error::invalid(format!(
            "body is {} bytes; the limit is {}",
            body.len(),
            limits::MAX_BODY_BYTES
        )));
    }
    crate::json_parse::parse(body)
        .map_err(|e| Error::invalid(format!("body is not valid JSON: {e}")))
}

/// A message (or any value the protocol writes) as JSON text.
pub fn encode<M: Encode + ?Sized>(message: &M) -> String {
    crate::json_write::to_text(message)
}
