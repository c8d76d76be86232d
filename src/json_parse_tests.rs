//! The JSON reader against serde_json's, on text it must accept and refuse.

use super::*;

/// serde_json's own reader, which this one stands in for.
fn reference(text: &str) -> Option<Value> {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .map(|v| crate::json_value::from_serde(&v))
}

#[test]
fn reads_what_serde_json_reads_and_refuses_what_it_refuses() {
    let cases = [
        r#"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
        r#"  [ 1 , -2 , 3.5 , -0.25e2 , 1E3 , 1e-3 , 0 , -0 ]  "#,
        r#""\"\\\/\b\f\n\r\t\u0041\u00e9\ud83d\ude00 héllo""#,
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
        "0.1",
        "1e400",
        "1e-400",
        r#"{"a":1,"a":2}"#,
        "",
        "[1,]",
        "{\"a\" 1}",
        "01",
        "1.",
        ".5",
        "-",
        "1e",
        "tru",
        "nul",
        "[1] x",
        "\"abc",
        "\"a\u{1}b\"",
        r#""\ud800""#,
        r#""\udc00x""#,
        r#""\ud800\u0041""#,
        r#""\x""#,
        r#""\u12""#,
        "{1:2}",
        "[",
        "{\"a\":",
    ];
    for text in cases {
        assert_eq!(parse(text.as_bytes()).ok(), reference(text), "{text}");
    }
}

#[test]
fn refuses_text_that_is_not_utf8() {
    assert!(parse(b"\"\xff\"").is_err());
}

#[test]
fn nesting_deeper_than_128_is_refused() {
    let ok = format!("{}{}", "[".repeat(128), "]".repeat(128));
    assert!(parse(ok.as_bytes()).is_ok());
    let deep = format!("{}{}", "[".repeat(129), "]".repeat(129));
    assert!(parse(deep.as_bytes()).is_err());
}

#[test]
fn large_and_tiny_numbers_read_within_an_ulp_or_two() {
    for text in [
        "123456789012345678901234567890",
        "1.5e300",
        "2.5e-300",
        "-7.25e-200",
        "9.999e307",
    ] {
        let x = parse(text.as_bytes()).unwrap().as_f64().unwrap();
        let expected = reference(text).unwrap().as_f64().unwrap();
        assert!(
            ((x - expected) / expected).abs() < 1e-15,
            "{text}: {x} vs {expected}"
        );
    }
}

#[test]
fn decimals_the_wire_carries_read_exactly() {
    for (text, x) in [
        ("0.1", 0.1),
        ("2.5", 2.5),
        ("1e-3", 1e-3),
        ("1234.5678", 1234.5678),
        ("3e22", 3e22),
    ] {
        assert_eq!(parse(text.as_bytes()).unwrap().as_f64(), Some(x), "{text}");
    }
}
