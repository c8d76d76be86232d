//! Deterministic simulation on virtual time: an executor whose clock jumps
//! from timer to timer, a provider with a hidden limit, and a fleet of
//! isolates sharing one gateway. Test support: built for the crate's own
//! tests and, with the `sim` feature, for its integration tests and
//! benchmarks.

pub mod arrivals;
mod call_tool_run;
mod executor;
mod fake_clock;
mod faulty_port;
mod fleet;
pub mod jitter;
pub mod oracle;
mod provider;
mod report;
mod requests;
pub mod scenarios;

pub use executor::SimRuntime;
pub use fake_clock::FakeClock;
pub use faulty_port::{AnswerHook, FaultyPort, Rewrite};
pub use fleet::{run_fleet, FleetConfig};
pub use provider::{Answer, Provider, ProviderModel, Reply, RETRY_AFTER_MS};
pub use report::FleetReport;
pub use requests::charge_request;

use crate::time::Millis;

/// Where tests and simulations start their clocks: 2026-01-01T00:00:00Z, a
/// realistic epoch time far from zero, so no subtraction underflows.
pub const T0: Millis = 1_767_225_600_000;
