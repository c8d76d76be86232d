//! Budget states: counting in memory, and block reservation at the gateway.

mod common;

use std::rc::Rc;

use common::port::{block_on, ScriptedPort};
use common::rig::SimRig;
use paceline::client::{BudgetState, GatewayBudgetState, LocalBudgetState};
use paceline::protocol::BudgetCharge;
use paceline::sim::{SimRuntime, T0};
use paceline::ErrorCode;

fn tool_call(limit: u64) -> Vec<BudgetCharge> {
    vec![BudgetCharge {
        key: "toolCall".into(),
        amount: 1,
        limit,
    }]
}

fn setup() -> (SimRuntime, Rc<ScriptedPort>, Rc<GatewayBudgetState>) {
    let rig = SimRig::new(0);
    let budget = Rc::new(rig.budget(9));
    (rig.rt, rig.port, budget)
}

fn counter(port: &ScriptedPort, key: &str) -> u64 {
    port.gateway.core.borrow().budget_counter("run", key)
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
    let (rt, port, budget) = setup();
    let b = budget.clone();
    block_on(&rt, async move {
        for _ in 0..100 {
            b.charge("run", &tool_call(10_000)).await.unwrap();
        }
    });
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
    let (rt, port, budget) = setup();
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
    let (rt, port, budget) = setup();
    port.lose_answer.set(1);
    let b = budget.clone();
    block_on(&rt, async move {
        b.charge("run", &tool_call(10_000)).await.unwrap()
    });
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
    let (rt, port, budget) = setup();
    let b = budget.clone();
    block_on(&rt, async move {
        b.charge("run", &tool_call(10_000)).await.unwrap()
    });
    for _ in 0..255 {
        let b = budget.clone();
        block_on(&rt, async move {
            b.charge("run", &tool_call(10_000)).await.unwrap()
        });
    }
    assert_eq!(budget.reserved_unused("run", "toolCall"), 0);
    port.refuse.set(3);
    let b = budget.clone();
    let e = block_on(&rt, async move {
        b.charge("run", &tool_call(10_000)).await.unwrap_err()
    });
    assert_eq!(e.code, ErrorCode::GatewayUnavailable);
    assert_eq!(
        budget.reserved_unused("run", "toolCall"),
        0,
        "nothing was reserved"
    );
    let b = budget.clone();
    block_on(&rt, async move {
        b.charge("run", &tool_call(10_000)).await.unwrap()
    });
    assert_eq!(counter(&port, "toolCall"), 512);
    assert_eq!(budget.reserved_unused("run", "toolCall"), 255);
}
