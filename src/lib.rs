//! paceline paces outbound calls to third-party provider APIs across many
//! worker isolates that share each provider's limit through one gateway.
//!
//! The crate is a pure core ([`protocol`], [`time`], and the scheduler and
//! client modules built on them) plus one bindings module, `wasm`, compiled
//! only for `wasm32` and the only place that touches JS.

mod by_name;
mod cell;
pub mod client;
pub mod error;
pub mod gateway;
pub mod governor;
pub mod json;
mod json_float;
mod json_parse;
pub mod json_value;
pub mod json_write;
pub mod protocol;
mod queue;
pub mod rt;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
mod sort;
mod sorted_map;
pub mod time;

#[cfg(target_arch = "wasm32")]
pub mod wasm;

pub use error::{Detail, Error, ErrorCode, ErrorFields, HostCause, Result};

/// The crate's version, as the npm package reports it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
