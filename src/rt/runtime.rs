//! What the client needs from its host besides the gateway: the time, a
//! timer, and cancellation. The bindings implement these with `Date.now()`,
//! `setTimeout` and `AbortSignal`; the simulation with a virtual clock.

use crate::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::error::{Detail, Error, ErrorCode, HostCause};
use crate::time::{Clock, Millis};

pub type LocalBoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// A clock, a timer, and a way to run work in the background. Dropping a
/// sleep future must cancel its timer.
pub trait Runtime: Clock {
    fn sleep(&self, ms: Millis) -> LocalBoxFuture<'static, ()>;
    /// Background work that ends soon and must not be cut short (a batched
    /// release, returned times, a refill): a Worker's runtime registers it
    /// with the request's `waitUntil`, so the request's end does not strand
    /// a lease.
    fn spawn(&self, task: LocalBoxFuture<'static, ()>);
    /// Background work that lives as long as a state does (a watch over
    /// cached permits): registering it would hold a request open for ever.
    fn spawn_watch(&self, task: LocalBoxFuture<'static, ()>) {
        self.spawn(task)
    }
}

impl<R: Runtime + ?Sized> Runtime for Rc<R> {
    fn sleep(&self, ms: Millis) -> LocalBoxFuture<'static, ()> {
        (**self).sleep(ms)
    }

    fn spawn(&self, task: LocalBoxFuture<'static, ()>) {
        (**self).spawn(task)
    }

    fn spawn_watch(&self, task: LocalBoxFuture<'static, ()>) {
        (**self).spawn_watch(task)
    }
}

