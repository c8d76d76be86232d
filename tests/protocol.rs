//! The wire protocol, natively: fixtures in the shapes clients send round-trip,
//! unknown fields are ignored, and every bad input is refused by name.

mod common;

use common::{acquire_rejects, other_rejects, same_json, FIXTURES};
use paceline::protocol::{
    decode, encode, rules_signature, AcquireRequest, AcquireResponse, ChargeResponse, ErrorBody,
    PacingRule, QuotaReport, SlotKind,
};
use paceline::{Detail, Error, ErrorCode};

#[test]
fn every_fixture_round_trips() {
    for (name, text, round_trip) in FIXTURES {
        if let Err(why) = round_trip(text) {
            panic!("{name}: {why}");
        }
    }
}

#[test]
fn legacy_grant_without_schedule_decodes_with_no_times() {
    let grant: AcquireResponse =
        decode(include_bytes!("fixtures/acquire-response-legacy.json")).unwrap();
    assert_eq!(grant.granted, 2);
    assert_eq!(grant.scheduled_at_ms, None);
    assert_eq!(grant.server_now_ms, None);
    assert_eq!(grant.lease_ids.unwrap(), ["lease-a", "lease-b"]);
}

#[test]
fn acquire_request_reads_every_field() {
    let req: AcquireRequest = decode(include_bytes!("fixtures/acquire-request.json")).unwrap();
    assert_eq!(req.bucket_id, "org_123:apollo");
    assert_eq!(req.requested, 8);
    assert_eq!(req.observed_successes, 12);
    assert_eq!(
        req.rules[0],
        PacingRule::new(20, 1_000)
            .with_max_concurrency(5)
            .with_adaptive_max_rps(40.0)
    );
    assert_eq!(req.rules[1], PacingRule::new(600, 60_000));
}

#[test]
fn unknown_fields_are_ignored() {
    let body = br#"{"bucketId":"b","rules":[{"requestsPerWindow":1,"windowMs":1000,"burst":9}],"requested":1,"client":"v9"}"#;
    let req: AcquireRequest = decode(body).unwrap();
    assert_eq!(
        encode(&req),
        r#"{"bucketId":"b","rules":[{"requestsPerWindow":1,"windowMs":1000}],"requested":1}"#
    );
}

