//! The governor against the real scheduler, on virtual time: tool slots
//! (permits, leases and budgets taken and given back together) and where a
//! tool's pacing comes from.

use std::rc::Rc;

use crate::common::port::{block_on, spawn};
use crate::rig::*;
use paceline::client::{BudgetState, LocalBudgetState, PacerOptions};
use paceline::governor::{Adapter, ExecutionPolicy, Governor, PacingDeclaration, ToolPacing};
use paceline::protocol::{decode, BudgetKind, PacingRule};
use paceline::rt::AbortSignal;
use paceline::sim::T0;
use paceline::time::Clock;
use paceline::{Error, ErrorCode};

// --- acquiring a tool slot -------------------------------------------------

#[test]
fn an_abort_while_waiting_for_a_tool_slot_returns_the_permits_lease_and_charges_nothing() {
    let rig = Rig::one_lease_per_permit();
    let gov = rig.governor(r#"{"concurrency":{"maxToolConcurrency":1}}"#);
    let g = gov.clone();
    let first = spawn(&rig.rt, async move {
        g.acquire_tool_slot("apollo.search", None).await
    });
    let signal = AbortSignal::new();
    let (g, s) = (gov.clone(), signal.clone());
    let second = spawn(&rig.rt, async move {
        g.acquire_tool_slot("apollo.search", Some(&s))
            .await
            .map(drop)
    });
    // The second permit is due at +50 ms; then it waits on the one slot.
    rig.rt.run_until(T0 + 100);
    assert!(second.borrow().is_none());
    signal.abort();
    // Past the release linger, the lease has gone back.
    rig.rt
        .run_until(T0 + 110 + PacerOptions::default().release_linger_ms);
    let first = first.borrow_mut().take().unwrap().unwrap();
    assert_eq!(
        second.borrow_mut().take().unwrap().unwrap_err().code,
        ErrorCode::Aborted
    );
    let released = rig.released();
    assert_eq!(released.len(), 1, "the aborted call's lease went back");
    assert_ne!(Some(released[0].as_str()), first.permit().lease_id());
    assert_eq!(rig.bucket("org:apollo").unwrap().live_leases, 1);
    assert_eq!(
        gov.snapshot().counts[BudgetKind::ToolCall],
        1,
        "only the first was charged"
    );
}

/// Three tool slots against a budget of one call and one slot: the first
/// call, then two refusals. Returns the two refusals and the governor.
fn breach_the_tool_call_budget(rig: &Rig) -> (Error, Error, Governor) {
    let gov = rig
        .governor(r#"{"budgets":{"maxToolCallCount":1},"concurrency":{"maxToolConcurrency":1}}"#);
    let g = gov.clone();
    let (e, again) = block_on(&rig.rt, async move {
        drop(g.acquire_tool_slot("apollo.search", None).await.unwrap());
        let e = g
            .acquire_tool_slot("apollo.search", None)
            .await
            .unwrap_err();
        // With the one slot kept, this would wait forever instead.
        let again = g
            .acquire_tool_slot("apollo.search", None)
            .await
            .unwrap_err();
        (e, again)
    });
    (e, again, gov)
}

#[test]
fn a_breach_of_the_tool_call_budget_gives_back_the_slot_and_the_permit() {
    let rig = Rig::one_lease_per_permit();
    let (e, again, gov) = breach_the_tool_call_budget(&rig);
    assert_eq!(e.code, ErrorCode::BudgetExceeded);
    assert_eq!(e.message, "Play execution toolCall budget exceeded (2/1).");
    assert_eq!(again.code, ErrorCode::BudgetExceeded);
    assert_eq!(rig.released().len(), 3, "every call's lease went back");
    assert_eq!(rig.bucket("org:apollo").unwrap().live_leases, 0);
    assert_eq!(gov.snapshot().counts[BudgetKind::ToolCall], 1);
}

#[test]
fn a_breach_of_the_tool_call_budget_leaves_no_kept_lease_at_the_gateway() {
    let rig = Rig::with_options(PacerOptions {
        keep_leases: true,
        ..PacerOptions::default()
    });
    let (e, again, gov) = breach_the_tool_call_budget(&rig);
    assert_eq!(e.code, ErrorCode::BudgetExceeded);
    assert_eq!(again.code, ErrorCode::BudgetExceeded);
    assert!(!rig.released().is_empty(), "the kept lease went back");
    assert_eq!(rig.bucket("org:apollo").unwrap().live_leases, 0);
    assert_eq!(gov.snapshot().counts[BudgetKind::ToolCall], 1);
}

#[test]
fn a_refusal_by_the_shared_budget_state_also_gives_everything_back() {
    let rig = Rig::new();
    let shared: Rc<dyn BudgetState> = Rc::new(LocalBudgetState::new());
    let isolate = || {
        let mut config = rig.config();
        config.policy = overrides(r#"{"budgets":{"maxToolCallCount":1}}"#);
        config.budget_state = Some(shared.clone());
        Governor::new(config).unwrap()
    };
    let (one, two) = (isolate(), isolate());
    let e = block_on(&rig.rt, async move {
        let _held = one.acquire_tool_slot("apollo.search", None).await.unwrap();
        // The second isolate has counted nothing itself; the run has.
        two.acquire_tool_slot("apollo.search", None)
            .await
            .unwrap_err()
    });
    assert_eq!(e.code, ErrorCode::BudgetExceeded);
    assert_eq!(rig.bucket("org:apollo").unwrap().live_leases, 0);
}

#[test]
fn pacing_comes_from_builtin_then_declared_then_the_provider_default_then_the_tools_own() {
    let rig = Rig::new();
    let mut config = rig.config();
    let builtin = vec![PacingRule::new(2, 1_000)];
    config.builtin_pacing.insert(
        "apollo.search".into(),
        PacingDeclaration::Declared(ToolPacing {
            provider: "apollo".into(),
            rules: builtin.clone(),
        }),
    );
    config.policy = overrides(r#"{"pacing":{"defaultProviderRequestsPerSecond":2.5}}"#);
    let gov = Governor::new(config).unwrap();
    let default_pace = gov.policy().default_provider_rule();
    assert_eq!(
        (default_pace.requests_per_window, default_pace.window_ms),
        (5, 2_000)
    );
    let g = gov.clone();
    let resolved = block_on(&rig.rt, async move {
        let mut out = Vec::new();
        for tool in [
            "apollo.search",
            "apollo.enrich",
            "clearbit.lookup",
            "web.scrape",
            "local.format",
        ] {
            out.push(g.resolve_pacing(tool).await.unwrap());
            drop(g.acquire_tool_slot(tool, None).await.unwrap());
        }
        out
    });
    let paced = |provider: &str, rules: Vec<PacingRule>| {
        Some(ToolPacing {
            provider: provider.into(),
            rules,
        })
    };
    assert_eq!(
        resolved,
        [
            paced("apollo", builtin),
            paced("apollo", apollo_rules()),
            paced("clearbit", vec![default_pace.clone()]),
            paced("tool:web.scrape", vec![default_pace]),
            None
        ]
    );
    let asked: Vec<String> = rig
        .port
        .acquires
        .borrow()
        .iter()
        .map(|a| a.bucket_id.clone())
        .collect();
    assert_eq!(
        asked,
        [
            "org:apollo",
            "org:apollo",
            "org:clearbit",
            "org:tool:web.scrape"
        ],
        "the tool declared unpaced asked the gateway for nothing"
    );
}

/// Acquires and releases `n` slots of `tool` one after another; returns
/// the virtual time it took.
fn time_sequential_calls(rig: &Rig, gov: &Governor, tool: &'static str, n: usize) -> u64 {
    let g = gov.clone();
    let rt = rig.rt.clone();
    block_on(&rig.rt, async move {
        let start = rt.now_ms();
        for _ in 0..n {
            let mut lease = g.acquire_tool_slot(tool, None).await.unwrap();
            lease.release_settled().await;
        }
        rt.now_ms() - start
    })
}

#[test]
fn a_tool_without_declared_pacing_is_held_to_the_default_pace_in_a_bucket_of_its_own() {
    let rig = Rig::new();
    let gov = rig.governor("{}");
    // 5 a second: twenty calls span at least nineteen gaps of 200 ms.
    let took = time_sequential_calls(&rig, &gov, "web.scrape", 20);
    assert!(took >= 19 * 200, "20 undeclared calls took only {took} ms");
    let bucket = rig.bucket("org:tool:web.scrape").unwrap();
    assert_eq!(bucket.configured_requests_per_second, Some(5.0));
    assert!(rig.bucket("org:apollo").is_none());
}

#[test]
fn only_an_explicit_unpaced_declaration_skips_the_pacer() {
    let rig = Rig::new();
    let gov = rig.governor("{}");
    let took = time_sequential_calls(&rig, &gov, "local.format", 20);
    assert_eq!(took, 0);
    assert!(rig.port.acquires.borrow().is_empty());
    let g = gov.clone();
    let lease = block_on(&rig.rt, async move {
        g.acquire_tool_slot("local.format", None).await.unwrap()
    });
    assert_eq!((lease.provider(), lease.rate_scope()), (None, None));
}

#[test]
fn a_blank_provider_from_the_resolver_is_no_provider() {
    let rig = Rig::new();
    let mut config = rig.config();
    config.resolve_pacing = Box::new(|tool| {
        let rules = if tool == "ruled.tool" {
            vec![PacingRule::new(3, 1_000)]
        } else {
            vec![]
        };
        Box::pin(async move {
            Ok(PacingDeclaration::Declared(ToolPacing {
                provider: "  ".into(),
                rules,
            }))
        })
    });
    let gov = Governor::new(config).unwrap();
    let default_pace = gov.policy().default_provider_rule();
    let (blank, ruled) = block_on(&rig.rt, async move {
        let blank = gov.resolve_pacing("blank.tool").await.unwrap().unwrap();
        let ruled = gov.resolve_pacing("ruled.tool").await.unwrap().unwrap();
        (blank, ruled)
    });
    assert_eq!(blank.provider, "tool:blank.tool");
    assert_eq!(blank.rules, [default_pace]);
    assert_eq!(ruled.provider, "tool:ruled.tool");
    assert_eq!(ruled.rules, [PacingRule::new(3, 1_000)]);
}

#[test]
fn a_pacing_declaration_reads_null_unpaced_and_blank_fields_as_the_runtime_does() {
    let read = |json: &str| decode::<PacingDeclaration>(json.as_bytes());
    assert_eq!(read("null").unwrap(), PacingDeclaration::Undeclared);
    assert_eq!(
        read(r#"{"unpaced":true}"#).unwrap(),
        PacingDeclaration::Unpaced
    );
    let blank = PacingDeclaration::Declared(ToolPacing {
        provider: String::new(),
        rules: vec![],
    });
    assert_eq!(read(r#"{"provider":" ","rules":[]}"#).unwrap(), blank);
    assert_eq!(read(r#"{"unpaced":false}"#).unwrap(), blank);
    for (json, says) in [
        (
            r#"{"unpaced":true,"provider":"p"}"#,
            "pacing has unpaced: true, so it takes no provider or rules",
        ),
        (
            r#"{"unpaced":"yes"}"#,
            "pacing.unpaced must be true or false",
        ),
        (r#"{"provider":7}"#, "pacing.provider must be a string"),
        (
            r#"{"provider":"p","rules":[{"windowMs":1000}]}"#,
            "pacing.rules[0].requestsPerWindow",
        ),
    ] {
        let e = read(json).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert!(e.message.contains(says), "{json}: {}", e.message);
    }
}

#[test]
fn the_default_pace_carries_suggested_max_parallelism_as_its_adaptive_ceiling() {
    let default_ceiling = |adapter| {
        ExecutionPolicy::for_adapter(adapter)
            .default_provider_rule()
            .adaptive_max_rps
    };
    assert_eq!(default_ceiling(Adapter::EsmWorkers), Some(6.0));
    assert_eq!(default_ceiling(Adapter::CjsNode20), Some(16.0));
    let rig = Rig::new();
    let gov = rig.governor(r#"{"pacing":{"suggestedMaxParallelism":2.5}}"#);
    block_on(&rig.rt, async move {
        drop(
            gov.acquire_tool_slot("clearbit.lookup", None)
                .await
                .unwrap(),
        );
        drop(gov.acquire_tool_slot("apollo.search", None).await.unwrap());
    });
    let sent: Vec<Vec<PacingRule>> = rig
        .port
        .acquires
        .borrow()
        .iter()
        .map(|a| a.rules.clone())
        .collect();
    assert_eq!(
        sent,
        [
            vec![PacingRule::new(5, 1_000).with_adaptive_max_rps(2.5)],
            apollo_rules()
        ],
        "stamped on the default pace only, as sent on the wire"
    );
    // paceline's gateway holds a rule as a hard limit: the ceiling lowers
    // the default pace here, and could never lift it.
    let bucket = rig.bucket("org:clearbit").unwrap();
    assert_eq!(bucket.configured_requests_per_second, Some(2.5));
}
