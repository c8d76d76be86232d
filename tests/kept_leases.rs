//! Kept leases: an isolate hands a slot from one of its callers to the
//! next without a gateway round trip, on virtual time.

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use common::port::spawn;
use common::rig::SimRig;
use paceline::client::{GatewayRateState, PacerOptions, PermitRequest};
use paceline::protocol::PacingRule;
use paceline::rt::Runtime;
use paceline::sim::T0;
use paceline::time::Clock;

const BUCKET: &str = "org:p";

fn keeping_pacer(rig: &SimRig) -> GatewayRateState {
    let options = PacerOptions {
        keep_leases: true,
        ..PacerOptions::default()
    };
    rig.pacer_with(options)
}

/// Callers of one isolate loop on one slot: acquire, hold it for
/// `hold_ms`, release, and straight back. Returns each caller's calls.
fn loop_on_one_slot(callers: usize, hold_ms: u64, run_ms: u64) -> Vec<u64> {
    let rig = SimRig::new(0);
    let pacer = keeping_pacer(&rig);
    let rules = vec![PacingRule::new(10, 1_000).with_max_concurrency(1)];
    let counts = Rc::new(RefCell::new(vec![0u64; callers]));
    for caller in 0..callers {
        let (rt, pacer, rules, counts) =
            (rig.rt.clone(), pacer.clone(), rules.clone(), counts.clone());
        spawn(&rig.rt, async move {
            while rt.now_ms() < T0 + run_ms {
                let mut permit = pacer
                    .acquire(PermitRequest {
                        bucket_id: BUCKET,
                        rate_scope_token: None,
                        rules: &rules,
                        signal: None,
                    })
                    .await
                    .unwrap();
                counts.borrow_mut()[caller] += 1;
                rt.sleep(hold_ms).await;
                permit.release();
            }
        });
    }
    rig.rt.run_to_completion();
    let counts = counts.borrow().clone();
    counts
}

#[test]
fn a_caller_straight_back_from_its_call_waits_behind_callers_already_waiting_bug_one_caller_kept_the_slot(
) {
    let counts = loop_on_one_slot(3, 150, 20_000);
    let (least, most) = (*counts.iter().min().unwrap(), *counts.iter().max().unwrap());
    assert!(most > 20, "the slot was hardly used: {counts:?}");
    assert!(
        least * 10 >= most * 9,
        "callers of one isolate are served in arrival order, so their calls are even: {counts:?}"
    );
}
