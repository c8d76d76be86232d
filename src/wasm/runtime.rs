//! The client's host facilities in a JS engine: `Date.now()`, `setTimeout`
//! (cleared when the wait is dropped), `spawn_local`, and `AbortSignal`.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use wasm_bindgen::prelude::*;

use super::clock::JsClock;
use crate::client::{AbortSignal, LocalBoxFuture, Runtime};
use crate::time::{Clock, Millis};

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(callback: &Closure<dyn FnMut()>, ms: f64) -> JsValue;
    #[wasm_bindgen(js_name = clearTimeout)]
    fn clear_timeout(id: &JsValue);

    /// The DOM `AbortSignal`, as Workers, browsers and Node all provide it.
    #[wasm_bindgen(js_name = AbortSignal)]
    pub type JsAbortSignal;
    #[wasm_bindgen(method, getter)]
    fn aborted(this: &JsAbortSignal) -> bool;
    #[wasm_bindgen(method, js_name = addEventListener)]
    fn add_event_listener(this: &JsAbortSignal, kind: &str, listener: &Closure<dyn FnMut()>);
    #[wasm_bindgen(method, js_name = removeEventListener)]
    fn remove_event_listener(this: &JsAbortSignal, kind: &str, listener: &Closure<dyn FnMut()>);
}

#[derive(Clone, Copy, Default)]
pub struct JsRuntime;

impl Clock for JsRuntime {
    fn now_ms(&self) -> Millis {
        JsClock.now_ms()
    }
}

impl Runtime for JsRuntime {
    fn sleep(&self, ms: Millis) -> LocalBoxFuture<'static, ()> {
        Box::pin(Sleep::new(ms))
    }

    fn spawn(&self, task: LocalBoxFuture<'static, ()>) {
        wasm_bindgen_futures::spawn_local(task);
    }
}

#[derive(Default)]
struct TimerState {
    fired: bool,
    waker: Option<Waker>,
}

/// A `setTimeout` as a future. Dropping it clears the timer, so an
/// abandoned wait leaves nothing scheduled in the isolate.
struct Sleep {
    state: Rc<RefCell<TimerState>>,
    id: JsValue,
    _callback: Closure<dyn FnMut()>,
}

impl Sleep {
    fn new(ms: Millis) -> Self {
        let state = Rc::new(RefCell::new(TimerState::default()));
        let fired = state.clone();
        let callback = Closure::new(move || {
            let waker = {
                let mut s = fired.borrow_mut();
                s.fired = true;
                s.waker.take()
            };
            if let Some(w) = waker {
                w.wake();
            }
        });
        let id = set_timeout(&callback, ms as f64);
        Sleep {
            state,
            id,
            _callback: callback,
        }
    }
}

impl Future for Sleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.state.borrow_mut();
        if s.fired {
            Poll::Ready(())
        } else {
            s.waker = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if !self.state.borrow().fired {
            clear_timeout(&self.id);
        }
    }
}

/// Mirrors a JS `AbortSignal` into the core's for one call; dropping it
/// removes the listener.
pub(crate) struct AbortBridge {
    pub signal: AbortSignal,
    js: Option<(JsAbortSignal, Closure<dyn FnMut()>)>,
}

impl AbortBridge {
    pub fn new(js: Option<JsAbortSignal>) -> Self {
        let signal = AbortSignal::new();
        let js = js.map(|js| {
            if js.aborted() {
                signal.abort();
            }
            let core = signal.clone();
            let listener = Closure::new(move || core.abort());
            js.add_event_listener("abort", &listener);
            (js, listener)
        });
        AbortBridge { signal, js }
    }

    pub fn signal(&self) -> Option<&AbortSignal> {
        self.js.as_ref().map(|_| &self.signal)
    }
}

impl Drop for AbortBridge {
    fn drop(&mut self) {
        if let Some((js, listener)) = &self.js {
            js.remove_event_listener("abort", listener);
        }
    }
}
