//! Single-threaded async plumbing shared by the client and the governor:
//! the host runtime, boxed futures, cancellation, wake-ups and fair slots.
//! It knows nothing of gateways or providers.

mod abort;
mod event;
mod runtime;
mod slots;

pub use abort::{abortable, AbortSignal};
pub(crate) use event::Event;
pub use runtime::{LocalBoxFuture, Runtime};
pub use slots::{SlotPermit, Slots};
