//! Random interleavings of every gateway operation from up to 64 clients,
//! checked against the scheduler's invariants:
//! (a) per rule, no half-open window of `windowMs` holds more than
//!     `requestsPerWindow` scheduled times;
//! (b) live leases never exceed `maxConcurrency`;
//! (c) every lease is released or expires by its TTL;
//! (d) a budget counter equals the sum of distinct accepted reservations and
//!     never exceeds its limit;
//! (e) no time is earlier than the request's `nowMs` plus the dispatch lead
//!     it asked for, or later than its horizon, nor earlier than any
//!     cooldown announced before it.
//!
//! Clients also give back times they hold (on an acquire or alone); a
//! returned time leaves the model's live set, and if the gateway grants it
//! again it comes back in, so (a) proves returned times never crowd a
//! window.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::collections::{BTreeMap, HashMap};

use common::gateway::{acquire, densest_window, penalize, release};
use paceline::gateway::{GatewayConfig, GatewayCore};
use paceline::protocol::{BudgetCharge, ChargeRequest, PacingRule};
use paceline::sim::T0;
use paceline::ErrorCode;
use proptest::prelude::*;

const HORIZON_MS: u64 = 1_000;
const LEASE_TTL_MS: u64 = 4_000;
const BUCKET: &str = "org:provider";
const BUDGET_KEYS: [&str; 3] = ["toolCall", "retry", "playCall"];
const BUDGET_LIMIT: u64 = 40;

#[derive(Debug, Clone)]
enum Op {
    Acquire {
        client: usize,
        requested: u64,
        successes: u64,
        lead_ms: u64,
        returns: usize,
    },
    Return {
        client: usize,
        count: usize,
    },
    /// A confused client: returns again what it gave back already, and
    /// times nobody was granted. The model's live set does not change.
    ReturnAgain {
        client: usize,
        offset_ms: u64,
    },
    Release {
        client: usize,
        count: usize,
    },
    Die {
        client: usize,
    },
    Penalize {
        cooldown_ms: u64,
    },
    Advance {
        ms: u64,
    },
    JumpBack {
        ms: u64,
    },
    SnapshotRestore,
    Charge {
        run: usize,
        reservation: usize,
        key: usize,
        amount: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..64usize, 1..=30u64, 0..40u64, 0..60u64, 0..4usize)
            .prop_map(|(client, requested, successes, lead_ms, returns)| Op::Acquire {
                client, requested, successes, lead_ms, returns,
            }),
        2 => (0..64usize, 0..8usize).prop_map(|(client, count)| Op::Return { client, count }),
        1 => (0..64usize, 0..900u64).prop_map(|(client, offset_ms)| Op::ReturnAgain { client, offset_ms }),
        3 => (0..64usize, 0..6usize).prop_map(|(client, count)| Op::Release { client, count }),
        1 => (0..64usize).prop_map(|client| Op::Die { client }),
        1 => (1..3_000u64).prop_map(|cooldown_ms| Op::Penalize { cooldown_ms }),
        4 => (0..1_500u64).prop_map(|ms| Op::Advance { ms }),
        1 => (0..5_000u64).prop_map(|ms| Op::JumpBack { ms }),
        1 => Just(Op::SnapshotRestore),
        3 => (0..3usize, 0..12usize, 0..3usize, 1..6u64)
            .prop_map(|(run, reservation, key, amount)| Op::Charge { run, reservation, key, amount }),
    ]
}

fn rules() -> impl Strategy<Value = Vec<PacingRule>> {
    let rule = (1..=40u64, prop::sample::select(vec![100u64, 1_000, 2_500]))
        .prop_map(|(n, w)| PacingRule::new(n, w));
    (
        rule.clone(),
        prop::option::of(rule),
        prop::option::of(1..=8u64),
    )
        .prop_map(|(first, second, max_concurrency)| {
            let mut first = first;
            first.max_concurrency = max_concurrency;
            [Some(first), second].into_iter().flatten().collect()
        })
}

struct Lease {
    id: String,
    expires_at: u64,
    released: bool,
}

/// What the test knows independently of the gateway.
struct Model {
    times: Vec<u64>,
    leases: Vec<Lease>,
    held: HashMap<usize, Vec<usize>>,
    max_now: u64,
    cooldown_until: u64,
    counters: HashMap<usize, BTreeMap<String, u64>>,
    reservations: HashMap<(usize, usize), Vec<BudgetCharge>>,
    /// Granted times each client holds and has not given back.
    held_times: HashMap<usize, Vec<u64>>,
    /// Times each client gave back.
    returned: HashMap<usize, Vec<u64>>,
}

