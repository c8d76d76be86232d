//! The single-flight refill of one bucket: one gateway request at a time,
//! for a block sized to the isolate's demand, however many callers wait.

use std::collections::VecDeque;
use std::future::Future;

use super::block::{validate_grant, Block, Slot, LEGACY_TOLERANCE_MS};
use super::demand::{block_size, horizon_budget, Demand};
use super::pool::{KeptLease, LeasePool, RENEW_EVERY_MS};
use super::{GatewayRateState, REFILL_POLL_MS, REFILL_TIMEOUT_MS};
use crate::client::retry::with_retries;
use crate::error::{Detail, Error, ErrorCode, Result};
use crate::protocol::{has_concurrency, AcquireRequest, AcquireResponse, PacingRule};
use crate::rt::{abortable, AbortSignal, Event};
use crate::time::Millis;

#[derive(Default)]
pub(super) struct Refill {
    running: bool,
    /// Refills are numbered; `landed` is the latest that finished.
    generation: u64,
    landed: u64,
    /// When the refill in flight counts as lost.
    deadline: Millis,
    /// The failure of the last refill, for the callers that waited on it.
    error: Option<(u64, Error)>,
    /// The gateway asked this client not to refill before this local time.
    pub not_before: Millis,
    /// When callers began waiting on the refill in flight.
    started_at: Millis,
    /// When the block last ran dry.
    pub exhausted_at: Option<Millis>,
    ever_granted: bool,
    /// The gateway has answered this bucket before.
    answered: bool,
    /// Callers drained the last block and came straight back for more: the
    /// isolate would use all the horizon holds. Kept across refusals until
    /// a grant comes.
    draining: bool,
    /// Notified when a refill lands, for the caller that started it (its
    /// own I/O, so waking it is safe in workerd).
    landed_event: Event,
}

impl Refill {
    /// The isolate's demand turned out smaller than it asked for: its next
    /// refill need not wait for the turn the gateway booked for it.
    pub fn forget_turn(&mut self) {
        self.not_before = 0;
        self.draining = false;
    }

    pub fn is_idle(&self) -> bool {
        !self.running && self.error.is_none()
    }

    /// Marks a refill running from `now`; returns its generation.
    fn begin(&mut self, now: Millis) -> u64 {
        self.running = true;
        self.started_at = now;
        self.generation += 1;
        self.deadline = now.max(self.not_before) + REFILL_TIMEOUT_MS;
        self.generation
    }
}

/// What one refill asks for: the gateway bucket and the rules it is for.
#[derive(Clone)]
pub(super) struct Target {
    pub bucket_id: String,
    pub token: Option<String>,
    pub rules: Vec<PacingRule>,
    pub rules_key: String,
}

impl GatewayRateState {
    /// Joins (or starts) the bucket's one refill and waits for it to land.
    /// The caller that starts it is woken by its landing; others look on
    /// their own timer, never woken by another caller's I/O: in workerd
    /// every request must be woken by its own events, or its continuation
    /// (and every timer it then sets) would belong to another request and
    /// die with it.
    pub(super) async fn await_refill(
        &self,
        target: &Target,
        signal: Option<&AbortSignal>,
    ) -> Result<()> {
        let now = self.inner.rt.now_ms();
        let (generation, started) = self.state(&target.bucket_id, |state| {
            state.waiters += 1;
            let r = &mut state.refill;
            if r.running {
                return (r.generation, None);
            }
            (r.begin(now), Some(r.landed_event.listen()))
        });
        if started.is_some() {
            self.spawn_refill(generation, target);
        }
        let mut landing = started;
        let rt = &self.inner.rt;
        let bucket_id = target.bucket_id.as_str();
        let waited = abortable(signal, || super::permit_wait(bucket_id), async {
            loop {
                let now = rt.now_ms();
                let (landed, not_before, lost) = self.state(bucket_id, |s| {
                    let r = &mut s.refill;
                    let lost = r.running && now > r.deadline;
                    if lost {
                        r.running = false;
                    }
                    (r.landed >= generation, r.not_before, lost)
                });
                // A call here handed on its lease meanwhile.
                let handed_on = self
                    .pool(bucket_id, |p| p.idle.iter().any(|l| l.start_by >= now))
                    .unwrap_or(false);
                if landed || lost || handed_on {
                    return Ok(());
                }
                let poll = rt.sleep(not_before.saturating_sub(now).max(REFILL_POLL_MS));
                match landing.take() {
                    Some(event) => {
                        let mut event = std::pin::pin!(event);
                        let mut poll = poll;
                        std::future::poll_fn(|cx| {
                            if event.as_mut().poll(cx).is_ready() {
                                return std::task::Poll::Ready(());
                            }
                            poll.as_mut().poll(cx)
                        })
                        .await;
                    }
                    None => poll.await,
                }
            }
        })
        .await;
        if waited.is_err() {
            let waiters = self.state(bucket_id, |s| s.waiters - 1);
            self.spare(bucket_id, waiters);
        }
        self.state(bucket_id, |state| {
            state.waiters -= 1;
            waited?;
            match &state.refill.error {
                Some((g, e)) if *g == generation => Err(e.clone()),
                _ => Ok(()),
            }
        })
    }

