//! A bucket's live state, for people and dashboards
//! (`GET /v1/rate/buckets/<id>`).

use serde::Serialize;

use super::timeline::{ceil_ms, micros};
use super::GatewayCore;
use crate::error::Result;
use crate::json_write::{Encode, ObjectWriter};
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

/// The same text as the derived `Serialize`'s, written by hand: the
/// gateway's HTTP answer and the wasm bindings use this, so the full module
/// carries no serde serializer. A Rust caller may still serialise the view
/// with serde.
impl Encode for BucketView {
    fn write_json(&self, out: &mut String) {
        ObjectWriter::new(out)
            .field("bucketId", &self.bucket_id)
            .field("rules", &self.rules)
            .opt(
                "configuredRequestsPerSecond",
                &self.configured_requests_per_second,
            )
            .opt(
                "effectiveRequestsPerSecond",
                &self.effective_requests_per_second,
            )
            .field("nextFreeAtMs", &self.next_free_at_ms)
            .opt("cooldownUntilMs", &self.cooldown_until_ms)
            .field("liveLeases", &self.live_leases)
            .opt("maxConcurrency", &self.max_concurrency)
            .field("reportedSuccesses", &self.reported_successes)
            .field("returnedPermits", &self.returned_permits)
            .field("serverNowMs", &self.server_now_ms)
            .end();
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_write::to_text;

    /// Dashboards read the hand-written text; a Rust caller serialising
    /// the view with serde gets the same, with every optional field absent
    /// and with every one present.
    #[test]
    fn a_bucket_view_is_written_as_serde_writes_it() {
        let mut view = BucketView {
            bucket_id: "bucket \"1\" ü".to_owned(),
            rules: vec![],
            configured_requests_per_second: None,
            effective_requests_per_second: None,
            next_free_at_ms: 0,
            cooldown_until_ms: None,
            live_leases: 0,
            max_concurrency: None,
            reported_successes: 0,
            returned_permits: 0,
            server_now_ms: 0,
        };
        assert_eq!(to_text(&view), serde_json::to_string(&view).unwrap());
        let mut limited = PacingRule::new(5, 1_000).with_max_concurrency(3);
        limited.adaptive_max_rps = Some(0.25);
        view.rules = vec![PacingRule::new(100, 60_000), limited];
        view.configured_requests_per_second = Some(12.5);
        view.effective_requests_per_second = Some(1e-7);
        view.next_free_at_ms = u64::MAX;
        view.cooldown_until_ms = Some(1_700_000_000_123);
        view.live_leases = 7;
        view.max_concurrency = Some(3);
        view.reported_successes = 42;
        view.returned_permits = 2;
        view.server_now_ms = 1_700_000_000_000;
        assert_eq!(to_text(&view), serde_json::to_string(&view).unwrap());
        view.effective_requests_per_second = Some(f64::NAN);
        assert_eq!(to_text(&view), serde_json::to_string(&view).unwrap());
    }
}
