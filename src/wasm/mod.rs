//! The JS face of paceline. Everything here is a thin adapter: it converts
//! JS values to the core's types, calls the core, and converts back.

mod clock;
mod error;
mod gateway;
mod js;
pub mod protocol;

pub use clock::JsClock;
