//! The gateway against hostile clients: forged scopes, guessed lease ids,
//! clients that disagree about a provider's rules, loose numbers. One test
//! per finding of the hardening review, named after it.

mod common;

use std::rc::Rc;

use common::gateway::{acquire, charge, densest_window, post, release};
use common::port::block_on;
use common::rig::SimRig;
use paceline::client::BudgetState;
use paceline::gateway::{
    mint_rate_scope_token, mint_run_scope_token, GatewayConfig, GatewayCore, MAX_NOW_MS,
};
use paceline::protocol::{BudgetCharge, PacingRule};
use paceline::sim::T0;
use paceline::ErrorCode;

const SECRET: &[u8] = b"control-plane-secret";

fn per_second(n: u64) -> PacingRule {
    PacingRule::new(n, 1_000)
}

fn with_secret() -> GatewayCore {
    let config = GatewayConfig {
        secret: Some(SECRET.to_vec()),
        ..GatewayConfig::default()
    };
    GatewayCore::new(config, [1; 32]).unwrap()
}

#[test]
fn budget_charges_ignore_the_secret_a_charge_needs_its_runs_token() {
    let mut g = with_secret();
    let mine = mint_run_scope_token(SECRET, "victim", T0 + 60_000);
    let forged = [
        None,
        Some(mint_run_scope_token(SECRET, "attacker", T0 + 60_000)),
        Some(mint_rate_scope_token(SECRET, "victim", T0 + 60_000)),
        Some(mint_run_scope_token(b"guess", "victim", T0 + 60_000)),
    ];
    for token in forged {
        let e = g
            .charge(
                &charge(
                    "victim",
                    "x",
                    token.clone(),
                    &[("toolCall", 1_000_000_000, 1_000_000_000)],
                ),
                T0,
            )
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::ForbiddenScope, "{token:?}");
    }
    assert_eq!(g.run_count(), 0, "refused charges made no ledger");
    let ok = g
        .charge(
            &charge("victim", "r1", Some(mine), &[("toolCall", 1, 10)]),
            T0,
        )
        .unwrap();
    assert_eq!(ok.counters["toolCall"], 1, "the forgeries counted nothing");
}

#[test]
fn budget_charges_ignore_the_secret_the_clients_budget_state_sends_its_token() {
    let rig = SimRig::new(0);
    *rig.port.gateway.core.borrow_mut() = with_secret();
    let token = mint_run_scope_token(SECRET, "run", T0 + 3_600_000);
    let tokened = Rc::new(rig.budget(1).with_run_scope_token(Some(token)));
    let bare = Rc::new(rig.budget(2));
    let one = vec![BudgetCharge {
        key: "retry".into(),
        amount: 1,
        limit: 5,
    }];
    let (t, b, c) = (tokened.clone(), bare.clone(), one.clone());
    let (with, without) = block_on(&rig.rt, async move {
        (t.charge("run", &c).await, b.charge("run", &c).await)
    });
    assert!(with.is_ok(), "{with:?}");
    assert_eq!(without.unwrap_err().code, ErrorCode::ForbiddenScope);
    assert!(rig.port.charges.borrow()[0].run_scope_token.is_some());
}

#[test]
fn a_tiny_adaptive_max_rps_is_refused_and_the_smallest_allowed_parks_no_bucket() {
    let mut g = GatewayCore::new(GatewayConfig::default(), 1).unwrap();
    let tiny = r#"{"bucketId":"v","rules":[{"requestsPerWindow":10,"windowMs":1000,"adaptiveMaxRps":1e-300}],"requested":1}"#;
    let (status, body) = post(&mut g, "/v1/rate/acquire", tiny, T0);
    assert_eq!(status, 400);
    assert!(
        body.contains("adaptiveMaxRps must be at least 0.001"),
        "{body}"
    );
    assert_eq!(g.bucket_count(), 0);

    let slowest = per_second(10).with_adaptive_max_rps(0.001);
    g.acquire(&acquire("v", &[slowest], 1), T0).unwrap();
    let later = T0 + 1_000_000;
    let normal = g
        .acquire(&acquire("v", &[per_second(10)], 1), later)
        .unwrap();
    assert_eq!(normal.scheduled_at_ms.unwrap(), [later], "1000 s at most");
}

