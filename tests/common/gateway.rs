//! Builders for gateway requests and a checker for the window invariant.

use paceline::gateway::{handle, GatewayCore};
use paceline::protocol::{AcquireRequest, PacingRule, PenalizeRequest, ReleaseRequest};

pub fn acquire(bucket: &str, rules: &[PacingRule], requested: u64) -> AcquireRequest {
    AcquireRequest {
        bucket_id: bucket.into(),
        rate_scope_token: None,
        rules: rules.to_vec(),
        requested,
        observed_successes: 0,
        scheduler_schema: None,
        dispatch_lead_ms: None,
        returned_at_ms: Vec::new(),
        book_next_turn: false,
        waiting_callers: None,
        released_lease_ids: Vec::new(),
        quota: None,
        slots_wanted: None,
        held_lease_ids: Vec::new(),
        turn_ticket: None,
        slot_claim: None,
        slot_kind: Default::default(),
    }
}

pub fn release(bucket: &str, rules: &[PacingRule], lease_ids: Vec<String>) -> ReleaseRequest {
    ReleaseRequest {
        bucket_id: bucket.into(),
        rate_scope_token: None,
        rules: rules.to_vec(),
        lease_ids,
        scheduler_schema: None,
        returned_at_ms: Vec::new(),
    }
}

pub fn penalize(bucket: &str, cooldown_ms: u64) -> PenalizeRequest {
    PenalizeRequest {
        bucket_id: bucket.into(),
        rate_scope_token: None,
        cooldown_ms,
        scheduler_schema: None,
        quota: None,
        sent_at_ms: None,
    }
}

/// A charge request from `(key, amount, limit)` triples.
#[allow(unused_imports)]
pub use paceline::sim::charge_request as charge;

/// POSTs `body` through the gateway's HTTP face: `(status, body)`.
pub fn post(g: &mut GatewayCore, path: &str, body: &str, now_ms: u64) -> (u16, String) {
    let r = handle(g, "POST", path, body.as_bytes(), now_ms);
    (r.status, r.body)
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
