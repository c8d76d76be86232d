//! A bucket's live state, for people and dashboards
//! (`GET /v1/rate/buckets/<id>`).

use serde::Serialize;

use super::timeline::{ceil_ms, micros};
use super::GatewayCore;
use crate::error::Result;
use crate::protocol::PacingRule;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BucketView {
    pub bucket_id: String,
    pub rules: Vec<PacingRule>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configured_requests_per_second: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_requests_per_second: Option<f64>,
    pub next_free_at_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cooldown_until_ms: Option<u64>,
    pub live_leases: u64,
    /// The strictest concurrency limit binding now: the current rules' or
    /// one another client named within its window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u64>,
    /// Successes clients reported. The rate law counts matured permits
    /// instead (see the gateway's adaptive module), so this is for people.
    pub reported_successes: u64,
    /// Times clients gave back that wait for the next acquirer.
    pub returned_permits: u64,
    pub server_now_ms: u64,
}

impl GatewayCore {
    /// The bucket's live state, or `None` if the gateway holds none for it.
    /// With a secret configured this needs the bucket's token like any
    /// other rate call.
    pub fn bucket(
        &mut self,
        bucket_id: &str,
        token: Option<&str>,
        now_ms: u64,
    ) -> Result<Option<BucketView>> {
        self.authorize(bucket_id, token, now_ms)?;
        let now = micros(now_ms);
        Ok(self.buckets.get_mut(bucket_id).map(|b| {
            b.concurrency.observe(&[], now);
            BucketView {
                bucket_id: bucket_id.to_owned(),
                rules: b.rules.clone(),
                configured_requests_per_second: b.adaptive.as_ref().map(|a| a.cap),
                effective_requests_per_second: b.effective_rps(),
                next_free_at_ms: ceil_ms(b.next_free(now)),
                cooldown_until_ms: b.cooldown_until_ms(now),
                live_leases: b.leases.live(now) as u64,
                max_concurrency: b.max_concurrency(),
                reported_successes: b.reported_successes,
                returned_permits: b.returns.pooled() as u64,
                server_now_ms: now_ms,
            }
        }))
    }
}
