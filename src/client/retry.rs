//! The one retry loop of every gateway call a client makes: a transport
//! failure is tried again after a short pause or two, then surfaces.
//! Refusals the gateway meant (bad input, a forbidden scope, a budget) are
//! answers, not failures, and are never retried.

use std::future::Future;

use crate::error::{Error, ErrorCode, Result};
use crate::rt::Runtime;
use crate::time::Millis;

/// After a failed gateway call, retry after these delays, then surface it.
pub const STORE_RETRY_DELAYS_MS: [Millis; 2] = [100, 250];

/// Calls `call` until it answers or [`STORE_RETRY_DELAYS_MS`] run out. A
/// caller that must be counted once across attempts (a budget charge)
/// sends the same request, with the same idempotency key, every time.
pub(crate) async fn with_retries<T, F>(rt: &dyn Runtime, mut call: impl FnMut() -> F) -> Result<T>
where
    F: Future<Output = Result<T>>,
{
    let mut attempt = 0;
    loop {
        match call().await {
            Err(e) => rt.sleep(pause_after(e, &mut attempt)?).await,
            answer => return answer,
        }
    }
}

/// After failed attempt number `attempt`: the pause before the next one,
/// or the error to surface. Kept out of the generic loop, which has a copy
/// per answer type.
#[inline(never)]
fn pause_after(mut e: Error, attempt: &mut usize) -> Result<Millis> {
    if e.code != ErrorCode::GatewayUnavailable {
        return Err(e);
    }
    let Some(&delay) = STORE_RETRY_DELAYS_MS.get(*attempt) else {
        e.message = format!(
            "the gateway failed {} times: {}",
            STORE_RETRY_DELAYS_MS.len() + 1,
            e.message
        );
        return Err(e);
    };
    *attempt += 1;
    Ok(delay)
}
