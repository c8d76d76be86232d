//! A gateway restored from its snapshot keeps every time, lease and
//! budget count; a corrupt or foreign snapshot is refused with a reason.

use crate::common::gateway::{acquire, penalize, release};
use crate::{charge, core, per_second};
use paceline::gateway::{GatewayConfig, GatewayCore};
use paceline::sim::T0;
use paceline::ErrorCode;

#[test]
fn a_restored_gateway_never_regrants_a_time_and_keeps_leases_and_budgets() {
    let mut g = core();
    let rules = [per_second(20).with_max_concurrency(10)];
    let before = g.acquire(&acquire("org:p", &rules, 4), T0).unwrap();
    g.penalize(&penalize("org:q", 1_000), T0).unwrap();
    g.charge(&charge("run", "r1", &[("toolCall", 1, 5)]), T0)
        .unwrap();
    let bytes = g.snapshot();
    let mut back = GatewayCore::restore(&bytes, GatewayConfig::default()).unwrap();
    assert_eq!(back.snapshot(), bytes, "equal states give equal bytes");
    let after = back.acquire(&acquire("org:p", &rules, 1), T0).unwrap();
    assert_eq!(after.scheduled_at_ms.unwrap(), [T0 + 200]);
    let leases = before.lease_ids.unwrap();
    let released = back
        .release(&release("org:p", &rules, leases.clone()), T0)
        .unwrap();
    assert_eq!(released.released, 4);
    assert!(
        !leases.contains(&after.lease_ids.unwrap()[0]),
        "ids continue, never repeat"
    );
    let retried = back
        .charge(&charge("run", "r1", &[("toolCall", 1, 5)]), T0)
        .unwrap();
    assert_eq!(
        retried.counters["toolCall"], 1,
        "a retry after restore counts once"
    );
    let q = back
        .acquire(&acquire("org:q", &[per_second(10)], 1), T0)
        .unwrap();
    assert_eq!(
        q.scheduled_at_ms.unwrap(),
        [T0 + 1_000],
        "cooldown survived"
    );
}

#[test]
fn corrupt_or_foreign_snapshots_are_refused_with_a_reason() {
    let mut g = core();
    g.acquire(&acquire("org:p", &[per_second(20)], 2), T0)
        .unwrap();
    let bytes = g.snapshot();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", vec![], "truncated"),
        (
            "foreign",
            b"{\"json\":1}".to_vec(),
            "not a paceline gateway snapshot",
        ),
        (
            "newer version",
            [b"PCLN".as_slice(), &[9]].concat(),
            "format version 9",
        ),
        ("truncated", bytes[..bytes.len() - 3].to_vec(), "checksum"),
        ("cut to its envelope", bytes[..7].to_vec(), "truncated"),
        (
            "trailing bytes",
            [bytes.as_slice(), &[0]].concat(),
            "checksum",
        ),
        (
            "version 1 with trailing bytes",
            [
                include_bytes!("../fixtures/gateway-snapshot-v1.bin").as_slice(),
                &[0],
            ]
            .concat(),
            "after its end",
        ),
    ];
    for (what, input, says) in cases {
        let e = GatewayCore::restore(&input, GatewayConfig::default()).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput, "{what}");
        assert!(e.message.contains(says), "{what}: {}", e.message);
    }
}
