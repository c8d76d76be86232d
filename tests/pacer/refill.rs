//! Blocks of permits: one refill serving every caller waiting on it, the
//! lead and the gateway's clock, retries of a failing gateway, grants
//! checked before use, and scope tokens kept apart.

use crate::common::port::block_on;
use crate::*;
use paceline::client::{GatewayRateState, PacerOptions, PermitRequest, DEFAULT_LEAD_MS};
use paceline::protocol::PacingRule;
use paceline::rt::Runtime;
use paceline::sim::{SimRuntime, T0};
use paceline::ErrorCode;
use std::rc::Rc;

#[test]
fn one_refill_serves_every_caller_waiting_on_it_each_at_its_time() {
    let (rt, port, pacer) = setup(0);
    let lead = DEFAULT_LEAD_MS;
    let expected: Vec<u64> = (0..8).map(|i| lead + 50 * i).collect();
    assert_eq!(times_together(&rt, &pacer, rate(20), 8), expected);
    assert_eq!(port.acquires.borrow().len(), 1, "single-flight refill");
    assert_eq!(
        port.acquires.borrow()[0].requested,
        21,
        "several callers at once ask for a horizon's worth at 20/s"
    );
}

#[test]
fn a_lone_caller_asks_for_one_permit_at_a_time() {
    let (rt, port, pacer) = setup(0);
    assert_eq!(
        times_of(&rt, &pacer, rate(20), 3),
        [DEFAULT_LEAD_MS, DEFAULT_LEAD_MS + 50, DEFAULT_LEAD_MS + 100]
    );
    let asked: Vec<u64> = port.acquires.borrow().iter().map(|a| a.requested).collect();
    assert_eq!(asked, [1, 1, 1], "no permit bought that nobody uses");
}

#[test]
fn the_first_request_asks_for_a_lead_and_later_ones_for_half_the_round_trip() {
    let (rt, port, pacer) = setup(0);
    times_of(&rt, &pacer, rate(20), 2);
    let leads: Vec<Option<u64>> = port
        .acquires
        .borrow()
        .iter()
        .map(|a| a.dispatch_lead_ms)
        .collect();
    assert_eq!(
        leads,
        [Some(DEFAULT_LEAD_MS), Some(0)],
        "an in-process port answers within the millisecond: no lead"
    );
}

#[test]
fn the_wait_until_a_dispatch_time_is_corrected_for_the_gateways_clock() {
    let (rt, _port, pacer) = setup(5_000);
    assert_eq!(
        times_together(&rt, &pacer, rate(20), 3),
        [DEFAULT_LEAD_MS, DEFAULT_LEAD_MS + 50, DEFAULT_LEAD_MS + 100],
        "server 5 s ahead, no extra wait"
    );
}

#[test]
fn gateway_failures_are_retried_after_100_and_250_ms_then_surface() {
    let (rt, port, pacer) = setup(0);
    port.refuse.set(2);
    assert_eq!(times_of(&rt, &pacer, rate(20), 1), [350 + DEFAULT_LEAD_MS]);
    let (rt, port, pacer) = setup(0);
    port.refuse.set(3);
    let rules = rate(20);
    let e = block_on(
        &rt,
        async move { take(&pacer, &rules, None).await.map(|_| ()) },
    )
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::GatewayUnavailable);
    assert!(e.message.contains("failed 3 times"), "{}", e.message);
    assert_eq!(port.calls.get(), 3);
}

/// Bug: a refill that failed against a gateway that was down was tried
/// again as soon as a caller came back for a permit, so an isolate whose
/// callers retried met a 5 s outage every half second. The refill after a
/// failure waits a second; a caller that comes back meanwhile waits for it.
#[test]
fn after_a_refill_fails_on_a_down_gateway_the_next_waits_a_second_bug_it_asked_again_at_once() {
    let (rt, port, pacer) = setup(0);
    port.refuse.set(3);
    let (rules, clock) = (rate(20), rt.clone());
    let (failed_at, served_at) = block_on(&rt, async move {
        let e = take(&pacer, &rules, None).await.map(|_| ()).unwrap_err();
        assert_eq!(e.code, ErrorCode::GatewayUnavailable);
        let failed_at = clock.now_ms() - T0;
        let _permit = take(&pacer, &rules, None).await.unwrap();
        (failed_at, clock.now_ms() - T0)
    });
    assert_eq!(port.calls.get(), 4, "three tries that failed, one answered");
    assert!(
        served_at >= failed_at + 1_000,
        "failed at +{failed_at} ms, asked again and served at +{served_at} ms"
    );
}

