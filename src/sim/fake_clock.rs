//! A clock for tests that drive time by hand.

use std::cell::Cell;
use std::rc::Rc;

use crate::time::{Clock, Millis};

/// A clock that moves only when told to. Clones share one time line, so a
/// test can hold one handle and give others to the code under test.
#[derive(Debug, Clone, Default)]
pub struct FakeClock {
    now: Rc<Cell<Millis>>,
}

impl FakeClock {
    pub fn new(start_ms: Millis) -> Self {
        FakeClock {
            now: Rc::new(Cell::new(start_ms)),
        }
    }

    pub fn advance(&self, by_ms: Millis) {
        self.now.set(self.now.get().saturating_add(by_ms));
    }

    /// Sets the time, also backwards: wall clocks jump, and the scheduler
    /// must stay correct when they do.
    pub fn set(&self, to_ms: Millis) {
        self.now.set(to_ms);
    }
}

impl Clock for FakeClock {
    fn now_ms(&self) -> Millis {
        self.now.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_one_timeline() {
        let clock = FakeClock::new(1_000);
        let handle = clock.clone();
        clock.advance(250);
        assert_eq!(handle.now_ms(), 1_250);
        handle.set(10);
        assert_eq!(clock.now_ms(), 10);
    }
}
