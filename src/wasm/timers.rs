//! Sleeps on JS timers: one `setTimeout` per wake-up time, not one per
//! caller. Callers of one bucket wake at the same few milliseconds (its
//! permits' times), so twenty callers need one timer, not twenty.
//!
//! Not in workerd: there a timer belongs to the request that set it, it is
//! cancelled when that request ends, and a continuation runs in the I/O
//! context of whatever woke it. A caller woken by another request's timer
//! would send its provider call on behalf of a request that may already
//! have answered, so each sleep keeps a timer of its own.

use std::cell::{Cell, OnceCell};

use super::global::Global;
use crate::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};

use js_sys::Reflect;
use wasm_bindgen::prelude::*;

use super::clock::JsClock;
use crate::time::{Clock, Millis};

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(callback: &Closure<dyn FnMut()>, ms: f64) -> JsValue;
    #[wasm_bindgen(catch, js_name = setTimeout)]
    fn try_set_timeout(callback: &Closure<dyn FnMut()>, ms: f64) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(js_name = clearTimeout)]
    fn clear_timeout(id: &JsValue);
}

#[derive(Default)]
struct SleepState {
    fired: bool,
    waker: Option<Waker>,
}

type Sleeper = Rc<RefCell<SleepState>>;

#[derive(Default)]
struct WakeupState {
    fired: Cell<bool>,
    sleepers: RefCell<Vec<Sleeper>>,
}

/// One `setTimeout` and the sleeps it ends.
struct Wakeup {
    id: JsValue,
    at: Millis,
    state: Rc<WakeupState>,
    _callback: Closure<dyn FnMut()>,
}

impl Wakeup {
    fn set(at: Millis, ms: Millis) -> Rc<Wakeup> {
        let state = Rc::new(WakeupState::default());
        let fired = state.clone();
        let callback = Closure::new(move || {
            fired.fired.set(true);
            let sleepers = std::mem::take(&mut *fired.sleepers.borrow_mut());
            for sleeper in sleepers {
                let waker = {
                    let mut s = sleeper.borrow_mut();
                    s.fired = true;
                    s.waker.take()
                };
                if let Some(w) = waker {
                    w.wake();
                }
            }
        });
        let id = set_timeout(&callback, ms as f64);
        Rc::new(Wakeup {
            id,
            at,
            state,
            _callback: callback,
        })
    }
}

/// Set once a timer could be set: the host allows them from then on.
static TIMERS_ALLOWED: Global<Cell<bool>> = Global::new(Cell::new(false));
/// Wake-up times with sleeps on them, where timers are shared, in time
/// order: a sorted list rather than a hash map, whose code for this one
/// key type would be the module's only such copy.
static WAKEUPS: Global<RefCell<Wakeups>> = Global::new(RefCell::new(Vec::new()));
type Wakeups = Vec<(Millis, Weak<Wakeup>)>;
static SHARES_TIMERS: Global<OnceCell<bool>> = Global::new(OnceCell::new());

fn in_workerd() -> bool {
    let navigator = Reflect::get(&js_sys::global(), &JsValue::from_str("navigator"));
    navigator
        .ok()
        .filter(JsValue::is_object)
        .and_then(|n| Reflect::get(&n, &JsValue::from_str("userAgent")).ok())
        .and_then(|agent| agent.as_string())
        .is_some_and(|agent| agent == "Cloudflare-Workers")
}

/// What the host threw when asked for a timer, if it refuses them here:
/// workerd does at a module's top level, before any request. A wait that
/// starts there would never end, so its caller is refused at once instead.
/// Once a timer was allowed the answer is known, and no more are tried.
pub(crate) fn timers_refused() -> Option<JsValue> {
    if TIMERS_ALLOWED.with(Cell::get) {
        return None;
    }
    let noop = Closure::<dyn FnMut()>::new(|| {});
    match try_set_timeout(&noop, 0.0) {
        Ok(id) => {
            clear_timeout(&id);
            TIMERS_ALLOWED.with(|a| a.set(true));
            None
        }
        Err(thrown) => Some(thrown),
    }
}

/// A sleep of `ms` as a future. Dropping it takes it off its timer, and a
/// timer nobody sleeps on any more is cleared, so an abandoned wait leaves
/// nothing scheduled in the isolate. It ends no sooner than the clock reads
/// its wake-up time: a timer counts from its event loop's own time, which
/// can trail `Date.now()` by a millisecond, and a permit sent a millisecond
/// before its time crowds the window it was spaced out of.
pub(crate) struct Sleep {
    sleeper: Sleeper,
    wakeup: Rc<Wakeup>,
    shared: bool,
    at: Millis,
}

impl Sleep {
    pub fn new(ms: Millis) -> Self {
        let now = JsClock.now_ms();
        Self::until(now.saturating_add(ms), now)
    }

    fn until(at: Millis, now: Millis) -> Self {
        let ms = at.saturating_sub(now);
        let shared = SHARES_TIMERS.with(|s| *s.get_or_init(|| !in_workerd()));
        let wakeup = if shared {
            WAKEUPS.with(|w| {
                let mut w = w.borrow_mut();
                let place = w.binary_search_by_key(&at, |(t, _)| *t);
                let set = place.ok().and_then(|i| w[i].1.upgrade());
                match set.filter(|t| !t.state.fired.get()) {
                    Some(t) => t,
                    None => {
                        let t = Wakeup::set(at, ms);
                        match place {
                            Ok(i) => w[i].1 = Rc::downgrade(&t),
                            Err(i) => w.insert(i, (at, Rc::downgrade(&t))),
                        }
                        t
                    }
                }
            })
        } else {
            Wakeup::set(0, ms)
        };
        let sleeper = Sleeper::default();
        wakeup.state.sleepers.borrow_mut().push(sleeper.clone());
        Sleep {
            sleeper,
            wakeup,
            shared,
            at,
        }
    }
}

impl Future for Sleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        loop {
            if !this.sleeper.borrow().fired {
                this.sleeper.borrow_mut().waker = Some(cx.waker().clone());
                return Poll::Pending;
            }
            // workerd moves its clock to a timer's time when it fires.
            let now = JsClock.now_ms();
            if !this.shared || now >= this.at {
                return Poll::Ready(());
            }
            *this = Sleep::until(this.at, now);
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        let t = &self.wakeup;
        if !t.state.fired.get() {
            let mut sleepers = t.state.sleepers.borrow_mut();
            sleepers.retain(|s| !Rc::ptr_eq(s, &self.sleeper));
            if sleepers.is_empty() {
                clear_timeout(&t.id);
            }
        }
        // The last sleep on a timer forgets its wake-up time.
        if self.shared && Rc::strong_count(t) == 1 {
            WAKEUPS.with(|w| {
                let mut w = w.borrow_mut();
                if let Ok(i) = w.binary_search_by_key(&t.at, |(at, _)| *at) {
                    if std::ptr::eq(w[i].1.as_ptr(), Rc::as_ptr(t)) {
                        w.remove(i);
                    }
                }
            });
        }
    }
}
