//! What a bucket and a run are keyed by and who may use them: rule order,
//! scope tokens, and budget charges counted once per reservation.

use crate::common::gateway::{acquire, penalize, release};
use crate::{charge, core, per_second};
use paceline::gateway::{mint_rate_scope_token, GatewayConfig, GatewayCore};
use paceline::protocol::PacingRule;
use paceline::sim::T0;
use paceline::ErrorCode;

#[test]
fn rule_order_does_not_rekey_the_bucket() {
    let mut g = core();
    let a = per_second(20);
    let b = PacingRule::new(600, 60_000);
    g.acquire(&acquire("org:p", &[a.clone(), b.clone()], 1), T0)
        .unwrap();
    let r = g.acquire(&acquire("org:p", &[b, a], 1), T0).unwrap();
    assert_eq!(r.scheduled_at_ms.unwrap(), [T0 + 100]);
}

#[test]
fn with_a_secret_every_rate_call_needs_its_buckets_token_and_nothing_changes_without_it() {
    let secret = b"s3cret".to_vec();
    let config = GatewayConfig {
        secret: Some(secret.clone()),
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 1).unwrap();
    let rules = [per_second(20)];
    let mine = mint_rate_scope_token(&secret, "org_a:p", T0 + 60_000);
    let theirs = mint_rate_scope_token(&secret, "org_b:p", T0 + 60_000);

    let mut req = acquire("org_a:p", &rules, 1);
    req.rate_scope_token = Some(mine.clone());
    assert_eq!(g.acquire(&req, T0).unwrap().granted, 1);

    for token in [
        None,
        Some(theirs.clone()),
        Some(mine.replace("v1.", "v1.1")),
    ] {
        let mut forged = acquire("org_a:p", &rules, 1);
        forged.rate_scope_token = token.clone();
        let e = g.acquire(&forged, T0).unwrap_err();
        assert_eq!(e.code, ErrorCode::ForbiddenScope, "{token:?}");
        let mut p = penalize("org_a:p", 1_000);
        p.rate_scope_token = token.clone();
        assert_eq!(
            g.penalize(&p, T0).unwrap_err().code,
            ErrorCode::ForbiddenScope
        );
        let mut rel = release("org_a:p", &rules, vec!["x".into()]);
        rel.rate_scope_token = token;
        assert_eq!(
            g.release(&rel, T0).unwrap_err().code,
            ErrorCode::ForbiddenScope
        );
    }
    let view = g.bucket("org_a:p", Some(&mine), T0).unwrap().unwrap();
    assert_eq!(view.next_free_at_ms, T0 + 50, "refused calls took no time");
    assert_eq!(
        view.effective_requests_per_second,
        Some(20.0),
        "and cut nothing"
    );
    let expired = g.bucket("org_a:p", Some(&mine), T0 + 60_000).unwrap_err();
    assert_eq!(expired.code, ErrorCode::ForbiddenScope);
}

#[test]
fn budget_charges_are_all_or_nothing_and_idempotent_per_reservation() {
    let mut g = core();
    let ok = g
        .charge(&charge("run", "r1", &[("toolCall", 2, 3)]), T0)
        .unwrap();
    assert_eq!(ok.counters["toolCall"], 2);
    assert_eq!(
        g.charge(&charge("run", "r1", &[("toolCall", 2, 3)]), T0)
            .unwrap(),
        ok
    );
    let e = g
        .charge(
            &charge("run", "r2", &[("playCall", 1, 9), ("toolCall", 2, 3)]),
            T0,
        )
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::BudgetExceeded);
    assert_eq!(e.message, "Play execution toolCall budget exceeded (4/3).");
    let other_run = g
        .charge(&charge("run2", "r2", &[("toolCall", 3, 3)]), T0)
        .unwrap();
    assert_eq!(other_run.counters["toolCall"], 3, "runs count separately");
    let after = g
        .charge(&charge("run", "r3", &[("playCall", 1, 9)]), T0)
        .unwrap();
    assert_eq!(
        after.counters["playCall"], 1,
        "the refused charge applied nothing"
    );
}
