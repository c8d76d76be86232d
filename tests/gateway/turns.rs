//! Turns among contending clients sized by their callers (`waitingCallers`):
//! who takes its share and is booked its next turn, and when.

use crate::common::gateway::{acquire, penalize};
use crate::{core, per_second};
use paceline::gateway::GatewayCore;
use paceline::protocol::{AcquireRequest, AcquireResponse};
use paceline::sim::T0;

/// An ask for `requested` permits at 20/s from a client with `callers`
/// waiting on it, booking its next turn when it `books`.
fn ask(requested: u64, callers: u64, books: bool) -> AcquireRequest {
    let mut req = acquire("org:p", &[per_second(20)], requested);
    req.waiting_callers = Some(callers);
    req.book_next_turn = books;
    req
}

fn send(g: &mut GatewayCore, req: &AcquireRequest, at: u64) -> AcquireResponse {
    g.acquire(req, at).unwrap()
}

fn first_and_last(r: &AcquireResponse) -> (u64, u64) {
    let times = r.scheduled_at_ms.as_deref().unwrap_or_default();
    (times[0], times[times.len() - 1])
}

/// Past the bucket's warm-up, client A (4 callers draining its blocks)
/// holds the timeline T0+2000..=T0+3000 and is booked the next whole
/// horizon; client B, refused, is booked a turn of its callers' share
/// after it. Returns the bucket and when each is to come back.
fn two_booked_turns() -> (GatewayCore, u64, u64) {
    let mut g = core();
    send(&mut g, &ask(1, 1, false), T0);
    let a = send(&mut g, &ask(21, 4, true), T0 + 2_000);
    let b = send(&mut g, &ask(21, 4, true), T0 + 2_010);
    assert_eq!((a.granted, b.granted), (21, 0));
    (g, T0 + 2_000 + a.wait_ms, T0 + 2_010 + b.wait_ms)
}

/// Bug: a client refilling ahead of its block's end (it asks for more than
/// its waiting callers and books nothing) was granted all it asked
/// whenever the timeline had room, ahead of the turns booked for callers
/// already waiting, and came back whenever it liked: a fleet of paced
/// slots stayed off its turns for 25 s, with a tail wait of 2.8 x the
/// oracle's. Among booked turns it now takes its callers' share (7
/// permits, a third of a second) and is booked its next turn, after
/// theirs; at that turn it is served again, in line.
#[test]
fn a_refill_ahead_among_booked_turns_takes_its_share_and_a_turn_bug_it_took_permits_out_of_turn() {
    let (mut g, a_back, b_back) = two_booked_turns();
    let c = send(&mut g, &ask(8, 1, false), T0 + 2_500);
    assert_eq!(c.granted, 7, "its share among contending clients");
    let c_back = T0 + 2_500 + c.wait_ms;
    assert!(c_back > b_back, "booked after B: {c_back} vs {b_back}");
    let a2 = send(&mut g, &ask(21, 4, true), a_back);
    let b2 = send(&mut g, &ask(21, 4, true), b_back);
    let c2 = send(&mut g, &ask(8, 1, false), c_back);
    assert_eq!(c2.granted, 7, "served at its turn, not starved");
    assert!(c2.wait_ms > 0, "and booked again while others wait");
    let turns = [&a2, &b2, &c2].map(first_and_last);
    assert!(
        turns.windows(2).all(|w| w[0].1 < w[1].0),
        "the turns' permits follow in booking order: {turns:?}"
    );
}

#[test]
fn an_ask_for_just_the_waiting_callers_is_served_whole_without_a_turn() {
    let (mut g, _, _) = two_booked_turns();
    let lone = send(&mut g, &ask(1, 1, false), T0 + 2_500);
    assert_eq!((lone.granted, lone.wait_ms), (1, 0));
}

/// Bug: turns booked while an outage paused the bucket were spaced at its
/// probes' pace (one per `Retry-After`), so a refused client's horizon
/// turn held a probe interval per permit it could hold: with a 5 s
/// `Retry-After`, each client refused during the pause was booked 5 s
/// after the last, and a fleet refused through an outage was booked tens
/// of seconds out while the timeline idled after it. Turns are booked at
/// the rate the bucket resumes at: a horizon (21 permits at 20/s) each.
#[test]
fn turns_booked_during_an_outage_s_pause_hold_a_horizon_each_bug_a_probe_interval_per_permit() {
    let mut g = core();
    send(&mut g, &ask(21, 4, true), T0);
    // 429s with a 5 s Retry-After and no success between them: the
    // fourth pauses the bucket, one probe per 5 s.
    let mut t = T0 + 2_000;
    let paused_until = loop {
        let p = g.penalize(&penalize("org:p", 5_000), t).unwrap();
        if p.effective_requests_per_second == Some(0.2) {
            break p.cooldown_until_ms;
        }
        assert!(t < T0 + 30_000, "never paused");
        // The first 429 of a run may cut with no cooldown.
        t = p.cooldown_until_ms.max(t + 1_000);
    };
    let waits: Vec<u64> = (0..5)
        .map(|k| {
            let r = send(&mut g, &ask(21, 4, true), t + 10 + k);
            assert_eq!(r.granted, 0, "nothing but the probe in a pause");
            t + 10 + k + r.wait_ms
        })
        .collect();
    assert_eq!(waits[0], paused_until, "the first comes back for the probe");
    for pair in waits.windows(2) {
        let apart = pair[1] - pair[0];
        assert!(
            (1_000..=1_100).contains(&apart),
            "turns {apart} ms apart: {waits:?}"
        );
    }
}
