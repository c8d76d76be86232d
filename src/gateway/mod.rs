//! The gateway: the one authority every isolate shares. It owns each
//! bucket's timelines, adaptive rate, cooldown and leases, and each run's
//! budget counters. It is pure: every call takes the request and the time,
//! and the host (a Durable Object, a Node server, a test) supplies both.
//!
//! Its state is bounded by construction (see the README's table of caps):
//! buckets and run ledgers by the config, leases per bucket by
//! [`MAX_LIVE_LEASES`], rules per bucket, reservations and keys per run by
//! their own constants; at a cap the answer is a coded refusal.

mod adaptive;
mod bucket;
mod concurrency;
mod config;
mod curve;
mod fair_turns;
mod grant;
mod http;
mod idle;
mod lease_id;
mod leases;
mod leash;
mod ledger;
mod map_hash;
mod quota;
mod recent;
mod returns;
mod scope;
mod slot_claims;
mod slot_rules;
mod slot_streams;
mod slots;
mod snapshot;
mod throughput;
mod tickets;
mod timeline;
mod turns;
mod view;

pub use concurrency::MAX_LIVE_LEASES;
pub use config::{GatewayConfig, MAX_NOW_MS, MAX_TABLES};
pub use http::{handle, HttpResponse};
pub use idle::{FORGET_CUT_AFTER_US, RUN_IDLE_US};
pub use lease_id::LeaseKey;
pub use ledger::MAX_BUDGET_KEYS;
pub use scope::{
    mint_rate_scope_token, mint_run_scope_token, verify_rate_scope_token, verify_run_scope_token,
    MAX_TOKEN_LIFETIME_MS,
};
pub use snapshot::{StoredRecord, META_KEY};
pub use view::BucketView;

use crate::error::{Error, ErrorCode, Result};
use crate::protocol::{
    rules_signature, AcquireRequest, AcquireResponse, ChargeRequest, ChargeResponse,
    ObserveRequest, ObserveResponse, PenalizeRequest, PenalizeResponse, ReleaseRequest,
    ReleaseResponse,
};
use bucket::Bucket;
use config::check_now;
use grant::Grant;
use idle::{bucket_forgettable_at, IdleIndex, RUN_IDLE_US as RUN_IDLE};
use lease_id::LeaseIds;
use ledger::Ledger;
use map_hash::KeyedMap;
use slots::KEEPER_RETRY_MS;
use timeline::{ceil_ms, micros, Micros};

#[derive(Debug, Clone, PartialEq)]
pub struct GatewayCore {
    config: GatewayConfig,
    buckets: KeyedMap<Bucket>,
    ledgers: KeyedMap<Ledger>,
    /// When each bucket and ledger may be forgotten.
    idle_buckets: IdleIndex,
    idle_runs: IdleIndex,
    ids: LeaseIds,
    /// No bucket made from now on places a permit before this: the latest
    /// time any forgotten bucket had reserved.
    floor: Micros,
    /// Buckets and runs changed since the host last stored them.
    changed: snapshot::Changed,
}

impl GatewayCore {
    /// `lease_key` makes this gateway's lease ids unpredictable: a host
    /// facing clients passes 32 bytes of fresh randomness; a test or a
    /// scheduler inside one isolate may pass a bare `u64`.
    pub fn new(config: GatewayConfig, lease_key: impl Into<LeaseKey>) -> Result<Self> {
        config.validate()?;
        Ok(GatewayCore::empty(
            config,
            LeaseIds::new(lease_key.into()),
            0,
        ))
    }

    /// A gateway holding no bucket or run yet: a new one, or one a
    /// snapshot's records are about to fill.
    fn empty(config: GatewayConfig, ids: LeaseIds, floor: Micros) -> Self {
        map_hash::mix_keys(&ids.key.0);
        GatewayCore {
            config,
            buckets: KeyedMap::default(),
            ledgers: KeyedMap::default(),
            idle_buckets: IdleIndex::default(),
            idle_runs: IdleIndex::default(),
            ids,
            floor,
            changed: snapshot::Changed::default(),
        }
    }

    pub fn config(&self) -> &GatewayConfig {
        &self.config
    }

