//! What a Durable Object pays to keep the gateway's state, native:
//! `cargo bench --bench persistence`. Prints the storage bytes one acquire
//! writes with 1 and with 1,000 buckets held (the whole snapshot, as the
//! object stored before, beside the records the acquire changed, as it
//! stores now), and the time to restore 100,000 live leases from the whole
//! snapshot and from per-bucket records. Under `cargo test` it runs at a
//! tenth of its size, as a smoke test of the benchmark itself.

use std::time::Instant;

use paceline::gateway::{handle, GatewayConfig, GatewayCore};

const T0: u64 = 1_767_225_600_000;

fn acquire(bucket: &str, requested: u64, max_concurrency: u64) -> String {
    format!(
        r#"{{"bucketId":"{bucket}","rules":[{{"requestsPerWindow":1000000,"windowMs":1000,"maxConcurrency":{max_concurrency}}}],"requested":{requested}}}"#
    )
}

fn post(g: &mut GatewayCore, body: &str, now: u64) {
    let r = handle(g, "POST", "/v1/rate/acquire", body.as_bytes(), now);
    assert_eq!(r.status, 200, "{}", r.body);
}

fn config() -> GatewayConfig {
    GatewayConfig {
        lease_ttl_ms: 86_400_000,
        ..GatewayConfig::default()
    }
}

/// A gateway holding `buckets` buckets, each with `leases` live leases.
fn held(buckets: u64, leases: u64) -> GatewayCore {
    let mut g = GatewayCore::new(config(), 1).unwrap();
    for b in 0..buckets {
        post(
            &mut g,
            &acquire(&format!("org-{b}:provider"), leases, 1_000),
            T0,
        );
    }
    g
}

fn bytes_per_acquire(buckets: u64) -> String {
    let mut g = held(buckets, 1);
    let _ = g.take_changed_records();
    post(&mut g, &acquire("org-0:provider", 1, 1_000), T0 + 1);
    let snapshot = g.snapshot().len();
    let records: usize = g
        .take_changed_records()
        .iter()
        .map(|(key, value)| key.len() + value.as_ref().map_or(0, Vec::len))
        .sum();
    format!("{buckets} buckets held: whole snapshot {snapshot} B, changed records {records} B")
}

fn restore(buckets: u64, leases: u64) -> String {
    let g = held(buckets, leases);
    let snapshot = g.snapshot();
    let records = g.records();
    let start = Instant::now();
    let whole = GatewayCore::restore(&snapshot, config()).unwrap();
    let from_snapshot = start.elapsed();
    let start = Instant::now();
    let parts = GatewayCore::restore_records(
        records.iter().map(|(k, v)| (k.as_str(), v.as_slice())),
        config(),
    )
    .unwrap();
    let from_records = start.elapsed();
    assert_eq!(whole.snapshot(), parts.snapshot());
    format!(
        "{} leases: from the snapshot {:.1} ms, from {} records {:.1} ms",
        buckets * leases,
        from_snapshot.as_secs_f64() * 1e3,
        records.len(),
        from_records.as_secs_f64() * 1e3
    )
}

fn main() {
    let scale = if std::env::args().any(|a| a == "--bench") {
        1
    } else {
        10
    };
    println!("{}", bytes_per_acquire(1));
    println!("{}", bytes_per_acquire(1_000 / scale));
    println!("{}", restore(10 / scale.min(10), 1_000));
    println!("{}", restore(100 / scale, 1_000));
}
