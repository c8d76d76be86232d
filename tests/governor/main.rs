//! The governor against the real scheduler, on virtual time, one module
//! per concern, in one test binary.

#[path = "../common/mod.rs"]
mod common;

mod feedback;
mod lineage;
mod policy;
mod retries;
mod rig;
mod slots;
