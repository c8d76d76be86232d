//! Concurrency: leases that cap live permits, turns for callers refused
//! a slot, leases of dead clients, and rules changes that keep honouring
//! the old rule for a window.

use crate::common::gateway::{acquire, release};
use crate::{core, per_second};
use paceline::gateway::{GatewayConfig, GatewayCore};
use paceline::sim::T0;

#[test]
fn concurrency_leases_cap_live_permits_and_come_back_on_release() {
    let mut g = core();
    let rules = [per_second(20).with_max_concurrency(2)];
    let r = g.acquire(&acquire("org:p", &rules, 5), T0).unwrap();
    assert_eq!(r.granted, 2);
    let leases = r.lease_ids.unwrap();
    assert_eq!(leases.len(), 2);
    assert_ne!(leases[0], leases[1]);
    let full = g.acquire(&acquire("org:p", &rules, 1), T0).unwrap();
    assert_eq!(full.granted, 0);
    assert!(full.wait_ms >= 1 && full.wait_ms <= 100, "{}", full.wait_ms);
    let released = g
        .release(
            &release("org:p", &rules, vec![leases[0].clone(), "unknown".into()]),
            T0,
        )
        .unwrap();
    assert_eq!(released.released, 1);
    let again = g
        .release(&release("org:p", &rules, vec![leases[0].clone()]), T0)
        .unwrap();
    assert_eq!(again.released, 0, "releasing twice is a no-op");
    let next = g.acquire(&acquire("org:p", &rules, 5), T0).unwrap();
    assert_eq!(next.granted, 1);
}

#[test]
fn callers_refused_a_slot_take_turns_from_when_calls_usually_end() {
    let mut g = core();
    let rules = [per_second(20).with_max_concurrency(2)];
    let first = g.acquire(&acquire("org:p", &rules, 2), T0).unwrap();
    let leases = first.lease_ids.unwrap();
    g.release(&release("org:p", &rules, vec![leases[0].clone()]), T0 + 200)
        .unwrap();
    let third = g.acquire(&acquire("org:p", &rules, 1), T0 + 200).unwrap();
    assert_eq!(third.granted, 1, "the released slot is free again");
    let b = g.acquire(&acquire("org:p", &rules, 1), T0 + 200).unwrap();
    let c = g.acquire(&acquire("org:p", &rules, 1), T0 + 200).unwrap();
    assert_eq!((b.granted, c.granted), (0, 0));
    assert_eq!(
        b.wait_ms, 50,
        "the oldest call, sent at +50, usually ends 200 ms later"
    );
    assert_eq!(
        c.wait_ms, 75,
        "the next turn is a quarter of a slot's share of a hold later"
    );
}

#[test]
fn leases_of_a_dead_client_expire_after_the_ttl_past_their_dispatch_time() {
    let config = GatewayConfig {
        lease_ttl_ms: 5_000,
        ..GatewayConfig::default()
    };
    let mut g = GatewayCore::new(config, 1).unwrap();
    let rules = [per_second(20).with_max_concurrency(3)];
    let held = g.acquire(&acquire("org:p", &rules, 3), T0).unwrap();
    assert_eq!(held.scheduled_at_ms.unwrap(), [T0, T0 + 50, T0 + 100]);
    assert_eq!(
        g.acquire(&acquire("org:p", &rules, 3), T0 + 4_999)
            .unwrap()
            .granted,
        0
    );
    let partly = g.acquire(&acquire("org:p", &rules, 3), T0 + 5_050).unwrap();
    assert_eq!(
        partly.granted, 2,
        "two leases expired by T0+5050, one still lives"
    );
    let view = g.bucket("org:p", None, T0 + 5_050).unwrap().unwrap();
    assert_eq!(view.live_leases, 3);
    assert_eq!(view.max_concurrency, Some(3));
}

#[test]
fn a_looser_rules_change_still_honours_the_old_rule_for_one_window() {
    let mut g = core();
    let slow = [per_second(10)];
    let fast = [per_second(20)];
    let a = g.acquire(&acquire("org:p", &slow, 2), T0).unwrap();
    assert_eq!(a.scheduled_at_ms.unwrap(), [T0, T0 + 100]);
    let b = g.acquire(&acquire("org:p", &fast, 3), T0).unwrap();
    let times = b.scheduled_at_ms.unwrap();
    assert_eq!(
        times,
        [T0 + 200, T0 + 300, T0 + 400],
        "old 10/s still binds"
    );
    let later = g.acquire(&acquire("org:p", &fast, 2), T0 + 1_200).unwrap();
    let later = later.scheduled_at_ms.unwrap();
    assert_eq!(
        later[1] - later[0],
        50,
        "after the old window, the new pace"
    );
}

#[test]
fn a_stricter_rules_change_counts_the_permits_already_in_its_first_window() {
    let mut g = core();
    g.acquire(&acquire("org:p", &[per_second(20)], 2), T0)
        .unwrap();
    let b = g
        .acquire(&acquire("org:p", &[per_second(5)], 3), T0)
        .unwrap();
    // T0 and T0+50 are in the first window: three of the 5/s rule's five
    // permits are left for it, one interval (200 ms) apart before its end.
    assert_eq!(b.scheduled_at_ms.unwrap(), [T0 + 450, T0 + 650, T0 + 850]);
    assert_eq!(b.effective_requests_per_second, Some(5.0));
}
