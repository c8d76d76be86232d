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
//! provider said), slots are not streamed: kept leases hear of a cut only
//! when renewed. Paced slots stay, their calls taking the timeline's
//! permits at the cut rate; a client that asks for streamed ones gets a
//! lease per permit, paced by the timeline, until the rate is back.
//!
//! Fairness: while callers elsewhere wait for a slot, a kept lease is
//! renewed only until its chain (the renewals since its grant) has lasted
//! [`MAX_CHAIN_US`]; a client that gives one back gets none in the same
//! request, and others get one at a time.
//! Refused clients are booked at the chain ends to come, each a little
//! after its slot is expected back (see `turns`).

use super::bucket::Bucket;
use super::lease_id::{format_lease_id, parse_lease_id, LeaseId, LeaseIds};
use super::slot_claims::{ClaimAnswer, Share};
use super::slot_rules::SlotAsker;
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
    /// What the answer tells a client that showed a claim.
    pub claim: Option<ClaimAnswer>,
    /// It holds fewer than its share and got fewer than it asked for: it
    /// comes back when a client over its share is to give a slot back.
    pub in_line: bool,
}

impl Bucket {
    /// The spacing of each slot's stream, when the bucket's slots can be
    /// streamed: its rules bound concurrency to `M` and each allows at
    /// least `M` calls a window. Retiring rules count too.
    pub fn stream_spacing(&self) -> Option<Micros> {
        // A cut, paused or provider-capped rate moves with every answer,
        // and kept leases hear of it only when renewed: such a bucket
        // grants one lease per permit, as the timeline paces each.
        if self.leases.streams.paced || self.rate_reduced() {
            return None;
        }
        self.streamable_spacing()
    }

    /// Whether the client asking now wants streamed slots: the kind it
    /// named, or, naming none, the kind the bucket hands out (as
    /// [`Bucket::slot_kind`] resolved it for this ask).
    pub(super) fn asks_streams(&self) -> bool {
        let streams = &self.leases.streams;
        !streams.asked_paced.unwrap_or(streams.paced)
    }

