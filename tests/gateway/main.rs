//! The gateway's scheduler on a fake clock: each reference behaviour and
//! each bad input, one test apiece, in one test binary of a module per
//! concern.

#[path = "../common/mod.rs"]
mod common;

mod adaptive;
mod http;
mod scopes;
mod slots;
mod snapshots;
mod state;
mod timeline;
mod turns;

use paceline::gateway::{GatewayConfig, GatewayCore};
use paceline::protocol::{ChargeRequest, PacingRule};

pub fn per_second(n: u64) -> PacingRule {
    PacingRule::new(n, 1_000)
}

pub fn core() -> GatewayCore {
    GatewayCore::new(GatewayConfig::default(), 7).unwrap()
}

pub fn charge(run: &str, id: &str, charges: &[(&str, u64, u64)]) -> ChargeRequest {
    common::gateway::charge(run, id, None, charges)
}
