//! The governor against the real scheduler, on virtual time.

mod common;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use common::port::{block_on, spawn, ScriptedPort};
use common::rig::SimRig;
use paceline::client::{
    BudgetState, GatewayRateState, LocalBudgetState, PacerOptions, DEFAULT_LEAD_MS,
};
use paceline::gateway::BucketView;
use paceline::governor::{
    imf_fixdate_ms, retry_after_ms, Adapter, CallError, CallOptions, ExecutionPolicy,
    GovernanceSnapshot, Governor, GovernorConfig, PacingDeclaration, PacingResolver,
    PolicyOverrides, ProviderResponse, RateScope, RunScope, ToolPacing, DEFAULT_RETRY_AFTER_MS,
    MAX_RETRY_AFTER_MS,
};
use paceline::protocol::{decode, BudgetKind, PacingRule};
use paceline::rt::{AbortSignal, Runtime};
use paceline::sim::{SimRuntime, T0};
use paceline::time::Clock;
use paceline::{Detail, Error, ErrorCode};

const ORG: &str = "org";
const RUN: &str = "run";

/// 20 a second, four in flight: every permit carries a lease.
fn apollo_rules() -> Vec<PacingRule> {
    vec![PacingRule::new(20, 1_000).with_max_concurrency(4)]
}

/// The tools the tests call: two on one provider, one that names its
/// provider only, one declared unpaced; any other is undeclared.
fn catalog() -> PacingResolver {
    let mut table = HashMap::new();
    for tool in ["apollo.search", "apollo.enrich"] {
        table.insert(
            tool.to_owned(),
            PacingDeclaration::Declared(ToolPacing {
                provider: "apollo".into(),
                rules: apollo_rules(),
            }),
        );
    }
    table.insert(
        "clearbit.lookup".to_owned(),
        PacingDeclaration::Declared(ToolPacing {
            provider: "clearbit".into(),
            rules: vec![],
        }),
    );
    table.insert("local.format".to_owned(), PacingDeclaration::Unpaced);
    Box::new(move |tool| {
        let found = table
            .get(tool)
            .cloned()
            .unwrap_or(PacingDeclaration::Undeclared);
        Box::pin(async move { Ok(found) })
    })
}

fn overrides(json: &str) -> PolicyOverrides {
    decode(json.as_bytes()).unwrap()
}

struct Rig {
    rt: SimRuntime,
    port: Rc<ScriptedPort>,
    pacer: GatewayRateState,
}

impl Rig {
    fn new() -> Self {
        Self::with_options(PacerOptions::default())
    }

    /// A rig whose pacer takes one lease per permit and gives it back when
    /// the permit ends, as it does against gateways that do not stream a
    /// bucket's slots.
    fn one_lease_per_permit() -> Self {
        Self::with_options(PacerOptions {
            keep_leases: false,
            ..PacerOptions::default()
        })
    }

    fn with_options(options: PacerOptions) -> Self {
        let sim = SimRig::new(0);
        let pacer = GatewayRateState::new(sim.gateway_port(), sim.runtime(), options);
        Rig {
            rt: sim.rt,
            port: sim.port,
            pacer,
        }
    }

    fn config(&self) -> GovernorConfig {
        GovernorConfig::new(
            Adapter::EsmWorkers,
            RunScope {
                org_id: ORG.into(),
                root_run_id: RUN.into(),
            },
            self.pacer.clone(),
            catalog(),
            self_runtime(&self.rt),
        )
    }

    fn governor(&self, policy: &str) -> Governor {
        let mut config = self.config();
        config.policy = overrides(policy);
        Governor::new(config).unwrap()
    }

    fn bucket(&self, id: &str) -> Option<BucketView> {
        let now = self.rt.now_ms();
        self.port
            .gateway
            .core
            .borrow_mut()
            .bucket(id, None, now)
            .unwrap()
    }

    /// Every lease handed back, alone or riding on an acquire.
    fn released(&self) -> Vec<String> {
        let alone = self.port.releases.borrow();
        let riding = self.port.acquires.borrow();
        alone
            .iter()
            .flat_map(|r| r.lease_ids.clone())
            .chain(riding.iter().flat_map(|a| a.released_lease_ids.clone()))
            .collect()
    }
}

fn self_runtime(rt: &SimRuntime) -> Rc<dyn Runtime> {
    Rc::new(rt.clone())
}

