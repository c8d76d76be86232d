//! A permit to call a provider once. Dropping it (or `release()`) hands its
//! concurrency lease back; a pure-rate permit has nothing to hand back.

use std::fmt;

/// What a permit gives back when it ends, if anything.
pub(crate) type OnRelease = Box<dyn FnOnce()>;

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

    /// Hands the lease back. Idempotent: a second call, or the drop after
    /// it, does nothing.
    pub fn release(&mut self) {
        if let Some(f) = self.on_release.take() {
            f();
        }
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
