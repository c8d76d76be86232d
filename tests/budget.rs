//! Budget states: counting in memory, and block reservation at the gateway,
//! including charges whose answer never comes back.

mod common;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::task::Poll;

use common::port::{block_on, spawn, ScriptedPort};
use common::rig::SimRig;
use paceline::client::{
    BudgetState, GatewayBudgetState, GatewayPort, LocalBudgetState, CHARGE_TURN_TIMEOUT_MS,
};
use paceline::protocol::limits::RESEND_HORIZON_MS;
use paceline::protocol::{
    AcquireRequest, AcquireResponse, BudgetCharge, ChargeRequest, ChargeResponse, ObserveRequest,
    ObserveResponse, PenalizeRequest, PenalizeResponse, ReleaseRequest, ReleaseResponse,
};
use paceline::rt::{LocalBoxFuture, Runtime};
use paceline::sim::{SimRuntime, T0};
use paceline::time::{Clock, Millis};
use paceline::{ErrorCode, Result};

fn tool_call(limit: u64) -> Vec<BudgetCharge> {
    tool_calls(1, limit)
}

fn tool_calls(amount: u64, limit: u64) -> Vec<BudgetCharge> {
    vec![BudgetCharge {
        key: "toolCall".into(),
        amount,
        limit,
    }]
}

fn counter(port: &ScriptedPort, key: &str) -> u64 {
    port.gateway.core.borrow().budget_counter("run", key)
}

/// `charges` charged to the run, run to their answer on virtual time.
fn charge_now(
    rt: &SimRuntime,
    budget: &Rc<GatewayBudgetState>,
    charges: Vec<BudgetCharge>,
) -> Result<ChargeResponse> {
    let b = budget.clone();
    block_on(rt, async move { b.charge("run", &charges).await })
}

#[test]
fn local_charges_apply_all_keys_or_none() {
    let local = Rc::new(LocalBudgetState::new());
    let l = local.clone();
    let rt = SimRuntime::new(T0);
    block_on(&rt, async move {
        let both = |retry: u64| {
            vec![
                BudgetCharge {
                    key: "toolCall".into(),
                    amount: 1,
                    limit: 10,
                },
                BudgetCharge {
                    key: "retry".into(),
                    amount: retry,
                    limit: 2,
                },
            ]
        };
        l.charge("run", &both(1)).await.unwrap();
        let e = l.charge("run", &both(2)).await.unwrap_err();
        assert_eq!(e.message, "Play execution retry budget exceeded (3/2).");
        let after = l.charge("run", &both(1)).await.unwrap();
        assert_eq!(
            after.counters["toolCall"], 2,
            "the refused charge applied no key"
        );
    });
}

#[test]
fn many_charges_cost_one_reservation_of_a_block() {
    let (rt, port, budget) = stalling(&[]);
    for _ in 0..100 {
        charge_now(&rt, &budget, tool_call(10_000)).unwrap();
    }
    assert_eq!(port.charges.borrow().len(), 1);
    assert_eq!(
        counter(&port, "toolCall"),
        256,
        "one reservation block of toolCall"
    );
    assert_eq!(budget.reserved_unused("run", "toolCall"), 156);
}

#[test]
fn at_the_limit_a_block_falls_back_to_the_exact_shortfall() {
    let (rt, port, budget) = stalling(&[]);
    let b = budget.clone();
    let results = block_on(&rt, async move {
        let mut ok = 0;
        let mut refused = None;
        for _ in 0..400 {
            match b.charge("run", &tool_call(300)).await {
                Ok(_) => ok += 1,
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        (ok, refused)
    });
    assert_eq!(results.0, 300, "every unit up to the limit was usable");
    let e = results.1.unwrap();
    assert_eq!(e.code, ErrorCode::BudgetExceeded);
    assert_eq!(
        e.message,
        "Play execution toolCall budget exceeded (301/300)."
    );
    assert_eq!(counter(&port, "toolCall"), 300);
}

#[test]
fn a_lost_answer_is_retried_with_the_same_reservation_and_counted_once() {
    let (rt, port, budget) = stalling(&[]);
    port.lose_answer.set(1);
    charge_now(&rt, &budget, tool_call(10_000)).unwrap();
    let ids: Vec<String> = port
        .charges
        .borrow()
        .iter()
        .map(|c| c.reservation_id.clone())
        .collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], ids[1], "the retry reused the reservation id");
    assert_eq!(counter(&port, "toolCall"), 256, "counted once");
}