#[derive(Default)]
struct AbortState {
    aborted: bool,
    reason: Option<HostCause>,
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
        self.abort_with(None);
    }

    /// Aborts with the host's reason, handed back as the cause of every
    /// `ABORTED` error, so a caller learns why its own signal fired.
    pub fn abort_because(&self, reason: HostCause) {
        self.abort_with(Some(reason));
    }

    fn abort_with(&self, reason: Option<HostCause>) {
        let wakers = {
            let mut s = self.state.borrow_mut();
            if s.aborted {
                return;
            }
            s.aborted = true;
            s.reason = reason;
            std::mem::take(&mut s.wakers)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    pub fn is_aborted(&self) -> bool {
        self.state.borrow().aborted
    }

    /// `Err(ABORTED)` once aborted; `waiting_for` names what was waited on
    /// ("a permit of bucket org:p").
    pub fn check(&self, waiting_for: impl FnOnce() -> String) -> Result<(), Error> {
        if self.is_aborted() {
            Err(self.error(&waiting_for()))
        } else {
            Ok(())
        }
    }

    /// The `ABORTED` error for a wait on `waiting_for`, with the reason.
    fn error(&self, waiting_for: &str) -> Error {
        let e = Error::new(
            ErrorCode::Aborted,
            format!("the wait for {waiting_for} was aborted"),
        );
        match &self.state.borrow().reason {
            Some(reason) => e.with_detail(Detail::Cause(reason.clone())),
            None => e,
        }
    }

    /// Resolves when the signal aborts.
    pub fn aborted(&self) -> Aborted {
        Aborted(self.clone())
    }
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
/// (cancelling whatever timer or request it owned) and the error names
/// `waiting_for`.
pub async fn abortable<T>(
    signal: Option<&AbortSignal>,
    waiting_for: impl FnOnce() -> String,
    work: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    // One path, with or without a signal: `work` awaited on a path of its
    // own as well would have its poll inlined twice in every caller.
    let mut work = std::pin::pin!(work);
    let mut abort = signal.map(AbortSignal::aborted);
    let mut waiting_for = Some(waiting_for);
    std::future::poll_fn(|cx| {
        if let Some(signal) = poll_abort(&mut abort, cx) {
            let what = waiting_for.take().map_or_else(String::new, |f| f());
            return Poll::Ready(Err(signal.error(&what)));
        }
        work.as_mut().poll(cx)
    })
    .await
}

/// Waits out `sleep` unless `signal` aborts first; the error names the wait
/// `{what} {name}`. Every timed wait goes through this one, where an async
/// block per caller had its own copy of `abortable`.
///
/// `abortable`'s steps with the sleep polled in place, not wrapped in an
/// async block that turns its `()` into `Ok(())` (a state machine fewer).
pub async fn abortable_sleep(
    mut sleep: LocalBoxFuture<'static, ()>,
    signal: Option<&AbortSignal>,
    what: &str,
    name: &str,
) -> Result<(), Error> {
    let mut abort = signal.map(AbortSignal::aborted);
    std::future::poll_fn(|cx| {
        if let Some(signal) = poll_abort(&mut abort, cx) {
            return Poll::Ready(Err(signal.error(&format!("{what} {name}"))));
        }
        sleep.as_mut().poll(cx).map(Ok)
    })
    .await
}

/// [`abortable`] for work that cannot fail: its output as `Ok`, the work
/// polled in place rather than in an async block that wraps its output (a
/// state machine fewer per caller). The two keep their own poll loops:
/// `abortable` written as this one plus a flattening made every caller's
/// copy larger (0.4 KB gzip in the client module), and a shared step
/// function 48 B.
pub async fn abortable_ok<T>(
    signal: Option<&AbortSignal>,
    waiting_for: impl FnOnce() -> String,
    work: impl Future<Output = T>,
) -> Result<T, Error> {
    let mut work = std::pin::pin!(work);
    let mut abort = signal.map(AbortSignal::aborted);
    let mut waiting_for = Some(waiting_for);
    std::future::poll_fn(|cx| {
        if let Some(signal) = poll_abort(&mut abort, cx) {
            let what = waiting_for.take().map_or_else(String::new, |f| f());
            return Poll::Ready(Err(signal.error(&what)));
        }
        work.as_mut().poll(cx).map(Ok)
    })
    .await
}

/// The signal of a wait, once it has aborted. Not generic: one copy for
/// every kind of wait.
#[inline(never)]
fn poll_abort<'a>(abort: &'a mut Option<Aborted>, cx: &mut Context<'_>) -> Option<&'a AbortSignal> {
    let abort = abort.as_mut()?;
    Pin::new(&mut *abort)
        .poll(cx)
        .is_ready()
        .then_some(&abort.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host value an error's cause carries, if it is a number.
    fn cause_of(e: &Error) -> Option<u32> {
        match &e.detail {
            Some(Detail::Cause(cause)) => cause.get::<u32>().copied(),
            _ => None,
        }
    }

    fn poll_once<T>(f: impl Future<Output = T>) -> Poll<T> {
        let mut f = std::pin::pin!(f);
        f.as_mut()
            .poll(&mut Context::from_waker(std::task::Waker::noop()))
    }

    #[test]
    fn an_aborted_wait_names_what_it_waited_on_and_keeps_the_reason() {
        let signal = AbortSignal::new();
        let wait = abortable(
            Some(&signal),
            || "a permit of bucket org:p".to_owned(),
            std::future::pending::<Result<(), Error>>(),
        );
        let mut wait = std::pin::pin!(wait);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        signal.abort_because(HostCause::new(7u32));
        let Poll::Ready(Err(e)) = wait.as_mut().poll(&mut cx) else {
            panic!("the wait did not end with the abort");
        };
        assert_eq!(e.code, ErrorCode::Aborted);
        assert_eq!(
            e.message,
            "the wait for a permit of bucket org:p was aborted"
        );
        assert_eq!(cause_of(&e), Some(7));
    }

    #[test]
    fn a_signal_aborted_before_the_wait_refuses_it_and_a_second_abort_keeps_the_first_reason() {
        let signal = AbortSignal::new();
        signal.abort_because(HostCause::new(1u32));
        signal.abort_because(HostCause::new(2u32));
        signal.abort();
        let Poll::Ready(Err(e)) = poll_once(abortable(
            Some(&signal),
            || "a tool slot".to_owned(),
            std::future::ready(Ok(())),
        )) else {
            panic!("an aborted signal let the work run");
        };
        assert_eq!(e.message, "the wait for a tool slot was aborted");
        assert_eq!(cause_of(&e), Some(1));
        assert_eq!(
            cause_of(&signal.check(|| "x".to_owned()).unwrap_err()),
            Some(1)
        );
    }
}
