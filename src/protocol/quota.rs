//! A provider's word on its own quota, relayed by a client: the optional
//! `quota` field of an acquire or a penalize request. An older gateway
//! ignores the field (unknown fields are ignored), so a client can always
//! send it.
//!
//! Every time is on the gateway's clock (the client converts with the skew
//! it measures from `serverNowMs`); the values come from a provider's
//! headers and are checked here like any other input.

use crate::json_value::Value;

use super::limits;
use crate::error::{Error, Result};
use crate::json::{as_object, Decode, Fields};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaReport {
    /// When the provider counted the call whose answer said this.
    pub observed_at_ms: u64,
    /// Requests the provider allows per window.
    pub limit: Option<u64>,
    /// The window `limit` counts over, when the provider named it.
    pub window_ms: Option<u64>,
    /// Requests left until `resetAtMs`.
    pub remaining: Option<u64>,
    pub reset_at_ms: Option<u64>,
}

impl QuotaReport {
    /// Whether it says anything the gateway can use.
    pub fn is_useful(&self) -> bool {
        self.limit.is_some() || (self.remaining.is_some() && self.reset_at_ms.is_some())
    }

    pub(crate) fn from_fields(f: &Fields<'_>, field: &str) -> Result<Option<Self>> {
        let Some(q) = f.opt_object(field)? else {
            return Ok(None);
        };
        let report = QuotaReport {
            observed_at_ms: q.millis("observedAtMs")?,
            limit: q.opt_integer("limit", 1, limits::MAX_REQUESTS_PER_WINDOW)?,
            window_ms: q.opt_integer("windowMs", 1, limits::MAX_WINDOW_MS)?,
            remaining: q.opt_integer("remaining", 0, limits::MAX_REQUESTS_PER_WINDOW)?,
            reset_at_ms: q.opt_millis("resetAtMs")?,
        };
        if report.window_ms.is_some() && report.limit.is_none() {
            return Err(Error::invalid(format!(
                "{} names the window of a limit it does not give",
                f.name(field)
            )));
        }
        Ok(Some(report))
    }
}

/// `POST /v1/rate/observe`: a provider's quota headers, sent on their own
/// when they cannot wait for the bucket's next acquire (its quota is about
/// to run out, or it stated a limit). An older gateway answers 404; the
/// report is advice, and the client then keeps it for its next acquire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObserveRequest {
    pub bucket_id: String,
    pub rate_scope_token: Option<String>,
    pub quota: QuotaReport,
    pub scheduler_schema: Option<String>,
}

impl Decode for ObserveRequest {
    fn from_value(value: &Value) -> Result<Self> {
        let f = as_object(value, "")?;
        let quota = QuotaReport::from_fields(&f, "quota")?
            .ok_or_else(|| Error::invalid("quota is required and must be an object"))?;
        Ok(ObserveRequest {
            bucket_id: f.string("bucketId", limits::MAX_ID_BYTES)?.to_owned(),
            rate_scope_token: f
                .opt_string("rateScopeToken", limits::MAX_TOKEN_BYTES)?
                .map(|t| t.trim().to_owned()),
            quota,
            scheduler_schema: f
                .opt_string("schedulerSchema", limits::MAX_ID_BYTES)?
                .map(str::to_owned),
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ObserveResponse {
    /// Absent when the gateway holds no rules for the bucket (the report
    /// was then ignored).
    pub effective_requests_per_second: Option<f64>,
}

impl Decode for ObserveResponse {
    fn from_value(value: &Value) -> Result<Self> {
        let f = as_object(value, "")?;
        Ok(ObserveResponse {
            effective_requests_per_second: f
                .opt_positive_number("effectiveRequestsPerSecond", f64::MAX)?,
        })
    }
}
