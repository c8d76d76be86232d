//! The protocol module compiled to wasm32 and run in headless Chromium: the
//! same fixtures and refusals as the native tier, plus the JS face (errors
//! become `Error`s with a `code`, the JS clock reads `Date.now()`).
#![cfg(target_arch = "wasm32")]

mod common;

use common::{acquire_rejects, other_rejects, FIXTURES};
use js_sys::Reflect;
use paceline::protocol::{decode, AcquireRequest};
use paceline::time::Clock;
use paceline::wasm::protocol::{decode_acquire_response, version};
use paceline::wasm::JsClock;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn prop(target: &JsValue, key: &str) -> JsValue {
    Reflect::get(target, &JsValue::from_str(key)).unwrap()
}

#[wasm_bindgen_test]
fn every_fixture_round_trips_in_the_browser() {
    for (name, text, round_trip) in FIXTURES {
        if let Err(why) = round_trip(text) {
            panic!("{name}: {why}");
        }
    }
}

#[wasm_bindgen_test]
fn every_bad_acquire_is_refused_in_the_browser() {
    for case in acquire_rejects() {
        let e = decode::<AcquireRequest>(case.body.as_bytes()).expect_err(case.what);
        assert!(
            e.message.contains(case.says),
            "{}: {}",
            case.what,
            e.message
        );
    }
    for (what, outcome, says) in other_rejects() {
        let message = outcome.unwrap_or_else(|why| panic!("{what}: {why}"));
        assert!(message.contains(says), "{what}: {message}");
    }
}

#[wasm_bindgen_test]
fn decoded_grant_is_a_plain_js_object() {
    let grant =
        decode_acquire_response(include_str!("fixtures/acquire-response-scheduled.json")).unwrap();
    assert_eq!(prop(&grant, "granted").as_f64(), Some(3.0));
    let times = js_sys::Array::from(&prop(&grant, "scheduledAtMs"));
    assert_eq!(times.length(), 3);
    assert_eq!(times.get(1).as_f64(), Some(1_767_225_600_050.0));
    assert_eq!(
        prop(&grant, "serverNowMs").as_f64(),
        Some(1_767_225_599_990.0)
    );
}

#[wasm_bindgen_test]
fn bad_grant_throws_an_error_with_code_and_field() {
    let thrown =
        decode_acquire_response(r#"{"granted":2,"waitMs":0,"scheduledAtMs":[1,"x"]}"#).unwrap_err();
    assert!(thrown.is_instance_of::<js_sys::Error>());
    assert_eq!(prop(&thrown, "code").as_string().unwrap(), "INVALID_INPUT");
    let message = prop(&thrown, "message").as_string().unwrap();
    assert!(message.contains("scheduledAtMs[1]"), "{message}");
}

#[wasm_bindgen_test]
fn budget_error_crosses_to_js_with_its_fields() {
    let thrown: JsValue = paceline::Error::budget_exceeded("retry", 4, 3).into();
    assert_eq!(
        prop(&thrown, "code").as_string().unwrap(),
        "BUDGET_EXCEEDED"
    );
    assert_eq!(prop(&thrown, "key").as_string().unwrap(), "retry");
    assert_eq!(prop(&thrown, "observed").as_f64(), Some(4.0));
    assert_eq!(prop(&thrown, "limit").as_f64(), Some(3.0));
    assert_eq!(
        prop(&thrown, "message").as_string().unwrap(),
        "Play execution retry budget exceeded (4/3)."
    );
}

#[wasm_bindgen_test]
fn js_clock_reads_date_now() {
    let before = js_sys::Date::now() as u64;
    let read = JsClock.now_ms();
    let after = js_sys::Date::now() as u64;
    assert!(
        before <= read && read <= after,
        "{before} <= {read} <= {after}"
    );
}

#[wasm_bindgen_test]
fn version_matches_the_crate() {
    assert_eq!(version(), env!("CARGO_PKG_VERSION"));
}
