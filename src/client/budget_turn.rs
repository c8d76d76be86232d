//! Whose turn it is to charge a shared budget state, with a bound on how
//! long one charge keeps it.
//!
//! Charges take turns in arrival order. A waiter looks for its turn on its
//! own timer: a budget state at module scope is shared by a Worker's
//! requests, and in workerd a request must be woken by its own events, or
//! its continuation would send I/O on behalf of a request that may already
//! have answered, and hang.
//!
//! A charge whose request was cancelled while its reservation was at the
//! gateway never runs again, and never gives its turn back. So a turn held
//! [`CHARGE_TURN_TIMEOUT_MS`] passes to the next waiter, and the charge
//! that held it, should it ever wake, finds it no longer does.

use crate::cell::RefCell;
use std::rc::Rc;

use crate::rt::Runtime;
use crate::time::Millis;

/// A charge holding its turn this long has lost its request (a round trip
/// and its retries take seconds at most): the next waiter takes the turn.
pub const CHARGE_TURN_TIMEOUT_MS: Millis = 30_000;

#[derive(Default)]
struct Queue {
    next_ticket: u64,
    /// Tickets waiting for the turn, in arrival order (a few at most:
    /// charges queue only while a reservation is in flight).
    waiting: Vec<u64>,
    /// The ticket holding the turn, and since when.
    holder: Option<(u64, Millis)>,
}

/// The turns of one budget state's charges.
#[derive(Default)]
pub(super) struct Turns {
    queue: Rc<RefCell<Queue>>,
}

impl Turns {
    /// Waits for the turn behind everyone who asked earlier, looking every
    /// `poll_ms` on `rt`'s timer; a free turn with nobody waiting is taken
    /// at once.
    pub async fn take(&self, rt: &dyn Runtime, poll_ms: Millis) -> Turn {
        let ticket = {
            let mut q = self.queue.borrow_mut();
            let ticket = q.next_ticket;
            q.next_ticket += 1;
            q.waiting.push(ticket);
            ticket
        };
        // Leaves the queue if the wait is dropped.
        let _waiting = Waiting {
            queue: &self.queue,
            ticket,
        };
        while !self.try_take(ticket, rt.now_ms()) {
            rt.sleep(poll_ms).await;
        }
        Turn {
            queue: self.queue.clone(),
            ticket,
        }
    }

    fn try_take(&self, ticket: u64, now: Millis) -> bool {
        let mut q = self.queue.borrow_mut();
        if q.waiting.first() != Some(&ticket) {
            return false;
        }
        let held = q
            .holder
            .is_some_and(|(_, since)| now.saturating_sub(since) < CHARGE_TURN_TIMEOUT_MS);
        if held {
            return false;
        }
        q.waiting.remove(0);
        q.holder = Some((ticket, now));
        true
    }
}

struct Waiting<'a> {
    queue: &'a Rc<RefCell<Queue>>,
    ticket: u64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut q = self.queue.borrow_mut();
        if let Some(at) = q.waiting.iter().position(|&t| t == self.ticket) {
            q.waiting.remove(at);
        }
    }
}

/// A charge's turn. Dropping it frees the turn, unless it was taken away.
pub(super) struct Turn {
    queue: Rc<RefCell<Queue>>,
    ticket: u64,
}

impl Turn {
    /// False once the turn passed to another charge: this one held it too
    /// long.
    pub fn held(&self) -> bool {
        self.queue.borrow().holder.map(|(t, _)| t) == Some(self.ticket)
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if self.held() {
            self.queue.borrow_mut().holder = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::task::Poll;

    use super::*;
    use crate::sim::SimRuntime;

    /// `work`'s output, or `None` if it is not done within `ms` (it is then
    /// dropped).
    async fn within<T>(rt: &SimRuntime, ms: Millis, work: impl Future<Output = T>) -> Option<T> {
        let (mut work, mut timer) = (Box::pin(work), rt.sleep(ms));
        std::future::poll_fn(|cx| match work.as_mut().poll(cx) {
            Poll::Ready(out) => Poll::Ready(Some(out)),
            Poll::Pending => timer.as_mut().poll(cx).map(|()| None),
        })
        .await
    }

    #[test]
    fn turns_go_in_arrival_order_and_a_dropped_wait_leaves_the_queue() {
        let rt = SimRuntime::new(0);
        let turns = Rc::new(Turns::default());
        let order = Rc::new(RefCell::new(Vec::new()));
        let first = rt.spawn_output({
            let (turns, rt) = (turns.clone(), rt.clone());
            async move { turns.take(&rt, 5).await }
        });
        for (name, patience) in [("second", 1_000), ("gone", 20), ("third", 1_000)] {
            let (turns, order, rt2) = (turns.clone(), order.clone(), rt.clone());
            rt.spawn_output(async move {
                let turn = within(&rt2, patience, turns.take(&rt2, 5)).await;
                if turn.is_some() {
                    order.borrow_mut().push(name);
                    rt2.sleep(10).await;
                }
            });
        }
        rt.run_until(50);
        assert!(order.borrow().is_empty(), "the first still holds the turn");
        drop(first.borrow_mut().take());
        rt.run_until(1_000);
        assert_eq!(*order.borrow(), ["second", "third"]);
    }
}
