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
    use paceline::rt::Runtime;
    let out = Rc::new(RefCell::new(None));
    let slot = out.clone();
    rt.spawn(Box::pin(async move {
        *slot.borrow_mut() = Some(work.await);
    }));
    out
}

/// Runs `work` to completion on virtual time.
pub fn block_on<T: 'static>(
    rt: &SimRuntime,
    work: impl std::future::Future<Output = T> + 'static,
) -> T {
    let out = spawn(rt, work);
    rt.run_to_completion();
    let result = out.borrow_mut().take();
    result.expect("the work finished")
}
