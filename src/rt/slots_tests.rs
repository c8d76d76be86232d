//! The slots on virtual time.

use std::cell::RefCell;
use std::rc::Rc;

use super::*;
use crate::error::ErrorCode;
use crate::sim::{SimRuntime, T0};
use crate::time::Clock;

/// A one-slot `Slots` whose slot is held, on a simulation at `T0`.
fn one_slot_held() -> (SimRuntime, Slots, SlotPermit) {
    let rt = SimRuntime::new(T0);
    let slots = Slots::new(1);
    let s = slots.clone();
    let held = rt.block_on(async move { s.acquire(None).await.unwrap() });
    (rt, slots, held)
}

/// A waiter for a slot that `signal` may abort; its outcome once it ends.
fn waiter(rt: &SimRuntime, slots: &Slots, signal: &AbortSignal) -> Rc<RefCell<Option<Result<()>>>> {
    let (slots, signal) = (slots.clone(), signal.clone());
    rt.spawn_output(async move { slots.acquire(Some(&signal)).await.map(|_| ()) })
}

fn assert_aborted(outcome: &RefCell<Option<Result<()>>>) {
    let outcome = outcome.borrow_mut().take().expect("the waiter ended");
    assert_eq!(outcome.unwrap_err().code, ErrorCode::Aborted);
}

#[test]
fn slots_are_granted_in_the_order_they_were_asked_for() {
    let rt = SimRuntime::new(T0);
    let slots = Slots::new(1);
    let order = Rc::new(RefCell::new(Vec::new()));
    for i in 0..5 {
        let (slots, order, rt2) = (slots.clone(), order.clone(), rt.clone());
        rt.spawn_output(async move {
            let _slot = slots.acquire(None).await.unwrap();
            order.borrow_mut().push(i);
            rt2.sleep(10).await;
        });
    }
    rt.run_to_completion();
    assert_eq!(*order.borrow(), [0, 1, 2, 3, 4]);
    assert_eq!(rt.now_ms(), T0 + 50, "one at a time, back to back");
    assert_eq!(slots.available(), 1);
}

#[test]
fn a_freed_slot_goes_to_the_longest_waiter_not_to_a_newcomer() {
    let rt = SimRuntime::new(T0);
    let slots = Slots::new(1);
    let held = rt.block_on({
        let slots = slots.clone();
        async move { slots.acquire(None).await.unwrap() }
    });
    let first = rt.spawn_output({
        let slots = slots.clone();
        async move { slots.acquire(None).await.map(|_| "first") }
    });
    rt.run_until(T0);
    assert_eq!(slots.waiting(), 1);
    drop(held);
    assert_eq!(slots.available(), 0, "handed to the waiter, not freed");
    let newcomer = rt.spawn_output({
        let slots = slots.clone();
        async move { slots.acquire(None).await.map(|_| "newcomer") }
    });
    rt.run_until(T0);
    assert_eq!(first.borrow_mut().take().unwrap().unwrap(), "first");
    assert_eq!(newcomer.borrow_mut().take().unwrap().unwrap(), "newcomer");
}

#[test]
fn a_slot_permit_is_released_on_drop_and_release_is_idempotent() {
    let rt = SimRuntime::new(T0);
    let slots = Slots::new(2);
    let s = slots.clone();
    let (mut a, b) = rt.block_on(async move {
        (
            s.acquire(None).await.unwrap(),
            s.acquire(None).await.unwrap(),
        )
    });
    assert_eq!(slots.available(), 0);
    a.release();
    a.release();
    assert_eq!(slots.available(), 1, "a second release frees nothing more");
    drop(a);
    assert_eq!(slots.available(), 1, "nor does the drop after it");
    drop(b);
    assert_eq!(slots.available(), 2);
}

#[test]
fn an_aborted_waiter_leaves_the_queue_even_if_granted_in_the_same_instant() {
    let (rt, slots, held) = one_slot_held();
    let signal = AbortSignal::new();
    let aborted = waiter(&rt, &slots, &signal);
    let next = rt.spawn_output({
        let (slots, rt2) = (slots.clone(), rt.clone());
        async move {
            let _slot = slots.acquire(None).await.unwrap();
            rt2.sleep(10).await;
        }
    });
    rt.run_until(T0);
    assert_eq!(slots.waiting(), 2);
    // The slot reaches the aborted waiter before it runs again.
    drop(held);
    signal.abort();
    rt.run_until(T0 + 1);
    assert_aborted(&aborted);
    assert!(next.borrow().is_none(), "the next waiter holds the slot");
    assert_eq!((slots.available(), slots.waiting()), (0, 0));
    rt.run_to_completion();
    assert_eq!(slots.available(), 1, "and nothing leaked");
}

#[test]
fn an_aborted_waiter_leaves_the_queue_without_a_slot() {
    let (rt, slots, held) = one_slot_held();
    let signal = AbortSignal::new();
    let aborted = waiter(&rt, &slots, &signal);
    rt.run_until(T0);
    signal.abort();
    rt.run_until(T0 + 1);
    assert_aborted(&aborted);
    assert_eq!(slots.waiting(), 0);
    drop(held);
    assert_eq!(slots.available(), 1);
}

#[test]
fn a_waiter_on_its_own_timer_is_not_woken_by_the_release_and_takes_its_slot_at_its_next_tick() {
    let (rt, slots, held) = one_slot_held();
    let got_at = rt.spawn_output({
        let (slots, rt2) = (slots.clone(), rt.clone());
        async move {
            let _slot = slots.acquire_on_own_timer(&rt2, 5, None).await.unwrap();
            rt2.now_ms()
        }
    });
    let rt2 = rt.clone();
    rt.spawn_output(async move {
        rt2.sleep(2).await;
        drop(held);
    });
    rt.run_until(T0 + 4);
    assert_eq!(slots.available(), 0, "handed to the waiter at T0+2");
    assert!(got_at.borrow().is_none(), "the release did not wake it");
    rt.run_to_completion();
    assert_eq!(got_at.borrow_mut().take(), Some(T0 + 5));
    assert_eq!(slots.available(), 1);
}

#[test]
fn a_waiter_on_its_own_timer_that_aborts_after_its_grant_passes_the_slot_on() {
    let (rt, slots, held) = one_slot_held();
    let signal = AbortSignal::new();
    let aborted = rt.spawn_output({
        let (slots, rt2, signal) = (slots.clone(), rt.clone(), signal.clone());
        async move {
            slots
                .acquire_on_own_timer(&rt2, 5, Some(&signal))
                .await
                .map(|_| ())
        }
    });
    let next = rt.spawn_output({
        let (slots, rt2) = (slots.clone(), rt.clone());
        async move {
            slots
                .acquire_on_own_timer(&rt2, 5, None)
                .await
                .map(|_| rt2.now_ms())
        }
    });
    rt.run_until(T0 + 1);
    drop(held);
    signal.abort();
    rt.run_to_completion();
    assert_aborted(&aborted);
    assert_eq!(next.borrow_mut().take().unwrap().unwrap(), T0 + 5);
    assert_eq!((slots.available(), slots.waiting()), (1, 0));
}
