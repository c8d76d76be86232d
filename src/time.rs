//! Time enters the core only through [`Clock`]; nothing here reads the host's
//! clock, so the same code runs on `Date.now()` in a Worker and on a fake
//! clock in tests.

use std::rc::Rc;

/// Milliseconds since the Unix epoch, as `Date.now()` gives them.
pub type Millis = u64;

pub trait Clock {
    fn now_ms(&self) -> Millis;
}

impl<C: Clock + ?Sized> Clock for Rc<C> {
    fn now_ms(&self) -> Millis {
        (**self).now_ms()
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now_ms(&self) -> Millis {
        (**self).now_ms()
    }
}
