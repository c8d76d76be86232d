//! The HTTP face and the gateway's own options: routes, statuses, coded
//! bodies, and leases that ride on an acquire.

use crate::common::gateway::acquire;
use crate::{core, per_second};
use paceline::gateway::{
    handle, mint_rate_scope_token, mint_run_scope_token, GatewayConfig, GatewayCore,
};
use paceline::sim::T0;
use paceline::ErrorCode;

#[test]
fn bad_gateway_options_are_refused() {
    let cases = [
        (
            GatewayConfig {
                horizon_ms: 0,
                ..GatewayConfig::default()
            },
            "horizonMs",
        ),
        (
            GatewayConfig {
                lease_ttl_ms: 10,
                ..GatewayConfig::default()
            },
            "leaseTtlMs",
        ),
        (
            GatewayConfig {
                secret: Some(vec![]),
                ..GatewayConfig::default()
            },
            "secret",
        ),
        (
            GatewayConfig {
                max_buckets: 0,
                ..GatewayConfig::default()
            },
            "maxBuckets",
        ),
    ];
    for (config, field) in cases {
        let e = GatewayCore::new(config, 0).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert!(e.message.starts_with(field), "{}", e.message);
    }
}

#[test]
fn http_routes_map_errors_to_statuses_and_coded_bodies() {
    let secret = b"k".to_vec();
    let config = GatewayConfig {
        secret: Some(secret.clone()),
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 1).unwrap();
    let token = mint_rate_scope_token(&secret, "org:p", T0 + 1_000);
    let run_token = mint_run_scope_token(&secret, "r", T0 + 1_000);
    let body = format!(
        r#"{{"bucketId":"org:p","rateScopeToken":"{token}","rules":[{{"requestsPerWindow":20,"windowMs":1000}}],"requested":2}}"#
    );
    let ok = handle(&mut g, "POST", "/v1/rate/acquire", body.as_bytes(), T0);
    assert_eq!(ok.status, 200);
    assert!(
        ok.body
            .contains(r#""scheduledAtMs":[1767225600000,1767225600050]"#),
        "{}",
        ok.body
    );

    let cases: Vec<(&str, &str, String, u16, &str)> = vec![
        ("POST", "/v1/rate/acquire", "{".into(), 400, "INVALID_INPUT"),
        ("POST", "/v1/rate/acquire", body.replace(&token, "v1.1.00"), 403, "FORBIDDEN_SCOPE"),
        ("GET", "/v1/rate/acquire", String::new(), 405, "INVALID_INPUT"),
        ("POST", "/v1/nope", "{}".into(), 404, "INVALID_INPUT"),
        (
            "POST",
            "/v1/budget/charge",
            format!(r#"{{"rootRunId":"r","runScopeToken":"{run_token}","reservationId":"x","charges":[{{"key":"retry","amount":2,"limit":1}}]}}"#),
            409,
            "BUDGET_EXCEEDED",
        ),
        (
            "POST",
            "/v1/budget/charge",
            r#"{"rootRunId":"r","reservationId":"y","charges":[{"key":"retry","amount":1,"limit":1}]}"#.into(),
            403,
            "FORBIDDEN_SCOPE",
        ),
    ];
    for (method, path, body, status, code) in cases {
        let r = handle(&mut g, method, path, body.as_bytes(), T0);
        assert_eq!(r.status, status, "{method} {path}: {}", r.body);
        assert!(
            r.body.contains(&format!(r#""code":"{code}""#)),
            "{}",
            r.body
        );
    }
    let view = handle(
        &mut g,
        "GET",
        &format!("/v1/rate/buckets/org%3Ap?token={token}"),
        b"",
        T0,
    );
    assert_eq!(view.status, 200, "{}", view.body);
    assert!(
        view.body.contains(r#""nextFreeAtMs":1767225600100"#),
        "{}",
        view.body
    );
}

#[test]
fn leases_riding_on_an_acquire_are_ended_before_it_grants() {
    let mut g = core();
    let rules = [per_second(20).with_max_concurrency(1)];
    let first = g.acquire(&acquire("org:p", &rules, 1), T0).unwrap();
    let refused = g.acquire(&acquire("org:p", &rules, 1), T0 + 100).unwrap();
    assert_eq!(refused.granted, 0, "the one slot is held");
    let mut next = acquire("org:p", &rules, 1);
    next.released_lease_ids = first.lease_ids.unwrap();
    let granted = g.acquire(&next, T0 + 100).unwrap();
    assert_eq!(
        granted.granted, 1,
        "the ridden release freed the slot first"
    );
}
