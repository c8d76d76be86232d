//! The gateway's state stays bounded whatever clients send: every table
//! has a cap or an expiry, a full gateway refuses with a code, queues shrink
//! as their entries go, and no stored record nears a Durable Object's limit
//! on one value. Also the snapshot's checksum and its migration from
//! version 1. One test per finding of the hardening review, named after it.

mod common;

use common::gateway::{acquire, charge, penalize, post, release};
use common::records::CURRENT_FORMAT;
use paceline::gateway::{
    GatewayConfig, GatewayCore, FORGET_CUT_AFTER_US, MAX_BUDGET_KEYS, MAX_LIVE_LEASES, RUN_IDLE_US,
};
use paceline::protocol::PacingRule;
use paceline::sim::T0;
use paceline::ErrorCode;

/// A Durable Object's limit on one stored value.
const STORAGE_VALUE_LIMIT: usize = 128 * 1024;

fn per_second(n: u64) -> PacingRule {
    PacingRule::new(n, 1_000)
}

#[test]
fn budget_ledgers_stay_far_below_the_storage_value_limit_whatever_the_charges() {
    let mut g = GatewayCore::new(GatewayConfig::default(), 1).unwrap();
    let long_id = "r".repeat(256);
    let refused = format!(
        r#"{{"rootRunId":"run","reservationId":"{long_id}","charges":[{{"key":"k","amount":1,"limit":9}}]}}"#
    );
    assert_eq!(post(&mut g, "/v1/budget/charge", &refused, T0).0, 400);
    // The review's repro, at the new caps: the longest ids, sixteen of the
    // longest keys per charge, as many charges as anyone likes.
    for i in 0..2_000 {
        let id = format!("{i:0>64}");
        let charges: Vec<String> = (0..16)
            .map(|k| {
                let key = (i * 16 + k) % MAX_BUDGET_KEYS;
                format!(r#"{{"key":"{key:0>64}","amount":1,"limit":1000000000}}"#)
            })
            .collect();
        let body = format!(
            r#"{{"rootRunId":"{}","reservationId":"{id}","charges":[{}]}}"#,
            "x".repeat(256),
            charges.join(",")
        );
        let (status, answer) = post(&mut g, "/v1/budget/charge", &body, T0 + i as u64);
        assert_eq!(status, 200, "{answer}");
    }
    let bytes = g.snapshot().len();
    assert!(bytes < STORAGE_VALUE_LIMIT / 4, "{bytes} bytes for one run");
    let key = format!("{:0>64}", MAX_BUDGET_KEYS);
    let over = format!(
        r#"{{"rootRunId":"{}","reservationId":"more","charges":[{{"key":"{key}","amount":1,"limit":9}}]}}"#,
        "x".repeat(256)
    );
    let (status, answer) = post(&mut g, "/v1/budget/charge", &over, T0 + 5_000);
    assert_eq!(status, 400, "a key past the run's cap: {answer}");
}

#[test]
fn a_tiny_adaptive_max_rps_bucket_is_forgotten_once_idle() {
    let config = GatewayConfig {
        max_buckets: 1,
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 1).unwrap();
    let slowest = per_second(10).with_adaptive_max_rps(0.001);
    g.acquire(&acquire("v", &[slowest], 1), T0).unwrap();
    let e = g
        .acquire(&acquire("w", &[per_second(10)], 1), T0 + 10_000)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::GatewayUnavailable);
    assert!(e.message.contains("maximum of 1 buckets"), "{}", e.message);
    let after = T0 + 1_000_000;
    assert_eq!(
        g.acquire(&acquire("w", &[per_second(10)], 1), after)
            .unwrap()
            .granted,
        1
    );
    assert!(g.bucket("v", None, after).unwrap().is_none());
}

#[test]
fn one_buckets_state_outgrows_storage_a_concurrency_above_the_lease_cap_is_refused() {
    let mut g = GatewayCore::new(GatewayConfig::default(), 1).unwrap();
    let huge = [PacingRule::new(1_000_000, 1_000).with_max_concurrency(100_000)];
    let e = g.acquire(&acquire("b", &huge, 1_000), T0).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    assert!(e.message.contains("maxConcurrency 100000"), "{}", e.message);
    assert_eq!(g.bucket_count(), 0, "refused before any state changed");

    let full = [PacingRule::new(1_000_000, 1_000).with_max_concurrency(MAX_LIVE_LEASES)];
    let mut granted = 0;
    for i in 0..100 {
        granted += g
            .acquire(&acquire("b", &full, 1_000), T0 + i)
            .unwrap()
            .granted;
    }
    assert_eq!(granted, MAX_LIVE_LEASES);
    let bytes = g.snapshot().len();
    assert!(
        bytes < STORAGE_VALUE_LIMIT / 3,
        "{bytes} bytes with every lease live"
    );
}

