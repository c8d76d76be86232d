//! The acquire one refill sends: the block's size from the isolate's
//! demand, the kept slots to renew or ask for and of which kind, the turn
//! to book or the ticket to show, and what rides back with it (returned
//! times, released leases, observed successes, a provider's quota).

use super::demand::{block_size, horizon_budget, Demand};
use super::refill::Target;
use super::{GatewayRateState, REFILL_POLL_MS};
use crate::client::retry::with_retries;
use crate::error::Result;
use crate::protocol::{has_concurrency, AcquireRequest, AcquireResponse, SlotKind};
use crate::time::Millis;

impl GatewayRateState {
    pub(super) async fn request_block(
        &self,
        target: &Target,
    ) -> Result<(AcquireResponse, Millis, Millis)> {
        let bucket_id = target.bucket_id.as_str();
        // Ask early by a round trip and a poll, so the block is here before
        // its first permit is due.
        // A turn ticket's turn is when its slot frees at the gateway: come
        // about then (a ticket shown early only books the client again),
        // a trip early to arrive on time.
        // A paced pool left with no slot for the permits it holds asks now.
        let (not_before, early) = self.state(bucket_id, |s| {
            let stranded = s
                .pool
                .as_ref()
                .is_some_and(|p| p.paced() && p.coming() == 0)
                && s.block.as_ref().is_some_and(|b| !b.slots.is_empty());
            // A streamed pool's lease due for renewal goes no later than
            // then.
            let pool = s.pool.as_ref().filter(|p| !p.paced());
            let not_before = pool
                .and_then(|p| p.renew_by())
                .map_or(s.refill.not_before, |at| at.min(s.refill.not_before));
            match s.refill.turn_ticket {
                _ if stranded => (0, 0),
                Some(_) => (not_before, s.clock.rtt_ms() / 2),
                None => (not_before, s.clock.rtt_ms() + REFILL_POLL_MS),
            }
        });
        let now = self.inner.rt.now_ms();
        let start_at = not_before.saturating_sub(early);
        if start_at > now {
            self.inner.rt.sleep(start_at - now).await;
        }
        let sent = self.inner.rt.now_ms();
        let horizon_ms = self.inner.options.block_horizon_ms;
        let concurrency = has_concurrency(&target.rules);
        let keep_leases = concurrency && self.inner.options.keep_leases;
        let (requested, observed_successes, lead, book_next_turn, quota, slots, turn_ticket) = self
            .state(bucket_id, |s| {
                if let Some(at) = s.refill.exhausted_at.take() {
                    let drained =
                        s.waiters > 1 && s.refill.started_at.saturating_sub(at) < horizon_ms;
                    s.refill.draining |= drained;
                    if drained {
                        s.refill.usable = s.refill.usable.map(|u| u.saturating_mul(2));
                    }
                }
                // Several callers at once at a bucket never granted look the
                // same as a closed loop starting: ask for the horizon (what a
                // burst does not use goes back).
                let first_burst = !s.refill.ever_granted && s.waiters > 1;
                // Slots to keep, and renewal of those held. Streamed: new
                // ones for the callers no kept lease serves. Paced (calls
                // seen short): one to start with, then one for each caller
                // that found none free at its permit's time.
                let slots = keep_leases.then(|| match &mut s.pool {
                    // A pool that holds nothing (made by a refusal) names
                    // no kind while no call was seen.
                    Some(pool) if pool.coming() == 0 && !s.hold.seen() => {
                        pool.renewing = Vec::new();
                        (1, Vec::new(), SlotKind::Either)
                    }
                    Some(pool) => {
                        pool.renewing = pool.held();
                        let wanted = match pool.paced() {
                            // As many as calls here overlap on a block's
                            // permits (one for callers that never
                            // overlap), and one more after a miss.
                            true => {
                                let callers = s.waiters + pool.in_call.len() as u64;
                                let needed = s.hold.paced_slots(&target.rules).min(callers);
                                std::mem::take(&mut pool.missed)
                                    .min(1)
                                    .max(needed.max(1).saturating_sub(pool.coming() as u64))
                            }
                            false => s
                                .waiters
                                .saturating_sub(pool.idle.len() as u64)
                                .max(std::mem::take(&mut pool.missed).min(1)),
                        };
                        let kind = match pool.paced() {
                            true => SlotKind::Paced,
                            false => SlotKind::Streamed,
                        };
                        (wanted, pool.renewing.clone(), kind)
                    }
                    None => match s.hold.seen() {
                        false => (1, Vec::new(), SlotKind::Either),
                        true if s.hold.streams_pay(&target.rules) => {
                            (s.waiters, Vec::new(), SlotKind::Streamed)
                        }
                        true => (1, Vec::new(), SlotKind::Paced),
                    },
                });
                // A paced slot serves a permit per call's hold: a block of
                // more would mostly go back, however many callers wait.
                let slot_bound = match (&s.pool, &slots, s.hold.usual_ms()) {
                    (Some(pool), Some((wanted, _, SlotKind::Paced)), Some(hold)) => {
                        Some((pool.coming() as u64 + wanted) * horizon_ms / hold.max(1))
                    }
                    _ => None,
                };
                let usable = slot_bound.map_or(s.refill.usable, |bound| {
                    Some(s.refill.usable.unwrap_or(bound).min(bound))
                });
                // Permits without leases, unless the answer streams slots.
                let paced = slots
                    .as_ref()
                    .is_some_and(|(_, _, kind)| *kind != SlotKind::Streamed);
                let demand = Demand {
                    waiters: s.waiters,
                    draw_rate_per_s: s.draw_rate.rate_at(sent),
                    draining: s.refill.draining || first_burst,
                    usable,
                    leased: concurrency && !paced,
                };
                let requested = block_size(&target.rules, &demand, horizon_ms);
                // An isolate that will use a whole horizon comes back for more
                // as soon as it is drawn: book that turn now.
                let whole_horizon = requested >= horizon_budget(&target.rules, horizon_ms);
                // A first request's size is a guess; only a guess that turned
                // out queued behind the fleet is worth a turn.
                let guessing = first_burst && !s.refill.answered;
                // One lease per permit: a refusal for want of a slot books
                // this client a turn, held for it by the ticket it shows.
                let turn_ticket = (concurrency && slots.is_none())
                    .then(|| s.refill.turn_ticket.take().unwrap_or(0));
                (
                    requested,
                    s.pending_successes,
                    s.clock.lead_ms(),
                    whole_horizon && !guessing && (!concurrency || paced),
                    s.quota.pending.take(),
                    // Kept slots: with the claim that counts this isolate's
                    // share.
                    slots.map(|slots| (slots, s.refill.slot_claim.unwrap_or(0))),
                    turn_ticket,
                )
            });
        // Its turns among contending clients are sized by its callers.
        let waiting_callers = self.state(bucket_id, |s| s.waiters);
        let (slots_wanted, held_lease_ids, slot_kind, slot_claim) = match slots {
            Some(((wanted, held, kind), claim)) => (Some(wanted), held, kind, Some(claim)),
            None => (None, Vec::new(), SlotKind::Streamed, None),
        };
        // A lease released a moment ago rides on this acquire instead of a
        // release of its own.
        let riders = self.take_riders(bucket_id, &target.rules_key);
        let request = AcquireRequest {
            bucket_id: bucket_id.to_owned(),
            rate_scope_token: target.token.clone(),
            rules: target.rules.clone(),
            requested,
            observed_successes,
            scheduler_schema: self.inner.options.scheduler_schema.clone(),
            dispatch_lead_ms: Some(lead),
            returned_at_ms: riders.returned,
            book_next_turn,
            waiting_callers: Some(waiting_callers),
            quota,
            released_lease_ids: lease_ids(&riders.leases),
            slots_wanted,
            held_lease_ids,
            turn_ticket,
            slot_claim,
            slot_kind,
        };
        // The round trip is timed on the attempt that answered, not across
        // the pauses between retries.
        let sent = std::cell::Cell::new(sent);
        let response = with_retries(&*self.inner.rt, || {
            sent.set(self.inner.rt.now_ms());
            self.inner.port.acquire(request.clone())
        })
        .await;
        self.riders_done(
            bucket_id,
            target.token.clone(),
            &target.rules,
            riders.leases,
            response.is_ok(),
        );
        let response = response?;
        if response.dispatch_tolerance_ms.is_some() {
            self.inner.riders_welcome.set(true);
        }
        let (sent, received) = (sent.get(), self.inner.rt.now_ms());
        self.state(bucket_id, |s| {
            s.pending_successes = s.pending_successes.saturating_sub(observed_successes);
        });
        Ok((response, sent, received))
    }
}

/// The ids of leases riding on an acquire: a loop rather than an iterator
/// collected, whose adapters are a copy per element type in the wasm.
fn lease_ids(leases: &[(u64, String)]) -> Vec<String> {
    let mut ids = Vec::with_capacity(leases.len());
    for (_, id) in leases {
        ids.push(id.clone());
    }
    ids
}