    fn authorize(&self, bucket_id: &str, token: Option<&str>, now_ms: u64) -> Result<()> {
        check_now(now_ms)?;
        match &self.config.secret {
            Some(secret) => verify_rate_scope_token(secret, bucket_id, token, now_ms),
            None => Ok(()),
        }
    }

    /// Makes the bucket at the floor if it is new, first forgetting every
    /// bucket that may be forgotten; with the gateway still full, refuses.
    fn ensure_bucket(&mut self, bucket_id: &str, now: Micros) -> Result<()> {
        if self.buckets.contains_key(bucket_id) {
            return Ok(());
        }
        while let Some(id) = self.idle_buckets.pop_due(now) {
            if let Some(b) = self.buckets.remove(&id) {
                self.floor = self.floor.max(b.next_free(0));
                self.changed.bucket(&id);
            }
        }
        if self.buckets.len() >= self.config.max_buckets {
            return Err(Error::unavailable(format!(
                "the gateway holds its maximum of {} buckets and none is idle; \
                 bucket {bucket_id} cannot be made now",
                self.config.max_buckets
            )));
        }
        self.buckets
            .insert(bucket_id.to_owned(), Bucket::new(self.floor));
        Ok(())
    }

    /// Files the bucket under the time it may be forgotten, after a call
    /// changed it at `now`.
    fn touched(&mut self, bucket_id: &str, now: Micros) {
        if let Some(b) = self.buckets.get(bucket_id) {
            self.idle_buckets
                .set(bucket_id, bucket_forgettable_at(b, now));
            self.changed.bucket(bucket_id);
        }
    }