#[test]
fn lease_ids_predictable_ids_are_128_bit_macs_nobody_can_release_unheld() {
    let mut g = GatewayCore::new(GatewayConfig::default(), [7; 32]).unwrap();
    let rules = [per_second(100).with_max_concurrency(3)];
    let mine = g
        .acquire(&acquire("b", &rules, 3), T0)
        .unwrap()
        .lease_ids
        .unwrap();
    assert!(mine.iter().all(|id| id.len() == 32));
    let mut other = GatewayCore::new(GatewayConfig::default(), [8; 32]).unwrap();
    let theirs = other
        .acquire(&acquire("b", &rules, 3), T0)
        .unwrap()
        .lease_ids
        .unwrap();
    assert!(
        mine.iter().all(|id| !theirs.contains(id)),
        "another key, other ids"
    );
    // Guesses from the ids one holds: neighbours, bit flips, truncations.
    let mut guesses: Vec<String> = theirs.clone();
    for id in &mine {
        let n = u128::from_str_radix(id, 16).unwrap();
        for delta in [1u128, 2, 3, 1 << 64] {
            guesses.push(format!("{:032x}", n.wrapping_add(delta)));
            guesses.push(format!("{:032x}", n.wrapping_sub(delta)));
        }
        guesses.push(id[16..].to_owned());
        guesses.push(id.to_uppercase());
    }
    let r = g.release(&release("b", &rules, guesses), T0).unwrap();
    assert_eq!(r.released, 0);
    assert_eq!(g.bucket("b", None, T0).unwrap().unwrap().live_leases, 3);
}

#[test]
fn lease_ids_predictable_a_restored_gateway_keeps_its_key_and_never_repeats_an_id() {
    let mut g = GatewayCore::new(GatewayConfig::default(), [7; 32]).unwrap();
    let rules = [per_second(100).with_max_concurrency(1_000)];
    let before = g
        .acquire(&acquire("b", &rules, 50), T0)
        .unwrap()
        .lease_ids
        .unwrap();
    let mut back = GatewayCore::restore(&g.snapshot(), GatewayConfig::default()).unwrap();
    let next = back
        .acquire(&acquire("b", &rules, 50), T0 + 1_000)
        .unwrap()
        .lease_ids
        .unwrap();
    let again = g
        .acquire(&acquire("b", &rules, 50), T0 + 1_000)
        .unwrap()
        .lease_ids
        .unwrap();
    assert_eq!(next, again, "the same key and counter continue");
    assert!(next.iter().all(|id| !before.contains(id)));
}

#[test]
fn clients_that_disagree_on_max_concurrency_the_strictest_binds_for_a_window() {
    let mut g = GatewayCore::new(GatewayConfig::default(), 1).unwrap();
    let strict = [per_second(100).with_max_concurrency(5)];
    let lax = [per_second(100).with_max_concurrency(50)];
    let mut leases = 0;
    for i in 0..20 {
        let now = T0 + i * 10;
        let rules = if i % 2 == 0 { &strict } else { &lax };
        leases += g.acquire(&acquire("b", rules, 10), now).unwrap().granted;
        let view = g.bucket("b", None, now).unwrap().unwrap();
        assert!(
            view.live_leases <= 5,
            "{} live under a named 5",
            view.live_leases
        );
    }
    assert_eq!(leases, 5);
    // One window (1 s) after the strict client last spoke, the lax limit binds.
    let later = T0 + 190 + 1_000;
    let r = g.acquire(&acquire("b", &lax, 50), later).unwrap();
    assert_eq!(r.granted, 45);
    assert_eq!(
        g.bucket("b", None, later).unwrap().unwrap().max_concurrency,
        Some(50)
    );
}

#[test]
fn a_lax_to_strict_switch_does_not_let_old_permits_crowd_the_strict_rules_first_window() {
    let mut g = GatewayCore::new(GatewayConfig::default(), 1).unwrap();
    let mut old = Vec::new();
    for i in 0..10 {
        let r = g
            .acquire(&acquire("b", &[per_second(50)], 50), T0 + i * 100)
            .unwrap();
        old.extend(r.scheduled_at_ms.unwrap());
    }
    let mut new = Vec::new();
    for i in 0..40 {
        let r = g
            .acquire(&acquire("b", &[per_second(5)], 5), T0 + 1_000 + i * 100)
            .unwrap();
        new.extend(r.scheduled_at_ms.unwrap());
    }
    assert!(
        new.len() >= 10,
        "the strict rule still gets its rate: {new:?}"
    );
    let all: Vec<u64> = old.iter().chain(&new).copied().collect();
    let starts = all
        .iter()
        .copied()
        .chain(new.iter().map(|t| t.saturating_sub(999)));
    for start in starts {
        let window = start..start + 1_000;
        if new.iter().any(|t| window.contains(t)) {
            let held = all.iter().filter(|t| window.contains(t)).count();
            assert!(
                held <= 5,
                "{held} permits in [{start}, +1000) with a strict one"
            );
        }
    }
    assert!(densest_window(&new, 1_000) <= 5);
}

