//! What providers say about their quota, relayed to the gateway: a report
//! rides on the bucket's next gateway request, or goes at once on its own
//! when it cannot wait (the gateway grants about a horizon ahead, so a
//! report that waited for the next acquire could come after the permits
//! that spend the quota).

use super::GatewayRateState;
use crate::error::ErrorCode;
use crate::protocol::{ObserveRequest, QuotaReport};
use crate::time::Millis;

/// A report goes to the gateway at once when fewer calls are left than
/// this long at the bucket's rate.
pub const QUOTA_URGENT_MS: Millis = 5_000;
/// The least time between two reports sent on their own from one isolate.
pub const QUOTA_REPORT_INTERVAL_MS: Millis = 250;

/// A bucket's quota reports waiting for the gateway.
#[derive(Default)]
pub(super) struct QuotaState {
    /// The provider's latest word (gateway clock), for the bucket's next
    /// gateway request.
    pub pending: Option<QuotaReport>,
    /// When a report last went out on its own, whether it is still out,
    /// and the limit it stated.
    sent_at: Option<Millis>,
    in_flight: bool,
    stated_limit: Option<(u64, Option<u64>)>,
}

impl QuotaState {
    pub fn is_idle(&self) -> bool {
        self.pending.is_none() && !self.in_flight
    }
}

impl GatewayRateState {
    /// What a provider's answer said about its quota (times on this
    /// isolate's clock). A newer report replaces an older one, keeping a
    /// limit only the older gave. A report that cannot wait (a new stated
    /// limit, or fewer calls left than [`QUOTA_URGENT_MS`] of the bucket's
    /// rate) goes at once on its own, at most one at a time and one per
    /// [`QUOTA_REPORT_INTERVAL_MS`].
    pub fn observe_quota(
        &self,
        bucket_id: &str,
        rate_scope_token: Option<&str>,
        mut report: QuotaReport,
    ) {
        if !report.is_useful() {
            return;
        }
        let now = self.inner.rt.now_ms();
        let refused = self.inner.observe_refused.get();
        let send = self.state(bucket_id, |s| {
            let q = &mut s.quota;
            let limit = report.limit.map(|l| (l, report.window_ms));
            let running_out = report.remaining.is_some_and(|left| {
                s.effective_rps
                    .is_none_or(|rps| (left as f64) < rps * QUOTA_URGENT_MS as f64 / 1e3)
            });
            let urgent = (limit.is_some() && limit != q.stated_limit) || running_out;
            let due = q
                .sent_at
                .is_none_or(|at| now >= at.saturating_add(QUOTA_REPORT_INTERVAL_MS));
            let send = urgent && due && !q.in_flight && !refused;
            if send {
                q.in_flight = true;
                q.sent_at = Some(now);
                q.stated_limit = limit.or(q.stated_limit);
            }
            report.observed_at_ms = s.clock.to_gateway(report.observed_at_ms);
            report.reset_at_ms = report.reset_at_ms.map(|t| s.clock.to_gateway(t));
            match &q.pending {
                Some(old) if old.observed_at_ms > report.observed_at_ms => {}
                old => {
                    if report.limit.is_none() {
                        if let Some(old) = old {
                            (report.limit, report.window_ms) = (old.limit, old.window_ms);
                        }
                    }
                    q.pending = Some(report);
                }
            }
            send
        });
        if send {
            let this = self.clone();
            let (bucket_id, token) = (bucket_id.to_owned(), rate_scope_token.map(str::to_owned));
            self.inner
                .rt
                .spawn(Box::pin(this.send_quota(bucket_id, token)));
        }
    }

    async fn send_quota(self, bucket_id: String, token: Option<String>) {
        let Some(quota) = self.state(&bucket_id, |s| s.quota.pending.take()) else {
            return;
        };
        let request = ObserveRequest {
            bucket_id: bucket_id.clone(),
            rate_scope_token: token,
            quota,
            scheduler_schema: self.inner.options.scheduler_schema.clone(),
        };
        let quota = request.quota.clone();
        let outcome = self.inner.port.observe(request).await;
        self.state(&bucket_id, |s| {
            s.quota.in_flight = false;
            match &outcome {
                Ok(r) => s.effective_rps = r.effective_requests_per_second.or(s.effective_rps),
                // Not lost: it rides on the next acquire unless a newer
                // report took its place.
                Err(_) if s.quota.pending.is_none() => s.quota.pending = Some(quota),
                Err(_) => {}
            }
        });
        // A port or gateway without the endpoint refuses it as bad input.
        if outcome.is_err_and(|e| e.code == ErrorCode::InvalidInput) {
            self.inner.observe_refused.set(true);
        }
    }
}
