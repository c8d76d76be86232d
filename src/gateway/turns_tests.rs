//! Tests of turns: how long refused clients wait, and who waits.

use super::*;
use crate::gateway::lease_id::{LeaseIds, LeaseKey};
use crate::protocol::PacingRule;

const S: Micros = 1_000_000;

/// Bug: only asks without leases looked at the bucket's rate for
/// turns sized by callers, so a limit the provider stated (or a cut,
/// or a pause) that came and went while only leased asks arrived was
/// never seen: the next ask without leases (a client of paced slots)
/// started fair turns at once, where one that saw it waits 30 s.
#[test]
fn a_stated_limit_only_leased_asks_saw_still_keeps_turns_whole_for_30_s_bug_leased_asks_skipped_it()
{
    let rules = [PacingRule::new(20, 1_000).with_max_concurrency(10)];
    let mut b = Bucket::new(0);
    b.apply_rules(&rules, "20/s, 10 at once".into(), 0);
    let mut ids = LeaseIds::new(LeaseKey([1; 32]));
    let mut leased = |b: &mut Bucket, now: Micros| {
        let one = Ask {
            wanted: 1,
            callers: 1,
            leased: true,
            ..Ask::default()
        };
        let g = one.at(b, now, &mut ids);
        assert_eq!(g.times.len(), 1);
    };
    leased(&mut b, S);
    let state_limit = |b: &mut Bucket, rps, at| {
        b.adaptive
            .as_mut()
            .expect("rules applied")
            .state_limit(rps, at)
    };
    state_limit(&mut b, 10.0, 2 * S);
    leased(&mut b, 2 * S);
    state_limit(&mut b, 20.0, 3 * S);
    assert!(!b.adaptive.as_ref().unwrap().is_reduced());
    assert!(!b.fair_turns(10 * S));
    assert!(
        !b.fair_turns(12 * S),
        "30 s after the limit was seen, not a warm-up after the first ask without leases"
    );
    assert!(b.fair_turns(32 * S), "and on once those are past");
}

/// A bucket of 20/s with `max` slots.
fn slots_of(max: u64) -> Bucket {
    let rules = [PacingRule::new(20, 1_000).with_max_concurrency(max)];
    let mut b = Bucket::new(0);
    b.apply_rules(&rules, format!("20/s, {max} at once"), 0);
    b
}

/// What a client asks for, seeing a horizon of 1 s, with leases of 5 s.
#[derive(Default)]
struct Ask {
    wanted: u64,
    /// Its callers waiting.
    callers: u64,
    book_next_turn: bool,
    leased: bool,
    asks_slots: bool,
}

impl Ask {
    fn at(self, b: &mut Bucket, now: Micros, ids: &mut LeaseIds) -> Grant {
        b.grant(
            self.wanted,
            self.book_next_turn,
            Some(self.callers),
            None,
            self.leased,
            self.asks_slots,
            now,
            now,
            now + S,
            5 * S,
            ids,
        )
    }
}

/// An ask for `n` permits by a client that keeps slots and has `n`
/// callers waiting, granted a lease per permit.
fn ask_for_slots(b: &mut Bucket, n: u64, now: Micros, ids: &mut LeaseIds) -> Grant {
    let ask = Ask {
        wanted: n,
        callers: n,
        leased: true,
        asks_slots: true,
        ..Ask::default()
    };
    ask.at(b, now, ids)
}

