//! Module-wide state for the wasm build. The module runs on one thread
//! (wasm32 without the atomics feature has none other), so its state can
//! be a plain `static` rather than a `thread_local!`, whose `with` keeps
//! an access-error panic, and the `Debug` formatting of its message, in
//! the module for each key.

#[cfg(target_feature = "atomics")]
compile_error!("paceline's wasm state assumes one thread: build without the atomics feature");

/// A value only the module's one thread touches.
pub(crate) struct Global<T>(T);

// SAFETY: without the atomics feature a wasm32 module has one thread, so
// no reference to the value is ever shared between threads.
unsafe impl<T> Sync for Global<T> {}

impl<T> Global<T> {
    pub const fn new(value: T) -> Self {
        Global(value)
    }

    /// Runs `f` on the value, as `LocalKey::with` would.
    #[inline(always)]
    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&self.0)
    }
}