#[test]
fn loose_numbers_a_now_past_the_year_2200_is_refused_without_a_state_change() {
    let mut g = GatewayCore::new(GatewayConfig::default(), 1).unwrap();
    g.acquire(&acquire("b", &[per_second(10)], 1), T0).unwrap();
    let before = g.snapshot();
    let body =
        r#"{"bucketId":"b","rules":[{"requestsPerWindow":10,"windowMs":1000}],"requested":1}"#;
    let charge_body =
        r#"{"rootRunId":"r","reservationId":"1","charges":[{"key":"k","amount":1,"limit":9}]}"#;
    for now in [
        MAX_NOW_MS + 1,
        10_000_000_000_000_000,
        (1 << 53) - 1,
        u64::MAX,
    ] {
        for (path, body) in [
            ("/v1/rate/acquire", body),
            ("/v1/rate/penalize", r#"{"bucketId":"b","cooldownMs":1000}"#),
            ("/v1/budget/charge", charge_body),
        ] {
            let (status, answer) = post(&mut g, path, body, now);
            assert_eq!(status, 400, "{path} at {now}: {answer}");
            assert!(answer.contains("before the year 2200"), "{answer}");
        }
        assert!(g.bucket("b", None, now).is_err());
    }
    assert_eq!(g.snapshot(), before);
    assert_eq!(
        g.acquire(&acquire("b", &[per_second(10)], 1), MAX_NOW_MS)
            .unwrap()
            .granted,
        1
    );
}

#[test]
fn loose_numbers_out_of_range_gateway_options_are_refused() {
    for (config, says) in [
        (
            GatewayConfig {
                max_runs: 0,
                ..GatewayConfig::default()
            },
            "maxRuns",
        ),
        (
            GatewayConfig {
                max_buckets: usize::MAX,
                ..GatewayConfig::default()
            },
            "maxBuckets",
        ),
        (
            GatewayConfig {
                horizon_ms: u64::MAX,
                ..GatewayConfig::default()
            },
            "horizonMs",
        ),
    ] {
        let e = GatewayCore::new(config, 0).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert!(e.message.starts_with(says), "{}", e.message);
    }
}

/// Slot claims are numbers a client echoes: one of the wrong type or out
/// of range is refused before anything changes, and one the gateway never
/// gave (a guess, or one it forgot) is answered with a claim of its own.
#[test]
fn slot_claims_out_of_range_are_refused_and_unknown_ones_replaced() {
    let mut g = GatewayCore::new(GatewayConfig::default(), 1).unwrap();
    let rules = r#"[{"requestsPerWindow":20,"windowMs":1000,"maxConcurrency":4}]"#;
    let ask = |claim: &str| {
        format!(
            r#"{{"bucketId":"b","rules":{rules},"requested":1,"slotsWanted":2,"slotClaim":{claim}}}"#
        )
    };
    let (status, first) = post(&mut g, "/v1/rate/acquire", &ask("0"), T0);
    assert_eq!(status, 200, "{first}");
    let first: serde_json::Value = serde_json::from_str(&first).unwrap();
    let claim = first["slotClaim"]
        .as_u64()
        .expect("a claim for a client that takes them");
    let before = g.snapshot();
    for bad in ["-1", "1.5", "\"7\"", "9007199254740993"] {
        let (status, answer) = post(&mut g, "/v1/rate/acquire", &ask(bad), T0 + 1);
        assert_eq!(status, 400, "slotClaim {bad}: {answer}");
        assert!(answer.contains("slotClaim"), "{answer}");
    }
    assert_eq!(g.snapshot(), before);
    let (_, guessed) = post(&mut g, "/v1/rate/acquire", &ask("123456"), T0 + 2);
    let guessed: serde_json::Value = serde_json::from_str(&guessed).unwrap();
    let given = guessed["slotClaim"].as_u64().unwrap();
    assert!(given != 123_456 && given != claim, "{guessed}");
}
