//! Bounded gateway state: idle buckets forgotten only when safe, a clock
//! that jumps back, too many rule sets.

use crate::common::gateway::{acquire, penalize};
use crate::{core, per_second};
use paceline::gateway::{GatewayConfig, GatewayCore};
use paceline::protocol::PacingRule;
use paceline::sim::{FakeClock, T0};
use paceline::time::Clock;
use paceline::ErrorCode;

#[test]
fn idle_buckets_are_forgotten_only_when_that_cannot_loosen_a_limit() {
    let config = GatewayConfig {
        max_buckets: 3,
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 1).unwrap();
    let clock = FakeClock::new(T0);
    let rules = [per_second(1)];
    g.acquire(&acquire("idle", &rules, 1), clock.now_ms())
        .unwrap();
    g.acquire(
        &acquire("leased", &[per_second(1).with_max_concurrency(1)], 1),
        clock.now_ms(),
    )
    .unwrap();
    g.acquire(&acquire("cut", &rules, 1), clock.now_ms())
        .unwrap();
    g.penalize(&penalize("cut", 10), clock.now_ms()).unwrap();
    clock.advance(1_500);
    g.acquire(&acquire("fourth", &rules, 1), clock.now_ms())
        .unwrap();
    assert_eq!(g.bucket_count(), 3, "only the idle bucket was forgotten");
    assert!(g.bucket("idle", None, clock.now_ms()).unwrap().is_none());
    assert!(g.bucket("leased", None, clock.now_ms()).unwrap().is_some());
    assert!(g.bucket("cut", None, clock.now_ms()).unwrap().is_some());
}

#[test]
fn a_bucket_made_after_an_eviction_never_schedules_before_the_forgotten_times() {
    let config = GatewayConfig {
        max_buckets: 2,
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 1).unwrap();
    g.acquire(&acquire("a", &[per_second(1)], 1), T0).unwrap();
    g.acquire(&acquire("b", &[per_second(1)], 1), T0 + 1_000)
        .unwrap();
    assert!(g.bucket("a", None, T0 + 1_000).unwrap().is_none());
    let back = g
        .acquire(&acquire("a", &[per_second(1)], 1), T0 - 60_000)
        .unwrap();
    assert!(back.granted == 0 || back.scheduled_at_ms.unwrap()[0] >= T0 + 1_000);
}

#[test]
fn a_clock_that_jumps_back_never_gets_a_time_already_handed_out() {
    let mut g = core();
    let rules = [per_second(20)];
    let first = g.acquire(&acquire("org:p", &rules, 5), T0).unwrap();
    let last = *first.scheduled_at_ms.unwrap().last().unwrap();
    let back = g
        .acquire(&acquire("org:p", &rules, 5), T0 - 10_000)
        .unwrap();
    assert_eq!(back.granted, 0);
    let forward = g.acquire(&acquire("org:p", &rules, 1), T0).unwrap();
    assert_eq!(forward.scheduled_at_ms.unwrap(), [last + 50]);
}

#[test]
fn too_many_distinct_rule_sets_are_refused_without_changing_the_bucket() {
    let mut g = core();
    for n in 1..=32 {
        g.acquire(&acquire("org:p", &[PacingRule::new(n, 60_000)], 1), T0)
            .unwrap();
    }
    let before = g.snapshot();
    let e = g
        .acquire(&acquire("org:p", &[PacingRule::new(99, 60_000)], 1), T0)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    assert!(
        e.message
            .contains("clients must agree on a provider's rules"),
        "{}",
        e.message
    );
    assert_eq!(g.snapshot(), before);
}
