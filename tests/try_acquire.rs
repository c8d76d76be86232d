//! `try_acquire` and `take_due`: a permit handed out without waiting when
//! one is due, and otherwise when to ask again, on virtual time.

use std::rc::Rc;

use paceline::client::{GatewayRateState, NotYet, PacerOptions, Permit, PermitRequest};
use paceline::protocol::PacingRule;
use paceline::rt::Runtime;
use paceline::sim::{SimRuntime, T0};
use paceline::time::Clock;
use paceline::ErrorCode;

const BUCKET: &str = "org:p";

fn local(rt: &SimRuntime) -> GatewayRateState {
    let runtime: Rc<dyn Runtime> = Rc::new(rt.clone());
    GatewayRateState::local(runtime, PacerOptions::default(), 7)
}

fn request(rules: &[PacingRule]) -> PermitRequest<'_> {
    PermitRequest {
        bucket_id: BUCKET,
        rate_scope_token: None,
        rules,
        signal: None,
    }
}

fn try_now(state: &GatewayRateState, rules: &[PacingRule]) -> Result<Permit, NotYet> {
    state.try_acquire(request(rules)).expect("no failure")
}

#[test]
fn try_acquire_refuses_with_a_retry_time_then_hands_out_each_permit_when_it_is_due() {
    let rt = SimRuntime::new(T0);
    let state = local(&rt);
    let rules = [PacingRule::new(10, 1_000)];
    let refused = try_now(&state, &rules).expect_err("nothing is cached yet");
    assert!(refused.retry_after_ms >= 1, "{refused:?}");
    // The refusal started the refill; it lands without time passing.
    rt.run_until(rt.now_ms());
    let mut handed_out = Vec::new();
    while handed_out.len() < 5 {
        match try_now(&state, &rules) {
            Ok(permit) => {
                assert_eq!(permit.lease_id(), None);
                handed_out.push(rt.now_ms() - T0);
            }
            Err(NotYet { retry_after_ms }) => {
                assert!(retry_after_ms >= 1);
                rt.run_until(rt.now_ms() + retry_after_ms);
            }
        }
    }
    for pair in handed_out.windows(2) {
        assert!(
            pair[1] - pair[0] >= 100,
            "10 a second are at least 100 ms apart: {handed_out:?}"
        );
    }
    assert!(
        handed_out[4] - handed_out[0] <= 4 * 110,
        "each permit was taken at its time, not a poll later: {handed_out:?}"
    );
}

#[test]
fn take_due_hands_out_a_due_permit_and_otherwise_starts_nothing() {
    let rt = SimRuntime::new(T0);
    let state = local(&rt);
    let rules = [PacingRule::new(10, 1_000)];
    assert!(state.take_due(request(&rules)).unwrap().is_none());
    rt.run_until(rt.now_ms());
    assert_eq!(rt.pending_tasks(), 0, "no refill was started");
    assert!(try_now(&state, &rules).is_err());
    rt.run_until(rt.now_ms());
    assert!(state.take_due(request(&rules)).unwrap().is_some());
}

#[test]
fn try_acquire_without_rules_is_an_unpaced_permit() {
    let rt = SimRuntime::new(T0);
    let state = local(&rt);
    assert!(try_now(&state, &[]).is_ok());
}

#[test]
fn try_acquire_reports_a_refill_that_failed_once_then_tries_again() {
    let rt = SimRuntime::new(T0);
    let state = local(&rt);
    // A window longer than any the gateway accepts: its refusal is the
    // refill's failure.
    let rules = [PacingRule::new(1, u64::MAX / 2)];
    assert!(try_now(&state, &rules).is_err());
    rt.run_until(rt.now_ms());
    let failure = state
        .try_acquire(request(&rules))
        .expect_err("the refill's failure");
    assert_eq!(failure.code, ErrorCode::InvalidInput, "{failure:?}");
    let again = state.try_acquire(request(&rules)).expect("told once");
    assert!(again.is_err(), "a new refill is on its way");
}

/// Bug: a bucket whose leases were kept answered every `try_acquire` with
/// "ask again in 5 ms", so a caller that only polls never got a permit.
#[test]
fn try_acquire_hands_out_kept_leases_and_never_more_than_the_bound_bug_it_never_answered_with_one()
{
    let rt = SimRuntime::new(T0);
    let state = local(&rt);
    let rules = [PacingRule::new(20, 1_000).with_max_concurrency(2)];
    // Calls of 150 ms, started whenever `try_acquire` hands out a permit.
    let mut calls: Vec<(Permit, u64)> = Vec::new();
    let mut served = 0;
    while rt.now_ms() < T0 + 10_000 {
        let now = rt.now_ms();
        calls.retain(|(_, ends)| *ends > now);
        match try_now(&state, &rules) {
            Ok(permit) => {
                assert!(
                    permit.lease_id().is_some(),
                    "a permit under a bound holds a lease"
                );
                calls.push((permit, now + 150));
                served += 1;
                assert!(calls.len() <= 2, "{} calls at once of 2", calls.len());
            }
            Err(NotYet { retry_after_ms }) => {
                let next_end = calls
                    .iter()
                    .map(|(_, ends)| *ends)
                    .min()
                    .unwrap_or(u64::MAX);
                rt.run_until((now + retry_after_ms).min(next_end));
            }
        }
    }
    // A slot kept busy by 150 ms calls serves about 6.7 a second.
    assert!(served >= 60, "{served} permits in 10 s");
}