fn response(status: u16, retry_after: Option<&str>) -> ProviderResponse<&'static str> {
    ProviderResponse {
        status,
        retry_after: retry_after.map(str::to_owned),
        quota_headers: Default::default(),
        body: "",
    }
}

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

// --- feedback ----------------------------------------------------------------

/// Tool `apollo.search` runs on credential X, `apollo.enrich` on Y: two
/// buckets of one provider.
fn credential_scopes(config: &mut GovernorConfig) {
    config.resolve_rate_scope = Some(Box::new(|tool, provider| {
        let credential = if tool == "apollo.search" { "x" } else { "y" };
        let scope = RateScope {
            bucket_id: format!("org:{provider}:cred-{credential}"),
            token: None,
        };
        Box::pin(async move { Ok(Some(scope)) })
    }));
}

#[test]
fn a_429_for_a_tool_penalizes_the_bucket_its_permit_came_from() {
    let rig = Rig::new();
    let mut config = rig.config();
    credential_scopes(&mut config);
    let gov = Governor::new(config).unwrap();
    let g = gov.clone();
    block_on(&rig.rt, async move {
        drop(g.acquire_tool_slot("apollo.search", None).await.unwrap());
        // The provider's latest resolved scope is now Y's.
        drop(g.acquire_tool_slot("apollo.enrich", None).await.unwrap());
        g.report_provider_backpressure("apollo", Some("apollo.search"), 2_000)
            .await
            .unwrap();
    });
    let cooldown = |id: &str| rig.bucket(id).and_then(|b| b.cooldown_until_ms);
    // The first acquire's permit came one default dispatch lead after it
    // asked; the second bucket starts from the first one's clock, and an
    // in-process gateway answers within the millisecond: no lead.
    assert_eq!(
        cooldown("org:apollo:cred-x"),
        Some(T0 + DEFAULT_LEAD_MS + 2_000)
    );
    assert_eq!(cooldown("org:apollo:cred-y"), None);
    assert_eq!(cooldown("org:apollo"), None, "no org bucket was made");
}

#[test]
fn backpressure_without_a_known_tool_goes_to_the_orgs_bucket() {
    let rig = Rig::new();
    let mut config = rig.config();
    credential_scopes(&mut config);
    let gov = Governor::new(config).unwrap();
    block_on(&rig.rt, async move {
        gov.report_provider_backpressure("apollo", None, 1_000)
            .await
            .unwrap();
        gov.report_provider_backpressure("apollo", Some("never.called"), 1_000)
            .await
            .unwrap();
    });
    let bucket = rig.bucket("org:apollo").unwrap();
    assert_eq!(bucket.cooldown_until_ms, Some(T0 + 1_000));
}

#[test]
fn a_429_reported_under_another_provider_name_lands_in_the_tools_remembered_scope() {
    let rig = Rig::new();
    let mut config = rig.config();
    credential_scopes(&mut config);
    let gov = Governor::new(config).unwrap();
    block_on(&rig.rt, async move {
        drop(gov.acquire_tool_slot("apollo.search", None).await.unwrap());
        // The host names the provider differently from its pacing table.
        gov.report_provider_backpressure("Apollo.io", Some("apollo.search"), 2_000)
            .await
            .unwrap();
        gov.observe_provider_success("Apollo.io", Some("apollo.search"), None);
    });
    let cooldown = |id: &str| rig.bucket(id).and_then(|b| b.cooldown_until_ms);
    assert_eq!(
        cooldown("org:apollo:cred-x"),
        Some(T0 + DEFAULT_LEAD_MS + 2_000)
    );
    assert!(
        rig.bucket("org:Apollo.io").is_none(),
        "no bucket by that name"
    );
}

#[test]
fn a_rate_scope_without_a_bucket_id_falls_back_to_the_orgs_bucket_with_its_token() {
    let rig = Rig::new();
    let mut config = rig.config();
    config.resolve_rate_scope = Some(Box::new(|_, _| {
        let scope = RateScope {
            bucket_id: " ".into(),
            token: Some("tok".into()),
        };
        Box::pin(async move { Ok(Some(scope)) })
    }));
    let gov = Governor::new(config).unwrap();
    let lease = block_on(&rig.rt, async move {
        gov.acquire_tool_slot("apollo.search", None).await.unwrap()
    });
    let scope = lease.rate_scope().unwrap();
    assert_eq!(scope.bucket_id, "org:apollo");
    assert_eq!(scope.token.as_deref(), Some("tok"));
    let sent = rig.port.acquires.borrow();
    assert_eq!(sent[0].bucket_id, "org:apollo");
    assert_eq!(sent[0].rate_scope_token.as_deref(), Some("tok"));
}

