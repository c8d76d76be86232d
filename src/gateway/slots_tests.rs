//! The kept slots' grants: streams, chains and fair shares.

use super::*;
use crate::gateway::lease_id::LeaseKey;
use crate::gateway::slot_claims::WAITERS_MEMORY_US;
use crate::protocol::{rules_signature, PacingRule};

/// A bucket whose kept leases are streamed.
fn bucket(limit: u64, max: u64) -> Bucket {
    let mut b = Bucket::new(0);
    let rules = [PacingRule::new(limit, 1_000).with_max_concurrency(max)];
    b.apply_rules(&rules, rules_signature(&rules), 0);
    b.leases.streams.paced = false;
    b
}

fn ids() -> LeaseIds {
    LeaseIds::new(LeaseKey([1; 32]))
}

const TTL: Micros = 60_000_000;
const HORIZON: Micros = 86_400_000_000;

#[test]
fn each_slot_gets_its_share_of_every_window() {
    assert_eq!(bucket(20, 5).stream_spacing(), Some(250_000));
    assert_eq!(
        bucket(20, 6).stream_spacing(),
        Some(333_334),
        "3 calls a window per slot, 18 of the 20"
    );
    assert_eq!(
        bucket(4, 5).stream_spacing(),
        None,
        "fewer calls than slots"
    );
    assert_eq!(
        Bucket::new(0).stream_spacing(),
        None,
        "no concurrency bound"
    );
}

#[test]
fn a_bucket_whose_rate_is_cut_streams_no_slots_but_keeps_handing_out_paced_ones() {
    let mut b = bucket(20, 5);
    assert!(b.stream_spacing().is_some());
    b.penalize(1_000_000, 1_000_000, None);
    assert_eq!(
        b.stream_spacing(),
        None,
        "streamed calls leave the timeline: kept streams would not hear of the cut"
    );
    assert_eq!(
        b.slot_kind(SlotKind::Paced, 1_000_000),
        Some(true),
        "paced calls take the timeline's permits, which the cut paces"
    );
}

#[test]
fn new_leases_come_only_from_free_slots_and_a_client_left_with_none_waits() {
    let (mut ids, mut b) = (ids(), bucket(20, 3));
    let first = b.hand_slots(&[], 2, false, false, None, 0, 0, HORIZON, TTL, &mut ids);
    assert_eq!(first.new.len(), 2);
    let second = b.hand_slots(&[], 2, false, false, None, 0, 0, HORIZON, TTL, &mut ids);
    assert_eq!(second.new.len(), 1, "one slot was left");
    assert!(
        !b.leases.streams.contended(0),
        "a client with a slot is served by it"
    );
    let third = b.hand_slots(&[], 1, false, false, None, 0, 0, HORIZON, TTL, &mut ids);
    assert!(third.new.is_empty());
    assert!(b.leases.streams.contended(0), "a client with none waits");
    assert!(!b.leases.streams.contended(WAITERS_MEMORY_US));
}

#[test]
fn a_released_slot_starts_its_next_stream_no_earlier_than_its_last_allowed() {
    // One slot takes the whole rule: its calls are a twentieth of a
    // second apart.
    let (mut ids, mut b) = (ids(), bucket(20, 1));
    let legacy = b.grant(
        1, false, None, None, true, false, 0, 0, 1_000_000, TTL, &mut ids,
    );
    assert_eq!(legacy.times, [0]);
    let lease = legacy.lease_ids.unwrap();
    b.leases.release(&lease, 10_000, TTL);
    let kept = b.hand_slots(
        &[],
        1,
        false,
        false,
        None,
        20_000,
        20_000,
        HORIZON,
        TTL,
        &mut ids,
    );
    assert_eq!(kept.new[0].1, 50, "spaced from the slot's call at 0 ms");
    let pooled = vec![kept.new[0].0.clone()];
    b.leases.release(&pooled, 600_000, TTL);
    let next = b.hand_slots(
        &[],
        1,
        false,
        false,
        None,
        600_000,
        600_000,
        HORIZON,
        TTL,
        &mut ids,
    );
    assert_eq!(
        next.new[0].1, 600,
        "a kept lease's slot is ready at its release"
    );
}

#[test]
fn held_leases_are_renewed_for_a_full_ttl_and_unknown_ones_are_not_kept() {
    let (mut ids, mut b) = (ids(), bucket(20, 2));
    let ttl = 5_000_000;
    let held: Vec<String> = b
        .hand_slots(&[], 2, false, false, None, 0, 0, HORIZON, ttl, &mut ids)
        .new
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let mut asked = held.clone();
    asked.push(format_lease_id(99));
    let again = b.hand_slots(
        &asked, 0, false, false, None, 4_000_000, 4_000_000, HORIZON, ttl, &mut ids,
    );
    assert_eq!(again.kept, held);
    assert_eq!(b.leases.live(ttl + 1), 2, "renewed past the first TTL");
    assert_eq!(b.leases.live(4_000_000 + ttl), 0);
}

#[test]
fn while_others_wait_a_chain_is_renewed_only_up_to_its_limit() {
    let (mut ids, mut b) = (ids(), bucket(20, 1));
    let held = vec![b
        .hand_slots(&[], 1, false, false, None, 0, 0, HORIZON, TTL, &mut ids)
        .new[0]
        .0
        .clone()];
    let late = MAX_CHAIN_US + 1;
    let alone = b.hand_slots(
        &held, 0, false, false, None, late, late, HORIZON, TTL, &mut ids,
    );
    assert_eq!(alone.kept, held, "nobody waits: the chain goes on");
    let refused = ask_as_older(&mut b, &mut ids, 1, late);
    assert!(refused.new.is_empty() && refused.kept.is_empty());
    let contended = b.hand_slots(
        &held,
        0,
        false,
        false,
        None,
        late + 1,
        late + 1,
        HORIZON,
        TTL,
        &mut ids,
    );
    assert!(contended.kept.is_empty(), "its chain is over: it goes back");
    assert_eq!(b.leases.live(late + 1), 1, "counted until it is released");
}

