use crate::time::{Clock, Millis};

/// `Date.now()`. In a Worker it only moves across I/O, which is why the core
/// never assumes time passes between two reads without an await.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsClock;

impl Clock for JsClock {
    fn now_ms(&self) -> Millis {
        js_sys::Date::now() as Millis
    }
}
