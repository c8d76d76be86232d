//! The client side, run in every isolate: the block-leasing pacer, the
//! budget states, and what they need from their host.

mod budget;
mod pacer;
mod permit;
mod port;
mod runtime;

pub use budget::{reservation_block, BudgetState, GatewayBudgetState, LocalBudgetState};
pub use pacer::{
    GatewayRateState, PacerOptions, PermitRequest, REFILL_POLL_MS, REFILL_TIMEOUT_MS,
    STORE_RETRY_DELAYS_MS,
};
pub use permit::Permit;
pub use port::{GatewayPort, InProcessGateway};
pub use runtime::{abortable, AbortSignal, LocalBoxFuture, Runtime};
