//! The governor's own cost per tool call, native:
//! `cargo bench --bench governor`. A call here is `acquire_tool_slot` and
//! the lease's release with the provider permit already cached (a pure-rate
//! block, so no gateway round trip and no wait); the pacer's draw and the
//! budget charge are also timed alone, so the governor's share can be read
//! off. Each figure is the median of 9 rounds. Under `cargo test` (no
//! `--bench` flag) every case runs once, as a smoke test.

use std::collections::HashMap;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use paceline::client::{
    GatewayPort, GatewayRateState, PacerOptions, PermitRequest, DEFAULT_LEAD_MS,
};
use paceline::governor::{
    Adapter, Governor, GovernorConfig, PacingDeclaration, PolicyOverrides, RunScope, ToolPacing,
};
use paceline::protocol::{BudgetKind, PacingRule};
use paceline::rt::{Runtime, Slots};
use paceline::sim::{SimRuntime, T0};
use paceline::time::Clock;

const ROUNDS: usize = 9;
/// A block holds up to 1,000 permits; a batch draws fewer, all cached.
const BATCH: usize = 900;
const BATCHES_PER_ROUND: usize = 20;
const TOOL: &str = "apollo.search";

/// A million a second: a block's thousand permits share about one
/// millisecond, so once it has passed every cached permit is due (and still
/// within the gateway's 25 ms tolerance) and a draw never sleeps.
fn rules() -> Vec<PacingRule> {
    vec![PacingRule::new(1_000_000, 1_000)]
}

/// Polls a future that must finish without waiting.
fn now<T>(future: impl Future<Output = T>) -> T {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(value) => value,
        Poll::Pending => panic!("a warm call waited"),
    }
}

struct World {
    rt: SimRuntime,
    pacer: GatewayRateState,
    governor: Governor,
}

impl World {
    fn new() -> Self {
        let rt = SimRuntime::new(T0);
        let runtime: Rc<dyn Runtime> = Rc::new(rt.clone());
        let clock: Rc<dyn Clock> = Rc::new(rt.clone());
        let config = paceline::gateway::GatewayConfig {
            window_guard_ms: 25,
            ..Default::default()
        };
        let core = paceline::gateway::GatewayCore::new(config, 1).unwrap();
        let port: Rc<dyn GatewayPort> =
            Rc::new(paceline::client::InProcessGateway::new(core, clock));
        let pacer = GatewayRateState::new(port, runtime.clone(), PacerOptions::default());
        let declared = HashMap::from([(
            TOOL.to_owned(),
            PacingDeclaration::Declared(ToolPacing {
                provider: "apollo".into(),
                rules: rules(),
            }),
        )]);
        let mut config = GovernorConfig::new(
            Adapter::EsmWorkers,
            RunScope {
                org_id: "org_123".into(),
                root_run_id: "run".into(),
            },
            pacer.clone(),
            Box::new(move |tool| {
                let found = declared
                    .get(tool)
                    .cloned()
                    .unwrap_or(PacingDeclaration::Undeclared);
                Box::pin(async move { Ok(found) })
            }),
            runtime,
        );
        config.policy = paceline::protocol::decode::<PolicyOverrides>(
            br#"{"budgets":{"maxToolCallCount":1000000000}}"#,
        )
        .unwrap();
        let governor = Governor::new(config).unwrap();
        World {
            rt,
            pacer,
            governor,
        }
    }

    /// A fresh world whose pacer holds a block of due permits: two calls
    /// at once (a burst asks for the horizon) take permits through a refill,
    /// then the block's two milliseconds pass.
    fn warm() -> Self {
        let w = World::new();
        for _ in 0..2 {
            let governor = w.governor.clone();
            w.rt.spawn(Box::pin(async move {
                drop(governor.acquire_tool_slot(TOOL, None).await.unwrap());
            }));
        }
        w.rt.run_until(T0 + DEFAULT_LEAD_MS + 2);
        w
    }

    fn draw_permit(&self) {
        let rules = rules();
        drop(black_box(
            now(self.pacer.acquire(PermitRequest {
                bucket_id: "org_123:apollo",
                rate_scope_token: None,
                rules: &rules,
                signal: None,
            }))
            .unwrap(),
        ));
    }
}

struct Case {
    name: &'static str,
    /// Runs `n` operations (after any untimed warm-up) and times them.
    batch: Box<dyn FnMut(usize) -> Duration>,
}

fn timed(n: usize, mut op: impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        op();
    }
    start.elapsed()
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();

    cases.push(Case {
        name: "governor: acquire_tool_slot + release, cached permit",
        batch: Box::new(|n| {
            let w = World::warm();
            timed(n, || {
                let mut lease = now(w.governor.acquire_tool_slot(TOOL, None)).unwrap();
                lease.release();
                drop(black_box(lease));
            })
        }),
    });

    cases.push(Case {
        name: "  of which the pacer: draw a cached permit",
        batch: Box::new(|n| {
            let w = World::warm();
            timed(n, || w.draw_permit())
        }),
    });

    let w = World::new();
    cases.push(Case {
        name: "  of which the budget: charge toolCall in memory",
        batch: Box::new(move |n| {
            timed(n, || {
                now(w.governor.charge_budget(BudgetKind::ToolCall, 1)).unwrap();
            })
        }),
    });

    let slots = Slots::new(6);
    cases.push(Case {
        name: "  of which the slots: acquire + release",
        batch: Box::new(move |n| timed(n, || drop(black_box(now(slots.acquire(None)).unwrap())))),
    });

    cases
}

fn main() {
    let benchmarking = std::env::args().any(|a| a == "--bench");
    let (rounds, batches, batch) = if benchmarking {
        (ROUNDS, BATCHES_PER_ROUND, BATCH)
    } else {
        (1, 1, 1)
    };
    println!("| operation | ns/op (median of {rounds}) |");
    println!("|---|---|");
    for mut case in cases() {
        let mut round_ns: Vec<f64> = (0..rounds)
            .map(|_| {
                let total: Duration = (0..batches).map(|_| (case.batch)(batch)).sum();
                total.as_nanos() as f64 / (batches * batch) as f64
            })
            .collect();
        round_ns.sort_by(f64::total_cmp);
        println!("| {} | {:.0} |", case.name, round_ns[round_ns.len() / 2]);
    }
}
