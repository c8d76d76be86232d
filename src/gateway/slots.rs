//! Streamed concurrency slots. When a bucket bounds calls in flight to
//! `M` and every rule allows at least `M` calls a window, each slot is a
//! stream: two calls started on one slot are always at least the spacing
//! `s = (window + guard) / floor(limit / M)` apart (the adaptive rate's
//! `M / rps` if wider). A window then holds at most `floor(limit / M)`
//! calls of each slot, `M` slots at most the limit, whoever holds them and
//! whenever within the spacing they start. So a client may keep leases and
//! hand a freed one straight to its next caller, spacing the calls on each
//! lease itself, with no round trip per call: it renews what it holds now
//! and then, and asks for new leases only for callers that have none.
//!
//! A slot's stream runs across holders. A lease granted one per time (to
//! an older client) frees its slot for its next call at its time plus the
//! spacing; a kept lease is given back no sooner than the spacing after its
//! last call started, so its slot is ready when the release arrives; one
//! that lapses is ready at its expiry.
//!
//! Paced slots are the other way to keep leases, for clients whose calls
//! are short: a stream would leave each slot idle between its spaced calls
//! while the rate allows more. A paced lease is a bare semaphore slot, and
//! every call on it also takes a permit from the bucket's timeline, which
//! the same answers grant in blocks. A bucket's kept leases are all of one
//! kind: streamed calls are not on the timeline, so the two kinds mixed
//! would count a window twice over. The kind changes only when no kept lease
//! is live, and no call of the new kind shares a window with the old
//! kind's: paced slots wait for the streamed calls to leave every window,
//! streams start a window after the last permit the timeline granted.
//!
//! While the adaptive rate is cut (or paused, or capped by what the
//! provider said), slots are not streamed: each permit comes with a lease
//! of its own again, paced by the timeline, until the rate is back.
//!
//! Fairness: while callers elsewhere wait for a slot, a kept lease is
//! renewed only until its chain (the renewals since its grant) has lasted
//! [`MAX_CHAIN_US`]; a client that gives one back gets none in the same
//! request, and others get one at a time.
//! Refused clients are booked at the chain ends to come, each a little
//! after its slot is expected back (see `turns`).

use super::bucket::Bucket;
use super::leases::{format_lease_id, parse_lease_id, LeaseIds};
use super::slot_streams::MAX_CHAIN_US;
use super::timeline::{ceil_ms, interval_for_rps, Micros};
use crate::protocol::SlotKind;

/// How long a client that keeps slots, and wanted more than were free,
/// serves its callers with its own before it asks again.
pub(crate) const KEEPER_RETRY_MS: u64 = 1_000;

/// The slots one acquire leaves its client holding.
pub(crate) struct SlotGrant {
    /// Held leases renewed for another TTL.
    pub kept: Vec<String>,
    /// New leases with the time each may start its first call.
    pub new: Vec<(String, u64)>,
    /// Nobody waited for a slot before this client: the slots are held by
    /// clients that give them back when done, likely soon.
    pub first_waiter: bool,
}

impl Bucket {
    /// The spacing of each slot's stream, when the bucket's slots can be
    /// streamed: its rules bound concurrency to `M` and each allows at
    /// least `M` calls a window. Retiring rules count too.
    pub fn stream_spacing(&self) -> Option<Micros> {
        // A cut, paused or provider-capped rate moves with every answer,
        // and kept leases hear of it only when renewed: such a bucket
        // grants one lease per permit, as the timeline paces each.
        if self.leases.streams.paced || self.adaptive.as_ref().is_some_and(|a| a.is_reduced()) {
            return None;
        }
        self.streamable_spacing()
    }

    /// The kind of kept leases the bucket hands a client that asks for
    /// `asked`: `Some(true)` paced, `Some(false)` streamed, `None` when it
    /// keeps none of that kind now (the client is then granted one lease
    /// per permit). A client that has seen no call yet takes the kind the
    /// bucket hands out now. A bucket turns to the other kind only when no
    /// kept lease is live and none of the old kind's calls can still be in
    /// any window: streamed calls after a lease's first are not on the
    /// timeline, and paced calls are on no slot's stream.
    pub fn slot_kind(&mut self, asked: SlotKind, now: Micros) -> Option<bool> {
        self.max_concurrency()?;
        // While the rate is cut, paused or capped, every permit comes with
        // a lease of its own: the provider's count moves with every answer,
        // and a slot kept through a cut serves permits that die in its
        // cooldowns.
        if self.adaptive.as_ref().is_some_and(|a| a.is_reduced()) {
            return None;
        }
        let streams = &self.leases.streams;
        let paced = match asked {
            SlotKind::Paced => true,
            SlotKind::Streamed => false,
            SlotKind::Either => streams.asked_paced.unwrap_or(streams.paced),
        };
        if asked != SlotKind::Either {
            self.leases.streams.asked_paced = Some(paced);
        }
        let streams = &self.leases.streams;
        if streams.paced != paced {
            if !streams.chains.is_empty() {
                return None;
            }
            let window = self.longest_window_us();
            match paced {
                // Streamed calls after a lease's first ran until their
                // leases went back.
                true if streams.kept_ended_at.saturating_add(window) > now => return None,
                true => {}
                // Paced calls ran on the timeline's permits, granted up
                // to its last: streams start a window after it.
                false => {
                    let last = self.last_at.unwrap_or(0).max(now);
                    self.leases.streams.streams_from = last.saturating_add(window);
                }
            }
            self.leases.streams.paced = paced;
        }
        match paced {
            true => Some(true),
            false => self.stream_spacing().map(|_| false),
        }
    }

