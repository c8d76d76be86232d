//! Cases shared by the native and the browser test tiers, so both prove the
//! same protocol behaviour.
#![allow(dead_code)]

pub mod gateway;
pub mod port;
pub mod records;
pub mod rig;

use paceline::protocol::{
    decode, encode, AcquireRequest, AcquireResponse, ChargeRequest, ChargeResponse, ErrorBody,
    Message, PenalizeRequest, PenalizeResponse, ReleaseRequest, ReleaseResponse,
};
use serde_json::Value;

pub type RoundTrip = fn(&str) -> Result<(), String>;

/// Decodes a fixture, encodes it again, and compares the two as JSON values.
pub fn round_trip<M: Message>(text: &str) -> Result<(), String> {
    let message: M = decode(text.as_bytes()).map_err(|e| e.to_string())?;
    let again: Value = serde_json::from_str(&encode(&message)).map_err(|e| e.to_string())?;
    let original: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if same_json(&again, &original) {
        Ok(())
    } else {
        Err(format!("re-encoded as {again}, expected {original}"))
    }
}

/// JSON equality with numbers compared by value, as JS sees them (`40` and
/// `40.0` are one number there).
pub fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// Every fixture, in the shapes clients send, with the message type it holds.
pub const FIXTURES: &[(&str, &str, RoundTrip)] = &[
    (
        "acquire-request",
        include_str!("../fixtures/acquire-request.json"),
        round_trip::<AcquireRequest>,
    ),
    (
        "acquire-response-scheduled",
        include_str!("../fixtures/acquire-response-scheduled.json"),
        round_trip::<AcquireResponse>,
    ),
    (
        "acquire-response-legacy",
        include_str!("../fixtures/acquire-response-legacy.json"),
        round_trip::<AcquireResponse>,
    ),
    (
        "acquire-response-wait",
        include_str!("../fixtures/acquire-response-wait.json"),
        round_trip::<AcquireResponse>,
    ),
    (
        "release-request",
        include_str!("../fixtures/release-request.json"),
        round_trip::<ReleaseRequest>,
    ),
    (
        "release-response",
        include_str!("../fixtures/release-response.json"),
        round_trip::<ReleaseResponse>,
    ),
    (
        "penalize-request",
        include_str!("../fixtures/penalize-request.json"),
        round_trip::<PenalizeRequest>,
    ),
    (
        "penalize-response",
        include_str!("../fixtures/penalize-response.json"),
        round_trip::<PenalizeResponse>,
    ),
    (
        "charge-request",
        include_str!("../fixtures/charge-request.json"),
        round_trip::<ChargeRequest>,
    ),
    (
        "charge-response",
        include_str!("../fixtures/charge-response.json"),
        round_trip::<ChargeResponse>,
    ),
    (
        "error-budget-exceeded",
        include_str!("../fixtures/error-budget-exceeded.json"),
        round_trip::<ErrorBody>,
    ),
    (
        "error-invalid-input",
        include_str!("../fixtures/error-invalid-input.json"),
        round_trip::<ErrorBody>,
    ),
];

const RULE: &str = r#"{"requestsPerWindow":20,"windowMs":1000}"#;

