//! Single-threaded async plumbing shared by the client and the governor:
//! the host runtime, boxed futures, cancellation, wake-ups and fair slots.
//! It knows nothing of gateways or providers.

mod event;
mod runtime;
mod slots;

pub(crate) use event::Event;
pub use runtime::{abortable, abortable_ok, abortable_sleep, AbortSignal, LocalBoxFuture, Runtime};
pub use slots::{SlotPermit, Slots};
