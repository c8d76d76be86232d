//! The governor's execution policy: overrides, adapters, default pace and
//! row concurrency.

use crate::common::port::{block_on, spawn};
use crate::rig::*;
use paceline::governor::{Adapter, ExecutionPolicy, PolicyOverrides};
use paceline::protocol::{decode, BudgetKind, PacingRule};
use paceline::sim::T0;
use paceline::ErrorCode;

// --- policy ------------------------------------------------------------------

#[test]
fn overrides_change_only_the_fields_they_name() {
    let base = ExecutionPolicy::for_adapter(Adapter::EsmWorkers);
    let policy = base
        .clone()
        .with_overrides(&overrides(r#"{"budgets":{"maxToolCallCount":3}}"#))
        .unwrap();
    assert_eq!(policy.budgets.max[BudgetKind::ToolCall], 3);
    let mut expected = base;
    expected.budgets.max[BudgetKind::ToolCall] = 3;
    assert_eq!(policy, expected);
}

#[test]
fn bad_overrides_are_refused_by_name() {
    let misspelt = decode::<PolicyOverrides>(br#"{"budgets":{"maxToolCalls":3}}"#);
    assert!(misspelt
        .unwrap_err()
        .message
        .contains("budgets.maxToolCalls is not a known field"));
    let base = || ExecutionPolicy::for_adapter(Adapter::CjsNode20);
    for (json, says) in [
        (
            r#"{"concurrency":{"maxToolConcurrency":0}}"#,
            "maxToolConcurrency must be at least 1",
        ),
        (
            r#"{"concurrency":{"defaultRowConcurrency":300}}"#,
            "defaultRowConcurrency (300) exceeds maxRowConcurrency (200)",
        ),
        (
            r#"{"pacing":{"defaultProviderRequestsPerSecond":0}}"#,
            "defaultProviderRequestsPerSecond must be from",
        ),
        (
            r#"{"pacing":{"suggestedMaxParallelism":-1}}"#,
            "suggestedMaxParallelism must be from",
        ),
        (
            r#"{"budgets":{"maxRetryCount":5000000000}}"#,
            "maxRetryCount must be at most 1000000000",
        ),
    ] {
        let e = base().with_overrides(&overrides(json)).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert!(e.message.contains(says), "{json}: {}", e.message);
    }
}

#[test]
fn the_adapter_names_are_esm_workers_and_cjs_node20() {
    assert_eq!(Adapter::from_name("esm_workers"), Some(Adapter::EsmWorkers));
    let adapter = Adapter::from_name("cjs_node20").unwrap();
    assert_eq!(adapter, Adapter::CjsNode20);
    assert_eq!(Adapter::from_name("lambda"), None);
    assert_eq!(serde_json::to_value(adapter).unwrap(), "cjs_node20");
    let json = serde_json::to_value(ExecutionPolicy::for_adapter(adapter)).unwrap();
    assert!(json["budgets"]["maxWaterfallStepExecutions"].is_u64());
    assert!(json["pacing"]["defaultProviderRequestsPerSecond"].is_number());
}

#[test]
fn the_default_pace_keeps_a_fractional_rate_in_a_longer_window() {
    let pace = |rps: f64| {
        ExecutionPolicy::for_adapter(Adapter::EsmWorkers)
            .with_overrides(&PolicyOverrides {
                pacing: Some(paceline::governor::PacingOverrides {
                    default_provider_requests_per_second: Some(rps),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .unwrap()
            .default_provider_rule()
    };
    let window = |rule: PacingRule| (rule.requests_per_window, rule.window_ms);
    assert_eq!(window(pace(5.0)), (5, 1_000));
    assert_eq!(window(pace(2.5)), (5, 2_000));
    assert_eq!(window(pace(0.5)), (1, 2_000));
    assert_eq!(window(pace(1.3)), (13, 10_000));
}

#[test]
fn row_concurrency_is_the_request_clamped_to_the_policy_else_its_default() {
    let rig = Rig::new();
    let gov = rig.governor(r#"{"concurrency":{"defaultRowConcurrency":4,"maxRowConcurrency":10}}"#);
    assert_eq!(gov.resolve_row_concurrency(None), 4);
    assert_eq!(gov.resolve_row_concurrency(Some(7)), 7);
    assert_eq!(gov.resolve_row_concurrency(Some(0)), 1);
    assert_eq!(gov.resolve_row_concurrency(Some(500)), 10);
}

#[test]
fn row_slots_cap_rows_in_flight_at_the_policys_maximum() {
    let rig = Rig::new();
    let gov = rig.governor(r#"{"concurrency":{"maxRowConcurrency":2,"defaultRowConcurrency":1}}"#);
    let g = gov.clone();
    let held = block_on(&rig.rt, async move {
        (
            g.acquire_row_slot(None).await.unwrap(),
            g.acquire_row_slot(None).await.unwrap(),
        )
    });
    let g = gov.clone();
    let third = spawn(
        &rig.rt,
        async move { g.acquire_row_slot(None).await.map(drop) },
    );
    rig.rt.run_until(T0 + 1_000);
    assert!(third.borrow().is_none());
    drop(held);
    rig.rt.run_until(T0 + 1_001);
    assert!(third.borrow_mut().take().unwrap().is_ok());
}
