//! A broadcast wake-up for waiters that re-check a condition.

use crate::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
struct EventState {
    generation: u64,
    wakers: Vec<Waker>,
}

/// Wakes everyone waiting when something they wait for has happened (a
/// refill landed, a slot was freed). Waiters re-check their condition.
#[derive(Clone, Default)]
pub(crate) struct Event {
    state: Rc<RefCell<EventState>>,
}

impl Event {
    pub fn notify(&self) {
        let wakers = {
            let mut s = self.state.borrow_mut();
            s.generation += 1;
            std::mem::take(&mut s.wakers)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Resolves at the next `notify` after this call.
    pub fn listen(&self) -> Listen {
        Listen {
            event: self.clone(),
            seen: self.state.borrow().generation,
        }
    }
}

pub(crate) struct Listen {
    event: Event,
    seen: u64,
}

impl Future for Listen {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.event.state.borrow_mut();
        if s.generation != self.seen {
            Poll::Ready(())
        } else {
            s.wakers.push(cx.waker().clone());
            Poll::Pending
        }
    }
}