#[test]
fn a_failed_reservation_restores_the_local_counters() {
    let (rt, port, budget) = stalling(&[]);
    for _ in 0..256 {
        charge_now(&rt, &budget, tool_call(10_000)).unwrap();
    }
    assert_eq!(budget.reserved_unused("run", "toolCall"), 0);
    port.refuse.set(3);
    let e = charge_now(&rt, &budget, tool_call(10_000)).unwrap_err();
    assert_eq!(e.code, ErrorCode::GatewayUnavailable);
    assert_eq!(
        budget.reserved_unused("run", "toolCall"),
        0,
        "nothing was reserved"
    );
    charge_now(&rt, &budget, tool_call(10_000)).unwrap();
    assert_eq!(counter(&port, "toolCall"), 512);
    assert_eq!(budget.reserved_unused("run", "toolCall"), 255);
}

/// How one charge's call to the gateway goes wrong.
#[derive(Clone, Copy)]
enum Stall {
    /// It never reaches the gateway, and never returns.
    BeforeTheGateway,
    /// The gateway counts it; its answer never comes back.
    Forever,
    /// The gateway counts it; its answer comes back this late.
    For(Millis),
}

/// The scripted port, with the next charges' calls stalled as scripted.
struct StallingPort {
    inner: Rc<ScriptedPort>,
    rt: SimRuntime,
    stalls: RefCell<VecDeque<Stall>>,
}

impl GatewayPort for StallingPort {
    fn acquire(&self, req: AcquireRequest) -> LocalBoxFuture<'_, Result<AcquireResponse>> {
        self.inner.acquire(req)
    }

    fn release(&self, req: ReleaseRequest) -> LocalBoxFuture<'_, Result<ReleaseResponse>> {
        self.inner.release(req)
    }

    fn penalize(&self, req: PenalizeRequest) -> LocalBoxFuture<'_, Result<PenalizeResponse>> {
        self.inner.penalize(req)
    }

    fn observe(&self, req: ObserveRequest) -> LocalBoxFuture<'_, Result<ObserveResponse>> {
        self.inner.observe(req)
    }

    fn charge(&self, req: ChargeRequest) -> LocalBoxFuture<'_, Result<ChargeResponse>> {
        let stall = self.stalls.borrow_mut().pop_front();
        Box::pin(async move {
            if let Some(Stall::BeforeTheGateway) = stall {
                return std::future::pending().await;
            }
            let answer = self.inner.charge(req).await;
            match stall {
                Some(Stall::Forever) => std::future::pending().await,
                Some(Stall::For(ms)) => {
                    self.rt.sleep(ms).await;
                    answer
                }
                _ => answer,
            }
        })
    }
}

/// A budget state whose next charges stall as `stalls` says (none: the
/// scripted port as it is).
fn stalling(stalls: &[Stall]) -> (SimRuntime, Rc<ScriptedPort>, Rc<GatewayBudgetState>) {
    let rig = SimRig::new(0);
    let port = Rc::new(StallingPort {
        inner: rig.port.clone(),
        rt: rig.rt.clone(),
        stalls: RefCell::new(stalls.iter().copied().collect()),
    });
    let budget = GatewayBudgetState::new(port, rig.runtime(), 9);
    (rig.rt, rig.port, Rc::new(budget))
}

/// Where a spawned charge's answer lands, with the time it came.
type Answered = Rc<RefCell<Option<(Result<ChargeResponse>, Millis)>>>;

/// One tool call charged to the run from `at` on.
fn charge_at(rt: &SimRuntime, budget: &Rc<GatewayBudgetState>, at: Millis) -> Answered {
    let (b, rt2) = (budget.clone(), rt.clone());
    spawn(rt, async move {
        rt2.sleep(at - rt2.now_ms()).await;
        let answer = b.charge("run", &tool_call(10_000)).await;
        (answer, rt2.now_ms())
    })
}

