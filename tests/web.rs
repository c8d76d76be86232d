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
        decode_acquire_response(include_str!("fixtures/acquire-response-scheduled.json").into())
            .unwrap();
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
        decode_acquire_response(r#"{"granted":2,"waitMs":0,"scheduledAtMs":[1,"x"]}"#.into())
            .unwrap_err();
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
    // The runtime's own words, then the policy field that sets the limit.
    assert_eq!(
        prop(&thrown, "message").as_string().unwrap(),
        "Play execution retry budget exceeded (4/3). \
         Raise policy.budgets.maxRetryCount in createGovernor's options to allow more."
    );
}

/// In the wasm a float's digits come from JS's `toExponential()`; the
/// text must be zmij's (what serde_json and the native build write).
#[wasm_bindgen_test]
fn floats_are_written_as_zmij_writes_them_in_the_browser() {
    let mut xs = vec![
        0.0,
        -0.0,
        1.0,
        0.1,
        1e-5,
        1e-6,
        1e15,
        1e16,
        5e-324,
        f64::MAX,
    ];
    // Exactly ...853.25: a tie between two shortest candidates, where both
    // pick the even digit (core's `{:e}` does not).
    xs.push(667_082_108_456_853.2);
    let mut bits: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..20_000 {
        bits = bits
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        xs.push(f64::from_bits(bits));
    }
    for x in xs.into_iter().filter(|x| x.is_finite()) {
        let expected = zmij::Buffer::new().format_finite(x).to_string();
        assert_eq!(paceline::json_write::to_text(&x), expected);
    }
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

mod client {
    //! The exported client classes against a gateway transport made in the
    //! page from the exported `GatewayCore`.

    use std::cell::RefCell;
    use std::rc::Rc;

    use js_sys::{Date, Function, Object, Promise, Reflect};
    use paceline::wasm::{JsGatewayBudgetState, JsGatewayCore, JsGatewayRateState};
    use wasm_bindgen::prelude::*;
    use wasm_bindgen_futures::JsFuture;
    use wasm_bindgen_test::*;

    use super::prop;

    /// A transport whose `post` calls `answer(path, body)`.
    fn transport(
        answer: impl FnMut(JsValue, JsValue) -> Result<JsValue, JsValue> + 'static,
    ) -> JsValue {
        let port = Object::new();
        let post = Closure::<dyn FnMut(JsValue, JsValue) -> Result<JsValue, JsValue>>::new(answer);
        Reflect::set(&port, &"post".into(), post.as_ref()).unwrap();
        post.forget();
        port.into()
    }

    fn port_from(core: Rc<RefCell<JsGatewayCore>>) -> JsValue {
        transport(move |path, body| {
            let now: JsValue = Date::now().into();
            core.borrow_mut().handle("POST".into(), path, body, now)
        })
    }

    fn in_page_gateway() -> (Rc<RefCell<JsGatewayCore>>, JsValue) {
        let core = Rc::new(RefCell::new(
            JsGatewayCore::new(JsValue::UNDEFINED).unwrap(),
        ));
        let port = port_from(core.clone());
        (core, port)
    }

    fn json(text: &str) -> JsValue {
        js_sys::JSON::parse(text).unwrap()
    }

    async fn settle(p: Promise) -> Result<JsValue, JsValue> {
        JsFuture::from(p).await
    }

    #[wasm_bindgen_test]
    async fn no_permit_arrives_before_its_scheduled_time() {
        let (_core, port) = in_page_gateway();
        let pacer = JsGatewayRateState::new(port, JsValue::UNDEFINED).unwrap();
        let input =
            json(r#"{"bucketId":"org:p","rules":[{"requestsPerWindow":20,"windowMs":1000}]}"#);
        // Timers fire late, never early: the k-th permit cannot be handed
        // out before k intervals after the first one's time, which is no
        // earlier than the start.
        let start = Date::now();
        let mut times = Vec::new();
        for _ in 0..4 {
            settle(pacer.acquire(input.clone())).await.unwrap();
            times.push(Date::now() - start);
        }
        for (k, t) in times.iter().enumerate() {
            assert!(*t >= 50.0 * k as f64 - 1.0, "{times:?}");
        }
    }

    #[wasm_bindgen_test]
    async fn an_abort_rejects_with_aborted_and_leaves_no_lease_behind() {
        let (core, port) = in_page_gateway();
        let pacer = JsGatewayRateState::new(port, JsValue::UNDEFINED).unwrap();
        let rules = r#""rules":[{"requestsPerWindow":5,"windowMs":1000,"maxConcurrency":4}]"#;
        let first = settle(pacer.acquire(json(&format!(r#"{{"bucketId":"org:p",{rules}}}"#))))
            .await
            .unwrap();
        let controller = Function::new_no_args("return new AbortController()")
            .call0(&JsValue::NULL)
            .unwrap();
        let input = json(&format!(r#"{{"bucketId":"org:p",{rules}}}"#));
        Reflect::set(&input, &"signal".into(), &prop(&controller, "signal")).unwrap();
        let waiting = pacer.acquire(input);
        let abort: Function = prop(&controller, "abort").unchecked_into();
        abort.call0(&controller).unwrap();
        let refused = settle(waiting).await.unwrap_err();
        assert_eq!(prop(&refused, "code").as_string().unwrap(), "ABORTED");
        let view = core
            .borrow_mut()
            .bucket(json(r#"{"bucketId":"org:p"}"#), Date::now().into())
            .unwrap();
        assert!(prop(&first, "leaseId").as_string().is_some());
        assert_eq!(
            prop(&view, "liveLeases").as_f64(),
            Some(1.0),
            "only the held permit's lease"
        );
    }

    #[wasm_bindgen_test]
    async fn a_budget_breach_rejects_with_its_key_count_and_limit() {
        let (_core, port) = in_page_gateway();
        let budget = JsGatewayBudgetState::new(port, JsValue::UNDEFINED).unwrap();
        let charge =
            json(r#"{"rootRunId":"run","charges":[{"key":"toolCall","amount":2,"limit":3}]}"#);
        settle(budget.charge(charge.clone())).await.unwrap();
        let e = settle(budget.charge(charge)).await.unwrap_err();
        assert_eq!(prop(&e, "code").as_string().unwrap(), "BUDGET_EXCEEDED");
        assert_eq!(prop(&e, "key").as_string().unwrap(), "toolCall");
        assert_eq!(prop(&e, "observed").as_f64(), Some(4.0));
        assert_eq!(prop(&e, "limit").as_f64(), Some(3.0));
    }

    #[wasm_bindgen_test]
    async fn a_grant_with_fewer_times_than_permits_is_rejected() {
        let port = transport(|_, _| {
            let answer = Object::new();
            let body = br#"{"granted":2,"waitMs":0,"scheduledAtMs":[1]}"#;
            Reflect::set(&answer, &"status".into(), &200.into())?;
            Reflect::set(
                &answer,
                &"body".into(),
                &js_sys::Uint8Array::from(&body[..]),
            )?;
            Ok(answer.into())
        });
        let pacer = JsGatewayRateState::new(port, JsValue::UNDEFINED).unwrap();
        let input =
            json(r#"{"bucketId":"org:p","rules":[{"requestsPerWindow":20,"windowMs":1000}]}"#);
        let e = settle(pacer.acquire(input)).await.unwrap_err();
        assert_eq!(prop(&e, "code").as_string().unwrap(), "GATEWAY_UNAVAILABLE");
        let message = prop(&e, "message").as_string().unwrap();
        assert!(message.contains("granted 2, got 1 times"), "{message}");
    }
}
