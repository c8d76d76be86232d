//! A permit to call a provider once. Dropping it (or `release()`) hands its
//! concurrency lease back; a pure-rate permit has nothing to hand back.

use std::fmt;

use crate::rt::LocalBoxFuture;

/// What a permit gives back when it ends: it hands its lease to the batched
/// release and returns a future that settles once that batch has gone.
pub(crate) type OnRelease = Box<dyn FnOnce() -> LocalBoxFuture<'static, ()>>;

#[must_use = "a permit holds a provider slot until it is released or dropped"]
pub struct Permit {
    on_release: Option<OnRelease>,
    lease_id: Option<String>,
}

impl Permit {
    pub(crate) fn new(lease_id: Option<String>, on_release: Option<OnRelease>) -> Self {
        Permit {
            on_release,
            lease_id,
        }
    }

    /// A permit with no slot behind it (no pacing rules apply).
    pub fn unpaced() -> Self {
        Permit::new(None, None)
    }

    /// The concurrency lease this permit holds, if its rules bound
    /// concurrency.
    pub fn lease_id(&self) -> Option<&str> {
        self.lease_id.as_deref()
    }

    /// Nothing to hand back: no lease, no release pending.
    pub fn holds_nothing(&self) -> bool {
        self.on_release.is_none() && self.lease_id.is_none()
    }

    /// Hands the lease back. Idempotent: a second call, or the drop after
    /// it, does nothing.
    pub fn release(&mut self) {
        drop(self.release_settled());
    }

    /// Hands the lease back and returns a future that settles when the
    /// gateway call carrying it has finished (at once if there is nothing
    /// to give back). A Worker passes it to `ctx.waitUntil`, so the request
    /// lives until its lease is back at the gateway.
    pub fn release_settled(&mut self) -> LocalBoxFuture<'static, ()> {
        self.release_pending()
            .unwrap_or_else(|| Box::pin(std::future::ready(())))
    }

    /// Hands the lease back, as [`Permit::release_settled`]; `None` when
    /// there was nothing to hand back (a pure-rate permit, or one already
    /// released), so a host can answer at once without a task.
    pub fn release_pending(&mut self) -> Option<LocalBoxFuture<'static, ()>> {
        self.on_release.take().map(|f| f())
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.release();
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("lease_id", &self.lease_id)
            .field("released", &self.on_release.is_none())
            .finish()
    }
}
