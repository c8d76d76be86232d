//! A fair async semaphore: slots go to waiters in the order they asked, a
//! freed slot passes straight to the longest waiter (so a newcomer can never
//! overtake it), and a waiter that gives up leaves the queue without taking
//! a slot with it, even if one was handed to it a moment before.
//!
//! A waiter learns that a slot was handed to it in one of two ways. Slots
//! used within one request wake it from the release. Slots shared by the
//! requests of a workerd isolate must not: workerd runs a continuation in
//! the I/O context of whatever woke it, so a waiter woken by another
//! request's release would send its own I/O on behalf of a request that
//! may already have answered, and hang. Such a waiter looks for its slot on
//! its own timer instead.

use std::cell::Cell;

use crate::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use super::{abortable_ok, AbortSignal, LocalBoxFuture, Runtime};
use crate::error::Result;
use crate::time::Millis;

#[derive(Default)]
struct Waiter {
    granted: Cell<bool>,
    /// Woken when a slot is handed over; `None` for a waiter on its own
    /// timer.
    waker: RefCell<Option<Waker>>,
}

struct Pool {
    /// What an aborted wait names ("a tool slot").
    kind: &'static str,
    capacity: usize,
    /// Free slots. Non-zero only while nobody waits: a freed slot goes to
    /// the head of the queue instead of back here.
    free: Cell<usize>,
    /// Oldest first. A Vec, not a VecDeque: taking the head moves only
    /// pointers, and each deque type brings its ring buffer's code into
    /// the wasm module.
    queue: RefCell<Vec<Rc<Waiter>>>,
}

impl Pool {
    fn give_back(&self) {
        let next = {
            let mut queue = self.queue.borrow_mut();
            (!queue.is_empty()).then(|| queue.remove(0))
        };
        match next {
            Some(waiter) => {
                waiter.granted.set(true);
                if let Some(waker) = waiter.waker.borrow_mut().take() {
                    waker.wake();
                }
            }
            None => self.free.set(self.free.get() + 1),
        }
    }
}

/// A fixed number of slots shared by clones.
#[derive(Clone)]
pub struct Slots {
    pool: Rc<Pool>,
}

impl Slots {
    /// `capacity` must be at least 1; the policy makes sure of it.
    pub fn new(capacity: usize) -> Self {
        Self::of_kind(capacity, "a slot")
    }

    /// Slots an aborted wait names as `kind` ("a tool slot").
    pub fn of_kind(capacity: usize, kind: &'static str) -> Self {
        Slots {
            pool: Rc::new(Pool {
                kind,
                capacity,
                free: Cell::new(capacity),
                queue: RefCell::new(Vec::new()),
            }),
        }
    }

    /// Waits for a slot, behind everyone who asked earlier, woken by the
    /// release that hands it over. An abort leaves the queue and returns
    /// `ABORTED`; a slot granted in the same instant goes on to the next
    /// waiter.
    pub fn acquire<'a>(
        &'a self,
        signal: Option<&'a AbortSignal>,
    ) -> impl Future<Output = Result<SlotPermit>> + 'a {
        self.acquire_with(Turn::Woken, signal)
    }

    /// As [`Slots::acquire`], but the waiter looks for its slot every
    /// `every_ms` on `rt`'s timer and no release wakes it: for slots shared
    /// by requests.
    pub fn acquire_on_own_timer<'a>(
        &'a self,
        rt: &'a dyn Runtime,
        every_ms: Millis,
        signal: Option<&'a AbortSignal>,
    ) -> impl Future<Output = Result<SlotPermit>> + 'a {
        let turn = Turn::OwnTimer {
            rt,
            every_ms,
            sleep: None,
        };
        self.acquire_with(turn, signal)
    }

    async fn acquire_with(
        &self,
        turn: Turn<'_>,
        signal: Option<&AbortSignal>,
    ) -> Result<SlotPermit> {
        let acquire = Acquire {
            pool: &self.pool,
            waiter: None,
            turn,
        };
        abortable_ok(signal, || self.pool.kind.to_owned(), acquire).await
    }

    pub fn capacity(&self) -> usize {
        self.pool.capacity
    }

    pub fn available(&self) -> usize {
        self.pool.free.get()
    }

    pub fn waiting(&self) -> usize {
        self.pool.queue.borrow().len()
    }
}