fn reservation_ids(port: &ScriptedPort) -> Vec<String> {
    port.charges
        .borrow()
        .iter()
        .map(|c| c.reservation_id.clone())
        .collect()
}

#[test]
fn a_charge_whose_answer_never_comes_no_longer_holds_the_budgets_turn_for_good() {
    for stall in [Stall::Forever, Stall::BeforeTheGateway] {
        let (rt, port, budget) = stalling(&[stall]);
        let lost = charge_at(&rt, &budget, T0);
        let next = charge_at(&rt, &budget, T0 + 1);
        rt.run_until(T0 + 2 * CHARGE_TURN_TIMEOUT_MS);
        assert!(lost.borrow().is_none(), "its request is gone for good");
        let (answer, at) = next.borrow_mut().take().expect("the next charge answered");
        answer.unwrap();
        assert!(
            at <= T0 + CHARGE_TURN_TIMEOUT_MS + 10,
            "answered at {}",
            at - T0
        );
        // The lost charge's reservation was asked for again, under its own
        // id, and counted once; its block serves the next charge.
        let ids = reservation_ids(&port);
        let sent = match stall {
            Stall::BeforeTheGateway => 1,
            _ => 2,
        };
        assert_eq!(ids.len(), sent, "{ids:?}");
        assert!(
            ids.iter().all(|id| *id == ids[0]),
            "the lost reservation, asked for again"
        );
        assert_eq!(counter(&port, "toolCall"), 256, "one block, counted once");
        assert_eq!(
            budget.reserved_unused("run", "toolCall"),
            255,
            "the lost charge's call never ran: only the next one's unit is used"
        );
    }
}

#[test]
fn a_charge_dropped_at_the_gateway_frees_the_turn_at_once_and_its_block_is_settled_once() {
    let (rt, port, budget) = stalling(&[Stall::For(1_000)]);
    let (b, rt2) = (budget.clone(), rt.clone());
    let dropped = spawn(&rt, async move {
        // Its caller gives up after 10 ms, dropping the charge mid-flight.
        let one = tool_call(10_000);
        let (mut charge, mut timer) = (b.charge("run", &one), rt2.sleep(10));
        std::future::poll_fn(|cx| match charge.as_mut().poll(cx) {
            Poll::Ready(answer) => Poll::Ready(Some(answer)),
            Poll::Pending => timer.as_mut().poll(cx).map(|()| None),
        })
        .await
        .is_none()
    });
    let next = charge_at(&rt, &budget, T0 + 20);
    rt.run_to_completion();
    assert_eq!(*dropped.borrow(), Some(true), "dropped before its answer");
    let (answer, at) = next.borrow_mut().take().expect("answered");
    answer.unwrap();
    assert_eq!(at, T0 + 20, "no wait for a turn its holder dropped");
    assert_eq!(counter(&port, "toolCall"), 256, "one block, counted once");
    assert_eq!(budget.reserved_unused("run", "toolCall"), 255);
}

#[test]
fn a_charge_that_hears_back_after_losing_its_turn_charges_again_and_counts_once() {
    let late = CHARGE_TURN_TIMEOUT_MS + 10_000;
    let (rt, port, budget) = stalling(&[Stall::For(late)]);
    let slow = charge_at(&rt, &budget, T0);
    let next = charge_at(&rt, &budget, T0 + 1);
    rt.run_to_completion();
    let (slow, slow_at) = slow.borrow_mut().take().expect("the slow charge answered");
    let (next, next_at) = next.borrow_mut().take().expect("the next charge answered");
    slow.unwrap();
    next.unwrap();
    assert!(
        next_at < slow_at,
        "the next charge did not wait for the slow one"
    );
    assert_eq!(slow_at, T0 + late, "charged from the settled block at once");
    assert_eq!(counter(&port, "toolCall"), 256, "one block, counted once");
    assert_eq!(
        budget.reserved_unused("run", "toolCall"),
        254,
        "both calls ran, each counted once"
    );
}