    /// The longest rule window with its guard.
    fn longest_window_us(&self) -> Micros {
        self.timelines
            .iter()
            .map(|t| t.interval_us.saturating_mul(t.requests_per_window))
            .max()
            .unwrap_or(0)
    }

    /// The spacing of each slot's stream, were the slots streamed.
    fn streamable_spacing(&self) -> Option<Micros> {
        let mut spacing = self.base_spacing()?;
        if let Some(rps) = self.effective_rps() {
            let max = self.max_concurrency()?.max(1);
            spacing = spacing.max(interval_for_rps(rps).saturating_mul(max));
        }
        (spacing > 0).then_some(spacing)
    }

    /// The streams' spacing the rules alone set (an adaptive rate only
    /// widens it).
    fn base_spacing(&self) -> Option<Micros> {
        let max = self.max_concurrency()?.max(1);
        let mut spacing: Micros = 0;
        for t in &self.timelines {
            let per_slot = t.requests_per_window / max;
            if per_slot == 0 {
                return None;
            }
            // `interval_us * limit` is the window with its guard, rounded up.
            let window = t.interval_us.saturating_mul(t.requests_per_window);
            spacing = spacing.max(window.div_ceil(per_slot));
        }
        (spacing > 0).then_some(spacing)
    }

    /// Renews the leases a client keeps (those it may keep) and grants it
    /// up to `wanted` more from the free slots. A paced lease starts no
    /// stream: its calls wait for the timeline's permits instead.
    #[allow(clippy::too_many_arguments)]
    pub fn hand_slots(
        &mut self,
        held: &[String],
        wanted: u64,
        giving_back: bool,
        paced: bool,
        now: Micros,
        earliest: Micros,
        horizon: Micros,
        lease_ttl: Micros,
        ids: &mut LeaseIds,
    ) -> SlotGrant {
        let contended = self.leases.streams.contended(now);
        let mut kept = Vec::new();
        for text in held {
            // An id that is not a live lease starts no chain: chains are
            // kept per lease, and a client naming made-up ids would grow
            // the table for as long as the bucket lives.
            let Some(id) = parse_lease_id(text).filter(|&id| self.leases.holds(id, now)) else {
                continue;
            };
            let started = *self.leases.streams.chains.entry(id).or_insert(now);
            let chain_over = contended && now.saturating_sub(started) >= MAX_CHAIN_US;
            if !chain_over && self.leases.renew(id, now, lease_ttl) {
                kept.push(text.clone());
            }
        }
        if !kept.is_empty() {
            // Calls go on on the kept slots: as far as the adaptive rate's
            // clock goes, the bucket is in use as if it granted now.
            self.last_at = Some(self.last_at.map_or(now, |last| last.max(now)));
        }
        let free = self
            .max_concurrency()
            .map_or(0, |max| max.saturating_sub(self.leases.live(now) as u64));
        let share = match contended {
            true if giving_back => 0,
            true => 1,
            false => wanted,
        };
        let granted = wanted.min(free).min(share);
        // Only a client left with no slot at all waits: one that keeps some
        // and wants more is served by its own, and is no reason to rotate.
        if granted == 0 && wanted > 0 && kept.is_empty() {
            self.leases.streams.refused(now);
        }
        let adaptive_interval = self.adaptive_interval();
        let mut new = Vec::with_capacity(granted as usize);
        for taken in 0..granted {
            if paced {
                let id = ids.next_id();
                self.leases.insert(id, now.saturating_add(lease_ttl));
                self.leases.streams.chains.insert(id, now);
                new.push((format_lease_id(id), ceil_ms(now)));
                continue;
            }
            if let Some(spacing) = self.base_spacing() {
                let floor = &mut self.leases.streams.spacing_floor_us;
                *floor = match *floor {
                    0 => spacing,
                    known => known.min(spacing),
                };
            }
            let ready = self.leases.streams.take_slot(now, free - taken);
            let at = self.next_free(ready.max(earliest));
            if at > horizon {
                self.leases.streams.untake(ready);
                break;
            }
            self.place(at, now, adaptive_interval);
            let id = ids.next_id();
            self.leases.insert(id, at.saturating_add(lease_ttl));
            self.leases.streams.chains.insert(id, now);
            new.push((format_lease_id(id), ceil_ms(at)));
        }
        SlotGrant {
            kept,
            new,
            first_waiter: !contended,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::leases::LeaseKey;
    use crate::gateway::slot_streams::WAITERS_MEMORY_US;
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
    fn a_bucket_whose_rate_is_cut_grants_one_lease_per_permit_again() {
        let mut b = bucket(20, 5);
        assert!(b.stream_spacing().is_some());
        b.penalize(1_000_000, 1_000_000);
        assert_eq!(
            b.stream_spacing(),
            None,
            "kept leases would not hear of the cut"
        );
    }

    #[test]
    fn new_leases_come_only_from_free_slots_and_a_client_left_with_none_waits() {
        let (mut ids, mut b) = (ids(), bucket(20, 3));
        let first = b.hand_slots(&[], 2, false, false, 0, 0, HORIZON, TTL, &mut ids);
        assert_eq!(first.new.len(), 2);
        let second = b.hand_slots(&[], 2, false, false, 0, 0, HORIZON, TTL, &mut ids);
        assert_eq!(second.new.len(), 1, "one slot was left");
        assert!(
            !b.leases.streams.contended(0),
            "a client with a slot is served by it"
        );
        let third = b.hand_slots(&[], 1, false, false, 0, 0, HORIZON, TTL, &mut ids);
        assert!(third.new.is_empty());
        assert!(b.leases.streams.contended(0), "a client with none waits");
        assert!(!b.leases.streams.contended(WAITERS_MEMORY_US));
    }

    #[test]
    fn a_released_slot_starts_its_next_stream_no_earlier_than_its_last_allowed() {
        // One slot takes the whole rule: its calls are a twentieth of a
        // second apart.
        let (mut ids, mut b) = (ids(), bucket(20, 1));
        let legacy = b.grant(1, false, None, true, false, 0, 0, 1_000_000, TTL, &mut ids);
        assert_eq!(legacy.times, [0]);
        let lease = legacy.lease_ids.unwrap();
        b.leases.release(&lease, 10_000, TTL);
        let kept = b.hand_slots(&[], 1, false, false, 20_000, 20_000, HORIZON, TTL, &mut ids);
        assert_eq!(kept.new[0].1, 50, "spaced from the slot's call at 0 ms");
        let pooled = vec![kept.new[0].0.clone()];
        b.leases.release(&pooled, 600_000, TTL);
        let next = b.hand_slots(
            &[],
            1,
            false,
            false,
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
            .hand_slots(&[], 2, false, false, 0, 0, HORIZON, ttl, &mut ids)
            .new
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let mut asked = held.clone();
        asked.push(format_lease_id(99));
        let again = b.hand_slots(
            &asked, 0, false, false, 4_000_000, 4_000_000, HORIZON, ttl, &mut ids,
        );
        assert_eq!(again.kept, held);
        assert_eq!(b.leases.live(ttl + 1), 2, "renewed past the first TTL");
        assert_eq!(b.leases.live(4_000_000 + ttl), 0);
    }

    #[test]
    fn while_others_wait_a_chain_is_renewed_only_up_to_its_limit() {
        let (mut ids, mut b) = (ids(), bucket(20, 1));
        let held = vec![b
            .hand_slots(&[], 1, false, false, 0, 0, HORIZON, TTL, &mut ids)
            .new[0]
            .0
            .clone()];
        let late = MAX_CHAIN_US + 1;
        let alone = b.hand_slots(&held, 0, false, false, late, late, HORIZON, TTL, &mut ids);
        assert_eq!(alone.kept, held, "nobody waits: the chain goes on");
        let refused = b.hand_slots(&[], 1, false, false, late, late, HORIZON, TTL, &mut ids);
        assert!(refused.new.is_empty() && refused.kept.is_empty());
        let contended = b.hand_slots(
            &held,
            0,
            false,
            false,
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
        let giver = b.hand_slots(&[], 2, true, false, 1, 1, HORIZON, TTL, &mut ids);
        assert!(giver.new.is_empty(), "what it gave back is for the others");
        let first = b.hand_slots(&[], 2, false, false, 1, 1, HORIZON, TTL, &mut ids);
        assert_eq!(first.new.len(), 1, "one at a time");
        let held = vec![first.new[0].0.clone()];
        let again = b.hand_slots(&held, 2, false, false, 2, 2, HORIZON, TTL, &mut ids);
        assert_eq!((again.kept.len(), again.new.len()), (1, 1));
    }

    /// Bug: any well-formed id a client named as held started a chain
    /// entry, live lease or not, and nothing ever removed it: a client could
    /// grow the table by a batch of made-up ids per request.
    #[test]
    fn ids_that_are_no_live_lease_start_no_chain_bug_made_up_ids_grew_the_table() {
        let (mut ids, mut b) = (ids(), bucket(20, 2));
        let made_up: Vec<String> = (0..50).map(|_| format_lease_id(ids.next_id())).collect();
        let answer = b.hand_slots(&made_up, 0, false, false, 0, 0, HORIZON, TTL, &mut ids);
        assert!(answer.kept.is_empty());
        assert!(
            b.leases.streams.chains.is_empty(),
            "{} chains",
            b.leases.streams.chains.len()
        );
    }
}
