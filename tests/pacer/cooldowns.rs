//! Cooldowns: a wait past the limit, a 429 that drops the cached block,
//! permits drawn before another isolate's 429, and what rides on the next
//! acquire (failed penalties, successes).

use std::rc::Rc;

use crate::common::port::{block_on, spawn, ScriptedPort};
use crate::common::rig::SimRig;
use crate::*;
use paceline::protocol::PacingRule;
use paceline::rt::Runtime;
use paceline::sim::{SimRuntime, T0};
use paceline::time::Clock;
use paceline::{Detail, ErrorCode};

/// A pacer at 20/s whose first call met a 429 asking for `cooldown_ms`,
/// reported through `penalize`.
fn after_a_429(
    cooldown_ms: u64,
) -> (
    SimRuntime,
    Rc<ScriptedPort>,
    GatewayRateState,
    Vec<PacingRule>,
) {
    let (rt, port, pacer) = setup(0);
    let rules = rate(20);
    let (p, r) = (pacer.clone(), rules.clone());
    block_on(&rt, async move {
        drop(take(&p, &r, None).await.unwrap());
        p.penalize(BUCKET, None, cooldown_ms, None).await.unwrap();
    });
    (rt, port, pacer, rules)
}

#[test]
fn a_wait_past_the_limit_fails_fast_with_provider_exhausted_and_its_cooldown() {
    let (rt, port, pacer, rules) = after_a_429(300_000);
    let e = block_on(
        &rt,
        async move { take(&pacer, &rules, None).await.map(|_| ()) },
    )
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::ProviderExhausted);
    assert!(matches!(e.detail, Some(Detail::Cooldown { until_ms }) if until_ms >= T0 + 300_000));
    assert_eq!(port.acquires.borrow().len(), 2);
}

#[test]
fn penalize_drops_the_cached_block_so_the_cooldown_applies_to_the_next_call() {
    let (rt, _port, pacer) = setup(0);
    let rules = rate(20);
    times_together(&rt, &pacer, rules.clone(), 2);
    let (p, r, rt2) = (pacer.clone(), rules.clone(), rt.clone());
    let next = block_on(&rt, async move {
        p.penalize(BUCKET, None, 2_000, None).await.unwrap();
        let _again = take(&p, &r, None).await.unwrap();
        rt2.now_ms() - T0
    });
    assert!(
        next >= 2_000,
        "a cached permit was dispatched inside the cooldown at +{next} ms"
    );
}

/// Bug: a cooldown learned from an acquire answer (another isolate's 429)
/// dropped the permits cached in the isolate's block but not one a caller
/// had already drawn and was waiting on: sent at its time, it reached a
/// provider inside the cooldown. Only a cooldown answered to the isolate's
/// own penalize was checked against drawn permits.
#[test]
fn a_permit_drawn_before_another_isolate_s_429_is_not_sent_inside_its_cooldown() {
    let rig = SimRig::new(0);
    let (rt, first, second) = (rig.rt.clone(), rig.pacer(), rig.pacer());
    let rules = rate(2);
    let (p, r) = (first.clone(), rules.clone());
    block_on(&rt, async move { drop(take(&p, &r, None).await.unwrap()) });
    // The second isolate's caller draws the next permit, due 500 ms on.
    let (p, r, rt2) = (second.clone(), rules.clone(), rt.clone());
    let drawn = spawn(&rt, async move {
        let _permit = take(&p, &r, None).await.unwrap();
        rt2.now_ms() - T0
    });
    let (p, r, rt2, other) = (first.clone(), rules.clone(), rt.clone(), second.clone());
    spawn(&rt, async move {
        rt2.sleep(100).await;
        // The first isolate's call is refused: the gateway's cooldown.
        p.penalize(BUCKET, None, 2_000, None).await.unwrap();
        rt2.sleep(100).await;
        // The second isolate's next caller hears of it from the gateway.
        drop(take(&other, &r, None).await.unwrap());
    });
    rt.run_to_completion();
    let sent = drawn.borrow_mut().take().unwrap();
    assert!(
        sent >= 2_000,
        "a permit drawn before the cooldown went out inside it at +{sent} ms"
    );
}

#[test]
fn a_failed_penalize_is_surfaced_to_its_caller() {
    let (rt, port, pacer) = setup(0);
    port.refuse.set(1);
    let e = block_on(&rt, async move {
        pacer.penalize(BUCKET, None, 1_000, None).await
    })
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::GatewayUnavailable);
    assert!(
        e.message.starts_with("penalize failed for org:p"),
        "{}",
        e.message
    );
}