impl Model {
    /// Up to `count` of the client's times still ahead of `now`, taken out
    /// of the live set: the client will not send them.
    fn give_back(&mut self, client: usize, count: usize, now: u64) -> Vec<u64> {
        let held = self.held_times.entry(client).or_default();
        let mut back = Vec::new();
        held.retain(|&t| {
            if back.len() < count && t > now {
                back.push(t);
                false
            } else {
                true
            }
        });
        for t in &back {
            let at = self.times.iter().position(|x| x == t).expect("a live time");
            self.times.swap_remove(at);
        }
        self.returned.entry(client).or_default().extend(&back);
        back
    }

    fn live_leases(&self) -> usize {
        self.leases
            .iter()
            .filter(|l| !l.released && l.expires_at > self.max_now)
            .count()
    }
}

fn config() -> GatewayConfig {
    GatewayConfig {
        horizon_ms: HORIZON_MS,
        lease_ttl_ms: LEASE_TTL_MS,
        ..GatewayConfig::default()
    }
}

fn run(rules: Vec<PacingRule>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let max_concurrency = rules.iter().filter_map(|r| r.max_concurrency).min();
    let mut g = GatewayCore::new(config(), 42).unwrap();
    let mut now = T0;
    let mut m = Model {
        times: Vec::new(),
        leases: Vec::new(),
        held: HashMap::new(),
        max_now: now,
        cooldown_until: 0,
        counters: HashMap::new(),
        reservations: HashMap::new(),
        held_times: HashMap::new(),
        returned: HashMap::new(),
    };
    for op in ops {
        m.max_now = m.max_now.max(now);
        match op {
            Op::Acquire {
                client,
                requested,
                successes,
                lead_ms,
                returns,
            } => {
                let mut req = acquire(BUCKET, &rules, requested);
                req.observed_successes = successes;
                req.dispatch_lead_ms = Some(lead_ms);
                req.returned_at_ms = m.give_back(client, returns, now);
                let r = g.acquire(&req, now).unwrap();
                let times = r.scheduled_at_ms.clone().unwrap();
                prop_assert_eq!(times.len() as u64, r.granted);
                prop_assert!(r.granted <= requested);
                let lead = lead_ms.min(HORIZON_MS / 2);
                for &t in &times {
                    prop_assert!(
                        t >= now + lead,
                        "(e) time {} before now {} + lead {}",
                        t,
                        now,
                        lead
                    );
                    prop_assert!(
                        t <= now + HORIZON_MS,
                        "(e) time {} past the horizon of {}",
                        t,
                        now
                    );
                    prop_assert!(
                        t >= m.cooldown_until,
                        "(e) time {} inside a cooldown to {}",
                        t,
                        m.cooldown_until
                    );
                }
                if r.granted == 0 {
                    prop_assert!(r.wait_ms >= 1);
                }
                match (max_concurrency, r.lease_ids) {
                    (Some(max), Some(ids)) => {
                        prop_assert_eq!(ids.len(), times.len());
                        for (id, t) in ids.into_iter().zip(&times) {
                            prop_assert!(
                                m.leases.iter().all(|l| l.id != id),
                                "lease id {} reused",
                                id
                            );
                            m.held.entry(client).or_default().push(m.leases.len());
                            m.leases.push(Lease {
                                id,
                                expires_at: t + LEASE_TTL_MS,
                                released: false,
                            });
                        }
                        prop_assert!(
                            m.live_leases() <= max as usize,
                            "(b) {} live leases over {}",
                            m.live_leases(),
                            max
                        );
                    }
                    (None, None) => {}
                    (expected, got) => {
                        prop_assert!(false, "leases {:?} for max {:?}", got, expected)
                    }
                }
                m.held_times.entry(client).or_default().extend(&times);
                m.times.extend(times);
            }
            Op::Return { client, count } => {
                let mut req = release(BUCKET, &rules, Vec::new());
                req.returned_at_ms = m.give_back(client, count, now);
                g.release(&req, now).unwrap();
            }
            Op::ReturnAgain { client, offset_ms } => {
                let mut req = release(BUCKET, &rules, Vec::new());
                // Only times nobody holds now: the gateway cannot tell who
                // holds a time, so returns are trusted within a bucket's
                // scope, and one granted to someone since is theirs.
                req.returned_at_ms = m
                    .returned
                    .get(&client)
                    .into_iter()
                    .flatten()
                    .filter(|t| !m.times.contains(t))
                    .copied()
                    .collect();
                let invented = now + offset_ms;
                if !m.times.contains(&invented) {
                    req.returned_at_ms.push(invented);
                }
                g.release(&req, now).unwrap();
            }
            Op::Release { client, count } => {
                let held = m.held.entry(client).or_default();
                let take = count.min(held.len());
                let chosen: Vec<usize> = held.drain(..take).collect();
                let ids = chosen.iter().map(|&i| m.leases[i].id.clone()).collect();
                let expected = chosen
                    .iter()
                    .filter(|&&i| m.leases[i].expires_at > m.max_now)
                    .count() as u64;
                let r = g.release(&release(BUCKET, &rules, ids), now).unwrap();
                prop_assert!(r.released <= take as u64);
                prop_assert!(
                    r.released >= expected,
                    "released {} of {} unexpired",
                    r.released,
                    expected
                );
                for i in chosen {
                    m.leases[i].released = true;
                }
            }
            Op::Die { client } => {
                // Its times stay live: it may have sent them before it died.
                m.held.remove(&client);
                m.held_times.remove(&client);
            }
            Op::Penalize { cooldown_ms } => {
                // The gateway sits the whole bucket out only for an
                // overload (a 429 it takes for noise, or for a failed probe
                // it answers with a cut, holds only the refused call); a
                // cooldown it announces never shrinks and binds every grant.
                let r = g.penalize(&penalize(BUCKET, cooldown_ms), now).unwrap();
                prop_assert!(r.cooldown_until_ms >= m.cooldown_until);
                prop_assert!(r.cooldown_until_ms <= m.cooldown_until.max(now + cooldown_ms));
                m.cooldown_until = m.cooldown_until.max(r.cooldown_until_ms);
            }
            Op::Advance { ms } => now += ms,
            Op::JumpBack { ms } => now -= ms,
            Op::SnapshotRestore => {
                g = GatewayCore::restore(&g.snapshot(), config()).unwrap();
            }
            Op::Charge {
                run,
                reservation,
                key,
                amount,
            } => {
                let charges = vec![BudgetCharge {
                    key: BUDGET_KEYS[key].into(),
                    amount,
                    limit: BUDGET_LIMIT,
                }];
                let req = ChargeRequest {
                    root_run_id: format!("run{run}"),
                    reservation_id: format!("res{reservation}"),
                    run_scope_token: None,
                    charges: charges.clone(),
                    resent: false,
                };
                let result = g.charge(&req, now);
                match m.reservations.get(&(run, reservation)) {
                    Some(first) if *first != charges => {
                        prop_assert_eq!(result.unwrap_err().code, ErrorCode::InvalidInput);
                    }
                    Some(_) => {
                        // A retry: counted once already; the answer is the first one.
                        let counters = &m.counters.entry(run).or_default();
                        if let Ok(r) = result {
                            prop_assert!(
                                r.counters[BUDGET_KEYS[key]] <= counters[BUDGET_KEYS[key]]
                            );
                        }
                    }
                    None => {
                        m.reservations.insert((run, reservation), charges);
                        let counters = m.counters.entry(run).or_default();
                        let count = counters.entry(BUDGET_KEYS[key].into()).or_insert(0);
                        if *count + amount > BUDGET_LIMIT {
                            let e = result.unwrap_err();
                            prop_assert_eq!(e.code, ErrorCode::BudgetExceeded);
                        } else {
                            *count += amount;
                            let r = result.unwrap();
                            prop_assert_eq!(r.counters[BUDGET_KEYS[key]], *count, "(d)");
                        }
                        prop_assert!(*count <= BUDGET_LIMIT, "(d) over the limit");
                    }
                }
            }
        }
    }
    for rule in &rules {
        let densest = densest_window(&m.times, rule.window_ms);
        prop_assert!(
            densest as u64 <= rule.requests_per_window,
            "(a) {} times in one {} ms window, limit {}",
            densest,
            rule.window_ms,
            rule.requests_per_window
        );
    }
    let after_every_ttl = m.max_now + HORIZON_MS + LEASE_TTL_MS + 1;
    let view = g.bucket(BUCKET, None, after_every_ttl).unwrap();
    if let Some(view) = view {
        prop_assert_eq!(view.live_leases, 0, "(c) a lease outlived its TTL");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1_000, ..ProptestConfig::default() })]

    #[test]
    fn scheduler_invariants_hold_under_any_interleaving(
        rules in rules(),
        ops in prop::collection::vec(op(), 1..200),
    ) {
        run(rules, ops)?;
    }
}