#[test]
fn a_grant_whose_leases_do_not_match_its_permits_is_refused() {
    let (rt, port, pacer) = setup(0);
    *port.rewrite.borrow_mut() = Some(Box::new(|mut r| {
        r.lease_ids.as_mut().unwrap().pop();
        r
    }));
    let rules = vec![PacingRule::new(20, 1_000).with_max_concurrency(3)];
    let e = block_on(
        &rt,
        async move { take(&pacer, &rules, None).await.map(|_| ()) },
    )
    .unwrap_err();
    assert!(
        e.message
            .contains("granted 1 concurrency permits for org:p with 0 lease ids"),
        "{}",
        e.message
    );
}

#[test]
fn a_grant_from_an_older_gateway_without_times_is_usable_at_once() {
    let (rt, port, pacer) = setup(0);
    *port.rewrite.borrow_mut() = Some(Box::new(|mut r| {
        r.scheduled_at_ms = None;
        r
    }));
    assert_eq!(times_of(&rt, &pacer, rate(20), 3), [0, 0, 0]);
}

#[test]
fn the_local_rate_state_paces_with_its_own_scheduler() {
    let rt = SimRuntime::new(T0);
    let runtime: Rc<dyn Runtime> = Rc::new(rt.clone());
    let local = GatewayRateState::local(runtime, PacerOptions::default(), 1);
    // Its scheduler keeps a 25 ms window guard for late JS timers, so 10/s
    // is spaced 102.5 ms; it shares this clock, so the first permit needs
    // no lead.
    assert_eq!(times_of(&rt, &local, rate(10), 3), [0, 103, 205]);
}

#[test]
fn a_permit_bought_with_one_scope_token_never_serves_a_caller_with_another() {
    let (rt, port, pacer) = setup(0);
    let rules = rate(20);
    times_together(&rt, &pacer, rules.clone(), 2);
    let (p, r) = (pacer.clone(), rules.clone());
    block_on(&rt, async move {
        let _other = p
            .acquire(PermitRequest {
                bucket_id: BUCKET,
                rate_scope_token: Some("another-token"),
                rules: &r,
                signal: None,
            })
            .await
            .unwrap();
    });
    let acquires = port.acquires.borrow();
    assert_eq!(
        acquires.len(),
        2,
        "the other token asked the gateway itself"
    );
    assert_eq!(
        acquires[1].rate_scope_token.as_deref(),
        Some("another-token")
    );
}

/// Bug: two callers whose calls take 290 ms, against 25/s, draw about 7
/// permits a second, and each refill asked for a horizon's worth of that
/// rate; the gateway spaces a block at the rule's 40 ms, so the callers
/// could take two of each block and the rest went back unused, 104 times
/// in 10 s, each a permit another isolate could have used only if it asked
/// in time. Once permits go back, an isolate asks for about what its
/// callers took of a block.
#[test]
fn callers_slower_than_the_rule_s_spacing_ask_for_what_they_take_bug_most_of_each_block_went_back()
{
    let (rt, port, pacer) = setup(0);
    let rules = rate(25);
    let taken = Rc::new(std::cell::Cell::new(0));
    for _ in 0..2 {
        let (pacer, rules, rt2, taken) = (pacer.clone(), rules.clone(), rt.clone(), taken.clone());
        spawn(&rt, async move {
            while rt2.now_ms() - T0 < 10_000 {
                let _permit = take(&pacer, &rules, None).await.unwrap();
                taken.set(taken.get() + 1);
                rt2.sleep(290).await;
            }
        });
    }
    rt.run_to_completion();
    let acquires = port.acquires.borrow();
    let returned: usize = acquires
        .iter()
        .map(|a| a.returned_at_ms.len())
        .sum::<usize>()
        + port
            .releases
            .borrow()
            .iter()
            .map(|r| r.returned_at_ms.len())
            .sum::<usize>();
    let asked: Vec<u64> = acquires.iter().map(|a| a.requested).collect();
    assert!(
        asked[1..].iter().all(|&n| n <= 3),
        "after the first guess, about the two callers' worth: {asked:?}"
    );
    assert!(
        returned <= 25,
        "only the first guess goes back: {returned} returned"
    );
    assert!(
        taken.get() >= 68,
        "each caller still calls every 290 ms: {} permits",
        taken.get()
    );
}
