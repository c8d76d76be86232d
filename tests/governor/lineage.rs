//! The governor against the real scheduler, on virtual time: a run's
//! lineage (cycles, forks, resumed snapshots, inline children).

use std::rc::Rc;

use crate::common::port::{block_on, spawn};
use crate::rig::*;
use paceline::client::{BudgetState, LocalBudgetState};
use paceline::governor::{GovernanceSnapshot, Governor};
use paceline::protocol::{decode, BudgetKind};
use paceline::sim::T0;
use paceline::{Detail, ErrorCode};

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
