//! Deterministic simulation on virtual time: an executor whose clock jumps
//! from timer to timer, a provider with a hidden limit, and a fleet of
//! isolates sharing one gateway.

pub mod arrivals;
mod executor;
mod faulty_port;
mod fleet;
mod provider;
pub mod scenarios;

pub use executor::SimRuntime;
pub use faulty_port::{AnswerHook, FaultyPort, Rewrite};
pub use fleet::{run_fleet, FleetConfig, FleetReport, START_MS};
pub use provider::{Answer, Provider, ProviderModel, Reply, RETRY_AFTER_MS};