fn acquire_with(fields: &str) -> String {
    format!(r#"{{"bucketId":"org:apollo","rules":[{RULE}],"requested":4{fields}}}"#)
}

fn acquire_rule(rule: &str) -> String {
    format!(r#"{{"bucketId":"org:apollo","rules":[{rule}],"requested":4}}"#)
}

/// A request that must be refused, and the words its error must contain.
pub struct Reject {
    pub what: &'static str,
    pub body: String,
    pub says: &'static str,
}

/// The acquire requests every tier must refuse with `INVALID_INPUT`.
pub fn acquire_rejects() -> Vec<Reject> {
    let r = |what, body: String, says| Reject { what, body, says };
    vec![
        r(
            "not JSON",
            "{\"bucketId\":".into(),
            "body is not valid JSON",
        ),
        r(
            "NaN literal",
            acquire_with(r#","observedSuccesses":NaN"#),
            "not valid JSON",
        ),
        r(
            "number too large for a double",
            acquire_rule(r#"{"requestsPerWindow":1e400,"windowMs":1000}"#),
            "not valid JSON",
        ),
        r(
            "an array body",
            "[]".into(),
            "body must be an object, got []",
        ),
        r(
            "a rule that is not an object",
            format!(r#"{{"bucketId":"b","rules":[{RULE},7],"requested":1}}"#),
            "rules[1] must be an object, got 7",
        ),
        r(
            "missing bucketId",
            r#"{"rules":[{"requestsPerWindow":1,"windowMs":1}],"requested":1}"#.into(),
            "bucketId is required",
        ),
        r(
            "blank bucketId",
            format!(r#"{{"bucketId":"  ","rules":[{RULE}],"requested":1}}"#),
            "bucketId must be a non-empty string",
        ),
        r(
            "negative requestsPerWindow",
            acquire_rule(r#"{"requestsPerWindow":-3,"windowMs":1000}"#),
            "rules[0].requestsPerWindow must be a positive integer at most 1000000, got -3",
        ),
        r(
            "fractional requestsPerWindow",
            acquire_rule(r#"{"requestsPerWindow":2.5,"windowMs":1000}"#),
            "rules[0].requestsPerWindow must be a positive integer",
        ),
        r(
            "zero window",
            acquire_rule(r#"{"requestsPerWindow":5,"windowMs":0}"#),
            "rules[0].windowMs must be a positive integer",
        ),
        r(
            "negative window",
            acquire_rule(r#"{"requestsPerWindow":5,"windowMs":-1000}"#),
            "rules[0].windowMs must be a positive integer",
        ),
        r(
            "window as a string",
            acquire_rule(r#"{"requestsPerWindow":5,"windowMs":"1000"}"#),
            "rules[0].windowMs must be a positive integer at most 2678400000, got \"1000\"",
        ),
        r(
            "null window",
            acquire_rule(r#"{"requestsPerWindow":5,"windowMs":null}"#),
            "rules[0].windowMs is required",
        ),
        r(
            "zero maxConcurrency",
            acquire_rule(r#"{"requestsPerWindow":5,"windowMs":1000,"maxConcurrency":0}"#),
            "rules[0].maxConcurrency must be a positive integer",
        ),
        r(
            "negative adaptiveMaxRps",
            acquire_rule(r#"{"requestsPerWindow":5,"windowMs":1000,"adaptiveMaxRps":-1}"#),
            "rules[0].adaptiveMaxRps must be a positive number",
        ),
        r(
            "no rules",
            r#"{"bucketId":"b","rules":[],"requested":1}"#.into(),
            "rules must hold at least 1 item, got 0",
        ),
        r(
            "rules not an array",
            r#"{"bucketId":"b","rules":{"requestsPerWindow":1},"requested":1}"#.into(),
            "rules must be an array",
        ),
        r(
            "requested zero",
            acquire_with(r#","requested":0"#),
            "requested must be a positive integer at most 1000, got 0",
        ),
        r(
            "requested over the cap",
            acquire_with(r#","requested":1001"#),
            "requested must be a positive integer at most 1000, got 1001",
        ),
        r(
            "negative observedSuccesses",
            acquire_with(r#","observedSuccesses":-1"#),
            "observedSuccesses must be an integer from 0 to 1000000",
        ),
        r(
            "token of the wrong type",
            acquire_with(r#","rateScopeToken":42"#),
            "rateScopeToken must be a string, got 42",
        ),
        r(
            "body over the size cap",
            acquire_with(&format!(r#","pad":"{}""#, "x".repeat(70_000))),
            "the limit is 65536",
        ),
    ]
}

/// Other messages' refusals: lease lists of the wrong type, grants whose
/// lists do not match their count, bad charges. Each outcome is `Ok(message)` when the body was refused as invalid input.
pub fn other_rejects() -> Vec<(&'static str, Result<String, String>, &'static str)> {
    fn err<M: Message + std::fmt::Debug>(body: &str) -> Result<String, String> {
        match decode::<M>(body.as_bytes()) {
            Ok(m) => Err(format!("accepted {m:?}")),
            Err(e) if e.code == paceline::ErrorCode::InvalidInput => Ok(e.message.clone()),
            Err(e) => Err(format!("refused with the wrong code {}", e.code)),
        }
    }
    vec![
        (
            "release with a number among lease ids",
            err::<ReleaseRequest>(&format!(
                r#"{{"bucketId":"b","rules":[{RULE}],"leaseIds":["a",7]}}"#
            )),
            "leaseIds[1] must be a non-empty lease id string",
        ),
        (
            "release with leaseIds a string",
            err::<ReleaseRequest>(&format!(
                r#"{{"bucketId":"b","rules":[{RULE}],"leaseIds":"a,b"}}"#
            )),
            "leaseIds must be an array",
        ),
        (
            "grant with fewer times than permits",
            err::<AcquireResponse>(r#"{"granted":2,"waitMs":0,"scheduledAtMs":[1]}"#),
            "granted 2, got 1 times",
        ),
        (
            "grant with a negative time",
            err::<AcquireResponse>(r#"{"granted":1,"waitMs":0,"scheduledAtMs":[-5]}"#),
            "scheduledAtMs[0] must be a finite number of milliseconds",
        ),
        (
            "grant with leases of the wrong count",
            err::<AcquireResponse>(r#"{"granted":2,"waitMs":0,"leaseIds":["a"]}"#),
            "granted 2, got 1 leases",
        ),
        (
            "grant with a null lease",
            err::<AcquireResponse>(r#"{"granted":1,"waitMs":0,"leaseIds":[null]}"#),
            "leaseIds[0] must be a non-empty lease id string",
        ),
        (
            "penalize without a cooldown",
            err::<PenalizeRequest>(r#"{"bucketId":"b","cooldownMs":0}"#),
            "cooldownMs must be a positive integer",
        ),
        (
            "charge of zero",
            err::<ChargeRequest>(
                r#"{"rootRunId":"r","reservationId":"x","charges":[{"key":"toolCall","amount":0,"limit":3}]}"#,
            ),
            "charges[0].amount must be a positive integer",
        ),
        (
            "a charge that is not an object",
            err::<ChargeRequest>(r#"{"rootRunId":"r","reservationId":"x","charges":["retry"]}"#),
            "charges[0] must be an object, got \"retry\"",
        ),
        (
            "charge naming a key twice",
            err::<ChargeRequest>(
                r#"{"rootRunId":"r","reservationId":"x","charges":[{"key":"retry","amount":1,"limit":3},{"key":"retry","amount":1,"limit":3}]}"#,
            ),
            "charges[1].key repeats the key \"retry\"",
        ),
        (
            "charge marked resent with a string",
            err::<ChargeRequest>(
                r#"{"rootRunId":"r","reservationId":"x","resent":"yes","charges":[{"key":"retry","amount":1,"limit":3}]}"#,
            ),
            "resent must be a boolean",
        ),
    ]
}