#[test]
fn successes_ride_on_the_next_acquire() {
    let (rt, port, pacer) = setup_one_lease_per_permit();
    let rules = vec![PacingRule::new(20, 1_000).with_max_concurrency(1)];
    let (p, r) = (pacer.clone(), rules.clone());
    block_on(&rt, async move {
        for _ in 0..3 {
            let permit = take(&p, &r, None).await.unwrap();
            p.observe_success(BUCKET);
            drop(permit);
        }
    });
    let sent: Vec<u64> = port
        .acquires
        .borrow()
        .iter()
        .map(|a| a.observed_successes)
        .collect();
    assert_eq!(sent[0], 0);
    assert_eq!(
        sent.iter().sum::<u64>(),
        2,
        "each success before the last refill is reported once: {sent:?}"
    );
}

/// Bug: a 429 reported with no wait (`cooldownMs: 0` through the
/// governor's `reportProviderBackpressure`, which takes 0) never reached
/// the gateway: the pacer returned before telling it, so the bucket's rate
/// was not cut and the fleet went on sending at the rate refused. It now
/// reaches the gateway with the shortest cooldown it takes, and cuts.
#[test]
fn a_429_reported_with_no_wait_still_cuts_the_rate_bug_it_never_reached_the_gateway() {
    let (rt, port, pacer, rules) = after_a_429(0);
    assert_eq!(port.round_trips.borrow().get("penalize"), Some(&1));
    let times = times_of(&rt, &pacer, rules, 4);
    let spacing = (times[3] - times[0]) / 3;
    assert!(
        spacing > 50,
        "permits {spacing} ms apart after the 429: the rule's 20/s, not cut ({times:?})"
    );
}

/// Bug: after a refill found the gateway down, the pacer waits a second
/// before asking it again, and a caller that came meanwhile waited that
/// second out before its refill even started, whatever its `maxWaitMs`
/// (a limiter with `maxWaitMs: 100` took 1.3-2.2 s to fail against a port
/// that failed 70% of the time). A caller whose longest wait ends before
/// the pause does now gets the gateway's failure at once.
#[test]
fn a_caller_during_the_pause_after_a_gateway_failure_gets_it_at_once_bug_it_waited_the_pause_out() {
    let rig = SimRig::new(0);
    let options = PacerOptions {
        max_wait_ms: 100,
        ..PacerOptions::default()
    };
    let pacer = rig.pacer_with(options);
    let (rt, rules) = (rig.rt.clone(), rate(20));
    rig.port.refuse.set(3);
    let (p, r) = (pacer.clone(), rules.clone());
    let first = block_on(&rt, async move { take(&p, &r, None).await.map(|_| ()) });
    assert_eq!(first.unwrap_err().code, ErrorCode::GatewayUnavailable);
    let (p, r, rt2) = (pacer.clone(), rules.clone(), rt.clone());
    let (second, waited) = block_on(&rt, async move {
        let began = rt2.now_ms();
        let second = take(&p, &r, None).await.map(|_| ());
        (second, rt2.now_ms() - began)
    });
    assert_eq!(second.unwrap_err().code, ErrorCode::GatewayUnavailable);
    assert_eq!(waited, 0, "the caller waited out the pause");
    let (p, rt2) = (pacer.clone(), rt.clone());
    block_on(&rt, async move {
        rt2.sleep(1_000).await;
        drop(
            take(&p, &rules, None)
                .await
                .expect("the gateway is back after the pause"),
        );
    });
}

#[test]
fn a_429_s_send_time_reaches_the_gateway_on_its_clock_and_an_unknown_one_is_left_out() {
    // The gateway's clock runs 400 ms ahead of this isolate's.
    let (rt, port, pacer) = setup(400);
    let rules = rate(20);
    let clock = rt.clone();
    let sent_at = block_on(&rt, async move {
        drop(take(&pacer, &rules, None).await.unwrap());
        let sent_at = clock.now_ms();
        pacer
            .penalize(BUCKET, None, 0, Some(sent_at))
            .await
            .unwrap();
        pacer.penalize(BUCKET, None, 0, None).await.unwrap();
        sent_at
    });
    let penalties = port.penalties.borrow();
    let sent = penalties.iter().map(|p| p.sent_at_ms).collect::<Vec<_>>();
    assert_eq!(sent.len(), 2);
    let on_gateway = sent[0].expect("the first report says when its call went out");
    // Within the clock estimate's error: half the fastest round trip.
    assert!(
        on_gateway.abs_diff(sent_at + 400) <= 10,
        "the isolate's {sent_at} read on the gateway's clock: {on_gateway}"
    );
    assert_eq!(sent[1], None, "a report that does not know says nothing");
}
