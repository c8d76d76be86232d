//! What the client needs from its host besides the gateway: the time, a
//! timer, and a way to run work in the background. The bindings implement
//! these with `Date.now()` and `setTimeout`; the simulation with a virtual
//! clock.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use crate::time::{Clock, Millis};

pub type LocalBoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// A clock, a timer, and a way to run work in the background (batched
/// releases). Dropping a sleep future must cancel its timer.
pub trait Runtime: Clock {
    fn sleep(&self, ms: Millis) -> LocalBoxFuture<'static, ()>;
    fn spawn(&self, task: LocalBoxFuture<'static, ()>);
}

impl<R: Runtime + ?Sized> Runtime for Rc<R> {
    fn sleep(&self, ms: Millis) -> LocalBoxFuture<'static, ()> {
        (**self).sleep(ms)
    }

    fn spawn(&self, task: LocalBoxFuture<'static, ()>) {
        (**self).spawn(task)
    }
}