#[test]
fn integral_floats_count_as_integers_and_fractional_times_round_up() {
    let req: AcquireRequest = decode(
        br#"{"bucketId":"b","rules":[{"requestsPerWindow":20.0,"windowMs":1e3}],"requested":2}"#,
    )
    .unwrap();
    assert_eq!(req.rules[0], PacingRule::new(20, 1_000));
    let grant: AcquireResponse =
        decode(br#"{"granted":1,"waitMs":0.2,"scheduledAtMs":[1000.01]}"#).unwrap();
    assert_eq!(grant.wait_ms, 1);
    assert_eq!(grant.scheduled_at_ms, Some(vec![1_001]));
}

#[test]
fn blank_token_means_no_token() {
    let req: AcquireRequest = decode(
        br#"{"bucketId":"b","rateScopeToken":"  ","rules":[{"requestsPerWindow":1,"windowMs":1}],"requested":1}"#,
    )
    .unwrap();
    assert_eq!(req.rate_scope_token, None);
}

#[test]
fn every_bad_acquire_is_refused_naming_the_field() {
    for case in acquire_rejects() {
        match decode::<AcquireRequest>(case.body.as_bytes()) {
            Ok(req) => panic!("{}: accepted {req:?}", case.what),
            Err(e) => {
                assert_eq!(e.code, ErrorCode::InvalidInput, "{}", case.what);
                assert!(
                    e.message.contains(case.says),
                    "{}: message {:?} lacks {:?}",
                    case.what,
                    e.message,
                    case.says
                );
            }
        }
    }
}

#[test]
fn every_bad_message_of_other_kinds_is_refused() {
    for (what, outcome, says) in other_rejects() {
        let message = outcome.unwrap_or_else(|why| panic!("{what}: {why}"));
        assert!(message.contains(says), "{what}: {message:?} lacks {says:?}");
    }
}

#[test]
fn charge_answer_with_counters_not_an_object_is_refused_quoting_them_shortly() {
    let long = "x".repeat(500);
    let body = format!(r#"{{"counters":["{long}"]}}"#);
    let e = decode::<ChargeResponse>(body.as_bytes()).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    assert!(
        e.message
            .starts_with("counters must be an object, got [\"xxx"),
        "{}",
        e.message
    );
    assert!(
        e.message.ends_with('…') && e.message.len() < 120,
        "{}",
        e.message
    );
}

#[test]
fn budget_error_body_carries_its_fields_both_ways() {
    let error = Error::budget_exceeded("toolCall", 257, 256);
    assert_eq!(
        error.message,
        "Play execution toolCall budget exceeded (257/256)."
    );
    let wire = encode(&ErrorBody::from(&error));
    let fixture: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/error-budget-exceeded.json")).unwrap();
    assert!(
        same_json(&serde_json::from_str(&wire).unwrap(), &fixture),
        "{wire}"
    );
    let back = decode::<ErrorBody>(wire.as_bytes()).unwrap().into_error();
    assert_eq!(back, error);
}

#[test]
fn error_body_with_unknown_code_surfaces_as_gateway_unavailable() {
    let back = decode::<ErrorBody>(br#"{"error":{"code":"TEAPOT","message":"short and stout"}}"#)
        .unwrap()
        .into_error();
    assert_eq!(back.code, ErrorCode::GatewayUnavailable);
    assert_eq!(back.message, "short and stout");
    assert_eq!(back.detail, None::<Detail>);
}

#[test]
fn rules_signature_ignores_rule_order_but_not_limits() {
    let a = PacingRule::new(20, 1_000);
    let b = PacingRule::new(600, 60_000).with_max_concurrency(4);
    assert_eq!(
        rules_signature(&[a.clone(), b.clone()]),
        rules_signature(&[b.clone(), a.clone()])
    );
    assert_ne!(
        rules_signature(std::slice::from_ref(&a)),
        rules_signature(&[PacingRule::new(21, 1_000)])
    );
    assert_ne!(
        rules_signature(&[b]),
        rules_signature(&[PacingRule::new(600, 60_000)])
    );
}

/// Snapshots store the signature as the key of a bucket's rules, so its
/// text must not change with how it is written.
#[test]
fn rules_signature_text_is_stable() {
    let rules = [
        PacingRule::new(600, 60_000).with_max_concurrency(4),
        PacingRule::new(0, u64::MAX).with_adaptive_max_rps(2.5),
        PacingRule::new(20, 1_000),
    ];
    assert_eq!(
        rules_signature(&rules),
        "0/18446744073709551615::2.5|20/1000::|600/60000:4:"
    );
}

/// The encoders are written by hand: every field's name, its place and
/// when it is left out are pinned here (the fixtures check values only).
#[test]
fn an_acquire_request_encodes_every_field_by_its_wire_name_in_order() {
    // Every optional field left out (what `acquire` builds).
    let minimal = common::gateway::acquire("b", &[PacingRule::new(20, 1_000)], 5);
    assert_eq!(
        encode(&minimal),
        r#"{"bucketId":"b","rules":[{"requestsPerWindow":20,"windowMs":1000}],"requested":5}"#
    );
    let full = AcquireRequest {
        rate_scope_token: Some("t".into()),
        rules: vec![PacingRule::new(20, 1_000)
            .with_max_concurrency(3)
            .with_adaptive_max_rps(12.5)],
        observed_successes: 7,
        scheduler_schema: Some("s".into()),
        dispatch_lead_ms: Some(40),
        returned_at_ms: vec![1, 2],
        book_next_turn: true,
        waiting_callers: Some(4),
        released_lease_ids: vec!["r".into()],
        quota: Some(QuotaReport {
            observed_at_ms: 9,
            limit: Some(100),
            window_ms: Some(60_000),
            remaining: Some(4),
            reset_at_ms: Some(99),
        }),
        slots_wanted: Some(2),
        held_lease_ids: vec!["h".into()],
        turn_ticket: Some(0),
        slot_claim: Some(4),
        slot_kind: SlotKind::Paced,
        ..minimal
    };
    assert_eq!(
        encode(&full),
        concat!(
            r#"{"bucketId":"b","rateScopeToken":"t","#,
            r#""rules":[{"requestsPerWindow":20,"windowMs":1000,"maxConcurrency":3,"adaptiveMaxRps":12.5}],"#,
            r#""requested":5,"observedSuccesses":7,"schedulerSchema":"s","dispatchLeadMs":40,"#,
            r#""returnedAtMs":[1,2],"bookNextTurn":true,"waitingCallers":4,"releasedLeaseIds":["r"],"#,
            r#""quota":{"observedAtMs":9,"limit":100,"windowMs":60000,"remaining":4,"resetAtMs":99},"#,
            r#""slotsWanted":2,"heldLeaseIds":["h"],"turnTicket":0,"slotClaim":4,"slotKind":"paced"}"#
        )
    );
}

#[test]
fn an_acquire_response_and_an_error_body_encode_every_field_by_its_wire_name_in_order() {
    let grant = AcquireResponse {
        granted: 2,
        wait_ms: 0,
        scheduled_at_ms: Some(vec![10, 20]),
        lease_ids: Some(vec!["a".into(), "b".into()]),
        effective_requests_per_second: Some(0.5),
        cooldown_until_ms: Some(5),
        server_now_ms: Some(6),
        dispatch_tolerance_ms: Some(7),
        kept_lease_ids: Some(vec![]),
        lease_spacing_ms: Some(8),
        lease_ttl_ms: Some(9),
        slot_waiters: true,
        slot_claim: Some(11),
        slot_share: Some(3),
        slot_keep: Some(2),
        turn_ticket: Some(3),
    };
    assert_eq!(
        encode(&grant),
        concat!(
            r#"{"granted":2,"waitMs":0,"scheduledAtMs":[10,20],"leaseIds":["a","b"],"#,
            r#""effectiveRequestsPerSecond":0.5,"cooldownUntilMs":5,"serverNowMs":6,"#,
            r#""dispatchToleranceMs":7,"keptLeaseIds":[],"leaseSpacingMs":8,"leaseTtlMs":9,"#,
            r#""slotWaiters":true,"slotClaim":11,"slotShare":3,"slotKeep":2,"turnTicket":3}"#
        )
    );
    let error =
        Error::new(ErrorCode::BudgetExceeded, "over \"retry\"").with_detail(Detail::Budget {
            key: "retry".into(),
            observed: 4,
            limit: 3,
        });
    assert_eq!(
        encode(&ErrorBody::from(&error)),
        r#"{"error":{"code":"BUDGET_EXCEEDED","message":"over \"retry\"","key":"retry","observed":4,"limit":3}}"#
    );
}

#[test]
fn error_codes_have_stable_strings_and_statuses() {
    for code in ErrorCode::ALL {
        assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
    }
    assert_eq!(ErrorCode::InvalidInput.http_status(), 400);
    assert_eq!(ErrorCode::ForbiddenScope.http_status(), 403);
    assert_eq!(ErrorCode::BudgetExceeded.http_status(), 409);
}
