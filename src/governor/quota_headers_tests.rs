use super::*;

const NOW: Millis = crate::sim::T0;

fn headers(pairs: &[(&str, &str)]) -> QuotaHeaders {
    QuotaHeaders::from_lookup(|name| {
        pairs
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| (*v).to_owned())
    })
}

#[test]
fn x_ratelimit_headers_give_limit_remaining_and_a_delay_reset() {
    let r = headers(&[
        ("X-RateLimit-Limit", "20"),
        ("X-RateLimit-Remaining", "3"),
        ("X-RateLimit-Reset", "2"),
    ])
    .report(NOW)
    .unwrap();
    assert_eq!(r.limit, Some(20));
    assert_eq!(r.window_ms, None);
    assert_eq!(r.remaining, Some(3));
    assert_eq!(r.reset_at_ms, Some(NOW + 2_000));
    assert_eq!(r.observed_at_ms, NOW);
}

#[test]
fn an_x_ratelimit_reset_in_unix_seconds_or_an_http_date_is_a_time() {
    let epoch = headers(&[
        ("x-ratelimit-remaining", "0"),
        ("x-ratelimit-reset", "1767225630"),
    ]);
    assert_eq!(epoch.report(NOW).unwrap().reset_at_ms, Some(NOW + 30_000));
    let date = headers(&[
        ("x-ratelimit-remaining", "0"),
        ("x-ratelimit-reset", "Thu, 01 Jan 2026 00:00:09 GMT"),
    ]);
    assert_eq!(date.report(NOW).unwrap().reset_at_ms, Some(NOW + 9_000));
}

#[test]
fn ietf_structured_fields_name_the_policy_of_the_binding_item() {
    let r = headers(&[
        ("RateLimit", "\"burst\";r=40;t=1, \"default\";r=0;t=3"),
        (
            "RateLimit-Policy",
            "\"burst\";q=50;w=1, \"default\";q=100;w=60",
        ),
    ])
    .report(NOW)
    .unwrap();
    assert_eq!(r.remaining, Some(0));
    assert_eq!(r.reset_at_ms, Some(NOW + 3_000));
    assert_eq!((r.limit, r.window_ms), (Some(100), Some(60_000)));
}

#[test]
fn a_policy_alone_states_the_strictest_limit() {
    let r = headers(&[("RateLimit-Policy", "\"a\";q=100;w=60, \"b\";q=10;w=1")])
        .report(NOW)
        .unwrap();
    assert_eq!((r.limit, r.window_ms), (Some(100), Some(60_000)));
}

#[test]
fn the_older_draft_forms_are_read() {
    let split = headers(&[
        ("RateLimit-Limit", "100, 100;w=60"),
        ("RateLimit-Remaining", "7"),
        ("RateLimit-Reset", "1.5"),
    ])
    .report(NOW)
    .unwrap();
    assert_eq!((split.limit, split.remaining), (Some(100), Some(7)));
    assert_eq!(split.reset_at_ms, Some(NOW + 1_500));
    let dictionary = headers(&[("RateLimit", "limit=10, remaining=2, reset=4")])
        .report(NOW)
        .unwrap();
    assert_eq!(dictionary.limit, Some(10));
    assert_eq!(dictionary.remaining, Some(2));
    assert_eq!(dictionary.reset_at_ms, Some(NOW + 4_000));
}

#[test]
fn hostile_values_are_dropped_not_guessed() {
    for (name, value) in [
        ("x-ratelimit-limit", "-5"),
        ("x-ratelimit-limit", "1e3"),
        ("x-ratelimit-limit", "99999999999999999999"),
        ("x-ratelimit-limit", "0"),
        ("x-ratelimit-limit", "ten"),
        ("ratelimit-policy", "\"d\";q=5;w=-1"),
        ("ratelimit-policy", "\"d\";w=60"),
    ] {
        assert_eq!(
            headers(&[(name, value)]).report(NOW),
            None,
            "{name}: {value}"
        );
    }
    let far = headers(&[
        ("x-ratelimit-remaining", "0"),
        ("x-ratelimit-reset", "9999999999"),
    ]);
    assert_eq!(
        far.report(NOW),
        None,
        "a reset centuries ahead says nothing"
    );
    let long = "9".repeat(MAX_VALUE_BYTES + 1);
    assert_eq!(headers(&[("x-ratelimit-limit", &long)]).report(NOW), None);
    let nan = headers(&[("x-ratelimit-remaining", "NaN"), ("x-ratelimit-reset", "1")]);
    assert_eq!(nan.report(NOW), None);
}

#[test]
fn remaining_without_a_reset_or_nothing_at_all_says_nothing() {
    assert_eq!(headers(&[("x-ratelimit-remaining", "3")]).report(NOW), None);
    assert_eq!(headers(&[]).report(NOW), None);
}