    /// Whether the client asking now wants streamed slots and is refused
    /// them because the rate is cut, paused or capped (see
    /// [`Bucket::stream_spacing`]), as it will be for as long as that
    /// lasts. A client that asks for paced slots is refused only while the
    /// bucket turns to them, and is served as soon as the turn is done.
    pub(super) fn streams_held_back_by_cut(&self) -> bool {
        !self.leases.streams.paced && self.asks_streams() && self.rate_reduced()
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
    pub(super) fn longest_window_us(&self) -> Micros {
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
    pub(super) fn base_spacing(&self) -> Option<Micros> {
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
        claim: Option<u64>,
        now: Micros,
        earliest: Micros,
        horizon: Micros,
        lease_ttl: Micros,
        ids: &mut LeaseIds,
    ) -> SlotGrant {
        let live = self.live_chains(held, now);
        let holds = live.len() as u64;
        let max = self.max_concurrency().unwrap_or(0);
        let streams = &mut self.leases.streams;
        let contended = streams.contended(now);
        let asker = match claim {
            Some(shown) => {
                let id = streams.claims.claim(shown, now, ids);
                let share = streams.claims.share(id, holds, holds + wanted, max, now);
                SlotAsker::Claimed { id, share }
            }
            None => SlotAsker::Older { contended },
        };
        let keep = asker.keeps(holds, streams.claims.unclaimed_waiting(now));
        let ending = chains_ending(&live, keep, now);
        let (kept, oldest_kept) = self.renew_kept(live, &ending, &asker, now, lease_ttl);
        let free = max.saturating_sub(self.leases.live(now) as u64);
        let holding = kept.len() as u64;
        let granted = wanted
            .min(free)
            .min(asker.may_take(holding, wanted, giving_back));
        // Only a client left with no slot at all waits: one that keeps some
        // and wants more is served by its own, and is no reason to rotate.
        if granted == 0 && wanted > 0 && kept.is_empty() {
            self.leases.streams.refused(now);
            if claim.is_none() {
                self.leases.streams.claims.unclaimed_refused(now);
            }
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
        // What the client is left holding: a grant cut short by the
        // horizon counts only the leases it got.
        let left_holding = (kept.len() + new.len()) as u64;
        let (claim, in_line) = match asker {
            SlotAsker::Claimed { id, share } => {
                let asked = holds + wanted;
                let answer = self.heard_claim(id, share, left_holding, asked, oldest_kept, now);
                let in_line = left_holding < holding + wanted
                    && share.is_some_and(|s| s.others_short && left_holding < s.most);
                (Some(answer), in_line)
            }
            SlotAsker::Older { .. } => (None, false),
        };
        SlotGrant {
            kept,
            new,
            first_waiter: !contended,
            claim,
            in_line,
        }
    }

    /// The held leases that are live, each with when its chain started (now
    /// for one it starts). An id that is not a live lease starts no chain:
    /// chains are kept per lease, and a client naming made-up ids would
    /// grow the table for as long as the bucket lives.
    fn live_chains<'h>(&mut self, held: &'h [String], now: Micros) -> Vec<Chain<'h>> {
        let mut live = Vec::with_capacity(held.len());
        for text in held {
            let Some(id) = parse_lease_id(text).filter(|&id| self.leases.holds(id, now)) else {
                continue;
            };
            let started = *self.leases.streams.chains.entry(id).or_insert(now);
            live.push((started, id, text));
        }
        live
    }

    /// Renews the live chains but those `ending`; returns the renewed ids
    /// and the oldest start among chains that go on. A chain a client with
    /// a claim keeps past its length starts again from now, so that a
    /// chain past its end is always one about to come back.
    fn renew_kept(
        &mut self,
        live: Vec<Chain<'_>>,
        ending: &[LeaseId],
        asker: &SlotAsker,
        now: Micros,
        lease_ttl: Micros,
    ) -> (Vec<String>, Micros) {
        let mut kept = Vec::new();
        let mut oldest_kept = now;
        for (started, id, text) in live {
            if ending.contains(&id) || !self.leases.renew(id, now, lease_ttl) {
                continue;
            }
            if ran_out(started, now) && matches!(asker, SlotAsker::Claimed { .. }) {
                self.leases.streams.chains.insert(id, now);
            } else {
                oldest_kept = oldest_kept.min(started);
            }
            kept.push(text.clone());
        }
        if !kept.is_empty() {
            // Calls go on on the kept slots: as far as the adaptive rate's
            // clock goes, the bucket is in use as if it granted now.
            self.last_at = Some(self.last_at.map_or(now, |last| last.max(now)));
        }
        (kept, oldest_kept)
    }

    /// Records what claim `id` holds after this grant, and when it is to
    /// give a slot back (its oldest chain's end, while it holds more than
    /// it keeps and others want more); the answer its client reads.
    fn heard_claim(
        &mut self,
        id: u64,
        share: Option<Share>,
        holds: u64,
        asked: u64,
        oldest_kept: Micros,
        now: Micros,
    ) -> ClaimAnswer {
        let sheds_at = share
            .filter(|s| s.others_short && holds > s.keep)
            .map(|_| oldest_kept.saturating_add(MAX_CHAIN_US));
        let claims = &mut self.leases.streams.claims;
        claims.heard(id, holds, asked, sheds_at, now);
        ClaimAnswer {
            claim: id,
            share,
            holds,
            unclaimed_waiting: claims.unclaimed_waiting(now),
        }
    }
}

/// A live held lease: when its chain started, its id, its text.
type Chain<'h> = (Micros, LeaseId, &'h String);

/// A chain that started at `started` has lasted its length by `now`.
fn ran_out(started: Micros, now: Micros) -> bool {
    now.saturating_sub(started) >= MAX_CHAIN_US
}

/// The chains that end: the oldest of those that ran their length, down
/// to `keep` held.
fn chains_ending(live: &[Chain<'_>], keep: u64, now: Micros) -> Vec<LeaseId> {
    let mut ending: Vec<LeaseId> = Vec::new();
    for _ in keep..live.len() as u64 {
        let oldest = live
            .iter()
            .filter(|&&(started, id, _)| ran_out(started, now) && !ending.contains(&id))
            .min_by_key(|&&(started, id, _)| (started, id));
        match oldest {
            Some(&(_, id, _)) => ending.push(id),
            None => break,
        }
    }
    ending
}

#[cfg(test)]
#[path = "slots_tests.rs"]
mod tests;
