//! The gateway's memory after the hostile-client repros of the hardening
//! review, native: `cargo bench --bench gateway_state`. Each line runs one
//! repro and prints what the gateway then holds (tables, queue entries,
//! snapshot bytes: the snapshot is what a Durable Object stores as one
//! value, limit 128 KiB) and, for making buckets at capacity, the time per
//! attempt. Under `cargo test` every repro runs at a tenth of its size, as a
//! smoke test of the benchmark itself.

use std::time::Instant;

use paceline::gateway::{handle, GatewayConfig, GatewayCore, MAX_LIVE_LEASES};
use paceline::sim::T0;

fn post(g: &mut GatewayCore, path: &str, body: &str, now: u64) -> u16 {
    handle(g, "POST", path, body.as_bytes(), now).status
}

fn acquire(bucket: &str, requested: u64, max_concurrency: u64) -> String {
    format!(
        r#"{{"bucketId":"{bucket}","rules":[{{"requestsPerWindow":1000000,"windowMs":1000,"maxConcurrency":{max_concurrency}}}],"requested":{requested}}}"#
    )
}

fn kib(bytes: usize) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

/// Keep one lease, then loop acquire(1000) + release of those 1000.
fn one_lease_kept(rounds: u64, step_ms: u64) -> String {
    let config = GatewayConfig {
        lease_ttl_ms: 86_400_000,
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 1).unwrap();
    assert_eq!(
        post(
            &mut g,
            "/v1/rate/acquire",
            &acquire("b", 1, MAX_LIVE_LEASES),
            T0
        ),
        200
    );
    let first = g.snapshot().len();
    for i in 1..=rounds {
        let now = T0 + i * step_ms;
        let r = handle(
            &mut g,
            "POST",
            "/v1/rate/acquire",
            acquire("b", 1_000, MAX_LIVE_LEASES).as_bytes(),
            now,
        );
        let json: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        let ids = json["leaseIds"].to_string();
        let body = format!(
            r#"{{"bucketId":"b","rules":[{{"requestsPerWindow":1000000,"windowMs":1000,"maxConcurrency":{MAX_LIVE_LEASES}}}],"leaseIds":{ids}}}"#
        );
        assert_eq!(post(&mut g, "/v1/rate/release", &body, now), 200);
    }
    format!(
        "{} expiry-queue entries; snapshot {} after the first lease, {} after {rounds} rounds",
        g.queued_leases(),
        kib(first),
        kib(g.snapshot().len())
    )
}

/// Distinct bucket ids, each left holding a live lease, at `maxBuckets` 100.
fn busy_buckets(ids: u64) -> String {
    let config = GatewayConfig {
        max_buckets: 100,
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 1).unwrap();
    let (mut refused, start) = (0, Instant::now());
    for i in 0..ids {
        if post(
            &mut g,
            "/v1/rate/acquire",
            &acquire(&format!("busy{i}"), 1, 1),
            T0,
        ) == 503
        {
            refused += 1;
        }
    }
    let per = start.elapsed().as_nanos() as f64 / ids as f64 / 1_000.0;
    format!(
        "{} buckets kept, {refused} refused with 503; {per:.1} µs per new-bucket attempt; snapshot {}",
        g.bucket_count(),
        kib(g.snapshot().len())
    )
}

/// Distinct idle bucket ids arriving one a second at the default cap:
/// the idle ones are forgotten as new ones arrive.
fn idle_buckets(ids: u64) -> String {
    let mut g = GatewayCore::new(GatewayConfig::default(), 1).unwrap();
    for i in 0..ids {
        let body = format!(
            r#"{{"bucketId":"idle{i}","rules":[{{"requestsPerWindow":10,"windowMs":1000}}],"requested":1}}"#
        );
        assert_eq!(post(&mut g, "/v1/rate/acquire", &body, T0 + i * 1_000), 200);
    }
    format!(
        "{} buckets kept of {ids}; snapshot {}",
        g.bucket_count(),
        kib(g.snapshot().len())
    )
}

/// Distinct runs charging once each, one a second.
fn runs(count: u64) -> String {
    let mut g = GatewayCore::new(GatewayConfig::default(), 1).unwrap();
    let mut refused = 0;
    for i in 0..count {
        let body = format!(
            r#"{{"rootRunId":"run-{i}","reservationId":"r","charges":[{{"key":"toolCall","amount":1,"limit":1000}}]}}"#
        );
        if post(&mut g, "/v1/budget/charge", &body, T0 + i * 1_000) == 503 {
            refused += 1;
        }
    }
    format!(
        "{} ledgers kept, {refused} refused with 503; snapshot {}",
        g.run_count(),
        kib(g.snapshot().len())
    )
}

/// One run charged with the longest ids and 16 of the longest keys a charge.
fn hostile_ledger(charges: u64) -> String {
    let mut g = GatewayCore::new(GatewayConfig::default(), 1).unwrap();
    let run = "x".repeat(256);
    for i in 0..charges {
        let keys: Vec<String> = (0..16)
            .map(|k| {
                format!(
                    r#"{{"key":"{:0>64}","amount":1,"limit":1000000000}}"#,
                    (i * 16 + k) % 32
                )
            })
            .collect();
        let body = format!(
            r#"{{"rootRunId":"{run}","reservationId":"{i:0>64}","charges":[{}]}}"#,
            keys.join(",")
        );
        assert_eq!(post(&mut g, "/v1/budget/charge", &body, T0 + i), 200);
    }
    format!("snapshot {} for the one run", kib(g.snapshot().len()))
}

/// One bucket with every lease it may hold live.
fn full_lease_table() -> String {
    let mut g = GatewayCore::new(GatewayConfig::default(), 1).unwrap();
    for i in 0..MAX_LIVE_LEASES {
        assert_eq!(
            post(
                &mut g,
                "/v1/rate/acquire",
                &acquire("b", 1, MAX_LIVE_LEASES),
                T0 + i
            ),
            200
        );
    }
    let refused = post(
        &mut g,
        "/v1/rate/acquire",
        &acquire("c", 1_000, 100_000),
        T0,
    );
    format!(
        "{} leases live, snapshot {}; maxConcurrency 100000 answered {refused}",
        MAX_LIVE_LEASES,
        kib(g.snapshot().len())
    )
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let n = |size: u64| if full { size } else { size / 10 };
    println!("| repro | after it |");
    println!("|---|---|");
    let (rounds, ids, charges) = (n(10_000), n(20_000), n(2_000));
    let rows = [
        (
            format!("keep one lease, {rounds} × acquire(1000)+release, 1 ms apart"),
            one_lease_kept(rounds, 1),
        ),
        (
            "the same, rounds 2.1 s apart (permits mature)".to_owned(),
            one_lease_kept(rounds, 2_100),
        ),
        (
            format!("{ids} busy bucket ids, maxBuckets 100"),
            busy_buckets(ids),
        ),
        (
            format!("{ids} idle bucket ids, one a second, default cap"),
            idle_buckets(ids),
        ),
        (format!("{ids} runs, one a second, default cap"), runs(ids)),
        (
            format!("one run: {charges} charges, 64-byte ids, 16 × 64-byte keys"),
            hostile_ledger(charges),
        ),
        ("one bucket at the lease cap".to_owned(), full_lease_table()),
    ];

    for (repro, after) in rows {
        println!("| {repro} | {after} |");
    }
}