#[test]
fn while_others_wait_slots_go_one_at_a_time_and_never_back_to_their_giver() {
    let (mut ids, mut b) = (ids(), bucket(20, 3));
    b.leases.streams.refused(0);
    let giver = b.hand_slots(&[], 2, true, false, None, 1, 1, HORIZON, TTL, &mut ids);
    assert!(giver.new.is_empty(), "what it gave back is for the others");
    let first = b.hand_slots(&[], 2, false, false, None, 1, 1, HORIZON, TTL, &mut ids);
    assert_eq!(first.new.len(), 1, "one at a time");
    let held = vec![first.new[0].0.clone()];
    let again = b.hand_slots(&held, 2, false, false, None, 2, 2, HORIZON, TTL, &mut ids);
    assert_eq!((again.kept.len(), again.new.len()), (1, 1));
}

/// An older client (no claim) holding no slot asks for `wanted` at `now`.
fn ask_as_older(b: &mut Bucket, ids: &mut LeaseIds, wanted: u64, now: Micros) -> SlotGrant {
    b.hand_slots(&[], wanted, false, false, None, now, now, HORIZON, TTL, ids)
}

/// A client showing a claim: asks for `wanted` more while holding
/// `held` at `now`; returns its claim and what it holds after.
fn ask(
    b: &mut Bucket,
    ids: &mut LeaseIds,
    claim: u64,
    held: &[String],
    wanted: u64,
    now: Micros,
) -> (u64, Vec<String>) {
    let g = b.hand_slots(
        held,
        wanted,
        false,
        false,
        Some(claim),
        now,
        now,
        HORIZON,
        TTL,
        ids,
    );
    let mut holds = g.kept;
    holds.extend(g.new.into_iter().map(|(id, _)| id));
    (g.claim.expect("a claim shown is answered").claim, holds)
}

#[test]
fn a_client_over_its_share_gives_back_chains_down_to_its_keep_while_another_wants() {
    let (mut ids, mut b) = (ids(), bucket(20, 10));
    let (a, a_holds) = ask(&mut b, &mut ids, 0, &[], 4, 0);
    let (_, b_holds) = ask(&mut b, &mut ids, 0, &[], 4, 0);
    let (c, c_holds) = ask(&mut b, &mut ids, 0, &[], 4, 0);
    assert_eq!((a_holds.len(), b_holds.len(), c_holds.len()), (4, 4, 2));
    let late = MAX_CHAIN_US;
    let (_, a_after) = ask(&mut b, &mut ids, a, &a_holds, 0, late);
    assert_eq!(a_after.len(), 3, "10 slots among 3: 3 kept, one moving");
    let (_, a_again) = ask(&mut b, &mut ids, a, &a_after, 0, late + 1);
    assert_eq!(a_again, a_after, "its kept chains start over");
    let (_, c_after) = ask(&mut b, &mut ids, c, &c_holds, 2, late + 2);
    assert_eq!(c_after.len(), 2, "the slot A gave is still in its call");
    b.leases.release(&a_holds[..1], late + 3, TTL);
    let (_, c_after) = ask(&mut b, &mut ids, c, &c_after, 2, late + 4);
    assert_eq!(c_after.len(), 3);
}

#[test]
fn a_free_slot_goes_to_a_client_under_its_keep_before_one_at_it() {
    let (mut ids, mut b) = (ids(), bucket(20, 7));
    let (a, a_holds) = ask(&mut b, &mut ids, 0, &[], 5, 0);
    let (c, c_holds) = ask(&mut b, &mut ids, 0, &[], 5, 0);
    assert_eq!(c_holds.len(), 2);
    b.leases.release(&a_holds[..2], 1, TTL);
    // Both want 5 of 7: three each and the odd one moving round. A
    // holds three, C two.
    let (_, a_after) = ask(&mut b, &mut ids, a, &a_holds[2..], 2, 2);
    assert_eq!(a_after.len(), 3, "at its keep while C is under its own");
    let (_, c_after) = ask(&mut b, &mut ids, c, &c_holds, 3, 3);
    assert_eq!(c_after.len(), 4, "its keep, and the odd slot");
}

/// Bug: any well-formed id a client named as held started a chain
/// entry, live lease or not, and nothing ever removed it: a client could
/// grow the table by a batch of made-up ids per request.
#[test]
fn ids_that_are_no_live_lease_start_no_chain_bug_made_up_ids_grew_the_table() {
    let (mut ids, mut b) = (ids(), bucket(20, 2));
    let made_up: Vec<String> = (0..50).map(|_| format_lease_id(ids.next_id())).collect();
    let answer = b.hand_slots(
        &made_up, 0, false, false, None, 0, 0, HORIZON, TTL, &mut ids,
    );
    assert!(answer.kept.is_empty());
    assert!(
        b.leases.streams.chains.is_empty(),
        "{} chains",
        b.leases.streams.chains.len()
    );
}

#[test]
fn an_older_client_waiting_with_none_takes_chains_back_from_clients_with_claims() {
    let (mut ids, mut b) = (ids(), bucket(20, 2));
    let (a, held) = ask(&mut b, &mut ids, 0, &[], 2, 0);
    let late = MAX_CHAIN_US;
    let older = ask_as_older(&mut b, &mut ids, 1, late);
    assert!(older.new.is_empty());
    let (_, after) = ask(&mut b, &mut ids, a, &held, 0, late + 1);
    assert!(after.is_empty(), "both chains ran their length: {after:?}");
}
