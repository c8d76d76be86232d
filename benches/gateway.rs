//! Gateway costs, native, through the same JSON path a host serves:
//! `cargo bench --bench gateway`. Each figure is the median of 9 rounds.
//! Under `cargo test` (no `--bench` flag) every case runs once, as a smoke
//! test of the benchmark itself.

use std::hint::black_box;
use std::time::Instant;

use paceline::gateway::{handle, GatewayConfig, GatewayCore};
use paceline::sim::T0;

const ROUNDS: usize = 9;

struct Case {
    name: &'static str,
    /// Runs one operation at iteration `i`; returns the response status.
    run: Box<dyn FnMut(u64) -> u16>,
}

fn acquire_body(requested: u64, max_concurrency: Option<u64>) -> String {
    let concurrency =
        max_concurrency.map_or(String::new(), |m| format!(r#","maxConcurrency":{m}"#));
    format!(
        r#"{{"bucketId":"org_123:apollo","rules":[{{"requestsPerWindow":100,"windowMs":1000{concurrency}}}],"requested":{requested},"observedSuccesses":3}}"#
    )
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();

    let mut g = GatewayCore::new(GatewayConfig::default(), 1).unwrap();
    let body = acquire_body(50, None);
    cases.push(Case {
        name: "acquire, 50-permit block, JSON in and out",
        // 100 req/s: half a second later the next 50 permits fit the horizon.
        run: Box::new(move |i| {
            handle(
                &mut g,
                "POST",
                "/v1/rate/acquire",
                body.as_bytes(),
                T0 + i * 500,
            )
            .status
        }),
    });

    let mut g = GatewayCore::new(GatewayConfig::default(), 1).unwrap();
    let body = acquire_body(50, Some(100_000));
    cases.push(Case {
        name: "acquire, 50 permits with leases, JSON in and out",
        run: Box::new(move |i| {
            handle(
                &mut g,
                "POST",
                "/v1/rate/acquire",
                body.as_bytes(),
                T0 + i * 500,
            )
            .status
        }),
    });

    let mut g = GatewayCore::new(GatewayConfig::default(), 1).unwrap();
    let body = acquire_body(1, None);
    cases.push(Case {
        name: "acquire, 1 permit, JSON in and out",
        run: Box::new(move |i| {
            handle(
                &mut g,
                "POST",
                "/v1/rate/acquire",
                body.as_bytes(),
                T0 + i * 10,
            )
            .status
        }),
    });

    let mut g = GatewayCore::new(GatewayConfig::default(), 1).unwrap();
    let body = acquire_body(1, None);
    handle(&mut g, "POST", "/v1/rate/acquire", body.as_bytes(), T0);
    cases.push(Case {
        name: "acquire refused past the horizon (wait), JSON",
        run: Box::new(move |_| {
            let r = handle(
                &mut g,
                "POST",
                "/v1/rate/acquire",
                acquire_body(1, None).as_bytes(),
                T0,
            );
            r.status
        }),
    });

    let mut g = GatewayCore::new(GatewayConfig::default(), 1).unwrap();
    let body = br#"{"bucketId":"org_123:apollo","rules":[{"requestsPerWindow":100,"windowMs":1000,"maxConcurrency":8}],"leaseIds":["0123456789abcdef"]}"#;
    cases.push(Case {
        name: "release of an unknown lease, JSON",
        run: Box::new(move |i| handle(&mut g, "POST", "/v1/rate/release", body, T0 + i).status),
    });

    let mut g = GatewayCore::new(GatewayConfig::default(), 1).unwrap();
    let body = br#"{"rootRunId":"run","reservationId":"r-1","charges":[{"key":"toolCall","amount":1,"limit":1000}]}"#;
    handle(&mut g, "POST", "/v1/budget/charge", body, T0);
    cases.push(Case {
        name: "charge retried with a seen reservation id (cached answer), JSON",
        run: Box::new(move |i| handle(&mut g, "POST", "/v1/budget/charge", body, T0 + i).status),
    });

    let mut g = GatewayCore::new(GatewayConfig::default(), 1).unwrap();
    cases.push(Case {
        name: "charge with a fresh reservation id, JSON",
        run: Box::new(move |i| {
            let body = format!(
                r#"{{"rootRunId":"run","reservationId":"r-{i}","charges":[{{"key":"toolCall","amount":1,"limit":1000000000}}]}}"#
            );
            handle(&mut g, "POST", "/v1/budget/charge", body.as_bytes(), T0 + i).status
        }),
    });

    cases
}

fn main() {
    let benchmarking = std::env::args().any(|a| a == "--bench");
    let iterations: u64 = if benchmarking { 20_000 } else { 1 };
    println!("| operation | ns/op (median of {ROUNDS}) |");
    println!("|---|---|");
    for mut case in cases() {
        let mut i = 0;
        let mut round_ns = Vec::with_capacity(ROUNDS);
        for _ in 0..if benchmarking { ROUNDS } else { 1 } {
            let start = Instant::now();
            for _ in 0..iterations {
                let status = black_box((case.run)(black_box(i)));
                assert!(status < 500, "{}: status {status}", case.name);
                i += 1;
            }
            round_ns.push(start.elapsed().as_nanos() as f64 / iterations as f64);
        }
        round_ns.sort_by(f64::total_cmp);
        println!("| {} | {:.0} |", case.name, round_ns[round_ns.len() / 2]);
    }
}
