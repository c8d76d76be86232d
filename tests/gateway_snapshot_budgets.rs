//! A run's budget ledger across restarts: a run that may have forgotten a
//! reservation still refuses an unknown resent id after a restore, from
//! its own records and from a version-5 gateway's.

mod common;

use std::collections::BTreeMap;

use common::records::{kept_and_restored, records_from_hex, restored, CURRENT_FORMAT};
use paceline::gateway::{handle, GatewayConfig, GatewayCore};
use paceline::protocol::limits::RESENT_REACH_MS;
use paceline::sim::T0;

/// A charge of one tool call to `run` under `id`, marked resent or not.
fn charge_one(g: &mut GatewayCore, run: &str, id: &str, resent: bool, now: u64) -> (u16, String) {
    let body = format!(
        r#"{{"rootRunId":"{run}","reservationId":"{id}","resent":{resent},"charges":[{{"key":"toolCall","amount":1,"limit":1000}}]}}"#
    );
    let r = handle(g, "POST", "/v1/budget/charge", body.as_bytes(), now);
    (r.status, r.body)
}

#[test]
fn a_version_5_run_that_held_128_reservations_refuses_an_unknown_resent_id_for_the_reach_after_its_last_charge(
) {
    // Written by the version-5 build: run-full made 130 reservations at
    // T0 + 5 ms (so it forgot two; version 5 did not record when), and
    // run-short three.
    let v5 = include_bytes!("fixtures/gateway-snapshot-v5.bin");
    assert_eq!(v5[4], 5, "the fixture is version 5");
    let records = records_from_hex(include_str!("fixtures/gateway-records-v5.json"));
    assert!(records.values().all(|bytes| bytes[4] == 5));
    let from_snapshot = GatewayCore::restore(v5, GatewayConfig::default()).unwrap();
    let from_records = restored(&records);
    assert_eq!(from_snapshot.snapshot(), from_records.snapshot());
    for (how, mut g) in [("snapshot", from_snapshot), ("records", from_records)] {
        let (status, body) = charge_one(&mut g, "run-full", "r0", true, T0 + 6);
        assert_eq!(status, 400, "{how}: r0 may have been counted: {body}");
        assert!(body.contains("may have been counted already"), "{body}");
        let (status, body) = charge_one(&mut g, "run-full", "r129", true, T0 + 6);
        assert_eq!(status, 200, "{how}: a remembered id answers: {body}");
        assert_eq!(g.budget_counter("run-full", "toolCall"), 130, "{how}");
        let (status, body) = charge_one(&mut g, "run-short", "lost", true, T0 + 6);
        assert_eq!(status, 200, "{how}: run-short forgot nothing: {body}");
        let after_reach = T0 + 5 + RESENT_REACH_MS + 1;
        let (status, body) = charge_one(&mut g, "run-full", "late", true, after_reach);
        assert_eq!(status, 200, "{how}: past the reach: {body}");
        let again = GatewayCore::restore(&g.snapshot(), GatewayConfig::default()).unwrap();
        assert_eq!(again.snapshot()[4], CURRENT_FORMAT);
        assert_eq!(again.snapshot(), g.snapshot(), "{how}");
    }
}

#[test]
fn a_restored_run_still_refuses_a_resent_id_it_may_have_forgotten() {
    let mut g = GatewayCore::new(GatewayConfig::default(), 7).unwrap();
    let mut store = BTreeMap::new();
    for i in 0..=256 {
        let (status, body) = charge_one(&mut g, "run", &format!("r{i}"), false, T0 + i);
        assert_eq!(status, 200, "{body}");
    }
    for (how, mut gateway) in kept_and_restored(g, &mut store) {
        let (status, body) = charge_one(&mut gateway, "run", "r0", true, T0 + 1_000);
        assert_eq!(status, 400, "{how}: {body}");
        assert_eq!(gateway.budget_counter("run", "toolCall"), 257, "{how}");
    }
}