#[test]
fn a_failed_penalize_names_the_bucket_and_keeps_the_ports_code() {
    let rig = Rig::new();
    let mut config = rig.config();
    credential_scopes(&mut config);
    let gov = Governor::new(config).unwrap();
    let port = rig.port.clone();
    let e = block_on(&rig.rt, async move {
        drop(gov.acquire_tool_slot("apollo.search", None).await.unwrap());
        port.refuse.set(1);
        gov.report_provider_backpressure("apollo", Some("apollo.search"), 1_000)
            .await
            .unwrap_err()
    });
    assert_eq!(e.code, ErrorCode::GatewayUnavailable);
    assert!(
        e.message.contains("org:apollo:cred-x") && e.message.ends_with(": connection refused"),
        "{}",
        e.message
    );
}

#[test]
fn a_429_in_call_tool_penalizes_the_scoped_bucket_and_is_retried_after_the_cooldown() {
    let rig = Rig::new();
    let mut config = rig.config();
    credential_scopes(&mut config);
    let gov = Governor::new(config).unwrap();
    let rt = rig.rt.clone();
    let sent = Rc::new(RefCell::new(Vec::new()));
    let s = sent.clone();
    let (g, rt2) = (gov.clone(), rt.clone());
    let answer = block_on(&rt, async move {
        g.call_tool("apollo.search", CallOptions::default(), |attempt| {
            s.borrow_mut().push(rt2.now_ms() - T0);
            let answer = if attempt == 1 {
                response(429, Some("3"))
            } else {
                response(200, None)
            };
            async move { Ok::<_, ()>(answer) }
        })
        .await
    })
    .unwrap();
    assert_eq!(answer.status, 200);
    let sent = sent.borrow();
    assert_eq!(sent[0], DEFAULT_LEAD_MS);
    assert!(
        sent[1] >= 3_000,
        "retried inside the cooldown at +{}",
        sent[1]
    );
    let x = rig.bucket("org:apollo:cred-x").unwrap();
    assert!(
        x.effective_requests_per_second.unwrap() < 20.0,
        "X's rate was cut"
    );
    assert!(rig.bucket("org:apollo:cred-y").is_none());
    let snapshot = gov.snapshot();
    assert_eq!(
        (
            snapshot.counts[BudgetKind::ToolCall],
            snapshot.counts[BudgetKind::Retry]
        ),
        (1, 1)
    );
    assert_eq!(rig.bucket("org:apollo:cred-x").unwrap().live_leases, 0);
}

#[test]
fn a_late_429_lands_in_the_scope_its_own_permit_came_from() {
    let rig = Rig::new();
    let mut config = rig.config();
    // The credential rotates: each resolution hands out the next one.
    let issued = Rc::new(Cell::new(0));
    let count = issued.clone();
    config.resolve_rate_scope = Some(Box::new(move |_, provider| {
        issued.set(issued.get() + 1);
        let scope = RateScope {
            bucket_id: format!("org:{provider}:cred-{}", issued.get()),
            token: None,
        };
        Box::pin(async move { Ok(Some(scope)) })
    }));
    let gov = Governor::new(config).unwrap();
    let once = CallOptions {
        max_attempts: 1,
        ..CallOptions::default()
    };
    let (g, rt2) = (gov.clone(), rig.rt.clone());
    let slow = spawn(&rig.rt, async move {
        g.call_tool("apollo.search", once, |_| {
            let rt2 = rt2.clone();
            async move {
                rt2.sleep(500).await;
                Ok::<_, ()>(response(429, Some("2")))
            }
        })
        .await
    });
    let g = gov.clone();
    let fast = spawn(&rig.rt, async move {
        g.call_tool("apollo.search", once, |_| async {
            Ok::<_, ()>(response(200, None))
        })
        .await
    });
    rig.rt.run_to_completion();
    assert_eq!(fast.borrow_mut().take().unwrap().unwrap().status, 200);
    assert_eq!(slow.borrow_mut().take().unwrap().unwrap().status, 429);
    let cooldown = |id: &str| rig.bucket(id).and_then(|b| b.cooldown_until_ms);
    assert_eq!(
        cooldown("org:apollo:cred-1"),
        Some(T0 + DEFAULT_LEAD_MS + 2_500)
    );
    assert!(rig.bucket("org:apollo:cred-2").is_some(), "the fast call's");
    assert_eq!(cooldown("org:apollo:cred-2"), None);
    // Sizing the next wave reads the remembered scope; it resolves none.
    let g = gov.clone();
    block_on(&rig.rt, async move {
        g.suggested_parallelism("apollo.search", 1).await.unwrap()
    });
    assert_eq!(count.get(), 2);
}

