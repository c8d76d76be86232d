//! The client side, run in every isolate: the block-leasing pacer, the
//! budget states, and what they need from their host.

mod budget;
mod budget_turn;
mod codec;
mod pacer;
mod permit;
mod port;
mod retry;
mod transport;

pub use budget::{BudgetState, GatewayBudgetState, LocalBudgetState};
pub use budget_turn::CHARGE_TURN_TIMEOUT_MS;
/// How often a waiting caller looks again; the simulation's window guard
/// is sized by it.
#[cfg(any(test, feature = "sim"))]
pub(crate) use pacer::REFILL_POLL_MS;
pub use pacer::{
    GatewayRateState, NotYet, PacerOptions, PermitRequest, DEFAULT_LEAD_MS, IDLE_KEEP_MS,
    LOCAL_WINDOW_GUARD_MS, QUOTA_REPORT_INTERVAL_MS, QUOTA_URGENT_MS, REFILL_TIMEOUT_MS,
};
pub use permit::Permit;
pub use port::GatewayPort;
pub use retry::STORE_RETRY_DELAYS_MS;
pub use transport::{GatewayReply, GatewayTransport, InProcessGateway};
