//! A grant: the permits one acquire is given on the bucket's timelines,
//! each with its lease when the rules bound concurrency, and when the
//! client should come back; and the wire answer it becomes.

use super::bucket::{Bucket, CONCURRENCY_RETRY_MS};
use super::fair_turns::FairTurns;
use super::lease_id::{format_lease_id, LeaseIds};
use super::timeline::{ceil_ms, interval_for_rps, micros, Micros};
use crate::protocol::AcquireResponse;

/// What an acquire produced, before it becomes a wire response.
pub(crate) struct Grant {
    pub times: Vec<u64>,
    pub lease_ids: Option<Vec<String>>,
    pub wait_ms: u64,
    /// With a refusal for want of a slot, to a client that takes tickets.
    pub turn_ticket: Option<u64>,
}

impl Bucket {
    /// Places up to `requested` permits no earlier than `earliest` and no
    /// later than `horizon`, one lease each when the rules bound
    /// concurrency. Returned times go first; the timelines extend only for
    /// the rest. `ticket` is the client's turn ticket for the slots: `0`
    /// when it takes tickets and holds none, `None` for a client that
    /// takes none. Unless `leased`, the permits come without leases, as for
    /// a bucket with no concurrency bound: for a client that holds paced
    /// slots, whose calls each take one of them and one of its slots.
    /// `asks_slots`: the client keeps leases when the bucket hands them out
    /// (it is granted one per permit only while the bucket turns or its
    /// rate is cut), and comes back when told.
    #[allow(clippy::too_many_arguments)]
    pub fn grant(
        &mut self,
        requested: u64,
        book_next_turn: bool,
        waiting_callers: Option<u64>,
        ticket: Option<u64>,
        leased: bool,
        asks_slots: bool,
        now: Micros,
        earliest: Micros,
        horizon: Micros,
        lease_ttl: Micros,
        ids: &mut LeaseIds,
    ) -> Grant {
        let max_concurrency = self.max_concurrency().filter(|_| leased);
        self.tickets.expire(now);
        let shown = ticket.filter(|&t| t > 0 && self.tickets.redeem(t));
        // Slots freed for clients booked earlier are theirs.
        let held = self.tickets.held_before(shown);
        let free_slots = max_concurrency.map_or(u64::MAX, |max| {
            max.saturating_sub(self.leases.live(now) as u64)
                .saturating_sub(held)
        });
        let rate = self.effective_rps().unwrap_or(f64::INFINITY);
        self.quota.expire(now);
        let adaptive_interval = if rate.is_finite() {
            interval_for_rps(rate)
        } else {
            0
        };
        // Among contending clients, a client booking its next turn is
        // granted its turn's share now, and booked as much next.
        let turn_interval = self.tally_interval(adaptive_interval);
        // Every ask, leased or not, keeps the bucket's memory of its cuts
        // and cooldowns: one that only leased asks saw still keeps turns
        // whole for a while after it.
        let fair_now = self.fair_turns(now);
        let fair_on = max_concurrency.is_none() && fair_now;
        // A client that says how many callers it has (none waiting counts
        // as one: it will have one when it comes back) is given turns of
        // their share; an older client, which says nothing, whole ones.
        let fair = waiting_callers
            .filter(|_| fair_on)
            .map(|callers| FairTurns::turn(callers.max(1), turn_interval));
        // A client that asks for more than its waiting callers (it refills
        // ahead of its block's end, for callers still drawing on it) will
        // be back as surely as one that books its next turn. Among
        // contending clients it takes its turn's share too, and is booked
        // its next turn, instead of taking permits ahead of the turns booked
        // for callers already waiting: such asks, granted whatever the
        // timeline held, kept a fleet of paced slots off its turns for its
        // first 25 s, with a tail wait of 2.8 x the closed-loop oracle's.
        let asks_ahead = waiting_callers.is_some_and(|callers| requested > callers);
        let shared = (book_next_turn || asks_ahead)
            && fair.is_some()
            && !self.fair_turns.in_whole_turns(self.next_free(earliest))
            && self.others_wait(earliest, turn_interval);
        let wanted = match (shared, fair) {
            (true, Some(turn)) => requested.min(free_slots).min(turn),
            _ => requested.min(free_slots),
        };
        let mut times = Vec::with_capacity(wanted.min(1_024) as usize);
        let mut lease_ids = max_concurrency.map(|_| Vec::with_capacity(times.capacity()));
        let returned_from = ceil_ms(earliest.max(self.cooldown_until));
        // Streamed slots: each permit also waits for its slot's stream, and
        // a returned time (spaced for no slot) is not reused.
        let stream = self.stream_spacing().filter(|_| leased);
        // A client that asks for kept slots is not given a permit at a
        // slot's stream more than a permit's spacing past the timeline's
        // next free time: placing it there would leave the timeline empty
        // until then, though a slot still held may come back ready sooner.
        // It comes back shortly instead (see `wait_ms` below). Older
        // clients, which ask for none, are given the far time as before.
        let park_after =
            (stream.is_some() && asks_slots).then(|| self.turn_interval(adaptive_interval));
        let mut parked = None;
        while (times.len() as u64) < wanted {
            let slot_ready = stream.map(|_| {
                self.leases
                    .streams
                    .take_slot(now, free_slots - times.len() as u64)
            });
            let returned = match stream {
                None => self.returns.take(returned_from, horizon / 1_000),
                Some(_) => None,
            };
            let at_ms = match returned {
                Some(at_ms) => {
                    self.grant_again(at_ms, now);
                    at_ms
                }
                None => {
                    let at = self.next_free(earliest.max(slot_ready.unwrap_or(0)));
                    let parks = park_after
                        .is_some_and(|after| at > self.next_free(earliest).saturating_add(after));
                    if parks {
                        if let Some(ready) = slot_ready {
                            self.leases.streams.untake(ready);
                        }
                        parked = Some(at);
                        break;
                    }
                    if at > horizon {
                        if let Some(ready) = slot_ready {
                            self.leases.streams.untake(ready);
                        }
                        break;
                    }
                    self.place(at, now, adaptive_interval);
                    ceil_ms(at)
                }
            };
            times.push(at_ms);
            if let Some(ids_out) = &mut lease_ids {
                let id = ids.next_id();
                self.leases
                    .insert(id, micros(at_ms).saturating_add(lease_ttl));
                if let Some(spacing) = stream {
                    self.leases
                        .streams
                        .spaced(id, micros(at_ms).saturating_add(spacing));
                }
                ids_out.push(format_lease_id(id));
            }
        }
        if let (Some(last), false) = (self.last_at, times.is_empty()) {
            self.recent.record(last, times.len() as u64);
        }
        // A caller whose callers drained its last block is booked its next
        // turn with this grant, so it comes back to a full block instead of
        // being refused first. A caller that got what it asked for and said
        // nothing of more books nothing: its demand is met, and a turn
        // booked for a caller that never comes back would hold back every
        // caller booked after it.
        let mut turn_ticket = None;
        let takes_tickets = ticket.is_some() && max_concurrency.is_some();
        let paced_by_cut = (leased && asks_slots)
            .then(|| self.slots_paced_by_cut(turn_interval))
            .flatten();
        let turns = (self.turns_tat, self.slot_turns_tat);
        let wait_ms = if let Some(at) = parked {
            // Back about when the slot it was not given is ready, or sooner
            // for one freed meanwhile.
            ceil_ms(at.saturating_sub(now)).clamp(1, CONCURRENCY_RETRY_MS)
        } else if takes_tickets && wanted < requested {
            // Refused for want of a slot, or granted fewer than it wants: it
            // is booked its next slot with this answer, one at a time (slots
            // free one by one, and each goes to the next ticket). A client
            // refused keeps its place if it came back too early; one served
            // joins the end of the line.
            let (redeemed, place) = match wanted {
                0 => (shown, held + 1),
                _ => (None, self.tickets.held_before(None) + 1),
            };
            let wait_ms = self.ticket_turn_ms(place, now, lease_ttl);
            let turn = now.saturating_add(micros(wait_ms));
            turn_ticket = Some(self.tickets.book(redeemed, turn, 1, ids));
            wait_ms
        } else if wanted == 0 {
            self.book_slot_turn(requested, paced_by_cut, now, lease_ttl)
        } else if book_next_turn || shared || self.contended(&times, wanted, earliest) {
            // A client refused for others' permits, or one granted its share
            // among them, is booked a turn of its callers' share.
            let queued = self.turns_tat > self.next_free(earliest).saturating_add(turn_interval);
            let fair = fair.filter(|_| shared || times.is_empty() || queued);
            let booked = fair.map_or(wanted, |turn| wanted.min(turn));
            self.book_turn(booked, now, horizon, turn_interval, fair.is_some())
                .max(u64::from(times.is_empty()))
        } else {
            0
        };
        // A client that asks for kept slots and is refused a lease per
        // permit for want of a slot holds none: it waits for one, and the
        // isolates keeping paced slots are told so (they then give idle
        // ones back), as when a client is refused a kept slot. Untold,
        // two isolates that kept paced slots through a provider's outage
        // held all five while six others asked for streamed ones.
        if leased && asks_slots && requested > 0 && wanted == 0 {
            self.leases.streams.refused(now);
        }
        // A client that asks for kept slots and is refused every leased
        // permit (the bucket turns kind, or its rate is cut) comes back
        // when told here, not at the turn just booked for it: a turn kept
        // for it would hold back every caller booked after it, a turn per
        // refusal. Unless every slot is held and slots free, as calls
        // end, less often than that retry (a call's usual hold over the
        // slots): looking again sooner would mostly find none free, so it
        // keeps its turn at the slots, as any client refused a slot does.
        // Sent back within 100 ms instead, a fleet of 2 s calls under a cut
        // made 7 to 11 gateway round trips per call. So does one refused
        // while the cut rate frees the slots: back within 100 ms, a fleet
        // of 300 ms calls on five slots under a provider's 12/s made 14.8
        // round trips per permit.
        let slots_free_slowly = self.slots_free_slowly() || paced_by_cut.is_some();
        let waits_for_a_call = wanted == 0 && free_slots == 0 && slots_free_slowly;
        let wait_ms = match leased && asks_slots && times.is_empty() && !waits_for_a_call {
            true => {
                (self.turns_tat, self.slot_turns_tat) = turns;
                let retry = self.kind_retry_ms(now, wait_ms);
                // Through an outage's pause nothing goes out before the
                // pause's next probe, and every permit a client that asks
                // for streamed slots is granted is placed on the timeline:
                // it looks again once that time is within its horizon.
                // Back within 100 ms instead, the slot-bound fleet polled
                // the gateway some 300 times a second through the outage.
                match self.paused() && self.asks_streams() {
                    true => retry.max(ceil_ms(self.next_free(earliest).saturating_sub(horizon))),
                    false => retry,
                }
            }
            false => wait_ms,
        };
        Grant {
            times,
            lease_ids,
            wait_ms,
            turn_ticket,
        }
    }

    pub fn response(&self, grant: Grant, now: Micros, tolerance_ms: u64) -> AcquireResponse {
        AcquireResponse {
            granted: grant.times.len() as u64,
            wait_ms: grant.wait_ms,
            scheduled_at_ms: Some(grant.times),
            lease_ids: grant.lease_ids,
            effective_requests_per_second: self.effective_rps(),
            cooldown_until_ms: self.cooldown_until_ms(now),
            server_now_ms: Some(ceil_ms(now)),
            dispatch_tolerance_ms: Some(tolerance_ms),
            kept_lease_ids: None,
            lease_spacing_ms: None,
            lease_ttl_ms: None,
            slot_waiters: false,
            slot_claim: None,
            slot_share: None,
            slot_keep: None,
            turn_ticket: grant.turn_ticket,
        }
    }
}