impl fmt::Debug for Slots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slots")
            .field("capacity", &self.capacity())
            .field("available", &self.available())
            .field("waiting", &self.waiting())
            .finish()
    }
}

/// How a queued waiter learns that a slot was handed to it.
enum Turn<'a> {
    /// The release wakes it.
    Woken,
    /// It looks every `every_ms` on its own timer.
    OwnTimer {
        rt: &'a dyn Runtime,
        every_ms: Millis,
        sleep: Option<LocalBoxFuture<'static, ()>>,
    },
}

impl Turn<'_> {
    /// Arranges to be polled again: by the release, or by the next tick of
    /// the waiter's own timer.
    fn wait(&mut self, waiter: &Waiter, cx: &mut Context<'_>) {
        match self {
            Turn::Woken => *waiter.waker.borrow_mut() = Some(cx.waker().clone()),
            Turn::OwnTimer {
                rt,
                every_ms,
                sleep,
            } => loop {
                let tick = sleep.get_or_insert_with(|| rt.sleep(*every_ms));
                if tick.as_mut().poll(cx).is_pending() {
                    return;
                }
                *sleep = None;
                if waiter.granted.get() {
                    cx.waker().wake_by_ref();
                    return;
                }
            },
        }
    }
}

struct Acquire<'a> {
    pool: &'a Rc<Pool>,
    /// Set once queued; taken when the slot is handed to the caller.
    waiter: Option<Rc<Waiter>>,
    turn: Turn<'a>,
}

impl Future for Acquire<'_> {
    type Output = SlotPermit;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<SlotPermit> {
        let this = self.get_mut();
        let pool = this.pool.clone();
        match &this.waiter {
            None if pool.free.get() > 0 => {
                pool.free.set(pool.free.get() - 1);
                return Poll::Ready(SlotPermit { pool: Some(pool) });
            }
            None => {
                let waiter = Rc::new(Waiter::default());
                pool.queue.borrow_mut().push(waiter.clone());
                this.turn.wait(&waiter, cx);
                this.waiter = Some(waiter);
            }
            Some(waiter) if waiter.granted.get() => {
                this.waiter = None;
                return Poll::Ready(SlotPermit { pool: Some(pool) });
            }
            Some(waiter) => this.turn.wait(waiter, cx),
        }
        Poll::Pending
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        let Some(waiter) = self.waiter.take() else {
            return;
        };
        if waiter.granted.get() {
            // Handed a slot but gone before taking it: pass it on.
            self.pool.give_back();
        } else {
            self.pool
                .queue
                .borrow_mut()
                .retain(|w| !Rc::ptr_eq(w, &waiter));
        }
    }
}

/// One held slot. Dropping it (or `release()`) frees it for the next waiter.
#[must_use = "a slot is held until the permit is released or dropped"]
pub struct SlotPermit {
    pool: Option<Rc<Pool>>,
}

impl SlotPermit {
    /// Frees the slot. Idempotent: a second call, or the drop after it,
    /// does nothing.
    pub fn release(&mut self) {
        if let Some(pool) = self.pool.take() {
            pool.give_back();
        }
    }

    pub fn is_released(&self) -> bool {
        self.pool.is_none()
    }
}

impl Drop for SlotPermit {
    fn drop(&mut self) {
        self.release();
    }
}

impl fmt::Debug for SlotPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlotPermit")
            .field("released", &self.is_released())
            .finish()
    }
}

#[cfg(test)]
#[path = "slots_tests.rs"]
mod tests;
