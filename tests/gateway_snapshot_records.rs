//! Snapshot formats across versions, and the keyed records a Durable Object
//! stores: older snapshots and records restore to the state they were
//! written from, records restore to the same gateway as the whole snapshot,
//! a request changes only the records of what it touched, and a restore
//! keeps each streamed slot's next ready time.

use std::collections::BTreeMap;

mod common;

use common::records::{apply, kept_and_restored, records_from_hex, restored, CURRENT_FORMAT};
use paceline::gateway::{handle, GatewayConfig, GatewayCore};

const T0: u64 = 1_767_225_600_000;

/// The state the version-2, 3 and 4 fixtures were written from (by the
/// builds of those versions): leases, a cooldown, an adaptive cut, a quota
/// window, returned times and a run's ledger.
fn scenario() -> GatewayCore {
    let mut g = GatewayCore::new(GatewayConfig::default(), 7).unwrap();
    let mut post = |path: &str, body: &str, now: u64| {
        let r = handle(&mut g, "POST", path, body.as_bytes(), now);
        assert!(r.status < 500, "{}", r.body);
        r.body
    };
    let leased = r#""rules":[{"requestsPerWindow":20,"windowMs":1000,"maxConcurrency":10}]"#;
    post(
        "/v1/rate/acquire",
        &format!(r#"{{"bucketId":"org:leased",{leased},"requested":4}}"#),
        T0,
    );
    post(
        "/v1/rate/acquire",
        r#"{"bucketId":"org:cut","rules":[{"requestsPerWindow":10,"windowMs":1000}],"requested":1}"#,
        T0,
    );
    post(
        "/v1/rate/penalize",
        r#"{"bucketId":"org:cut","cooldownMs":2000}"#,
        T0,
    );
    let adaptive = r#""rules":[{"requestsPerWindow":100,"windowMs":1000,"adaptiveMaxRps":50}]"#;
    post(
        "/v1/rate/acquire",
        &format!(r#"{{"bucketId":"org:adaptive",{adaptive},"requested":3}}"#),
        T0,
    );
    post(
        "/v1/rate/penalize",
        r#"{"bucketId":"org:adaptive","cooldownMs":500}"#,
        T0 + 10,
    );
    let quota = format!(
        r#"{{"bucketId":"org:quota","rules":[{{"requestsPerWindow":30,"windowMs":60000}}],"requested":5,"quota":{{"observedAtMs":{T0},"limit":30,"windowMs":60000,"remaining":12,"resetAtMs":{}}}}}"#,
        T0 + 30_000
    );
    let grant = post("/v1/rate/acquire", &quota, T0);
    let times: serde_json::Value = serde_json::from_str(&grant).unwrap();
    let last = times["scheduledAtMs"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    post(
        "/v1/rate/release",
        &format!(
            r#"{{"bucketId":"org:quota","rules":[{{"requestsPerWindow":30,"windowMs":60000}}],"leaseIds":[],"returnedAtMs":[{last}]}}"#
        ),
        T0 + 1,
    );
    post(
        "/v1/budget/charge",
        r#"{"rootRunId":"run-1","reservationId":"r1","charges":[{"key":"toolCall","amount":3,"limit":10},{"key":"retry","amount":1,"limit":5}]}"#,
        T0,
    );
    post(
        "/v1/budget/charge",
        r#"{"rootRunId":"run-1","reservationId":"r2","charges":[{"key":"toolCall","amount":9,"limit":10}]}"#,
        T0,
    );
    g
}

const V4_RECORDS: &str = include_str!("fixtures/gateway-records-v4.json");

/// The version-4 records a Durable Object stored for the scenario.
fn v4_records() -> BTreeMap<String, Vec<u8>> {
    records_from_hex(V4_RECORDS)
}

/// Each record of `g` as it is written now.
fn records_of(g: &GatewayCore) -> BTreeMap<String, Vec<u8>> {
    g.records().into_iter().collect()
}

#[test]
fn version_3_and_4_snapshots_restore_to_the_state_they_were_written_from_but_its_slot_streams() {
    let v3 = include_bytes!("fixtures/gateway-snapshot-v3.bin");
    let v4 = include_bytes!("fixtures/gateway-snapshot-v4.bin");
    assert_eq!((v3[4], v4[4]), (3, 4), "the fixtures' versions");
    let from_v3 = GatewayCore::restore(v3, GatewayConfig::default()).unwrap();
    let from_v4 = GatewayCore::restore(v4, GatewayConfig::default()).unwrap();
    assert_eq!(from_v3.snapshot(), from_v4.snapshot());
    assert_eq!(
        from_v4.snapshot()[4],
        CURRENT_FORMAT,
        "written in the current version"
    );
    // Neither kept the streams of the leased bucket's slots; every other
    // record is the scenario's to the byte.
    let mut now = records_of(&scenario());
    let mut restored = records_of(&from_v4);
    let leased = "bucket:org:leased";
    assert_ne!(now.remove(leased), restored.remove(leased));
    assert_eq!(restored, now, "nothing else was lost or changed");
}

#[test]
fn stored_version_4_records_restore_and_mix_with_the_current_records_written_after() {
    let mut store = v4_records();
    assert!(store.values().all(|bytes| bytes[4] == 4));
    let v4 = include_bytes!("fixtures/gateway-snapshot-v4.bin");
    let whole = GatewayCore::restore(v4, GatewayConfig::default()).unwrap();
    let mut g = restored(&store);
    assert_eq!(g.snapshot(), whole.snapshot(), "records and snapshot agree");
    let rules = r#""rules":[{"requestsPerWindow":20,"windowMs":1000,"maxConcurrency":10}]"#;
    let body = format!(r#"{{"bucketId":"org:leased",{rules},"requested":2}}"#);
    let r = handle(&mut g, "POST", "/v1/rate/acquire", body.as_bytes(), T0);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        apply(&mut store, &mut g),
        2,
        "its bucket and the lease counter"
    );
    assert_eq!(store["bucket:org:leased"][4], CURRENT_FORMAT);
    assert_eq!(store["run:run-1"][4], 4, "untouched records stay as stored");
    assert_eq!(restored(&store).snapshot(), g.snapshot());
}

#[test]
fn a_version_2_snapshot_restores_its_leases_and_ledger_and_is_written_again_in_the_current_version()
{
    // Version 2 kept no counts for the adaptive rate's cuts: those start
    // empty, so the state equals the scenario's but for them.
    let v2 = include_bytes!("fixtures/gateway-snapshot-v2.bin");
    assert_eq!(v2[4], 2, "the fixture is version 2");
    let mut restored = GatewayCore::restore(v2, GatewayConfig::default()).unwrap();
    assert_eq!(restored.budget_counter("run-1", "toolCall"), 3);
    assert_eq!(restored.bucket_count(), 4);
    let again = restored.snapshot();
    assert_eq!(again[4], CURRENT_FORMAT);
    let back = GatewayCore::restore(&again, GatewayConfig::default()).unwrap();
    assert_eq!(back.snapshot(), again);
    let rules = r#""rules":[{"requestsPerWindow":20,"windowMs":1000,"maxConcurrency":10}]"#;
    let body = format!(r#"{{"bucketId":"org:leased",{rules},"requested":10}}"#);
    let r = handle(
        &mut restored,
        "POST",
        "/v1/rate/acquire",
        body.as_bytes(),
        T0,
    );
    let grant: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(
        grant["granted"], 6,
        "four of its ten slots are still leased"
    );
}

#[test]
fn the_records_restore_the_gateway_the_whole_snapshot_restores() {
    let g = scenario();
    let records: BTreeMap<_, _> = g.records().into_iter().collect();
    assert_eq!(records.len(), 1 + 4 + 1, "meta, four buckets, one run");
    assert_eq!(restored(&records).snapshot(), g.snapshot());
}

#[test]
fn changed_records_kept_request_by_request_restore_the_same_gateway() {
    let mut g = GatewayCore::new(GatewayConfig::default(), 7).unwrap();
    let mut store = BTreeMap::new();
    let acquire = |b: &str| {
        format!(
            r#"{{"bucketId":"{b}","rules":[{{"requestsPerWindow":5,"windowMs":1000,"maxConcurrency":3}}],"requested":2}}"#
        )
    };
    for (i, bucket) in ["a", "b", "a", "c"].into_iter().enumerate() {
        let now = T0 + i as u64 * 400;
        let r = handle(
            &mut g,
            "POST",
            "/v1/rate/acquire",
            acquire(bucket).as_bytes(),
            now,
        );
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(
            apply(&mut store, &mut g) <= 2,
            "its bucket and the lease counter"
        );
        assert_eq!(restored(&store).snapshot(), g.snapshot());
    }
    let charge = r#"{"rootRunId":"run-1","reservationId":"r1","charges":[{"key":"toolCall","amount":1,"limit":3}]}"#;
    handle(
        &mut g,
        "POST",
        "/v1/budget/charge",
        charge.as_bytes(),
        T0 + 2_000,
    );
    assert_eq!(apply(&mut store, &mut g), 1, "the run's record alone");
    assert_eq!(restored(&store).snapshot(), g.snapshot());
}

#[test]
fn a_request_that_changes_nothing_changes_no_record() {
    let config = GatewayConfig {
        secret: Some(b"s".to_vec()),
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 7).unwrap();
    let body =
        r#"{"bucketId":"b","rules":[{"requestsPerWindow":5,"windowMs":1000}],"requested":1}"#;
    assert_eq!(
        handle(&mut g, "POST", "/v1/rate/acquire", body.as_bytes(), T0).status,
        403
    );
    assert_eq!(
        handle(&mut g, "POST", "/v1/rate/acquire", b"{", T0).status,
        400
    );
    assert!(g.take_changed_records().is_empty());
}

#[test]
fn a_forgotten_bucket_is_a_deleted_record() {
    let config = GatewayConfig {
        max_buckets: 1,
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 7).unwrap();
    let mut store = BTreeMap::new();
    let body = |b: &str| {
        format!(
            r#"{{"bucketId":"{b}","rules":[{{"requestsPerWindow":5,"windowMs":1000}}],"requested":1}}"#
        )
    };
    handle(
        &mut g,
        "POST",
        "/v1/rate/acquire",
        body("old").as_bytes(),
        T0,
    );
    apply(&mut store, &mut g);
    assert!(store.contains_key("bucket:old"));
    let r = handle(
        &mut g,
        "POST",
        "/v1/rate/acquire",
        body("new").as_bytes(),
        T0 + 60_000,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    apply(&mut store, &mut g);
    assert!(!store.contains_key("bucket:old"), "{:?}", store.keys());
    assert!(store.contains_key("bucket:new"));
    assert_eq!(restored(&store).snapshot(), g.snapshot());
}

#[test]
fn a_record_listing_leases_out_of_expiry_order_is_refused() {
    use sha2::{Digest, Sha256};
    let mut g = GatewayCore::new(GatewayConfig::default(), 7).unwrap();
    let body = r#"{"bucketId":"b","rules":[{"requestsPerWindow":5,"windowMs":1000,"maxConcurrency":5}],"requested":2}"#;
    let r = handle(&mut g, "POST", "/v1/rate/acquire", body.as_bytes(), T0);
    let grant: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    let ids: Vec<[u8; 16]> = grant["leaseIds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| {
            u128::from_str_radix(id.as_str().unwrap(), 16)
                .unwrap()
                .to_le_bytes()
        })
        .collect();
    let mut bytes = g.snapshot();
    let at = |id: &[u8; 16]| bytes.windows(16).position(|w| w == id).unwrap();
    let (first, second) = (at(&ids[0]), at(&ids[1]));
    assert!(first < second, "written in expiry order");
    // Swap the two entries (each an id and its expiry), then seal again.
    let end = bytes.len() - 8;
    let second_len = (second..end)
        .find(|&i| i > second + 16 && bytes[i - 1] < 0x80)
        .unwrap()
        - second;
    let one = bytes[first..second].to_vec();
    let two = bytes[second..second + second_len].to_vec();
    bytes.splice(first..second + second_len, [two, one].concat());
    let sum = Sha256::digest(&bytes[..end]);
    bytes[end..].copy_from_slice(&sum[..8]);
    let e = GatewayCore::restore(&bytes, GatewayConfig::default()).unwrap_err();
    assert!(e.message.contains("out of expiry order"), "{}", e.message);
}

/// Acquires `n` permits of a bucket whose five slots each take a fifth of
/// 20 calls a second: calls on one slot are at least 250 ms apart.
fn acquire_streamed(g: &mut GatewayCore, n: u64, now: u64) -> serde_json::Value {
    let body = format!(
        r#"{{"bucketId":"b","rules":[{{"requestsPerWindow":20,"windowMs":1000,"maxConcurrency":5}}],"requested":{n}}}"#
    );
    let r = handle(g, "POST", "/v1/rate/acquire", body.as_bytes(), now);
    assert_eq!(r.status, 200, "{}", r.body);
    serde_json::from_str(&r.body).unwrap()
}

#[test]
fn a_restored_gateway_starts_no_call_on_a_freed_slot_before_its_stream_allows() {
    // Five calls at 0, 50, ..., 200 ms, one per slot; the last one's slot
    // is given back at 210 ms and may start its next call at 450 ms. A
    // restore used to forget that and start it at once, 150 ms early.
    let mut g = GatewayCore::new(GatewayConfig::default(), 7).unwrap();
    let mut store = BTreeMap::new();
    let first = acquire_streamed(&mut g, 5, T0);
    assert_eq!(first["scheduledAtMs"][4], T0 + 200);
    let last = first["leaseIds"][4].as_str().unwrap();
    let release = format!(
        r#"{{"bucketId":"b","rules":[{{"requestsPerWindow":20,"windowMs":1000,"maxConcurrency":5}}],"leaseIds":["{last}"]}}"#
    );
    let r = handle(
        &mut g,
        "POST",
        "/v1/rate/release",
        release.as_bytes(),
        T0 + 210,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    for (how, mut gateway) in kept_and_restored(g, &mut store) {
        let next = acquire_streamed(&mut gateway, 1, T0 + 300);
        assert_eq!(
            next["scheduledAtMs"],
            serde_json::json!([T0 + 450]),
            "{how}: the freed slot's next call is a spacing after its last"
        );
    }
}

#[test]
fn a_restored_gateway_still_ends_a_kept_leases_chain_on_time_while_others_wait() {
    // One slot, kept by a client from 0 ms; another wants it at 2.5 s. At
    // 3 s the keeper's chain is over and its renewal is refused, restart
    // or not: a restore used to start its chain again, and forget the
    // waiter.
    let mut g = GatewayCore::new(GatewayConfig::default(), 7).unwrap();
    let mut store = BTreeMap::new();
    let rules = r#""rules":[{"requestsPerWindow":20,"windowMs":1000,"maxConcurrency":1}]"#;
    let keep = |g: &mut GatewayCore, held: &str, wanted: u64, now: u64| {
        let body = format!(
            r#"{{"bucketId":"b",{rules},"requested":1,"slotsWanted":{wanted},"heldLeaseIds":[{held}]}}"#
        );
        let r = handle(g, "POST", "/v1/rate/acquire", body.as_bytes(), now);
        assert_eq!(r.status, 200, "{}", r.body);
        serde_json::from_str::<serde_json::Value>(&r.body).unwrap()
    };
    let kept = keep(&mut g, "", 1, T0);
    let lease = format!("{}", kept["leaseIds"][0]);
    assert_eq!(
        keep(&mut g, "", 1, T0 + 2_500)["leaseIds"],
        serde_json::json!([])
    );
    for (how, mut gateway) in kept_and_restored(g, &mut store) {
        let renewal = keep(&mut gateway, &lease, 0, T0 + 3_001);
        assert_eq!(
            renewal["keptLeaseIds"],
            serde_json::json!([]),
            "{how}: the chain is over and the slot goes back"
        );
    }
}

/// An acquire of one slot of a bucket with one, by a client that takes turn
/// tickets and shows `ticket` (0 for none).
fn acquire_one_slot(g: &mut GatewayCore, ticket: u64, now: u64) -> serde_json::Value {
    let body = format!(
        r#"{{"bucketId":"b","rules":[{{"requestsPerWindow":20,"windowMs":1000,"maxConcurrency":1}}],"requested":1,"turnTicket":{ticket}}}"#
    );
    let r = handle(g, "POST", "/v1/rate/acquire", body.as_bytes(), now);
    assert_eq!(r.status, 200, "{}", r.body);
    serde_json::from_str(&r.body).unwrap()
}

#[test]
fn a_restored_gateway_still_holds_a_freed_slot_for_its_ticket_bug_tickets_were_not_in_the_snapshot()
{
    // One slot, held from 0 ms; a client refused at 1 ms is booked a turn.
    // The slot is freed at 60 ms and the gateway restarts. A restore used
    // to forget the booking: the freed slot went to whoever asked first,
    // and new tickets were numbered from 1 again.
    let mut g = GatewayCore::new(GatewayConfig::default(), 7).unwrap();
    let mut store = BTreeMap::new();
    let holder = acquire_one_slot(&mut g, 0, T0);
    let refused = acquire_one_slot(&mut g, 0, T0 + 1);
    assert_eq!(refused["granted"], 0);
    let ticket = refused["turnTicket"].as_u64().expect("a ticket");
    let release = format!(
        r#"{{"bucketId":"b","rules":[{{"requestsPerWindow":20,"windowMs":1000,"maxConcurrency":1}}],"leaseIds":[{}]}}"#,
        holder["leaseIds"][0]
    );
    let r = handle(
        &mut g,
        "POST",
        "/v1/rate/release",
        release.as_bytes(),
        T0 + 60,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    for (how, mut gateway) in kept_and_restored(g, &mut store) {
        let cut_in = acquire_one_slot(&mut gateway, 0, T0 + 61);
        assert_eq!(cut_in["granted"], 0, "{how}: the slot is held");
        let behind = cut_in["turnTicket"].as_u64().expect("a ticket");
        assert!(
            behind > ticket,
            "{how}: a newer ticket, {behind} after {ticket}"
        );
        let served = acquire_one_slot(&mut gateway, ticket, T0 + 62);
        assert_eq!(served["granted"], 1, "{how}: the ticket's holder is served");
    }
}
