//! The governor against the real scheduler, on virtual time: what a
//! provider's answers do (429s and their cooldowns, in the bucket each
//! permit came from), successes reported and the parallelism suggested
//! from them.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::common::port::{block_on, spawn};
use crate::rig::*;
use paceline::client::{GatewayRateState, PacerOptions, DEFAULT_LEAD_MS};
use paceline::governor::{
    CallOptions, Governor, GovernorConfig, RateScope, DEFAULT_RETRY_AFTER_MS,
};
use paceline::protocol::BudgetKind;
use paceline::rt::Runtime;
use paceline::sim::T0;
use paceline::time::Clock;
use paceline::ErrorCode;

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
        g.report_provider_backpressure("apollo", Some("apollo.search"), 2_000, None)
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
fn backpressure_reported_with_its_calls_send_time_passes_that_time_to_the_gateway() {
    let rig = Rig::new();
    let gov = Governor::new(rig.config()).unwrap();
    let clock = rig.rt.clone();
    let sent_at = block_on(&rig.rt, async move {
        drop(gov.acquire_tool_slot("apollo.search", None).await.unwrap());
        let sent_at = clock.now_ms();
        gov.report_provider_backpressure("apollo", Some("apollo.search"), 0, Some(sent_at))
            .await
            .unwrap();
        gov.report_provider_backpressure("apollo", Some("apollo.search"), 0, None)
            .await
            .unwrap();
        sent_at
    });
    let penalties = rig.port.penalties.borrow();
    let sent = penalties.iter().map(|p| p.sent_at_ms).collect::<Vec<_>>();
    // The rig's gateway shares the isolate's clock: the time arrives as it
    // was given, within the clock estimate's error.
    let on_gateway = sent[0].expect("the first report says when its call went out");
    assert!(
        on_gateway.abs_diff(sent_at) <= 10,
        "{sent_at} read on the gateway's clock: {on_gateway}"
    );
    assert_eq!(
        sent[1..],
        [None],
        "a report that does not know says nothing"
    );
}

#[test]
fn backpressure_without_a_known_tool_goes_to_the_orgs_bucket() {
    let rig = Rig::new();
    let mut config = rig.config();
    credential_scopes(&mut config);
    let gov = Governor::new(config).unwrap();
    block_on(&rig.rt, async move {
        gov.report_provider_backpressure("apollo", None, 1_000, None)
            .await
            .unwrap();
        gov.report_provider_backpressure("apollo", Some("never.called"), 1_000, None)
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
        gov.report_provider_backpressure("Apollo.io", Some("apollo.search"), 2_000, None)
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
        gov.report_provider_backpressure("apollo", Some("apollo.search"), 1_000, None)
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
        gov.report_provider_backpressure("apollo", Some("apollo.search"), 1_000, None)
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
        g.report_provider_backpressure("clearbit", Some("clearbit.lookup"), 1_000, None)
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
