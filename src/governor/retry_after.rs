//! A 429's `Retry-After`: delay seconds, or an HTTP date (IMF-fixdate,
//! `Sun, 06 Nov 1994 08:49:37 GMT`) taken relative to now.
// A closure, not a `char` pattern, splits the seconds: a `char` pattern
// brings core's searcher for it into the wasm (see quota_headers.rs).
#![allow(clippy::manual_pattern_char_comparison)]

use crate::time::Millis;

/// The cooldown of a 429 that says nothing usable (no header, garbage, a
/// date already past, zero). Never zero: a zero cooldown would not cut the
/// bucket's rate, and a provider that said no must slow the fleet down.
pub const DEFAULT_RETRY_AFTER_MS: Millis = 1_000;

/// The longest cooldown taken from a provider. Past the pacer's longest
/// wait callers fail fast with `PROVIDER_EXHAUSTED` anyway; the cap keeps a
/// confused server's far-future date from freezing a bucket for a day.
pub const MAX_RETRY_AFTER_MS: Millis = 15 * 60_000;

/// The cooldown a 429 asks for, in milliseconds, capped and defaulted.
pub fn retry_after_ms(header: Option<&str>, now_ms: Millis) -> Millis {
    header
        .and_then(|value| parse(value.trim(), now_ms))
        .filter(|&ms| ms > 0)
        .map_or(DEFAULT_RETRY_AFTER_MS, |ms| ms.min(MAX_RETRY_AFTER_MS))
}

fn parse(value: &str, now_ms: Millis) -> Option<Millis> {
    if value.starts_with(|c: char| c.is_ascii_digit()) {
        return seconds_ms(value);
    }
    imf_fixdate_ms(value).map(|at| at.saturating_sub(now_ms))
}

/// Delay seconds as milliseconds. RFC 9110 allows whole seconds only;
/// fractions are common enough in the wild to honour, rounded up so the
/// cooldown is never early. Parsed by hand: a float parser would add ~8 KB
/// to the wasm for this one header. Quota headers' delays read through it
/// too.
pub(super) fn seconds_ms(value: &str) -> Option<Millis> {
    let (whole, fraction) = value.split_once(|c| c == '.').unwrap_or((value, ""));
    let digits = |s: &str| s.as_bytes().iter().all(u8::is_ascii_digit);
    if whole.is_empty() || !digits(whole) || !digits(fraction) {
        return None;
    }
    // Digits only, so only an overflow fails: read in a loop rather than
    // through `str::parse`, whose integer reader is a function of its own
    // in the wasm (or `try_fold`, whose adapter is one too).
    let mut n: Millis = 0;
    for b in whole.bytes() {
        n = n.checked_mul(10)?.checked_add(Millis::from(b - b'0'))?;
    }
    let whole = n;
    let mut ms: Millis = 0;
    for (i, digit) in fraction.bytes().enumerate() {
        let d = Millis::from(digit - b'0');
        match i {
            0..=2 => ms += d * [100, 10, 1][i],
            _ if d > 0 => {
                ms += 1;
                break;
            }
            _ => {}
        }
    }
    Some(whole.saturating_mul(1_000).saturating_add(ms))
}

const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Milliseconds since the epoch of an IMF-fixdate. The weekday must be a
/// weekday's name but is not checked against the date.
pub fn imf_fixdate_ms(value: &str) -> Option<Millis> {
    let b = value.as_bytes();
    // "Sun, 06 Nov 1994 08:49:37 GMT": fixed width, fixed separators.
    if b.len() != 29 || &b[3..5] != b", " || &b[25..] != b" GMT" {
        return None;
    }
    if ![7, 11, 16].iter().all(|&i| b[i] == b' ') || b[19] != b':' || b[22] != b':' {
        return None;
    }
    DAYS.iter().position(|d| d.as_bytes() == &b[..3])?;
    let month = MONTHS.iter().position(|m| m.as_bytes() == &b[8..11])? as u64 + 1;
    let day = digits(&b[5..7])?;
    let year = digits(&b[12..16])?;
    let (hour, minute, second) = (
        digits(&b[17..19])?,
        digits(&b[20..22])?,
        digits(&b[23..25])?,
    );
    // 60 is a leap second, which the epoch count folds into the next one.
    if year < 1970 || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = days_since_epoch(year, month, day);
    Some(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1_000)
}

fn digits(b: &[u8]) -> Option<u64> {
    b.iter().try_fold(0, |n, &c| {
        c.is_ascii_digit().then(|| n * 10 + u64::from(c - b'0'))
    })
}

fn is_leap(year: u64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the date, for years from 1970: the days of the
/// whole years before it (leap days counted by the Gregorian rule), then of
/// the whole months before it in its own year.
fn days_since_epoch(year: u64, month: u64, day: u64) -> u64 {
    let leap_days_before = |y: u64| (y - 1) / 4 - (y - 1) / 100 + (y - 1) / 400;
    let years = year - 1970;
    let mut days = years * 365 + leap_days_before(year) - leap_days_before(1970);
    for m in 1..month {
        days += days_in_month(year, m);
    }
    days + day - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_seconds_past_u64_are_no_delay_and_the_largest_saturates() {
        assert_eq!(seconds_ms("18446744073709551616"), None);
        assert_eq!(seconds_ms("18446744073709551615"), Some(Millis::MAX));
        assert_eq!(seconds_ms("18446744073709551615.5"), Some(Millis::MAX));
        assert_eq!(seconds_ms("007"), Some(7_000));
    }

    #[test]
    fn known_dates_count_the_right_days() {
        assert_eq!(imf_fixdate_ms("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            imf_fixdate_ms("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777_000)
        );
        assert_eq!(
            imf_fixdate_ms("Tue, 29 Feb 2000 12:00:00 GMT"),
            Some(951_825_600_000)
        );
        assert_eq!(
            imf_fixdate_ms("Thu, 01 Jan 2026 00:00:00 GMT"),
            Some(1_767_225_600_000)
        );
    }

    #[test]
    fn malformed_dates_are_refused() {
        for bad in [
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Sun, 29 Feb 1900 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Xyz, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nox 1994 08:49:37 GMT",
            "Sun, 0a Nov 1994 08:49:37 GMT",
        ] {
            assert_eq!(imf_fixdate_ms(bad), None, "{bad}");
        }
    }
}
