//! The governor against the real scheduler, on virtual time: retries
//! (Retry-After read as seconds or an HTTP date, the retry budget, which
//! failures are retried and how they back off).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::common::port::block_on;
use crate::rig::*;
use paceline::governor::{
    imf_fixdate_ms, retry_after_ms, CallError, CallOptions, ProviderResponse,
    DEFAULT_RETRY_AFTER_MS, MAX_RETRY_AFTER_MS,
};
use paceline::protocol::BudgetKind;
use paceline::sim::T0;
use paceline::time::Clock;

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
