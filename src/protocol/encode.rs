//! The wire's messages as JSON text: each field by its wire name, in the
//! order of its struct, and when it is left out (an absent option, an
//! empty list, a flag not set, a default). Written by hand rather than
//! derived with serde (see `json_write`).

use super::{
    AcquireRequest, AcquireResponse, BudgetCharge, ChargeRequest, ChargeResponse, ErrorBody,
    ErrorFields, ObserveRequest, ObserveResponse, PacingRule, PenalizeRequest, PenalizeResponse,
    QuotaReport, ReleaseRequest, ReleaseResponse, SlotKind,
};
use crate::json_write::{Encode, ObjectWriter};

impl Encode for PacingRule {
    fn write_json(&self, out: &mut String) {
        ObjectWriter::new(out)
            .field("requestsPerWindow", &self.requests_per_window)
            .field("windowMs", &self.window_ms)
            .opt("maxConcurrency", &self.max_concurrency)
            .opt("adaptiveMaxRps", &self.adaptive_max_rps)
            .end();
    }
}

impl Encode for QuotaReport {
    fn write_json(&self, out: &mut String) {
        ObjectWriter::new(out)
            .field("observedAtMs", &self.observed_at_ms)
            .opt("limit", &self.limit)
            .opt("windowMs", &self.window_ms)
            .opt("remaining", &self.remaining)
            .opt("resetAtMs", &self.reset_at_ms)
            .end();
    }
}

impl Encode for ObserveRequest {
    fn write_json(&self, out: &mut String) {
        ObjectWriter::new(out)
            .field("bucketId", &self.bucket_id)
            .opt("rateScopeToken", &self.rate_scope_token)
            .field("quota", &self.quota)
            .opt("schedulerSchema", &self.scheduler_schema)
            .end();
    }
}

impl Encode for ObserveResponse {
    fn write_json(&self, out: &mut String) {
        ObjectWriter::new(out)
            .opt(
                "effectiveRequestsPerSecond",
                &self.effective_requests_per_second,
            )
            .end();
    }
}

impl Encode for SlotKind {
    fn write_json(&self, out: &mut String) {
        let name = match self {
            SlotKind::Streamed => "streamed",
            SlotKind::Paced => "paced",
            SlotKind::Either => "either",
        };
        name.write_json(out);
    }
}

impl Encode for AcquireRequest {
    fn write_json(&self, out: &mut String) {
        let mut o = ObjectWriter::new(out);
        o.field("bucketId", &self.bucket_id)
            .opt("rateScopeToken", &self.rate_scope_token)
            .field("rules", &self.rules)
            .field("requested", &self.requested);
        if self.observed_successes != 0 {
            o.field("observedSuccesses", &self.observed_successes);
        }
        o.opt("schedulerSchema", &self.scheduler_schema)
            .opt("dispatchLeadMs", &self.dispatch_lead_ms)
            .list("returnedAtMs", &self.returned_at_ms)
            .flag("bookNextTurn", self.book_next_turn)
            .opt("waitingCallers", &self.waiting_callers)
            .list("releasedLeaseIds", &self.released_lease_ids)
            .opt("quota", &self.quota)
            .opt("slotsWanted", &self.slots_wanted)
            .list("heldLeaseIds", &self.held_lease_ids)
            .opt("turnTicket", &self.turn_ticket)
            .opt("slotClaim", &self.slot_claim);
        if !self.slot_kind.is_streamed() {
            o.field("slotKind", &self.slot_kind);
        }
        o.end();
    }
}

impl Encode for AcquireResponse {
    fn write_json(&self, out: &mut String) {
        ObjectWriter::new(out)
            .field("granted", &self.granted)
            .field("waitMs", &self.wait_ms)
            .opt("scheduledAtMs", &self.scheduled_at_ms)
            .opt("leaseIds", &self.lease_ids)
            .opt(
                "effectiveRequestsPerSecond",
                &self.effective_requests_per_second,
            )
            .opt("cooldownUntilMs", &self.cooldown_until_ms)
            .opt("serverNowMs", &self.server_now_ms)
            .opt("dispatchToleranceMs", &self.dispatch_tolerance_ms)
            .opt("keptLeaseIds", &self.kept_lease_ids)
            .opt("leaseSpacingMs", &self.lease_spacing_ms)
            .opt("leaseTtlMs", &self.lease_ttl_ms)
            .flag("slotWaiters", self.slot_waiters)
            .opt("slotClaim", &self.slot_claim)
            .opt("slotShare", &self.slot_share)
            .opt("slotKeep", &self.slot_keep)
            .opt("turnTicket", &self.turn_ticket)
            .end();
    }
}

impl Encode for ReleaseRequest {
    fn write_json(&self, out: &mut String) {
        ObjectWriter::new(out)
            .field("bucketId", &self.bucket_id)
            .opt("rateScopeToken", &self.rate_scope_token)
            .field("rules", &self.rules)
            .field("leaseIds", &self.lease_ids)
            .opt("schedulerSchema", &self.scheduler_schema)
            .list("returnedAtMs", &self.returned_at_ms)
            .end();
    }
}

impl Encode for ReleaseResponse {
    fn write_json(&self, out: &mut String) {
        ObjectWriter::new(out)
            .field("released", &self.released)
            .end();
    }
}

impl Encode for PenalizeRequest {
    fn write_json(&self, out: &mut String) {
        ObjectWriter::new(out)
            .field("bucketId", &self.bucket_id)
            .opt("rateScopeToken", &self.rate_scope_token)
            .field("cooldownMs", &self.cooldown_ms)
            .opt("schedulerSchema", &self.scheduler_schema)
            .opt("quota", &self.quota)
            .opt("sentAtMs", &self.sent_at_ms)
            .end();
    }
}

impl Encode for PenalizeResponse {
    fn write_json(&self, out: &mut String) {
        ObjectWriter::new(out)
            .opt(
                "effectiveRequestsPerSecond",
                &self.effective_requests_per_second,
            )
            .field("cooldownUntilMs", &self.cooldown_until_ms)
            .end();
    }
}

impl Encode for BudgetCharge {
    fn write_json(&self, out: &mut String) {
        ObjectWriter::new(out)
            .field("key", &self.key)
            .field("amount", &self.amount)
            .field("limit", &self.limit)
            .end();
    }
}

impl Encode for ChargeRequest {
    fn write_json(&self, out: &mut String) {
        ObjectWriter::new(out)
            .field("rootRunId", &self.root_run_id)
            .field("reservationId", &self.reservation_id)
            .opt("runScopeToken", &self.run_scope_token)
            .field("charges", &self.charges)
            .flag("resent", self.resent)
            .end();
    }
}

impl Encode for ChargeResponse {
    fn write_json(&self, out: &mut String) {
        ObjectWriter::new(out)
            .field("counters", &self.counters)
            .end();
    }
}

impl Encode for ErrorBody {
    fn write_json(&self, out: &mut String) {
        ObjectWriter::new(out).field("error", &self.error).end();
    }
}

impl Encode for ErrorFields {
    fn write_json(&self, out: &mut String) {
        ObjectWriter::new(out)
            .field("code", self.code)
            .field("message", &self.message)
            .opt("key", &self.key)
            .opt("observed", &self.observed)
            .opt("limit", &self.limit)
            .opt("cooldownUntilMs", &self.cooldown_until_ms)
            .end();
    }
}