    pub fn acquire(&mut self, req: &AcquireRequest, now_ms: u64) -> Result<AcquireResponse> {
        self.authorize(&req.bucket_id, req.rate_scope_token.as_deref(), now_ms)?;
        if let Some(max) = req
            .rules
            .iter()
            .filter_map(|r| r.max_concurrency)
            .find(|&m| m > MAX_LIVE_LEASES)
        {
            return Err(Error::invalid(format!(
                "maxConcurrency {max} is more live leases than a gateway bucket holds \
                 ({MAX_LIVE_LEASES})"
            )));
        }
        let signature = rules_signature(&req.rules);
        if let Some(existing) = self.buckets.get(&req.bucket_id) {
            existing.check_rules_change(&req.rules, &signature, &req.bucket_id)?;
        }
        let now = micros(now_ms);
        let horizon = now + micros(self.config.horizon_ms);
        // A lead of more than half the horizon would leave a client little
        // to be granted; it still gets what it asked for the trip back.
        let lead = req
            .dispatch_lead_ms
            .unwrap_or(0)
            .min(self.config.horizon_ms / 2);
        let lease_ttl = micros(self.config.lease_ttl_ms);
        self.ensure_bucket(&req.bucket_id, now)?;
        let bucket = self.buckets.get_mut(&req.bucket_id).expect("ensured");
        bucket.apply_rules(&req.rules, signature, self.config.window_guard_ms);
        bucket.concurrency.observe(&req.rules, now);
        bucket.retire(now);
        bucket.mature(now);
        bucket.take_back(&req.returned_at_ms, now_ms);
        if !req.released_lease_ids.is_empty() {
            bucket
                .leases
                .release(&req.released_lease_ids, now, lease_ttl);
        }
        if let Some(report) = &req.quota {
            bucket.observe_quota(report, now, self.config.window_guard_ms);
        }
        bucket.successes_reported(req.observed_successes, now);
        let earliest = now + micros(lead);
        let kind = req
            .slots_wanted
            .and_then(|_| bucket.slot_kind(req.slot_kind, now));
        let mut kept = None;
        let mut claim = None;
        let grant = match (kind, req.slots_wanted) {
            (Some(paced), Some(wanted)) => {
                let slots = bucket.hand_slots(
                    &req.held_lease_ids,
                    wanted,
                    !req.released_lease_ids.is_empty(),
                    paced,
                    req.slot_claim,
                    now,
                    earliest,
                    horizon,
                    lease_ttl,
                    &mut self.ids,
                );
                // A client that keeps slots and got fewer new ones than it
                // asked for serves its callers with its own for a while
                // before it asks again.
                let short = (slots.new.len() as u64) < wanted;
                claim = slots.claim;
                let mut held = slots.kept;
                if paced {
                    held.extend(slots.new.iter().map(|(id, _)| id.clone()));
                }
                let grant = if held.is_empty() && slots.new.is_empty() {
                    // A paced slot frees when its holder's call ends, or
                    // when it idles with others waiting: soon, and no turn
                    // at a chain's end.
                    bucket.refuse_for_slots(now, slots.first_waiter || paced)
                } else if paced {
                    // Its calls take the timeline's permits: granted as for
                    // a bucket with no concurrency bound, the slots it holds
                    // being what bounds its calls in flight.
                    let mut grant = bucket.grant(
                        req.requested,
                        req.book_next_turn,
                        req.waiting_callers,
                        None,
                        false,
                        true,
                        now,
                        earliest,
                        bucket.grant_horizon(now, horizon),
                        lease_ttl,
                        &mut self.ids,
                    );
                    if short {
                        grant.wait_ms = grant.wait_ms.max(KEEPER_RETRY_MS);
                    }
                    grant
                } else {
                    let (ids, times) = slots.new.into_iter().unzip();
                    Grant {
                        times,
                        lease_ids: Some(ids),
                        wait_ms: match (short, slots.in_line) {
                            (true, true) => bucket.keeper_turn_ms(now),
                            (true, false) => KEEPER_RETRY_MS,
                            (false, _) => 0,
                        },
                        turn_ticket: None,
                    }
                };
                kept = Some((held, paced));
                grant
            }
            _ => bucket.grant(
                req.requested,
                req.book_next_turn,
                req.waiting_callers,
                req.turn_ticket,
                true,
                req.slots_wanted.is_some(),
                now,
                earliest,
                horizon,
                lease_ttl,
                &mut self.ids,
            ),
        };
        let mut response = bucket.response(grant, now, self.config.dispatch_tolerance_ms());
        if bucket.max_concurrency().is_some() {
            response.slot_waiters = bucket.leases.streams.contended(now);
        }
        if let Some(claim) = claim {
            claim.write(&mut response);
        }
        if let Some((held, paced)) = kept {
            response.kept_lease_ids = Some(held);
            response.lease_spacing_ms = match paced {
                true => Some(0),
                false => bucket.stream_spacing().map(ceil_ms),
            };
            response.lease_ttl_ms = Some(self.config.lease_ttl_ms);
        }
        self.touched(&req.bucket_id, now);
        Ok(response)
    }

    pub fn release(&mut self, req: &ReleaseRequest, now_ms: u64) -> Result<ReleaseResponse> {
        self.authorize(&req.bucket_id, req.rate_scope_token.as_deref(), now_ms)?;
        let now = micros(now_ms);
        let signature = rules_signature(&req.rules);
        let released = self.buckets.get_mut(&req.bucket_id).map_or(0, |b| {
            // Times come back only under the rules that spaced them.
            if !req.returned_at_ms.is_empty() && b.signature == signature {
                b.take_back(&req.returned_at_ms, now_ms);
            }
            b.leases
                .release(&req.lease_ids, now, micros(self.config.lease_ttl_ms))
        });
        if released > 0 {
            self.touched(&req.bucket_id, now);
        } else if !req.returned_at_ms.is_empty() && self.buckets.contains_key(&req.bucket_id) {
            self.changed.bucket(&req.bucket_id);
        }
        Ok(ReleaseResponse { released })
    }

    pub fn penalize(&mut self, req: &PenalizeRequest, now_ms: u64) -> Result<PenalizeResponse> {
        self.authorize(&req.bucket_id, req.rate_scope_token.as_deref(), now_ms)?;
        let now = micros(now_ms);
        self.ensure_bucket(&req.bucket_id, now)?;
        let bucket = self.buckets.get_mut(&req.bucket_id).expect("ensured");
        bucket.mature(now);
        if let Some(report) = &req.quota {
            bucket.observe_quota(report, now, self.config.window_guard_ms);
        }
        bucket.penalize(now, micros(req.cooldown_ms), req.sent_at_ms.map(micros));
        let response = PenalizeResponse {
            effective_requests_per_second: bucket.effective_rps(),
            cooldown_until_ms: ceil_ms(bucket.cooldown_until),
        };
        self.touched(&req.bucket_id, now);
        Ok(response)
    }