#[test]
fn max_buckets_does_not_bound_memory_a_full_gateway_refuses_new_buckets() {
    let config = GatewayConfig {
        max_buckets: 100,
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 1).unwrap();
    let rules = [per_second(1).with_max_concurrency(1)];
    let mut refused = 0;
    for i in 0..20_000 {
        match g.acquire(&acquire(&format!("busy{i}"), &rules, 1), T0) {
            Ok(r) => assert_eq!(r.granted, 1),
            Err(e) => {
                assert_eq!(e.code, ErrorCode::GatewayUnavailable);
                refused += 1;
            }
        }
    }
    assert_eq!(g.bucket_count(), 100);
    assert_eq!(refused, 19_900);
    let body = r#"{"bucketId":"one-more","rules":[{"requestsPerWindow":1,"windowMs":1000}],"requested":1}"#;
    let (status, answer) = post(&mut g, "/v1/rate/acquire", body, T0);
    assert_eq!(status, 503);
    assert!(answer.contains("GATEWAY_UNAVAILABLE"), "{answer}");
    let after_leases = T0 + 61_000;
    assert_eq!(
        g.acquire(&acquire("one-more", &rules, 1), after_leases)
            .unwrap()
            .granted,
        1,
        "once their leases expired the busy buckets made room"
    );
    assert_eq!(g.bucket_count(), 1);
}

#[test]
fn max_buckets_does_not_bound_memory_a_bucket_penalized_before_its_rules_is_forgotten() {
    let config = GatewayConfig {
        max_buckets: 1,
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 1).unwrap();
    g.penalize(&penalize("unseen", 1_000), T0).unwrap();
    let soon = T0 + 60_000;
    let e = g
        .acquire(&acquire("other", &[per_second(1)], 1), soon)
        .unwrap_err();
    assert_eq!(
        e.code,
        ErrorCode::GatewayUnavailable,
        "the cut is kept a while"
    );
    let hour = T0 + FORGET_CUT_AFTER_US / 1_000;
    assert_eq!(
        g.acquire(&acquire("other", &[per_second(1)], 1), hour)
            .unwrap()
            .granted,
        1
    );
    assert!(g.bucket("unseen", None, hour).unwrap().is_none());
}

#[test]
fn max_buckets_does_not_bound_memory_run_ledgers_are_forgotten_after_a_day() {
    let config = GatewayConfig {
        max_runs: 2,
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 1).unwrap();
    g.charge(&charge("a", "1", None, &[("toolCall", 5, 5)]), T0)
        .unwrap();
    g.charge(&charge("b", "1", None, &[("toolCall", 1, 5)]), T0 + 1)
        .unwrap();
    let e = g
        .charge(&charge("c", "1", None, &[("toolCall", 1, 5)]), T0 + 2)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::GatewayUnavailable);
    let day = T0 + RUN_IDLE_US / 1_000;
    let full = g.charge(&charge("a", "2", None, &[("toolCall", 1, 5)]), day - 1);
    assert_eq!(
        full.unwrap_err().code,
        ErrorCode::BudgetExceeded,
        "not idle yet"
    );
    assert!(g
        .charge(&charge("c", "1", None, &[("toolCall", 1, 5)]), day + 1)
        .is_ok());
    assert_eq!(
        g.budget_counter("b", "toolCall"),
        0,
        "b was idle a day: forgotten"
    );
    let fresh = g.charge(&charge("a", "3", None, &[("toolCall", 1, 5)]), day * 2);
    assert_eq!(
        fresh.unwrap().counters["toolCall"],
        1,
        "a ledger idle a day starts over"
    );
}