    /// Renews the bucket's kept leases in the background when one would
    /// lapse soon and no refill would carry them.
    pub(super) fn renew_ahead(&self, target: &Target) {
        let now = self.inner.rt.now_ms();
        let generation = self.state(&target.bucket_id, |s| {
            let due = s.pool.as_ref().is_some_and(|p| p.renewal_due(now));
            (due && !s.refill.running && s.refill.not_before <= now).then(|| s.refill.begin(now))
        });
        if let Some(generation) = generation {
            self.spawn_refill(generation, target);
        }
    }

    fn spawn_refill(&self, generation: u64, target: &Target) {
        let (this, target) = (self.clone(), target.clone());
        self.inner.rt.spawn(Box::pin(async move {
            this.refill(generation, target).await;
        }));
    }

    /// Runs in the background so an aborted caller never strands a grant in
    /// flight.
    async fn refill(self, generation: u64, target: Target) {
        let result = self.request_block(&target).await;
        let result = result
            .and_then(|(response, sent, received)| self.land(&target, response, sent, received));
        let event = self.state(&target.bucket_id, |state| {
            let r = &mut state.refill;
            if r.generation == generation {
                r.running = false;
            }
            r.landed = r.landed.max(generation);
            r.error = result.err().map(|e| (generation, e));
            r.landed_event.clone()
        });
        event.notify();
        self.watch_surplus(&target.bucket_id);
    }

