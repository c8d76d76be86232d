//! A fuzz of the gateway's whole HTTP surface: random call sequences of
//! well-formed, half-formed and garbage requests against `gateway::handle`,
//! with hostile numbers, ids, tokens, clocks and snapshot round trips.
//! After every call:
//! - nothing panicked, and the status is one the protocol names;
//! - the body is JSON, and every refusal carries a known code and a message;
//! - a refusal for bad input (400, 403, 404, 405) changed no state;
//! - granted times lie between now and the horizon;
//! - the snapshot stays within its per-table bound, restores to the same
//!   bytes, and the restored gateway answers the next call identically.
//!
//! `cargo test` runs 256 sequences; `PROPTEST_CASES=20000 cargo test
//! --release --test gateway_fuzz` runs as many as asked.
#![cfg(not(target_arch = "wasm32"))]

use paceline::error::ErrorCode;
use paceline::gateway::{
    handle, mint_rate_scope_token, mint_run_scope_token, GatewayConfig, GatewayCore,
};
use paceline::sim::T0;
use proptest::prelude::*;
use serde_json::{json, Map, Value};

const HORIZON_MS: u64 = 1_000;
const SECRET: &[u8] = b"fuzz-secret";
const BUCKETS: [&str; 4] = ["org:a", "org:b", "org:c", "o%2Fd"];
const RUNS: [&str; 3] = ["run-1", "run-2", "run-3"];
/// A generous bound on one table's share of a snapshot: a bucket with every
/// lease live is under 40 KiB, a run's ledger under 24 KiB.
const BYTES_PER_TABLE: usize = 48 * 1024;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256)
}

/// Any JSON value, leaning to the edges of what fields accept.
fn hostile_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        prop::sample::select(vec![
            0.0,
            -1.0,
            0.5,
            1e-300,
            1e300,
            9_007_199_254_740_993.0,
            1e16,
            -0.0
        ])
        .prop_map(|f| json!(f)),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (0u64..2_000).prop_map(Value::from),
        "[a-zA-Z0-9:._%-]{0,12}".prop_map(Value::from),
        Just(Value::from("x".repeat(300))),
        Just(Value::from("v1.99999999999999.00")),
        Just(Value::from("\u{0}\u{fffd}é")),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::vec(("[a-zA-Z]{1,8}", inner), 0..3)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A field's value: usually a good one, sometimes anything.
fn field(good: impl Strategy<Value = Value> + 'static) -> BoxedStrategy<Option<Value>> {
    prop_oneof![
        30 => good.prop_map(Some),
        1 => hostile_value().prop_map(Some),
        1 => Just(None),
    ]
    .boxed()
}

fn rule() -> impl Strategy<Value = Value> {
    (
        field((1u64..50).prop_map(Value::from)),
        field(prop::sample::select(vec![100u64, 1_000, 60_000]).prop_map(Value::from)),
        prop::option::of(field(
            prop_oneof![10 => 1u64..12, 1 => 1_000u64..1_100].prop_map(Value::from),
        )),
        prop::option::of(field(
            prop::sample::select(vec![0.001, 0.5, 5.0]).prop_map(|f| json!(f)),
        )),
    )
        .prop_map(|(n, w, c, a)| {
            let mut rule = Map::new();
            for (name, v) in [
                ("requestsPerWindow", n),
                ("windowMs", w),
                ("maxConcurrency", c.flatten()),
                ("adaptiveMaxRps", a.flatten()),
            ] {
                if let Some(v) = v {
                    rule.insert(name.into(), v);
                }
            }
            Value::Object(rule)
        })
}

fn object(fields: Vec<(&'static str, Option<Value>)>) -> Value {
    Value::Object(
        fields
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v)))
            .collect(),
    )
}

/// What a call's token field holds: none, the right one, or a wrong one.
#[derive(Debug, Clone, Copy)]
enum Token {
    None,
    Right,
    Wrong,
}

#[derive(Debug, Clone)]
enum Call {
    Acquire(usize, Vec<Value>, Option<Value>, Token),
    Release(usize, Vec<Value>, usize, Token),
    Penalize(usize, Option<Value>, Token),
    Charge(usize, Option<Value>, Vec<(usize, Value, Value)>, Token),
    View(usize, Token),
    Raw(String, String, Vec<u8>),
    /// A well-formed body with some bytes replaced.
    Mangled(usize, Vec<(usize, u8)>),
}

#[derive(Debug, Clone)]
struct Step {
    call: Call,
    /// Milliseconds the clock moves before the call (may go back).
    dt: i64,
    /// Replaced by an absurd time for this call.
    absurd_now: Option<u64>,
    restore_first: bool,
}

fn token() -> impl Strategy<Value = Token> {
    prop_oneof![1 => Just(Token::None), 4 => Just(Token::Right), 1 => Just(Token::Wrong)]
}