/// Bug: a client that asks for streamed slots while the rate is cut
/// is granted a lease per permit, and when every slot was held it was
/// told to look again within 25-100 ms, though the cut rate frees a
/// slot for a new permit only once per spacing: a fleet of eight such
/// clients made 14.8 gateway round trips per permit. Refused clients
/// now take turns at the slots one spacing apart.
#[test]
fn clients_refused_slots_under_a_cut_come_back_a_spacing_apart_bug_all_polled_within_100_ms() {
    let mut b = slots_of(5);
    let adaptive = b.adaptive.as_mut().expect("rules applied");
    adaptive.state_limit(10.0, 0);
    b.leases.hold_us = Some(300_000);
    let mut ids = LeaseIds::new(LeaseKey([1; 32]));
    let mut ask = |b: &mut Bucket, now: Micros| ask_for_slots(b, 5, now, &mut ids);
    assert_eq!(ask(&mut b, S).times.len(), 5, "the five slots");
    let waits: Vec<u64> = (0..3)
        .map(|_| {
            let refused = ask(&mut b, S + 10_000);
            assert!(refused.times.is_empty());
            refused.wait_ms
        })
        .collect();
    // The first lease's permit is at 1 s and its call ends 300 ms
    // later; the next slot frees 100 ms after that at 10/s.
    assert_eq!(waits, [290, 390, 490], "turns a spacing apart");
}

/// Bug: a client that asks for kept slots and is refused a lease per
/// permit for want of a slot (the rate cut, or the bucket turning
/// kind) was not counted as waiting, so isolates keeping paced slots
/// were never told others wait and kept their idle ones: after a
/// provider's outage two such isolates held all five slots while six
/// others asked for streamed ones.
#[test]
fn a_client_refused_a_leased_permit_for_want_of_a_slot_counts_as_waiting_bug_keepers_never_heard() {
    let mut b = slots_of(2);
    let mut ids = LeaseIds::new(LeaseKey([1; 32]));
    let mut ask = |b: &mut Bucket, now: Micros| ask_for_slots(b, 2, now, &mut ids);
    assert_eq!(ask(&mut b, S).times.len(), 2, "both slots");
    assert!(!b.leases.streams.contended(S));
    assert!(ask(&mut b, S + 10_000).times.is_empty());
    assert!(
        b.leases.streams.contended(S + 10_000),
        "the refused client waits"
    );
}

/// Bug: a client that gives back the permits its callers did not come
/// for forgets the turn it was booked for its next block, but the turn
/// stayed in the bucket's tally of turns booked ahead, so the next client
/// was booked behind it and the timeline idled through the stretch nobody
/// came for (in the fleet simulation, isolates that gave back most of
/// their first blocks left it idle for 0.7 s while every other isolate
/// was booked 3 s out). Each time taken back now shortens the tally by a
/// permit's spacing.
#[test]
fn times_given_back_shorten_the_turns_booked_ahead_bug_a_forgotten_turn_left_the_timeline_idle() {
    let next_turn_ms = |gives_back: bool| {
        let mut b = Bucket::new(0);
        b.apply_rules(&[PacingRule::new(20, 1_000)], "20/s".into(), 0);
        let mut ids = LeaseIds::new(LeaseKey([1; 32]));
        let mut ask = |b: &mut Bucket, wanted: u64, now: Micros| {
            let ask = Ask {
                wanted,
                callers: 2,
                book_next_turn: true,
                ..Ask::default()
            };
            ask.at(b, now, &mut ids)
        };
        // The bucket's first second: its turns are whole horizons.
        ask(&mut b, 1, 0);
        let first = ask(&mut b, 40, 2 * S);
        assert_eq!(first.times.len(), 21, "a whole horizon at 20/s");
        for client in 1..4 {
            let refused = ask(&mut b, 40, 2 * S + client * 1_000);
            assert!(refused.times.is_empty(), "booked a turn behind the first");
        }
        if gives_back {
            b.take_back(&first.times[5..], 2_004);
        }
        let next = ask(&mut b, 40, 2 * S + 5_000);
        assert_eq!(next.times.len(), usize::from(gives_back) * 7);
        next.wait_ms
    };
    let (kept, given_back) = (next_turn_ms(false), next_turn_ms(true));
    assert_eq!(
        kept - given_back,
        16 * 50,
        "16 permits given back, 50 ms apart: the next turn is that much sooner"
    );
}
