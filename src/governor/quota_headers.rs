//! A provider's quota headers, read into a [`QuotaReport`]: the
//! `X-RateLimit-Limit` / `-Remaining` / `-Reset` family, the IETF draft's
//! structured `RateLimit` / `RateLimit-Policy` fields
//! (`RateLimit: "default";r=0;t=3`, `RateLimit-Policy: "default";q=100;w=60`)
//! and its older `RateLimit-Limit` / `-Remaining` / `-Reset` forms.
//!
//! Header values are the provider's and untrusted: a value that is not a
//! plain number in range is dropped, never guessed at, and the gateway
//! bounds what the rest can do (a stated limit only lowers the rate, a
//! reset parks a bucket for a bounded time).
// Strings are split with closures, not `char` patterns: a `char` pattern
// brings core's searcher for it into the wasm (0.6 KB).
#![allow(clippy::manual_pattern_char_comparison)]

use super::retry_after::{imf_fixdate_ms, seconds_ms};
use crate::protocol::{limits, QuotaReport};
use crate::time::Millis;

/// An `X-RateLimit-Reset` at or above this many seconds is a Unix time
/// (GitHub's form), below it a delay (most others').
const EPOCH_SECONDS_FROM: u64 = 1_000_000_000;
/// The longest reset delay read; the gateway holds a bucket far less.
const MAX_RESET_MS: Millis = limits::MAX_COOLDOWN_MS;
/// The longest header value read: quota headers are short.
const MAX_VALUE_BYTES: usize = 512;

/// The raw text of a response's quota headers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuotaHeaders {
    pub x_ratelimit_limit: Option<String>,
    pub x_ratelimit_remaining: Option<String>,
    pub x_ratelimit_reset: Option<String>,
    pub ratelimit: Option<String>,
    pub ratelimit_policy: Option<String>,
    pub ratelimit_limit: Option<String>,
    pub ratelimit_remaining: Option<String>,
    pub ratelimit_reset: Option<String>,
}

impl QuotaHeaders {
    /// Reads the headers through `get(lowercase name)`.
    pub fn from_lookup(mut get: impl FnMut(&str) -> Option<String>) -> Self {
        let mut read = |name: &str| get(name).filter(|v| v.len() <= MAX_VALUE_BYTES);
        QuotaHeaders {
            x_ratelimit_limit: read("x-ratelimit-limit"),
            x_ratelimit_remaining: read("x-ratelimit-remaining"),
            x_ratelimit_reset: read("x-ratelimit-reset"),
            ratelimit: read("ratelimit"),
            ratelimit_policy: read("ratelimit-policy"),
            ratelimit_limit: read("ratelimit-limit"),
            ratelimit_remaining: read("ratelimit-remaining"),
            ratelimit_reset: read("ratelimit-reset"),
        }
    }

    /// What the headers say, with times on the clock of `now_ms` (the
    /// instant the provider counted the call, as near as the caller knows),
    /// or `None` if they say nothing usable. The IETF fields win over the
    /// `X-` ones when both are sent.
    pub fn report(&self, now_ms: Millis) -> Option<QuotaReport> {
        let mut report = QuotaReport {
            observed_at_ms: now_ms,
            limit: None,
            window_ms: None,
            remaining: None,
            reset_at_ms: None,
        };
        let at = |ms: Option<Millis>| ms.map(|ms| now_ms.saturating_add(ms));
        let policy = self.ratelimit_policy.as_deref().unwrap_or("");
        let mut binding = None;
        if let Some(value) = &self.ratelimit {
            // Searched as bytes: `str::contains` with a `&str` brings core's
            // two-way searcher and its slicing panic, whose message formats
            // a `char` with `Debug` (core's Unicode tables): 4.8 KB gzip.
            if value.as_bytes().windows(10).any(|w| w == b"remaining=") {
                // The draft's older dictionary: `limit=L, remaining=R, reset=T`.
                for m in members(value) {
                    match m.trim().split_once(|c| c == '=') {
                        Some(("limit", v)) => report.limit = count(v),
                        Some(("remaining", v)) => report.remaining = count(v),
                        Some(("reset", v)) => report.reset_at_ms = at(delay_seconds(v)),
                        _ => {}
                    }
                }
            } else {
                // `"name";r=R;t=T, ...`: the item with the fewest left binds.
                let mut fewest = None;
                for m in members(value) {
                    if let Some(r) = param(m, "r").and_then(count) {
                        if fewest.is_none_or(|(_, least)| r < least) {
                            fewest = Some((m, r));
                        }
                    }
                }
                if let Some((m, r)) = fewest {
                    report.remaining = Some(r);
                    report.reset_at_ms = at(param(m, "t").and_then(delay_seconds));
                    binding = Some(name(m));
                }
            }
        }
        if report.limit.is_none() {
            let named = binding.and_then(|b| members(policy).find(|&m| name(m) == b));
            let quota = match named {
                Some(m) => quota_policy(m),
                None => strictest(policy),
            };
            let quota = quota.or_else(|| {
                let v = self
                    .ratelimit_limit
                    .as_ref()
                    .or(self.x_ratelimit_limit.as_ref())?;
                quota_policy(members(v).next()?)
            });
            if let Some((q, w)) = quota {
                report.limit = Some(q);
                report.window_ms = w;
            }
        }
        if report.remaining.is_none() {
            let v = self
                .ratelimit_remaining
                .as_ref()
                .or(self.x_ratelimit_remaining.as_ref());
            report.remaining = v.and_then(|v| count(members(v).next()?));
        }
        if report.reset_at_ms.is_none() {
            report.reset_at_ms = match (&self.ratelimit_reset, &self.x_ratelimit_reset) {
                (Some(v), _) => at(delay_seconds(v)),
                (None, Some(v)) => x_reset_at(v, now_ms),
                (None, None) => None,
            };
        }
        report.limit = report.limit.filter(|&q| q >= 1);
        report.is_useful().then_some(report)
    }
}

