//! The client tests' gateway port: the real scheduler in process behind the
//! simulation's fault-injecting transport (refused connections, lost
//! answers, rewritten grants, a server clock offset, a log of every call).

use std::cell::RefCell;
use std::rc::Rc;

#[allow(unused_imports)]
pub use paceline::sim::FaultyPort as ScriptedPort;
use paceline::sim::SimRuntime;

/// Spawns `work` on the simulation and returns a handle to its result.
pub fn spawn<T: 'static>(
    rt: &SimRuntime,
    work: impl std::future::Future<Output = T> + 'static,
) -> Rc<RefCell<Option<T>>> {
    rt.spawn_output(work)
}

/// Runs `work` to completion on virtual time.
pub fn block_on<T: 'static>(
    rt: &SimRuntime,
    work: impl std::future::Future<Output = T> + 'static,
) -> T {
    rt.block_on(work)
}