#[test]
fn released_leases_stay_in_the_expiry_queue_the_queue_shrinks_as_leases_go() {
    // Leases that outlive the loop, and rounds 2.1 s apart so the granted
    // permits mature (their count is the adaptive rate's, not measured here).
    let config = GatewayConfig {
        lease_ttl_ms: 86_400_000,
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 1).unwrap();
    let rules = [PacingRule::new(1_000_000, 1_000).with_max_concurrency(MAX_LIVE_LEASES)];
    let kept = g.acquire(&acquire("b", &rules, 1), T0).unwrap();
    assert_eq!(kept.granted, 1);
    let mut sizes = Vec::new();
    for i in 1..=200 {
        let now = T0 + i * 2_100;
        let r = g.acquire(&acquire("b", &rules, 1_000), now).unwrap();
        assert_eq!(r.granted, 1_000);
        let done = g
            .release(&release("b", &rules, r.lease_ids.unwrap()), now)
            .unwrap();
        assert_eq!(done.released, 1_000);
        sizes.push(g.snapshot().len());
    }
    assert_eq!(g.queued_leases(), 1, "only the kept lease is queued");
    // The log of recent grants fills to its 64 entries; then nothing grows.
    let settled = &sizes[100..];
    let (low, high) = (settled.iter().min().unwrap(), settled.iter().max().unwrap());
    assert!(high - low <= 32, "snapshot from {low} to {high} bytes");
    assert!(
        sizes[199] < sizes[0] + 1_024,
        "{} then {}",
        sizes[0],
        sizes[199]
    );
}

#[test]
fn corrupted_snapshots_restore_no_single_bit_flip_is_restored() {
    let mut g = GatewayCore::new(GatewayConfig::default(), [3; 32]).unwrap();
    let rules = [per_second(20).with_max_concurrency(10)];
    g.acquire(&acquire("org:p", &rules, 4), T0).unwrap();
    g.penalize(&penalize("org:q", 1_000), T0).unwrap();
    g.charge(&charge("run", "r1", None, &[("toolCall", 1, 5)]), T0)
        .unwrap();
    let bytes = g.snapshot();
    let mut refused = 0;
    for bit in 0..bytes.len() * 8 {
        let mut flipped = bytes.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        let e = GatewayCore::restore(&flipped, GatewayConfig::default()).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput, "bit {bit}");
        refused += 1;
    }
    assert_eq!(refused, bytes.len() * 8);
}

#[test]
fn a_version_1_snapshot_restores_and_continues_its_leases_budgets_and_cuts() {
    // Made before the checksummed format: a bucket "org:leased" (20/s, 10
    // concurrent) with 4 leases granted at T0, a bucket "org:cut" (10/s)
    // penalized for 2 s at T0, "org:unseen" penalized before its rules, and
    // run "run-1" charged r1 = {toolCall 3/10, retry 1/5} and refused
    // r2 = {toolCall 9/10}.
    let v1 = include_bytes!("fixtures/gateway-snapshot-v1.bin");
    assert_eq!(v1[4], 1, "the fixture is version 1");
    let mut g = GatewayCore::restore(v1, GatewayConfig::default()).unwrap();
    let leased = [per_second(20).with_max_concurrency(10)];
    let old_ids = [
        "21b91e90b1420b12",
        "d2d0a9ed92e8a465",
        "2220d2d2f1423244",
        "4ee435a4f6659666",
    ];
    let next = g.acquire(&acquire("org:leased", &leased, 1), T0).unwrap();
    assert_eq!(
        next.scheduled_at_ms.unwrap(),
        [T0 + 200],
        "no time is granted twice"
    );
    assert_eq!(next.lease_ids.as_ref().unwrap()[0].len(), 32);
    let ids = old_ids.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        g.release(&release("org:leased", &leased, ids), T0)
            .unwrap()
            .released,
        4
    );
    let retried = g
        .charge(
            &charge("run-1", "r1", None, &[("toolCall", 3, 10), ("retry", 1, 5)]),
            T0,
        )
        .unwrap();
    assert_eq!(retried.counters["toolCall"], 3, "the retry counts once");
    let refused = g.charge(&charge("run-1", "r2", None, &[("toolCall", 9, 10)]), T0);
    assert_eq!(
        refused.unwrap_err().message,
        "Play execution toolCall budget exceeded (12/10)."
    );
    let cut = g
        .acquire(&acquire("org:cut", &[per_second(10)], 1), T0)
        .unwrap();
    assert_eq!(cut.granted, 0, "the cooldown survived");
    let unseen = g
        .acquire(&acquire("org:unseen", &[per_second(10)], 1), T0 + 1_000)
        .unwrap();
    assert_eq!(
        unseen.effective_requests_per_second,
        Some(7.0),
        "the pending cut survived"
    );
    let current = g.snapshot();
    assert_eq!(current[4], CURRENT_FORMAT, "written in the current format");
    assert_eq!(
        GatewayCore::restore(&current, GatewayConfig::default())
            .unwrap()
            .snapshot(),
        current
    );
}
