//! Releases: leases handed back on abort, batched, released once however
//! often dropped, settled once at the gateway, and riding on the next
//! acquire.

use crate::common::port::{block_on, spawn};
use crate::*;
use paceline::client::PacerOptions;
use paceline::protocol::PacingRule;
use paceline::rt::AbortSignal;
use paceline::sim::T0;
use paceline::time::Clock;
use paceline::ErrorCode;

#[test]
fn an_abort_while_waiting_for_a_dispatch_time_hands_the_lease_back() {
    let (rt, port, pacer) = setup_one_lease_per_permit();
    let rules = vec![PacingRule::new(20, 1_000).with_max_concurrency(4)];
    let signal = AbortSignal::new();
    let (p, r) = (pacer.clone(), rules.clone());
    let first = spawn(&rt, async move { take(&p, &r, None).await });
    let (p, r, s) = (pacer.clone(), rules.clone(), signal.clone());
    let second = spawn(&rt, async move { take(&p, &r, Some(&s)).await.map(|_| ()) });
    rt.run_until(T0 + 20);
    signal.abort();
    // Past the release linger, the lease has gone back.
    rt.run_until(T0 + 30 + PacerOptions::default().release_linger_ms);
    let first = first.borrow_mut().take().unwrap().unwrap();
    assert_eq!(
        second.borrow_mut().take().unwrap().unwrap_err().code,
        ErrorCode::Aborted
    );
    let released: Vec<String> = port
        .releases
        .borrow()
        .iter()
        .flat_map(|r| r.lease_ids.clone())
        .collect();
    assert_eq!(
        released.len(),
        1,
        "the aborted caller's lease, drawn for T0+50, went back"
    );
    assert_ne!(Some(released[0].as_str()), first.lease_id());
    let view = port
        .gateway
        .core
        .borrow_mut()
        .bucket(BUCKET, None, T0 + 30)
        .unwrap()
        .unwrap();
    assert_eq!(view.live_leases, 1, "only the held permit's lease is live");
}

#[test]
fn permits_released_together_go_back_in_one_batch() {
    let (rt, port, pacer) = setup_one_lease_per_permit();
    let rules = vec![PacingRule::new(100, 1_000).with_max_concurrency(5)];
    let (p, r) = (pacer.clone(), rules.clone());
    block_on(&rt, async move {
        let mut permits = Vec::new();
        for _ in 0..5 {
            permits.push(take(&p, &r, None).await.unwrap());
        }
        drop(permits);
    });
    let releases = port.releases.borrow();
    assert_eq!(releases.len(), 1, "{releases:?}");
    assert_eq!(releases[0].lease_ids.len(), 5);
}

#[test]
fn a_failed_batched_release_surfaces_on_the_next_acquire() {
    let (rt, port, pacer) = setup(0);
    let rules = vec![PacingRule::new(20, 1_000).with_max_concurrency(3)];
    let (p, r, port2) = (pacer.clone(), rules.clone(), port.clone());
    block_on(&rt, async move {
        let permit = take(&p, &r, None).await.unwrap();
        port2.refuse.set(3);
        drop(permit);
    });
    assert_eq!(port.releases.borrow().len(), 3, "tried, then retried twice");
    let e = block_on(
        &rt,
        async move { take(&pacer, &rules, None).await.map(|_| ()) },
    )
    .unwrap_err();
    assert!(
        e.message.starts_with("releasing leases of org:p failed"),
        "{}",
        e.message
    );
}

#[test]
fn a_permit_is_released_once_however_often_it_is_dropped_or_released() {
    let (rt, port, pacer) = setup(0);
    let rules = vec![PacingRule::new(20, 1_000).with_max_concurrency(2)];
    block_on(&rt, async move {
        let mut permit = take(&pacer, &rules, None).await.unwrap();
        permit.release();
        permit.release();
        drop(permit);
    });
    let released: usize = port
        .releases
        .borrow()
        .iter()
        .map(|r| r.lease_ids.len())
        .sum();
    assert_eq!(released, 1);
}

#[test]
fn a_release_settles_once_its_batch_has_reached_the_gateway() {
    let (rt, port, pacer) = setup(0);
    let rules = vec![PacingRule::new(20, 1_000).with_max_concurrency(3)];
    let (p, r) = (pacer.clone(), rules.clone());
    let mut permit = block_on(&rt, async move { take(&p, &r, None).await.unwrap() });
    let released_at = rt.now_ms();
    let rt2 = rt.clone();
    let settled = spawn(&rt, async move {
        permit.release_settled().await;
        rt2.now_ms()
    });
    rt.run_until(released_at + 5);
    assert!(settled.borrow().is_none(), "still lingering for company");
    assert!(port.releases.borrow().is_empty());
    rt.run_to_completion();
    let at = settled.borrow_mut().take().expect("settled");
    assert_eq!(port.releases.borrow().len(), 1);
    assert!(
        at >= released_at + PacerOptions::default().release_linger_ms,
        "{at}"
    );
}

#[test]
fn a_lease_released_just_before_the_next_acquire_rides_on_it() {
    let (rt, port, pacer) = setup_one_lease_per_permit();
    let rules = vec![PacingRule::new(20, 1_000).with_max_concurrency(1)];
    let (p, r) = (pacer.clone(), rules.clone());
    block_on(&rt, async move {
        drop(take(&p, &r, None).await.unwrap());
        drop(take(&p, &r, None).await.unwrap());
    });
    let acquires = port.acquires.borrow();
    assert_eq!(acquires.len(), 2, "the only slot was free again at once");
    assert_eq!(acquires[1].released_lease_ids.len(), 1);
    let releases = port.releases.borrow();
    assert_eq!(
        releases.len(),
        1,
        "only the last lease, which nothing else would carry, goes alone"
    );
    assert_ne!(releases[0].lease_ids, acquires[1].released_lease_ids);
}
