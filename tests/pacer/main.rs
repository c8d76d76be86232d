//! The block-leasing pacer against the real scheduler, on virtual time,
//! one module per concern in one test binary.

#[path = "../common/mod.rs"]
mod common;

mod cooldowns;
mod refill;
mod releases;

use std::rc::Rc;

use common::port::{block_on, spawn, ScriptedPort};
use common::rig::SimRig;
use paceline::client::{GatewayRateState, PacerOptions, Permit, PermitRequest};
use paceline::protocol::PacingRule;
use paceline::rt::AbortSignal;
use paceline::sim::{SimRuntime, T0};
use paceline::time::Clock;
use paceline::Result;

pub const BUCKET: &str = "org:p";

pub fn setup(skew_ms: i64) -> (SimRuntime, Rc<ScriptedPort>, GatewayRateState) {
    let rig = SimRig::new(skew_ms);
    let pacer = rig.pacer();
    (rig.rt, rig.port, pacer)
}

/// A pacer that takes one lease per permit and gives it back when the
/// permit ends, as it does against gateways that do not stream a bucket's
/// slots and while a bucket's rate is cut.
pub fn setup_one_lease_per_permit() -> (SimRuntime, Rc<ScriptedPort>, GatewayRateState) {
    let rig = SimRig::new(0);
    let options = PacerOptions {
        keep_leases: false,
        ..PacerOptions::default()
    };
    let pacer = rig.pacer_with(options);
    (rig.rt, rig.port, pacer)
}

pub fn rate(n: u64) -> Vec<PacingRule> {
    vec![PacingRule::new(n, 1_000)]
}

pub async fn take(
    pacer: &GatewayRateState,
    rules: &[PacingRule],
    signal: Option<&AbortSignal>,
) -> Result<Permit> {
    pacer
        .acquire(PermitRequest {
            bucket_id: BUCKET,
            rate_scope_token: None,
            rules,
            signal,
        })
        .await
}

/// Acquires `n` permits one after another; returns when each was handed out.
pub fn times_of(
    rt: &SimRuntime,
    pacer: &GatewayRateState,
    rules: Vec<PacingRule>,
    n: usize,
) -> Vec<u64> {
    let (rt2, pacer) = (rt.clone(), pacer.clone());
    block_on(rt, async move {
        let mut times = Vec::new();
        for _ in 0..n {
            let _permit = take(&pacer, &rules, None).await.unwrap();
            times.push(rt2.now_ms() - T0);
        }
        times
    })
}

/// Starts `n` callers at once; returns when each was handed its permit,
/// earliest first.
pub fn times_together(
    rt: &SimRuntime,
    pacer: &GatewayRateState,
    rules: Vec<PacingRule>,
    n: usize,
) -> Vec<u64> {
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let (pacer, rules, rt2) = (pacer.clone(), rules.clone(), rt.clone());
            spawn(rt, async move {
                let _p = take(&pacer, &rules, None).await.unwrap();
                rt2.now_ms() - T0
            })
        })
        .collect();
    rt.run_to_completion();
    let mut times: Vec<u64> = handles
        .iter()
        .map(|h| h.borrow_mut().take().unwrap())
        .collect();
    times.sort_unstable();
    times
}
