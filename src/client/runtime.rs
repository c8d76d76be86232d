//! What the client needs from its host besides the gateway: the time, a
//! timer, and cancellation. The bindings implement these with `Date.now()`,
//! `setTimeout` and `AbortSignal`; the simulation with a virtual clock.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::error::{Error, ErrorCode};
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

#[derive(Default)]
struct AbortState {
    aborted: bool,
    wakers: Vec<Waker>,
}

/// A cancellation flag that futures can wait on: the core's `AbortSignal`.
/// Clones share one flag.
#[derive(Clone, Default)]
pub struct AbortSignal {
    state: Rc<RefCell<AbortState>>,
}

impl AbortSignal {
    pub fn new() -> Self {
        AbortSignal::default()
    }

    pub fn abort(&self) {
        let wakers = {
            let mut s = self.state.borrow_mut();
            s.aborted = true;
            std::mem::take(&mut s.wakers)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    pub fn is_aborted(&self) -> bool {
        self.state.borrow().aborted
    }

    /// `Err(ABORTED)` once aborted.
    pub fn check(&self) -> Result<(), Error> {
        if self.is_aborted() {
            Err(aborted())
        } else {
            Ok(())
        }
    }

    /// Resolves when the signal aborts.
    pub fn aborted(&self) -> Aborted {
        Aborted(self.clone())
    }
}

pub fn aborted() -> Error {
    Error::new(ErrorCode::Aborted, "the wait was aborted")
}

pub struct Aborted(AbortSignal);

impl Future for Aborted {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.0.state.borrow_mut();
        if s.aborted {
            Poll::Ready(())
        } else {
            if !s.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                s.wakers.push(cx.waker().clone());
            }
            Poll::Pending
        }
    }
}

/// Runs `work` unless `signal` aborts first; on abort, `work` is dropped
/// (cancelling whatever timer or request it owned).
pub async fn abortable<T>(
    signal: Option<&AbortSignal>,
    work: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let Some(signal) = signal else {
        return work.await;
    };
    signal.check()?;
    let mut work = std::pin::pin!(work);
    let mut abort = signal.aborted();
    std::future::poll_fn(|cx| {
        if Pin::new(&mut abort).poll(cx).is_ready() {
            return Poll::Ready(Err(aborted()));
        }
        work.as_mut().poll(cx)
    })
    .await
}

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