#[test]
fn a_429_on_the_last_attempt_is_still_reported_and_returned() {
    let rig = Rig::new();
    let gov = rig.governor("{}");
    let options = CallOptions {
        max_attempts: 1,
        ..CallOptions::default()
    };
    let answer = block_on(&rig.rt, async move {
        gov.call_tool("apollo.search", options, |_| async {
            Ok::<_, ()>(response(429, None))
        })
        .await
    })
    .unwrap();
    assert_eq!(answer.status, 429);
    let bucket = rig.bucket("org:apollo").unwrap();
    assert_eq!(
        bucket.cooldown_until_ms,
        Some(T0 + DEFAULT_LEAD_MS + DEFAULT_RETRY_AFTER_MS),
        "no Retry-After: one second"
    );
    assert_eq!(bucket.live_leases, 0);
}

#[test]
fn an_http_date_retry_after_sets_the_cooldown_relative_to_now() {
    let rig = Rig::new();
    let gov = rig.governor("{}");
    // T0 is 2026-01-01T00:00:00Z; the provider asks for 00:00:42.
    let options = CallOptions {
        max_attempts: 1,
        ..CallOptions::default()
    };
    block_on(&rig.rt, async move {
        gov.call_tool("apollo.search", options, |_| async {
            Ok::<_, ()>(response(429, Some("Thu, 01 Jan 2026 00:00:42 GMT")))
        })
        .await
        .unwrap()
    });
    assert_eq!(
        rig.bucket("org:apollo").unwrap().cooldown_until_ms,
        Some(T0 + 42_000)
    );
}

#[test]
fn retry_after_reads_delay_seconds_and_http_dates_with_a_default_and_a_cap() {
    let now = imf_fixdate_ms("Thu, 01 Jan 2026 00:00:00 GMT").unwrap();
    assert_eq!(now, T0);
    let after = |v: &str| retry_after_ms(Some(v), now);
    assert_eq!(after("3"), 3_000);
    assert_eq!(after(" 7 "), 7_000);
    assert_eq!(after("1.5"), 1_500);
    assert_eq!(after("0.0001"), 1, "a fraction is rounded up, never early");
    assert_eq!(after("2.250"), 2_250);
    assert_eq!(
        after("1.5s"),
        DEFAULT_RETRY_AFTER_MS,
        "not a number of seconds"
    );
    assert_eq!(after("Thu, 01 Jan 2026 00:00:30 GMT"), 30_000);
    assert_eq!(
        after("Wed, 31 Dec 2025 23:59:00 GMT"),
        DEFAULT_RETRY_AFTER_MS,
        "a date already past"
    );
    assert_eq!(after("0"), DEFAULT_RETRY_AFTER_MS);
    assert_eq!(after("soon"), DEFAULT_RETRY_AFTER_MS);
    assert_eq!(after("-5"), DEFAULT_RETRY_AFTER_MS);
    assert_eq!(retry_after_ms(None, now), DEFAULT_RETRY_AFTER_MS);
    assert_eq!(after("86400"), MAX_RETRY_AFTER_MS);
    assert_eq!(after("Fri, 01 Jan 2100 00:00:00 GMT"), MAX_RETRY_AFTER_MS);
}

#[test]
fn an_unpaced_tools_429_is_slept_out_before_the_retry() {
    let rig = Rig::new();
    let gov = rig.governor("{}");
    let (rt2, at) = (rig.rt.clone(), Rc::new(RefCell::new(Vec::new())));
    let a = at.clone();
    block_on(&rig.rt, async move {
        gov.call_tool("local.format", CallOptions::default(), |attempt| {
            a.borrow_mut().push(rt2.now_ms() - T0);
            let status = if attempt == 1 { 429 } else { 200 };
            async move { Ok::<_, ()>(response(status, Some("2"))) }
        })
        .await
        .unwrap()
    });
    assert_eq!(*at.borrow(), [0, 2_000]);
    assert!(rig.port.acquires.borrow().is_empty());
}

