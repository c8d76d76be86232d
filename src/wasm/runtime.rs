//! The client's host facilities in a JS engine: `Date.now()`, timers
//! (shared by wake-up time where the host allows it, see `timers`), `spawn_local` (each short task also
//! handed to the host's `waitUntil`, when it gave one), and `AbortSignal`
//! (checked to be one, and read only through the host's own accessors).

use js_sys::Function;
use wasm_bindgen::prelude::*;

use super::clock::JsClock;
use super::error::keep;
use super::js::{run, undefined_after};
use super::timers::Sleep;
use crate::error::Error;
use crate::rt::{AbortSignal, LocalBoxFuture, Runtime};
use crate::time::{Clock, Millis};

/// The JS host. With a `waitUntil` (a Worker's `ctx.waitUntil`, bound),
/// every short background task is registered with it: workerd cancels a
/// request's pending work when its response is done, and a release cut off
/// there would leave its lease to the gateway's TTL.
#[derive(Clone, Default)]
pub struct JsRuntime {
    wait_until: Option<Function>,
}

impl JsRuntime {
    pub fn new(wait_until: Option<Function>) -> Self {
        JsRuntime { wait_until }
    }

    /// `work` as a promise the caller gets, also registered with the
    /// host's `waitUntil`. The work runs whatever `waitUntil` does; one
    /// that throws (its request is over) only means nothing more can be
    /// kept alive.
    pub fn keep_alive(&self, work: LocalBoxFuture<'static, ()>) -> js_sys::Promise {
        let running = run(undefined_after(work));
        if let Some(wait_until) = &self.wait_until {
            let _ = wait_until.call1(&JsValue::NULL, &running);
        }
        running
    }
}

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
        if self.wait_until.is_some() {
            drop(self.keep_alive(task));
        } else {
            spawn_local(task);
        }
    }

    fn spawn_watch(&self, task: LocalBoxFuture<'static, ()>) {
        spawn_local(task);
    }
}

/// Runs `task` as `spawn_local` would, through `future_to_promise`'s task
/// (a promise nobody awaits): every async method's promise already brings
/// that one into the wasm, and `spawn_local` of a task of its own type
/// would add a second copy of the task machinery.
fn spawn_local(task: LocalBoxFuture<'static, ()>) {
    drop(wasm_bindgen_futures::future_to_promise(undefined_after(
        task,
    )));
}

/// A value checked to be the host's `AbortSignal`. It is used only through
/// the host's own accessors (`final`: looked up on `AbortSignal.prototype`
/// and called on the value), which brand-check it: a look-alike makes them
/// throw, which the catch turns into `INVALID_INPUT`, and properties a
/// caller put on the object itself are never called.
#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = AbortSignal)]
    pub(crate) type JsAbortSignal;
    #[wasm_bindgen(method, getter, final, catch)]
    fn aborted(this: &JsAbortSignal) -> Result<bool, JsValue>;
    #[wasm_bindgen(method, getter, final, catch)]
    fn reason(this: &JsAbortSignal) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, final, catch, js_name = addEventListener)]
    fn add_event_listener(
        this: &JsAbortSignal,
        kind: &str,
        listener: &Closure<dyn FnMut()>,
    ) -> Result<(), JsValue>;
    #[wasm_bindgen(method, final, catch, js_name = removeEventListener)]
    fn remove_event_listener(
        this: &JsAbortSignal,
        kind: &str,
        listener: &Closure<dyn FnMut()>,
    ) -> Result<(), JsValue>;
}

impl JsAbortSignal {
    /// Whether it has aborted (a checked signal's accessor does not throw).
    pub fn is_aborted(&self) -> bool {
        self.aborted().unwrap_or(false)
    }

    /// Reads an optional `signal` argument; anything but an `AbortSignal`
    /// is refused up front, before any wait starts or any permit is taken.
    pub fn read(value: Option<JsValue>, path: &str) -> Result<Option<Self>, Error> {
        let Some(value) = value else {
            return Ok(None);
        };
        let signal: JsAbortSignal = value.unchecked_into();
        match signal.aborted() {
            Ok(_) => Ok(Some(signal)),
            Err(_) => Err(Error::invalid(format!(
                "{path} must be an AbortSignal (from new AbortController().signal)"
            ))),
        }
    }
}

/// Keeps the reason a JS signal aborted with, for the core's errors.
fn abort_core(core: &AbortSignal, js: &JsAbortSignal) {
    core.abort_because(keep(js.reason().unwrap_or_default()));
}

/// Mirrors a JS `AbortSignal` into the core's for one call, reason
/// included; dropping it removes the listener.
pub(crate) struct AbortBridge {
    pub signal: AbortSignal,
    js: Option<(JsAbortSignal, Closure<dyn FnMut()>)>,
}

impl AbortBridge {
    pub fn new(js: Option<JsAbortSignal>) -> Self {
        let signal = AbortSignal::new();
        let js = js.map(|js| {
            if js.aborted().unwrap_or(false) {
                abort_core(&signal, &js);
            }
            let (core, target) = (signal.clone(), js.clone().unchecked_into::<JsAbortSignal>());
            let listener = Closure::new(move || abort_core(&core, &target));
            // The host's own method on a checked signal does not throw; if
            // a host made it, the wait simply runs unabortable.
            let _ = js.add_event_listener("abort", &listener);
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
            // A permit already granted must reach its caller: nothing the
            // removal could throw may interrupt that.
            let _ = js.remove_event_listener("abort", listener);
        }
    }
}
