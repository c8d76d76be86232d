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

use super::retry_after::imf_fixdate_ms;
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
        if let Some(value) = &self.ratelimit {
            structured(&mut report, value, self.ratelimit_policy.as_deref(), now_ms);
        } else if let Some(policy) = &self.ratelimit_policy {
            if let Some((_, q, w)) = policies(policy).min_by(by_rate) {
                report.limit = Some(q);
                report.window_ms = w;
            }
        }
        let first = |a: &Option<String>, b: &Option<String>| a.clone().or_else(|| b.clone());
        if report.limit.is_none() {
            if let Some(v) = first(&self.ratelimit_limit, &self.x_ratelimit_limit) {
                if let Some((_, q, w)) = policies(&v).next() {
                    report.limit = Some(q);
                    report.window_ms = w;
                }
            }
        }
        if report.remaining.is_none() {
            report.remaining = first(&self.ratelimit_remaining, &self.x_ratelimit_remaining)
                .and_then(|v| count(v.split(',').next().unwrap_or("")));
        }
        if report.reset_at_ms.is_none() {
            report.reset_at_ms = match (&self.ratelimit_reset, &self.x_ratelimit_reset) {
                (Some(v), _) => delay_seconds(v).map(|ms| now_ms.saturating_add(ms)),
                (None, Some(v)) => x_reset_at(v, now_ms),
                (None, None) => None,
            };
        }
        report.limit = report.limit.filter(|&q| q >= 1);
        report.is_useful().then_some(report)
    }
}

/// `RateLimit: "name";r=R;t=T, ...` with its policies: the most binding
/// item (fewest remaining), and the limit of the policy of the same name
/// (or the strictest one). The draft's older dictionary form
/// `limit=L, remaining=R, reset=T` is read too.
fn structured(report: &mut QuotaReport, value: &str, policy: Option<&str>, now_ms: Millis) {
    let members = split_list(value);
    if members
        .iter()
        .any(|m| m.trim_start().starts_with("remaining="))
    {
        for m in &members {
            match m.trim().split_once('=') {
                Some(("limit", v)) => report.limit = count(v),
                Some(("remaining", v)) => report.remaining = count(v),
                Some(("reset", v)) => {
                    report.reset_at_ms = delay_seconds(v).map(|ms| now_ms.saturating_add(ms))
                }
                _ => {}
            }
        }
        return;
    }
    let items = members.iter().filter_map(|m| {
        let (name, params) = item(m)?;
        let remaining = params
            .iter()
            .find(|(k, _)| *k == "r")
            .and_then(|(_, v)| count(v));
        let reset = params
            .iter()
            .find(|(k, _)| *k == "t")
            .and_then(|(_, v)| delay_seconds(v));
        Some((name, remaining?, reset))
    });
    let Some((name, remaining, reset)) = items.min_by_key(|(_, r, _)| *r) else {
        return;
    };
    report.remaining = Some(remaining);
    report.reset_at_ms = reset.map(|ms| now_ms.saturating_add(ms));
    if let Some(policy) = policy {
        let named = policies(policy).find(|(n, _, _)| *n == name);
        if let Some((_, q, w)) = named.or_else(|| policies(policy).min_by(by_rate)) {
            report.limit = Some(q);
            report.window_ms = w;
        }
    }
}

/// Quota policies: `"name";q=Q;w=W` (the current draft), `Q;w=W` or a bare
/// `Q` (the older forms), as `(name, quota, window in ms)`.
fn policies(value: &str) -> impl Iterator<Item = (&str, u64, Option<Millis>)> {
    split_list(value).into_iter().filter_map(|m| {
        let (head, params) = item(m)?;
        let param = |key: &str| params.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        let (name, quota) = match count(head) {
            Some(q) => ("", q),
            None => (head, count(param("q")?)?),
        };
        let window = match param("w") {
            Some(w) => Some(
                count(w)?
                    .checked_mul(1_000)
                    .filter(|&ms| (1..=limits::MAX_WINDOW_MS).contains(&ms))?,
            ),
            None => None,
        };
        Some((name, quota.min(limits::MAX_REQUESTS_PER_WINDOW), window))
    })
}

/// Orders policies by the rate they allow, a policy without a window last.
fn by_rate(a: &(&str, u64, Option<Millis>), b: &(&str, u64, Option<Millis>)) -> std::cmp::Ordering {
    let rate = |p: &(&str, u64, Option<Millis>)| p.2.map(|w| p.1 as f64 / w as f64);
    match (rate(a), rate(b)) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    }
}

/// A structured-field item: its bare name (quotes removed) and parameters.
fn item(member: &str) -> Option<(&str, Vec<(&str, &str)>)> {
    let mut parts = member.split(';').map(str::trim);
    let head = parts.next()?;
    let name = head
        .strip_prefix('"')
        .and_then(|h| h.strip_suffix('"'))
        .unwrap_or(head);
    let params = parts.filter_map(|p| p.split_once('=')).collect();
    Some((name, params))
}

/// Splits a list at commas outside quoted strings.
fn split_list(value: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted) = (0, false);
    for (i, b) in value.bytes().enumerate() {
        match b {
            b'"' => quoted = !quoted,
            b',' if !quoted => {
                out.push(&value[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&value[start..]);
    out
}

/// A count of requests: plain ASCII digits, at most the protocol's bound.
fn count(value: &str) -> Option<u64> {
    let v = value.trim();
    if v.is_empty() || v.len() > 12 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse::<u64>()
        .ok()
        .filter(|&n| n <= limits::MAX_REQUESTS_PER_WINDOW)
}

/// Delay seconds, whole or with a fraction (rounded up to a millisecond,
/// so a reset is never read early), at most [`MAX_RESET_MS`].
fn delay_seconds(value: &str) -> Option<Millis> {
    let v = value.trim();
    let (whole, fraction) = v.split_once('.').unwrap_or((v, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || whole.len() > 12 || !digits(whole) || !digits(fraction) {
        return None;
    }
    let mut ms = whole.parse::<u64>().ok()?.checked_mul(1_000)?;
    let frac: Vec<u64> = fraction.bytes().map(|b| u64::from(b - b'0')).collect();
    ms += frac
        .iter()
        .take(3)
        .zip([100, 10, 1])
        .map(|(d, s)| d * s)
        .sum::<u64>();
    if frac.iter().skip(3).any(|&d| d > 0) {
        ms += 1;
    }
    (ms <= MAX_RESET_MS).then_some(ms)
}

/// `X-RateLimit-Reset`: a delay in seconds, a Unix time in seconds, or an
/// HTTP date, as a time on `now_ms`'s clock, at most a day ahead.
fn x_reset_at(value: &str, now_ms: Millis) -> Option<Millis> {
    let v = value.trim();
    let at = match delay_seconds(v) {
        Some(ms) => now_ms.saturating_add(ms),
        None => match count_seconds(v) {
            Some(secs) if secs >= EPOCH_SECONDS_FROM => secs.checked_mul(1_000)?,
            _ => imf_fixdate_ms(v)?,
        },
    };
    (at > now_ms && at - now_ms <= MAX_RESET_MS).then_some(at)
}

/// Whole seconds of a Unix time (a fraction, if any, dropped).
fn count_seconds(value: &str) -> Option<u64> {
    let whole = value.split_once('.').map_or(value, |(w, _)| w);
    if whole.is_empty() || whole.len() > 12 || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    whole.parse().ok()
}

#[cfg(test)]
#[path = "quota_headers_tests.rs"]
mod tests;
