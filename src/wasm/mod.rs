//! The JS face of paceline. Everything here is a thin adapter: it converts
//! JS values to the core's types, calls the core, and converts back.

mod budget;
mod clock;
mod error;
mod gateway;
mod js;
mod pacer;
mod port;
pub mod protocol;
mod runtime;

pub use clock::JsClock;