#[test]
fn a_lost_reservation_the_gateway_refused_is_settled_as_nothing_reserved() {
    let (rt, port, budget) = stalling(&[Stall::Forever]);
    let other = Rc::new(GatewayBudgetState::new(
        port.clone(),
        Rc::new(rt.clone()),
        2,
    ));
    let charge = |b: &Rc<GatewayBudgetState>, amount: u64| {
        let b = b.clone();
        async move { b.charge("run", &tool_calls(amount, 300)).await }
    };
    charge_now(&rt, &other, tool_calls(250, 300)).unwrap();
    assert_eq!(counter(&port, "toolCall"), 256, "another isolate's block");
    // This state's block of 256 would cross the limit: refused, and the
    // refusal never comes back.
    spawn(&rt, charge(&budget, 1));
    rt.run_until(T0 + 1);
    let next = spawn(&rt, charge(&budget, 1));
    rt.run_until(T0 + 2 * CHARGE_TURN_TIMEOUT_MS);
    let answer = next.borrow_mut().take().expect("the next charge answered");
    assert_eq!(
        answer.unwrap().counters["toolCall"],
        257,
        "the exact shortfall"
    );
    assert_eq!(
        budget.reserved_unused("run", "toolCall"),
        0,
        "the refused block reserved nothing"
    );
}

/// `n` reservations of one unit each, made by other isolates of the run
/// straight at the gateway.
fn others_reserve(rt: &SimRuntime, port: &ScriptedPort, n: usize) {
    for i in 0..n {
        let req = paceline::sim::charge_request(
            "run",
            &format!("other-{i}"),
            None,
            &[("toolCall", 1, 10_000)],
        );
        port.gateway
            .core
            .borrow_mut()
            .charge(&req, rt.now_ms())
            .unwrap();
    }
}

/// A charge whose answer is lost once the gateway counted it, `newer`
/// reservations by other isolates, then this state's next charge at `next`.
fn lost_then_others(newer: usize, next: Millis) -> (Rc<ScriptedPort>, Rc<GatewayBudgetState>) {
    let (rt, port, budget) = stalling(&[Stall::Forever]);
    charge_at(&rt, &budget, T0);
    rt.run_until(T0 + 1);
    others_reserve(&rt, &port, newer);
    let answered = charge_at(&rt, &budget, next);
    rt.run_until(next + 2 * CHARGE_TURN_TIMEOUT_MS);
    let (answer, _) = answered.borrow_mut().take().expect("answered");
    answer.unwrap();
    (port, budget)
}

#[test]
fn a_lost_reservation_settled_after_more_than_128_newer_ones_is_counted_once() {
    let (port, budget) = lost_then_others(129, T0 + 2);
    let lost = reservation_ids(&port)[0].clone();
    let resent: Vec<bool> = port
        .charges
        .borrow()
        .iter()
        .filter(|c| c.reservation_id == lost)
        .map(|c| c.resent)
        .collect();
    assert_eq!(resent, [false, true], "sent, then resent marked as such");
    assert_eq!(
        counter(&port, "toolCall"),
        256 + 129,
        "the lost block counted once"
    );
    assert_eq!(budget.reserved_unused("run", "toolCall"), 255);
}

#[test]
fn a_lost_reservation_the_gateway_may_have_forgotten_is_let_go_not_counted_twice() {
    let (port, budget) = lost_then_others(300, T0 + 2);
    // The resend is refused, and the next charge reserves a block of its
    // own. The lost block's units stay counted and unused: the run stops
    // short of its limit by them, never past it.
    let ids = reservation_ids(&port);
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert_eq!(ids[0], ids[1], "the lost reservation, resent");
    assert_ne!(ids[2], ids[0], "a reservation of its own");
    assert_eq!(counter(&port, "toolCall"), 256 + 300 + 256);
    assert_eq!(budget.reserved_unused("run", "toolCall"), 255);
}

#[test]
fn a_lost_reservation_is_not_sent_again_past_the_resend_horizon() {
    let late = T0 + RESEND_HORIZON_MS + 1;
    let (port, budget) = lost_then_others(0, late);
    let lost = reservation_ids(&port)[0].clone();
    let sent = reservation_ids(&port)
        .iter()
        .filter(|id| **id == lost)
        .count();
    assert_eq!(sent, 1, "never resent");
    assert_eq!(counter(&port, "toolCall"), 2 * 256);
    assert_eq!(budget.reserved_unused("run", "toolCall"), 255);
}