fn call() -> impl Strategy<Value = Call> {
    let requested = field((1u64..1_100).prop_map(Value::from));
    prop_oneof![
        6 => (0..BUCKETS.len(), prop_oneof![1 => Just(Vec::new()), 12 => prop::collection::vec(rule(), 1..3)], requested, token())
            .prop_map(|(b, r, q, t)| Call::Acquire(b, r, q, t)),
        3 => (0..BUCKETS.len(), prop::collection::vec(rule(), 1..2), 0usize..20, token())
            .prop_map(|(b, r, n, t)| Call::Release(b, r, n, t)),
        1 => (0..BUCKETS.len(), field((1u64..5_000).prop_map(Value::from)), token())
            .prop_map(|(b, c, t)| Call::Penalize(b, c, t)),
        3 => (
            0..RUNS.len(),
            field((0u64..6).prop_map(|n| Value::from(format!("res{n}")))),
            prop::collection::vec(
                (0usize..40, prop_oneof![1 => hostile_value(), 4 => (1u64..5).prop_map(Value::from)],
                 (0u64..30).prop_map(Value::from)),
                0..4,
            ),
            token(),
        )
            .prop_map(|(r, id, c, t)| Call::Charge(r, id, c, t)),
        1 => (0..BUCKETS.len(), token()).prop_map(|(b, t)| Call::View(b, t)),
        1 => (
            prop::sample::select(vec!["POST", "GET", "PUT", "DELETE", ""]),
            prop::sample::select(vec![
                "/v1/rate/acquire", "/v1/budget/charge", "/v1/rate/buckets/", "/v1/rate/buckets/%zz",
                "/v1/rate/buckets/org:a?token=%", "/", "/v1/rate/acquire?x=1", "//v1",
            ]),
            prop::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(|(m, p, b)| Call::Raw(m.into(), p.into(), b)),
        2 => (0..BUCKETS.len(), prop::collection::vec((0usize..200, any::<u8>()), 1..4))
            .prop_map(|(b, edits)| Call::Mangled(b, edits)),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    (
        call(),
        prop_oneof![4 => 0i64..400, 1 => 0i64..70_000, 1 => -3_000i64..0],
        prop::option::weighted(
            0.03,
            prop::sample::select(vec![
                1e16 as u64,
                (1 << 53) - 1,
                u64::MAX,
                paceline::gateway::MAX_NOW_MS + 1,
            ]),
        ),
        prop::bool::weighted(0.05),
    )
        .prop_map(|(call, dt, absurd_now, restore_first)| Step {
            call,
            dt,
            absurd_now,
            restore_first,
        })
}

struct Fuzz {
    secret: bool,
    /// Lease ids handed out, to release some of them later.
    leases: Vec<String>,
}

impl Fuzz {
    fn rate_token(&self, bucket: &str, t: Token, now: u64) -> Option<Value> {
        match (self.secret, t) {
            (_, Token::None) => None,
            (true, Token::Right) => {
                Some(mint_rate_scope_token(SECRET, bucket, now.saturating_add(60_000)).into())
            }
            _ => Some(mint_rate_scope_token(b"wrong", bucket, now.saturating_add(60_000)).into()),
        }
    }

    fn run_token(&self, run: &str, t: Token, now: u64) -> Option<Value> {
        match (self.secret, t) {
            (_, Token::None) => None,
            (true, Token::Right) => {
                Some(mint_run_scope_token(SECRET, run, now.saturating_add(60_000)).into())
            }
            _ => {
                Some(mint_run_scope_token(SECRET, "another run", now.saturating_add(60_000)).into())
            }
        }
    }

    fn acquire_body(&self, b: usize, now: u64) -> Value {
        object(vec![
            ("bucketId", Some(BUCKETS[b].into())),
            (
                "rateScopeToken",
                self.rate_token(BUCKETS[b], Token::Right, now),
            ),
            (
                "rules",
                Some(json!([{"requestsPerWindow": 20, "windowMs": 1000, "maxConcurrency": 5}])),
            ),
            ("requested", Some(3.into())),
        ])
    }

    /// The request a call makes at `now`: (method, path, body).
    fn request(&self, call: &Call, now: u64) -> (String, String, Vec<u8>) {
        let post =
            |path: &str, body: Value| ("POST".into(), path.into(), body.to_string().into_bytes());
        match call {
            Call::Acquire(b, rules, requested, t) => post(
                "/v1/rate/acquire",
                object(vec![
                    ("bucketId", Some(BUCKETS[*b].into())),
                    ("rateScopeToken", self.rate_token(BUCKETS[*b], *t, now)),
                    ("rules", Some(Value::from(rules.clone()))),
                    ("requested", requested.clone()),
                ]),
            ),
            Call::Release(b, rules, n, t) => {
                let ids: Vec<Value> = self
                    .leases
                    .iter()
                    .rev()
                    .take(*n)
                    .map(|s| s.as_str().into())
                    .collect();
                post(
                    "/v1/rate/release",
                    object(vec![
                        ("bucketId", Some(BUCKETS[*b].into())),
                        ("rateScopeToken", self.rate_token(BUCKETS[*b], *t, now)),
                        ("rules", Some(Value::from(rules.clone()))),
                        ("leaseIds", Some(ids.into())),
                    ]),
                )
            }
            Call::Penalize(b, cooldown, t) => post(
                "/v1/rate/penalize",
                object(vec![
                    ("bucketId", Some(BUCKETS[*b].into())),
                    ("rateScopeToken", self.rate_token(BUCKETS[*b], *t, now)),
                    ("cooldownMs", cooldown.clone()),
                ]),
            ),
            Call::Charge(r, id, charges, t) => {
                let charges: Vec<Value> = charges
                    .iter()
                    .map(|(key, amount, limit)| json!({"key": format!("k{key}"), "amount": amount, "limit": limit}))
                    .collect();
                post(
                    "/v1/budget/charge",
                    object(vec![
                        ("rootRunId", Some(RUNS[*r].into())),
                        ("runScopeToken", self.run_token(RUNS[*r], *t, now)),
                        ("reservationId", id.clone()),
                        ("charges", Some(charges.into())),
                    ]),
                )
            }
            Call::View(b, t) => {
                let token = self.rate_token(BUCKETS[*b], *t, now);
                let query =
                    token.map_or(String::new(), |t| format!("?token={}", t.as_str().unwrap()));
                (
                    "GET".into(),
                    format!("/v1/rate/buckets/{}{query}", BUCKETS[*b]),
                    Vec::new(),
                )
            }
            Call::Raw(method, path, body) => (method.clone(), path.clone(), body.clone()),
            Call::Mangled(b, edits) => {
                let mut body = self.acquire_body(*b, now).to_string().into_bytes();
                for &(at, byte) in edits {
                    let at = at % body.len();
                    body[at] = byte;
                }
                ("POST".into(), "/v1/rate/acquire".into(), body)
            }
        }
    }
}

fn config(secret: bool, max_buckets: usize, max_runs: usize) -> GatewayConfig {
    GatewayConfig {
        secret: secret.then(|| SECRET.to_vec()),
        horizon_ms: HORIZON_MS,
        max_buckets,
        max_runs,
        ..GatewayConfig::default()
    }
}

fn run(
    secret: bool,
    max_buckets: usize,
    max_runs: usize,
    steps: Vec<Step>,
) -> Result<(), TestCaseError> {
    let config = config(secret, max_buckets, max_runs);
    let mut g = GatewayCore::new(config.clone(), [5; 32]).unwrap();
    let mut fuzz = Fuzz {
        secret,
        leases: Vec::new(),
    };
    let mut now = T0;
    for step in steps {
        now = now.saturating_add_signed(step.dt);
        let at = step.absurd_now.unwrap_or(now);
        let before = g.snapshot();
        let mut twin = None;
        if step.restore_first {
            let back = GatewayCore::restore(&before, config.clone()).unwrap();
            prop_assert_eq!(back.snapshot(), before.clone(), "a restore changes no byte");
            twin = Some(back);
        }
        let (method, path, body) = fuzz.request(&step.call, at);
        let answer = handle(&mut g, &method, &path, &body, at);
        if let Some(mut twin) = twin {
            let again = handle(&mut twin, &method, &path, &body, at);
            prop_assert_eq!(&again, &answer, "the restored gateway answers alike");
            prop_assert_eq!(twin.snapshot(), g.snapshot());
        }
        prop_assert!(
            [200, 400, 403, 404, 405, 409, 503].contains(&answer.status),
            "status {} for {} {}",
            answer.status,
            method,
            path
        );
        let json: Value = serde_json::from_str(&answer.body)
            .map_err(|e| TestCaseError::fail(format!("{e}: {}", answer.body)))?;
        if answer.status != 200 {
            let code = json["error"]["code"].as_str().unwrap_or("");
            prop_assert!(
                ErrorCode::parse(code).is_some(),
                "code {:?}: {}",
                code,
                answer.body
            );
            prop_assert!(!json["error"]["message"].as_str().unwrap_or("").is_empty());
        }
        if [400, 403, 404, 405].contains(&answer.status) {
            prop_assert!(
                g.snapshot() == before,
                "a {} changed state: {}",
                answer.status,
                answer.body
            );
        }
        if answer.status == 200 && path == "/v1/rate/acquire" {
            for t in json["scheduledAtMs"].as_array().into_iter().flatten() {
                let t = t.as_u64().unwrap();
                prop_assert!(
                    t >= at && t <= at.saturating_add(HORIZON_MS),
                    "time {} at {}",
                    t,
                    at
                );
            }
            for id in json["leaseIds"].as_array().into_iter().flatten() {
                fuzz.leases.push(id.as_str().unwrap().to_owned());
            }
        }
        let tables = g.bucket_count() + g.run_count();
        let bytes = g.snapshot().len();
        prop_assert!(
            bytes <= 64 + tables * BYTES_PER_TABLE,
            "{} bytes for {} tables",
            bytes,
            tables
        );
        prop_assert!(g.bucket_count() <= max_buckets && g.run_count() <= max_runs);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn any_sequence_of_http_calls_gets_coded_answers_and_keeps_state_sound(
        secret in any::<bool>(),
        max_buckets in 1usize..5,
        max_runs in 1usize..4,
        steps in prop::collection::vec(step(), 1..60),
    ) {
        run(secret, max_buckets, max_runs, steps)?;
    }
}