    async fn request_block(&self, target: &Target) -> Result<(AcquireResponse, Millis, Millis)> {
        let bucket_id = target.bucket_id.as_str();
        // Ask early by a round trip and a poll, so the block is here before
        // its first permit is due.
        let (not_before, early) = self.state(bucket_id, |s| {
            (s.refill.not_before, s.clock.rtt_ms() + REFILL_POLL_MS)
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
        let (requested, observed_successes, lead, book_next_turn, quota, slots) =
            self.state(bucket_id, |s| {
                if let Some(at) = s.refill.exhausted_at.take() {
                    s.refill.draining |=
                        s.waiters > 1 && s.refill.started_at.saturating_sub(at) < horizon_ms;
                }
                // Several callers at once at a bucket never granted look the
                // same as a closed loop starting: ask for the horizon (what a
                // burst does not use goes back).
                let first_burst = !s.refill.ever_granted && s.waiters > 1;
                let demand = Demand {
                    waiters: s.waiters,
                    draw_rate_per_s: s.draw_rate.rate_at(sent),
                    draining: s.refill.draining || first_burst,
                };
                let requested = block_size(&target.rules, &demand, horizon_ms);
                // An isolate that will use a whole horizon comes back for more
                // as soon as it is drawn: book that turn now.
                let whole_horizon = requested >= horizon_budget(&target.rules, horizon_ms);
                // A first request's size is a guess; only a guess that turned
                // out queued behind the fleet is worth a turn.
                let guessing = first_burst && !s.refill.answered;
                // Slots to keep: new ones for the callers no kept lease
                // serves, and renewal of those held.
                let slots = keep_leases.then(|| match &mut s.pool {
                    Some(pool) => {
                        pool.renewing = pool.held();
                        let wanted = s.waiters.saturating_sub(pool.idle.len() as u64);
                        (wanted, pool.renewing.clone())
                    }
                    None => (s.waiters, Vec::new()),
                });
                (
                    requested,
                    s.pending_successes,
                    s.clock.lead_ms(),
                    whole_horizon && !guessing && !concurrency,
                    s.quota.pending.take(),
                    slots,
                )
            });
        let (slots_wanted, held_lease_ids) = match slots {
            Some((wanted, held)) => (Some(wanted), held),
            None => (None, Vec::new()),
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
            quota,
            released_lease_ids: riders.leases.iter().map(|(_, id)| id.clone()).collect(),
            slots_wanted,
            held_lease_ids,
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

    /// Records what a gateway answer says about the bucket, and merges a
    /// grant into its block.
    fn land(
        &self,
        target: &Target,
        response: AcquireResponse,
        sent: Millis,
        received: Millis,
    ) -> Result<()> {
        let bucket_id = target.bucket_id.as_str();
        let slots = validate_grant(bucket_id, &target.rules, &response)?;
        match response.lease_spacing_ms {
            Some(spacing) => self.land_kept(target, &response, spacing, &slots, sent, received),
            None => self.dissolve_pool(bucket_id),
        }
        let max_wait = self.inner.options.max_wait_ms;
        let mut buckets = self.inner.buckets.borrow_mut();
        let state = buckets
            .get_mut(bucket_id)
            .expect("landing on a known bucket");
        state.clock.sample(response.server_now_ms, sent, received);
        *self.inner.clock_seed.borrow_mut() = state.clock.clone();
        if let Some(rps) = response.effective_requests_per_second {
            state.effective_rps = Some(rps);
        }
        state.refill.not_before = received.saturating_add(response.wait_ms);
        state.refill.answered = true;
        if response.granted > 0 {
            state.refill.draining = false;
            state.refill.ever_granted = true;
            // Time spent waiting for permits is not time without demand:
            // an isolate queued behind the fleet draws nothing because it
            // has nothing to draw.
            state
                .draw_rate
                .skip(received.saturating_sub(state.refill.started_at));
        }
        // Another isolate met a 429: cached permits inside the cooldown
        // would reach a provider that is refusing, so they go unsent (their
        // leases back; their times are void).
        if let (Some(block), Some(until)) = (&mut state.block, response.cooldown_until_ms) {
            let mut voided = Vec::new();
            block.slots.retain_mut(|s| {
                let keep = s.at.is_none_or(|at| at >= until);
                if !keep {
                    voided.push(s.clone());
                }
                keep
            });
            if !voided.is_empty() {
                let (token, rules) = (block.token.clone(), block.rules.clone());
                self.void(bucket_id, token, &rules, voided);
            }
        }
        if response.granted == 0 {
            if response.wait_ms > max_wait {
                let until = response
                    .cooldown_until_ms
                    .unwrap_or(received.saturating_add(response.wait_ms));
                return Err(Error::new(
                    ErrorCode::ProviderExhausted,
                    format!(
                        "provider bucket {bucket_id} asks to wait {} ms, past the {max_wait} ms \
                         limit (raise maxWaitMs to wait longer)",
                        response.wait_ms
                    ),
                )
                .with_detail(Detail::Cooldown { until_ms: until }));
            }
            return Ok(());
        }
        if response.lease_spacing_ms.is_some() {
            // The leases went to the pool; their times are first starts.
            return Ok(());
        }
        let tolerance_ms = response
            .dispatch_tolerance_ms
            .unwrap_or(LEGACY_TOLERANCE_MS);
        match &mut state.block {
            Some(block) if block.serves(target) => {
                block.slots.extend(slots);
                crate::sort::sort_by_time(block.slots.make_contiguous(), |s| s.at.unwrap_or(0));
                block.tolerance_ms = tolerance_ms;
            }
            slot => {
                let stale = slot.replace(Block {
                    slots,
                    rules_key: target.rules_key.clone(),
                    rules: target.rules.clone(),
                    token: target.token.clone(),
                    tolerance_ms,
                });
                let gateway_now = response.server_now_ms.unwrap_or(0);
                drop(buckets);
                if let Some(stale) = stale {
                    self.give_back(
                        bucket_id,
                        stale.token,
                        &stale.rules,
                        stale.slots.into(),
                        gateway_now,
                    );
                }
            }
        }
        Ok(())
    }
}

impl GatewayRateState {
    /// Takes a streamed grant into the bucket's pool: renewals, new leases
    /// with their first starts, what the gateway said of others waiting
    /// and of a cooldown. Leases not renewed go back.
    fn land_kept(
        &self,
        target: &Target,
        response: &AcquireResponse,
        spacing: Millis,
        slots: &VecDeque<Slot>,
        sent: Millis,
        received: Millis,
    ) {
        let ttl = response.lease_ttl_ms.unwrap_or(RENEW_EVERY_MS * 2);
        let start_by = sent.saturating_add((ttl / 2).min(RENEW_EVERY_MS));
        let kept = response.kept_lease_ids.clone().unwrap_or_default();
        let back = self.state(&target.bucket_id, |s| {
            let clock = s.clock.clone();
            let pool = s.pool.get_or_insert_with(|| {
                LeasePool::new(spacing, target.token.clone(), target.rules.clone())
            });
            pool.spacing_ms = spacing;
            pool.others_wait = response.slot_waiters;
            if let Some(until) = response.cooldown_until_ms {
                pool.cooldown_until = pool.cooldown_until.max(clock.to_local(until));
            }
            let asked = std::mem::take(&mut pool.renewing);
            let back = pool.renewed(&asked, &kept, start_by);
            for slot in slots {
                if let Some(id) = &slot.lease {
                    pool.idle.push(KeptLease {
                        id: id.clone(),
                        next_at: slot.at.map_or(received, |at| clock.to_local(at)),
                        last_start: None,
                        start_by,
                        granted_at: received,
                        idle_since: received,
                    });
                }
            }
            back
        });
        if !back.is_empty() {
            drop(self.give_back_kept(&target.bucket_id, back));
        }
        self.watch_pool(&target.bucket_id);
    }
}