/// The members of a list, split at commas outside quoted strings.
fn members(value: &str) -> impl Iterator<Item = &str> {
    let mut quoted = false;
    value.split(move |c| {
        if c == '"' {
            quoted = !quoted;
        }
        c == ',' && !quoted
    })
}

/// A member's bare item: its name, quotes removed.
fn name(member: &str) -> &str {
    let head = member.split(|c| c == ';').next().unwrap_or("").trim();
    head.strip_prefix('"')
        .and_then(|h| h.strip_suffix('"'))
        .unwrap_or(head)
}

/// A member's parameter `key=value`.
fn param<'a>(member: &'a str, key: &str) -> Option<&'a str> {
    member
        .split(|c| c == ';')
        .skip(1)
        .find_map(|p| p.trim().strip_prefix(key)?.strip_prefix('='))
}

/// A quota policy: `"name";q=Q;w=W` (the current draft), `Q;w=W` or a bare
/// `Q` (the older forms), as a quota and its window in ms.
fn quota_policy(member: &str) -> Option<(u64, Option<Millis>)> {
    let quota = match count(name(member)) {
        Some(q) => q,
        None => count(param(member, "q")?)?,
    };
    let window = match param(member, "w") {
        Some(w) => Some(
            count(w)?
                .checked_mul(1_000)
                .filter(|&ms| (1..=limits::MAX_WINDOW_MS).contains(&ms))?,
        ),
        None => None,
    };
    Some((quota, window))
}

/// The policy that allows the lowest rate; one without a window only if
/// none has one.
fn strictest(value: &str) -> Option<(u64, Option<Millis>)> {
    members(value)
        .filter_map(quota_policy)
        .reduce(|a, b| match (a.1, b.1) {
            // q_a / w_a <= q_b / w_b without dividing.
            (Some(wa), Some(wb))
                if u128::from(a.0) * u128::from(wb) <= u128::from(b.0) * u128::from(wa) =>
            {
                a
            }
            (Some(_), None) => a,
            (None, None) => a,
            _ => b,
        })
}

/// A count of requests: plain ASCII digits, at most the protocol's bound.
fn count(value: &str) -> Option<u64> {
    let v = value.trim();
    if v.is_empty() {
        return None;
    }
    v.bytes()
        .try_fold(0u64, |n, b| {
            b.is_ascii_digit()
                .then(|| n.checked_mul(10)?.checked_add(u64::from(b - b'0')))
                .flatten()
        })
        .filter(|&n| n <= limits::MAX_REQUESTS_PER_WINDOW)
}

/// Delay seconds, whole or with a fraction (rounded up to a millisecond,
/// so a reset is never read early), at most [`MAX_RESET_MS`].
fn delay_seconds(value: &str) -> Option<Millis> {
    let v = value.trim();
    // More than 12 whole digits is no delay (nor, at 1e12 s, a Unix time).
    if v.bytes().take_while(|&b| b != b'.').count() > 12 {
        return None;
    }
    seconds_ms(v).filter(|&ms| ms <= MAX_RESET_MS)
}

/// `X-RateLimit-Reset`: a delay in seconds, a Unix time in seconds, or an
/// HTTP date, as a time on `now_ms`'s clock, at most a day ahead.
fn x_reset_at(value: &str, now_ms: Millis) -> Option<Millis> {
    let v = value.trim();
    let at = match delay_seconds(v) {
        Some(ms) => now_ms.saturating_add(ms),
        None => match epoch_seconds(v) {
            Some(secs) if secs >= EPOCH_SECONDS_FROM => secs.checked_mul(1_000)?,
            _ => imf_fixdate_ms(v)?,
        },
    };
    (at > now_ms && at - now_ms <= MAX_RESET_MS).then_some(at)
}

/// Whole seconds of a Unix time (a fraction, if any, dropped).
fn epoch_seconds(value: &str) -> Option<u64> {
    let whole = value.split_once(|c| c == '.').map_or(value, |(w, _)| w);
    if whole.len() > 12 {
        return None;
    }
    whole.bytes().try_fold(0u64, |n, b| {
        b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0'))
    })
}

#[cfg(test)]
#[path = "quota_headers_tests.rs"]
mod tests;
