//! The JS face of paceline. Everything here is a thin adapter: it converts
//! JS values to the core's types, calls the core, and converts back.

#[cfg(feature = "governor")]
mod budget;
mod clock;
mod error;
pub(crate) mod float_digits;
#[cfg(feature = "gateway-host")]
mod gateway;
#[cfg(all(feature = "gateway-host", feature = "pacer"))]
mod gateway_client;
#[cfg(feature = "pacer")]
mod global;
#[cfg(feature = "governor")]
mod governor;
#[cfg(feature = "governor")]
mod governor_options;
pub(crate) mod js;
#[cfg(feature = "governor")]
mod leases;
#[cfg(feature = "pacer")]
mod permit;
#[cfg(feature = "pacer")]
mod port;
pub mod protocol;
#[cfg(feature = "pacer")]
mod rate_input;
#[cfg(feature = "pacer")]
mod rate_input_cache;
#[cfg(feature = "pacer")]
mod rate_state;
mod reader;
#[cfg(feature = "governor")]
mod registry;
#[cfg(feature = "pacer")]
mod runtime;
#[cfg(feature = "pacer")]
mod timers;
mod wire;

#[cfg(feature = "governor")]
pub use budget::{JsGatewayBudgetState, JsLocalBudgetState};
pub use clock::JsClock;
#[cfg(feature = "gateway-host")]
pub use gateway::JsGatewayCore;
#[cfg(all(feature = "gateway-host", feature = "pacer"))]
pub use gateway_client::JsGatewayClient;
#[cfg(feature = "governor")]
pub use governor::JsGovernor;
#[cfg(feature = "governor")]
pub use leases::{JsToolLease, JsWorkLease};
#[cfg(feature = "pacer")]
pub use permit::JsPermit;
#[cfg(feature = "pacer")]
pub use rate_state::JsGatewayRateState;
#[cfg(feature = "local-rate-state")]
pub use rate_state::JsLocalRateState;

/// The module's allocator: talc, not std's dlmalloc, which is six times
/// its code (7.2 KB against 1.3 KB) and was a third of what V8 compiles
/// when a first state is built. A permit costs the same with either. The
/// module has no threads, so no lock.
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();
