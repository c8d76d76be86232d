//! Builders for gateway requests and a checker for the window invariant.

use paceline::protocol::{AcquireRequest, PacingRule, PenalizeRequest, ReleaseRequest};

pub fn acquire(bucket: &str, rules: &[PacingRule], requested: u64) -> AcquireRequest {
    AcquireRequest {
        bucket_id: bucket.into(),
        rate_scope_token: None,
        rules: rules.to_vec(),
        requested,
        observed_successes: 0,
        scheduler_schema: None,
        quota: None,
    }
}

pub fn release(bucket: &str, rules: &[PacingRule], lease_ids: Vec<String>) -> ReleaseRequest {
    ReleaseRequest {
        bucket_id: bucket.into(),
        rate_scope_token: None,
        rules: rules.to_vec(),
        lease_ids,
        scheduler_schema: None,
    }
}

pub fn penalize(bucket: &str, cooldown_ms: u64) -> PenalizeRequest {
    PenalizeRequest {
        bucket_id: bucket.into(),
        rate_scope_token: None,
        cooldown_ms,
        scheduler_schema: None,
        quota: None,
    }
}

/// The most dispatch times any half-open window `[a, a + window_ms)` holds.
pub fn densest_window(times: &[u64], window_ms: u64) -> usize {
    let mut sorted = times.to_vec();
    sorted.sort_unstable();
    let mut best = 0;
    let mut start = 0;
    for end in 0..sorted.len() {
        while sorted[end] >= sorted[start] + window_ms {
            start += 1;
        }
        best = best.max(end - start + 1);
    }
    best
}