    /// A provider's quota headers, relayed on their own. A bucket the
    /// gateway does not hold is not made for it: a report means nothing
    /// before the rules it qualifies.
    pub fn observe(&mut self, req: &ObserveRequest, now_ms: u64) -> Result<ObserveResponse> {
        self.authorize(&req.bucket_id, req.rate_scope_token.as_deref(), now_ms)?;
        let now = micros(now_ms);
        let Some(bucket) = self.buckets.get_mut(&req.bucket_id) else {
            return Ok(ObserveResponse {
                effective_requests_per_second: None,
            });
        };
        bucket.mature(now);
        bucket.observe_quota(&req.quota, now, self.config.window_guard_ms);
        let response = ObserveResponse {
            effective_requests_per_second: bucket.effective_rps(),
        };
        self.touched(&req.bucket_id, now);
        Ok(response)
    }

    /// Charges the run. With a secret it needs the run's token. A ledger
    /// idle for a day is forgotten before the charge, as it would be by a
    /// sweep, so the answer never depends on when sweeps ran.
    pub fn charge(&mut self, req: &ChargeRequest, now_ms: u64) -> Result<ChargeResponse> {
        check_now(now_ms)?;
        if let Some(secret) = &self.config.secret {
            verify_run_scope_token(
                secret,
                &req.root_run_id,
                req.run_scope_token.as_deref(),
                now_ms,
            )?;
        }
        let now = micros(now_ms);
        let run = &req.root_run_id;
        self.changed.run(run);
        if self.idle_runs.get(run).is_some_and(|at| at <= now) {
            self.idle_runs.remove(run);
            self.ledgers.remove(run);
        }
        if !self.ledgers.contains_key(run) {
            while let Some(id) = self.idle_runs.pop_due(now) {
                self.ledgers.remove(&id);
                self.changed.run(&id);
            }
            if self.ledgers.len() >= self.config.max_runs {
                return Err(Error::unavailable(format!(
                    "the gateway holds its maximum of {} run ledgers and none is idle; \
                     run {run} cannot be charged now",
                    self.config.max_runs
                )));
            }
        }
        let ledger = self.ledgers.entry(run.clone()).or_default();
        let result = ledger.charge(req, now);
        if ledger.order.is_empty() {
            // A new run's first charge was refused: nothing to keep.
            self.ledgers.remove(run);
        } else if !result
            .as_ref()
            .is_err_and(|e| e.code == ErrorCode::InvalidInput)
        {
            let last_charge = self
                .idle_runs
                .get(run)
                .map_or(now, |at| at.saturating_sub(RUN_IDLE).max(now));
            self.idle_runs
                .set(run, last_charge.saturating_add(RUN_IDLE));
        }
        result
    }

    /// A run's budget counter for `key` (0 if never charged): for tests and
    /// the simulation's books, which check the gateway's counts against
    /// the clients'.
    #[cfg(any(test, feature = "sim"))]
    pub fn budget_counter(&self, root_run_id: &str, key: &str) -> u64 {
        self.ledgers.get(root_run_id).map_or(0, |l| l.count(key))
    }

    /// Buckets held, for tests of the gateway's bounds.
    #[cfg(any(test, feature = "sim"))]
    pub fn bucket_count(&self) -> usize {
        self.buckets.len()
    }

    /// Run ledgers held, for tests of the gateway's bounds.
    #[cfg(any(test, feature = "sim"))]
    pub fn run_count(&self) -> usize {
        self.ledgers.len()
    }

    /// Entries in every bucket's lease expiry queue, live or released: what
    /// the lease tables cost, for benchmarks and leak tests.
    #[cfg(any(test, feature = "sim"))]
    pub fn queued_leases(&self) -> usize {
        self.buckets.values().map(|b| b.leases.queued()).sum()
    }
}
