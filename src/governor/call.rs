//! One provider call under governance: cleared, made, fed back, retried
//! when that is safe, and its slot always given back.

use std::fmt;
use std::future::Future;

use super::play::Governor;
use super::quota_headers::QuotaHeaders;
use super::retry_after::{retry_after_ms, DEFAULT_RETRY_AFTER_MS, MAX_RETRY_AFTER_MS};
use crate::error::Error;
use crate::protocol::BudgetKind;
use crate::protocol::QuotaReport;
use crate::rt::{abortable_sleep, AbortSignal};
use crate::time::Millis;

/// What a provider answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderResponse<B> {
    pub status: u16,
    /// The raw `Retry-After` header, if any.
    pub retry_after: Option<String>,
    /// The raw quota headers (`X-RateLimit-*`, `RateLimit*`).
    pub quota_headers: QuotaHeaders,
    pub body: B,
}

/// Attempts per call unless the caller says otherwise: the first and two
/// retries.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// The pause before the first retry of a 5xx or a transport failure; it
/// doubles per retry up to [`MAX_BACKOFF_MS`]. No jitter: every retry takes
/// a fresh permit, so the gateway spreads retries from the whole fleet.
pub const BASE_BACKOFF_MS: Millis = 200;
pub const MAX_BACKOFF_MS: Millis = 5_000;

#[derive(Clone, Copy)]
pub struct CallOptions<'a> {
    /// The call may run twice without harm, so a 5xx or a transport failure
    /// (after which the provider may or may not have acted) is retried. A
    /// 429 is retried either way: the provider refused before acting.
    pub retry_safe: bool,
    /// The most attempts in all, at least 1.
    pub max_attempts: u32,
    pub signal: Option<&'a AbortSignal>,
}

impl Default for CallOptions<'_> {
    fn default() -> Self {
        CallOptions {
            retry_safe: false,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            signal: None,
        }
    }
}

/// Why a governed call produced no provider response.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError<E> {
    /// The governor refused or gave up: a budget, an abort, the gateway.
    Governor(Error),
    /// The provider could not be reached, and the call was not retried (or
    /// ran out of attempts).
    Transport(E),
}

impl<E> From<Error> for CallError<E> {
    fn from(e: Error) -> Self {
        CallError::Governor(e)
    }
}

impl<E: fmt::Display> fmt::Display for CallError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Governor(e) => e.fmt(f),
            CallError::Transport(e) => write!(f, "the provider call failed: {e}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for CallError<E> {}

impl Governor {
    /// Calls a provider for `tool_id` with `call(attempt)` (attempts count
    /// from 1), holding a tool lease for each attempt.
    ///
    /// Any answer but a 429 or a 5xx counts as a success for the pacer (the
    /// provider took the request at that rate), its time sizes the tool's
    /// parallelism, and it is returned as is. Any answer's quota headers go
    /// to the bucket the permit came from. A 429 reports its `Retry-After`
    /// (or, without one, the reset of a spent quota) to that bucket, even on
    /// the last attempt, and is retried once that cooldown has passed; a 5xx
    /// or a transport error is retried only for a `retry_safe` call. Each
    /// retry spends one unit of the retry budget and takes a fresh permit.
    /// When the attempts run out, the last answer is returned.
    pub async fn call_tool<B, E, F, Fut>(
        &self,
        tool_id: &str,
        options: CallOptions<'_>,
        mut call: F,
    ) -> Result<ProviderResponse<B>, CallError<E>>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<ProviderResponse<B>, E>>,
    {
        let signal = options.signal;
        let mut lease = self.acquire_tool_slot(tool_id, signal).await?;
        let mut attempt = 1;
        loop {
            let sent_at = self.shared.runtime.now_ms();
            let outcome = call(attempt).await;
            // The release's flush is background work the host must let
            // finish (a Worker's `waitUntil`), though the caller moves on.
            self.shared.runtime.spawn(lease.release_settled());
            let quota = match &outcome {
                Ok(response) => response.quota_headers.report(sent_at),
                Err(_) => None,
            };
            if let (Some(quota), Some(scope)) = (&quota, lease.rate_scope()) {
                self.shared.rate_state.observe_quota(
                    &scope.bucket_id,
                    scope.token.as_deref(),
                    quota.clone(),
                );
            }
            let last = attempt >= options.max_attempts;
            let wait_ms = match outcome {
                Ok(response) if response.status == 429 => {
                    let now = self.shared.runtime.now_ms();
                    let cooldown = match (&response.retry_after, &quota) {
                        (
                            None,
                            Some(QuotaReport {
                                remaining: Some(0),
                                reset_at_ms: Some(at),
                                ..
                            }),
                        ) => match at.saturating_sub(now) {
                            0 => DEFAULT_RETRY_AFTER_MS,
                            ms => ms.min(MAX_RETRY_AFTER_MS),
                        },
                        _ => retry_after_ms(response.retry_after.as_deref(), now),
                    };
                    if let Some(scope) = lease.rate_scope() {
                        self.penalize(scope, cooldown, Some(sent_at)).await?;
                    }
                    if last {
                        return Ok(response);
                    }
                    // The refused call waits out its own Retry-After: the
                    // gateway holds the whole bucket past it only when the
                    // provider is overloaded, not for a failed probe.
                    cooldown
                }
                Ok(response) if response.status >= 500 && options.retry_safe && !last => {
                    backoff_ms(attempt)
                }
                Ok(response) => {
                    if response.status < 500 {
                        if let Some(scope) = lease.rate_scope() {
                            self.shared.rate_state.observe_success(&scope.bucket_id);
                        }
                        let took = self.shared.runtime.now_ms().saturating_sub(sent_at);
                        self.shared.latency.observe(tool_id, took);
                    }
                    return Ok(response);
                }
                Err(e) if last || !options.retry_safe => return Err(CallError::Transport(e)),
                Err(_) => backoff_ms(attempt),
            };
            if wait_ms > 0 {
                let sleep = self.shared.runtime.sleep(wait_ms);
                abortable_sleep(sleep, signal, "a retry of tool", tool_id).await?;
            }
            attempt += 1;
            lease = self.clear_call(tool_id, signal, BudgetKind::Retry).await?;
        }
    }
}

/// The pause after failed attempt `attempt` (from 1).
fn backoff_ms(attempt: u32) -> Millis {
    let doublings = attempt.saturating_sub(1).min(16);
    (BASE_BACKOFF_MS << doublings).min(MAX_BACKOFF_MS)
}