#[test]
fn the_retry_budget_is_charged_once_per_retry_attempt() {
    let rig = Rig::new();
    let gov = rig.governor("{}");
    let options = CallOptions {
        retry_safe: true,
        max_attempts: 5,
        ..CallOptions::default()
    };
    let g = gov.clone();
    let answer = block_on(&rig.rt, async move {
        g.call_tool("apollo.search", options, |attempt| async move {
            Ok::<_, ()>(response(if attempt < 3 { 503 } else { 200 }, None))
        })
        .await
    })
    .unwrap();
    assert_eq!(answer.status, 200);
    let snapshot = gov.snapshot();
    assert_eq!(
        (
            snapshot.counts[BudgetKind::ToolCall],
            snapshot.counts[BudgetKind::Retry]
        ),
        (1, 2),
        "one call, two retries"
    );
}

#[test]
fn a_retry_past_the_retry_budget_is_refused_before_the_provider_sees_it() {
    let rig = Rig::new();
    let gov = rig.governor(r#"{"budgets":{"maxRetryCount":1}}"#);
    let calls = Rc::new(Cell::new(0));
    let c = calls.clone();
    let options = CallOptions {
        retry_safe: true,
        max_attempts: 5,
        ..CallOptions::default()
    };
    let e = block_on(&rig.rt, async move {
        gov.call_tool("apollo.search", options, |_| {
            c.set(c.get() + 1);
            async { Ok::<_, ()>(response(502, None)) }
        })
        .await
    })
    .unwrap_err();
    let CallError::Governor(e) = e else {
        panic!("{e:?}")
    };
    assert_eq!(e.message, "Play execution retry budget exceeded (2/1).");
    assert_eq!(calls.get(), 2, "the first attempt and the one retry");
    assert_eq!(rig.bucket("org:apollo").unwrap().live_leases, 0);
}

#[test]
fn a_5xx_or_transport_failure_is_retried_only_for_a_retry_safe_call() {
    let rig = Rig::new();
    let gov = rig.governor("{}");
    let calls = Rc::new(Cell::new(0));
    let (g, c) = (gov.clone(), calls.clone());
    let (answer, failure) = block_on(&rig.rt, async move {
        let answer = g
            .call_tool("apollo.search", CallOptions::default(), |_| {
                c.set(c.get() + 1);
                async { Ok::<_, &str>(response(500, None)) }
            })
            .await;
        let failure = g
            .call_tool("apollo.search", CallOptions::default(), |_| {
                c.set(c.get() + 1);
                async { Err::<ProviderResponse<&str>, _>("connection reset") }
            })
            .await;
        (answer, failure)
    });
    assert_eq!(answer.unwrap().status, 500);
    assert_eq!(
        failure.unwrap_err(),
        CallError::Transport("connection reset")
    );
    assert_eq!(calls.get(), 2, "each tried once");
    assert_eq!(gov.snapshot().counts[BudgetKind::Retry], 0);
}

#[test]
fn transport_failures_back_off_and_surface_when_the_attempts_run_out() {
    let rig = Rig::new();
    let gov = rig.governor("{}");
    let (rt2, at) = (rig.rt.clone(), Rc::new(RefCell::new(Vec::new())));
    let a = at.clone();
    let options = CallOptions {
        retry_safe: true,
        max_attempts: 3,
        ..CallOptions::default()
    };
    let failure = block_on(&rig.rt, async move {
        gov.call_tool("local.format", options, |_| {
            a.borrow_mut().push(rt2.now_ms() - T0);
            async { Err::<ProviderResponse<()>, _>("refused") }
        })
        .await
    });
    assert_eq!(failure.unwrap_err(), CallError::Transport("refused"));
    assert_eq!(*at.borrow(), [0, 200, 600], "200 ms, then 400 ms");
}

#[test]
fn successes_are_reported_on_the_next_acquire_of_the_tools_bucket() {
    let rig = Rig::one_lease_per_permit();
    let gov = rig.governor("{}");
    block_on(&rig.rt, async move {
        // A 404 is still the provider taking the request at that rate.
        gov.call_tool("apollo.search", CallOptions::default(), |_| async {
            Ok::<_, ()>(response(404, None))
        })
        .await
        .unwrap();
        gov.observe_tool_success("apollo.search", None);
        gov.observe_provider_success("apollo", None, None);
        gov.observe_tool_success("never.called", None);
        drop(gov.acquire_tool_slot("apollo.search", None).await.unwrap());
    });
    let sent: Vec<u64> = rig
        .port
        .acquires
        .borrow()
        .iter()
        .map(|a| a.observed_successes)
        .collect();
    assert_eq!(sent, [0, 3]);
}

#[test]
fn a_local_pacer_adapts_in_its_own_scheduler() {
    let rig = Rig::new();
    let mut config = rig.config();
    config.rate_state = GatewayRateState::local(self_runtime(&rig.rt), PacerOptions::default(), 7);
    let local = config.rate_state.clone();
    let gov = Governor::new(config).unwrap();
    block_on(&rig.rt, async move {
        drop(gov.acquire_tool_slot("apollo.search", None).await.unwrap());
        gov.report_provider_backpressure("apollo", Some("apollo.search"), 1_000)
            .await
            .unwrap();
    });
    let rps = local.effective_rps("org:apollo").unwrap();
    assert!((13.0..=14.5).contains(&rps), "cut once from 20: {rps}");
    assert!(
        rig.port.acquires.borrow().is_empty(),
        "the shared gateway saw nothing"
    );
}

#[test]
fn suggested_parallelism_follows_the_buckets_live_rate() {
    let rig = Rig::new();
    let gov = rig.governor(r#"{"concurrency":{"maxToolConcurrency":40}}"#);
    let g = gov.clone();
    let pacer = rig.pacer.clone();
    let (before, after, rps, capped, unpaced, fallback_low) = block_on(&rig.rt, async move {
        // 5/s configured (the default pace), one second a call: five.
        let before = g.suggested_parallelism("clearbit.lookup", 3).await.unwrap();
        drop(g.acquire_tool_slot("clearbit.lookup", None).await.unwrap());
        g.report_provider_backpressure("clearbit", Some("clearbit.lookup"), 1_000)
            .await
            .unwrap();
        let after = g.suggested_parallelism("clearbit.lookup", 3).await.unwrap();
        let rps = pacer.effective_rps("org:clearbit").unwrap();
        // 20/s but at most four in flight.
        let capped = g.suggested_parallelism("apollo.search", 3).await.unwrap();
        let unpaced = g.suggested_parallelism("local.format", 100).await.unwrap();
        let fallback_low = g.suggested_parallelism("local.format", 0).await.unwrap();
        (before, after, rps, capped, unpaced, fallback_low)
    });
    assert_eq!(before, 5);
    assert!(rps < 5.0);
    assert_eq!(after, rps.ceil() as usize);
    assert_eq!(capped, 4);
    assert_eq!((unpaced, fallback_low), (40, 1));
}

#[test]
fn suggested_parallelism_uses_the_tools_observed_latency_then_its_hint_then_the_policys() {
    let rig = Rig::new();
    let mut config = rig.config();
    config.policy = overrides(r#"{"concurrency":{"maxToolConcurrency":40}}"#);
    config
        .tool_latency_ms
        .insert("clearbit.lookup".into(), 3_000);
    let gov = Governor::new(config).unwrap();
    let (g, rt) = (gov.clone(), rig.rt.clone());
    let sizes = block_on(&rig.rt, async move {
        // 5 a second (the default pace) for every tool here.
        let policy = g.suggested_parallelism("web.scrape", 1).await.unwrap();
        let hinted = g.suggested_parallelism("clearbit.lookup", 1).await.unwrap();
        g.observe_tool_success("clearbit.lookup", Some(200));
        let observed = g.suggested_parallelism("clearbit.lookup", 1).await.unwrap();
        // callTool times its own calls.
        let slow = g.call_tool("web.scrape", CallOptions::default(), |_| {
            let rt = rt.clone();
            async move {
                rt.sleep(1_600).await;
                Ok::<_, ()>(response(200, None))
            }
        });
        slow.await.unwrap();
        let timed = g.suggested_parallelism("web.scrape", 1).await.unwrap();
        (policy, hinted, observed, timed)
    });
    assert_eq!(sizes, (5, 15, 1, 8));
}

// --- lineage -----------------------------------------------------------------

fn rooted(rig: &Rig, play: &str, policy: &str) -> Governor {
    let mut config = rig.config();
    config.resume = Some(GovernanceSnapshot::root(RUN, Some(play)));
    config.policy = overrides(policy);
    Governor::new(config).unwrap()
}

#[test]
fn a_cycle_a_b_a_is_refused_naming_the_chain() {
    let rig = Rig::new();
    let root = rooted(&rig, "a", "{}");
    let (e, counts) = block_on(&rig.rt, async move {
        let b = root.fork_inline_child("b", "run-b").await.unwrap();
        let e = b.fork_child("a", "run-a2").await.unwrap_err();
        let s = root.snapshot();
        (
            e,
            (
                s.counts[BudgetKind::PlayCall],
                s.counts[BudgetKind::Descendant],
            ),
        )
    });
    assert_eq!(e.code, ErrorCode::CycleDetected);
    assert!(e.message.contains("a -> b -> a"), "{}", e.message);
    assert_eq!(counts, (1, 1), "the refused fork charged nothing");
}

#[test]
fn a_child_run_resumed_elsewhere_still_sees_the_cycle() {
    let rig = Rig::new();
    let root = rooted(&rig, "a", "{}");
    let child = block_on(&rig.rt, async move { root.fork_child("b", "run-b").await }).unwrap();
    assert_eq!(child.ancestry_play_ids, ["a", "b"]);
    let mut config = rig.config();
    config.resume = Some(child);
    let b = Governor::new(config).unwrap();
    let e = block_on(&rig.rt, async move { b.fork_child("b", "run-b2").await }).unwrap_err();
    assert_eq!(e.code, ErrorCode::CycleDetected);
    assert!(e.message.contains("a -> b -> b"), "{}", e.message);
}

#[test]
fn charging_zero_of_a_budget_is_nothing_to_charge_even_at_its_limit() {
    let rig = Rig::new();
    let gov = rig.governor(r#"{"budgets":{"maxRetryCount":0}}"#);
    let g = gov.clone();
    block_on(&rig.rt, async move {
        g.charge_budget(BudgetKind::Retry, 0).await.unwrap();
        let e = g.charge_budget(BudgetKind::Retry, 1).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::BudgetExceeded);
    });
    assert_eq!(gov.snapshot().counts[BudgetKind::Retry], 0);
}

#[test]
fn a_resumed_snapshot_continues_the_same_lineage_counters() {
    let rig = Rig::new();
    let root = rooted(&rig, "a", r#"{"budgets":{"maxToolCallCount":4}}"#);
    let child = block_on(&rig.rt, async move {
        for _ in 0..3 {
            root.charge_budget(BudgetKind::ToolCall, 1).await.unwrap();
        }
        root.fork_child("b", "run-b").await.unwrap()
    });
    assert_eq!(child.current_run_id, "run-b");
    assert_eq!(child.depth, 1);
    assert_eq!(
        (
            child.counts[BudgetKind::ToolCall],
            child.counts[BudgetKind::PlayCall],
            child.counts[BudgetKind::Descendant]
        ),
        (3, 1, 1)
    );
    assert_eq!(child.parent_child_calls.get(RUN), Some(&1));
    // Through JSON, as a child run in another isolate receives it.
    let json = serde_json::to_value(&child).unwrap();
    assert_eq!(json["toolCallCount"], 3);
    assert_eq!(json["ancestryPlayIds"], serde_json::json!(["a", "b"]));
    let mut config = rig.config();
    config.resume = Some(decode(json.to_string().as_bytes()).unwrap());
    config.policy = overrides(r#"{"budgets":{"maxToolCallCount":4}}"#);
    let resumed = Governor::new(config).unwrap();
    let r = resumed.clone();
    let e = block_on(&rig.rt, async move {
        r.charge_budget(BudgetKind::ToolCall, 1).await.unwrap();
        r.charge_budget(BudgetKind::ToolCall, 1).await.unwrap_err()
    });
    assert_eq!(e.message, "Play execution toolCall budget exceeded (5/4).");
    let again = resumed.snapshot();
    assert_eq!(
        (
            again.current_run_id.as_str(),
            again.counts[BudgetKind::ToolCall]
        ),
        ("run-b", 4)
    );
}

#[test]
fn the_roots_own_play_id_guards_cycles_without_a_resume_snapshot() {
    let rig = Rig::new();
    let mut config = rig.config();
    config.play_id = Some("a".into());
    let root = Governor::new(config).unwrap();
    let snapshot = root.snapshot();
    assert_eq!(snapshot.current_play_id.as_deref(), Some("a"));
    assert_eq!(snapshot.ancestry_play_ids, ["a"]);
    let e = block_on(&rig.rt, async move {
        let b = root.fork_inline_child("b", "run-b").await.unwrap();
        b.fork_child("a", "run-a2").await.unwrap_err()
    });
    assert_eq!(e.code, ErrorCode::CycleDetected);
    // With a snapshot, the play id must be the snapshot's own.
    let mut config = rig.config();
    config.play_id = Some("other".into());
    config.resume = Some(GovernanceSnapshot::root(RUN, Some("a")));
    let e = Governor::new(config).err().unwrap();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    assert!(e.message.contains("playId other"), "{}", e.message);
}

#[test]
fn a_snapshot_of_another_root_run_is_refused() {
    let rig = Rig::new();
    let mut config = rig.config();
    config.resume = Some(GovernanceSnapshot::root("other-run", None));
    let e = Governor::new(config).err().unwrap();
    assert_eq!(e.code, ErrorCode::InvalidInput);
}

#[test]
fn forks_past_the_depth_or_per_parent_limit_are_refused_and_charge_nothing() {
    let rig = Rig::new();
    let root = rooted(
        &rig,
        "p0",
        r#"{"budgets":{"maxDepth":2,"maxChildPlayCallsPerParent":2}}"#,
    );
    let r = root.clone();
    let (depth, fan_out) = block_on(&rig.rt, async move {
        let p1 = r.fork_inline_child("p1", "run-1").await.unwrap();
        let p2 = p1.fork_inline_child("p2", "run-2").await.unwrap();
        let depth = p2.fork_child("p3", "run-3").await.unwrap_err();
        r.fork_child("q", "run-q").await.unwrap();
        let fan_out = r.fork_child("q", "run-q2").await.unwrap_err();
        (depth, fan_out)
    });
    assert_eq!(depth.message, "Play execution depth budget exceeded (3/2).");
    assert_eq!(
        fan_out.detail,
        Some(Detail::Budget {
            key: "childPerParent".into(),
            observed: 3,
            limit: 2
        })
    );
    let s = root.snapshot();
    assert_eq!(
        (
            s.counts[BudgetKind::PlayCall],
            s.counts[BudgetKind::Descendant]
        ),
        (3, 3)
    );
    assert_eq!(s.parent_child_calls.get(RUN), Some(&2));
}

#[test]
fn a_fork_refused_by_the_shared_budget_state_names_the_per_parent_budget() {
    let rig = Rig::new();
    let shared: Rc<dyn BudgetState> = Rc::new(LocalBudgetState::new());
    let isolate = || {
        let mut config = rig.config();
        config.budget_state = Some(shared.clone());
        config.policy = overrides(r#"{"budgets":{"maxChildPlayCallsPerParent":1}}"#);
        Governor::new(config).unwrap()
    };
    let (one, two) = (isolate(), isolate());
    let e = block_on(&rig.rt, async move {
        one.fork_child("c", "run-c1").await.unwrap();
        two.fork_child("c", "run-c2").await.unwrap_err()
    });
    assert_eq!(
        e.message,
        "Play execution childPerParent budget exceeded (2/1)."
    );
}

#[test]
fn an_inline_child_shares_the_roots_slots_and_budgets() {
    let rig = Rig::new();
    let root = rooted(&rig, "a", r#"{"concurrency":{"maxToolConcurrency":1}}"#);
    let r = root.clone();
    let child = block_on(&rig.rt, async move {
        r.fork_inline_child("b", "run-b").await.unwrap()
    });
    let c = child.clone();
    let held = block_on(&rig.rt, async move {
        c.acquire_tool_slot("local.format", None).await.unwrap()
    });
    let r = root.clone();
    let waiting = spawn(&rig.rt, async move {
        r.acquire_tool_slot("local.format", None).await.map(drop)
    });
    rig.rt.run_until(T0 + 1_000);
    assert!(waiting.borrow().is_none(), "the child holds the one slot");
    drop(held);
    rig.rt.run_until(T0 + 1_001);
    assert!(waiting.borrow_mut().take().unwrap().is_ok());
    let (s, cs) = (root.snapshot(), child.snapshot());
    assert_eq!(
        (
            s.counts[BudgetKind::ToolCall],
            cs.counts[BudgetKind::ToolCall]
        ),
        (2, 2)
    );
    assert_eq!((s.current_run_id.as_str(), s.depth), (RUN, 0));
    assert_eq!((cs.current_run_id.as_str(), cs.depth), ("run-b", 1));
}

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
