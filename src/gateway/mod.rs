//! The gateway: the one authority every isolate shares. It owns each
//! bucket's timelines, adaptive rate, cooldown and leases, and each run's
//! budget counters. It is pure: every call takes the request and the time,
//! and the host (a Durable Object, a Node server, a test) supplies both.

mod adaptive;
mod bucket;
mod http;
mod leases;
mod ledger;
mod quota;
mod scope;
mod snapshot;
mod timeline;

pub use http::{handle, HttpResponse};
pub use scope::{mint_rate_scope_token, verify_rate_scope_token};

use std::collections::HashMap;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::protocol::{
    rules_signature, AcquireRequest, AcquireResponse, ChargeRequest, ChargeResponse,
    ObserveRequest, ObserveResponse, PacingRule, PenalizeRequest, PenalizeResponse, ReleaseRequest,
    ReleaseResponse,
};
use bucket::Bucket;
use leases::LeaseIds;
use ledger::Ledger;
use timeline::{ceil_ms, micros, Micros};

#[derive(Debug, Clone, PartialEq)]
pub struct GatewayConfig {
    /// With a secret, every rate request must carry a valid token for its
    /// bucket (see [`mint_rate_scope_token`]).
    pub secret: Option<Vec<u8>>,
    /// How far ahead of now a dispatch time may be granted.
    pub horizon_ms: u64,
    /// How long a concurrency lease lives past its dispatch time unless
    /// released.
    pub lease_ttl_ms: u64,
    /// Past this many buckets, idle ones are forgotten (only those whose
    /// forgetting cannot loosen a limit).
    pub max_buckets: usize,
    /// Every rule window is scheduled as if this much longer, to absorb
    /// jitter between a permit's time and its arrival at the provider.
    pub window_guard_ms: u64,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            secret: None,
            horizon_ms: 1_000,
            lease_ttl_ms: 60_000,
            max_buckets: 10_000,
            window_guard_ms: 0,
        }
    }
}

impl GatewayConfig {
    pub fn validate(&self) -> Result<()> {
        if !(1..=60_000).contains(&self.horizon_ms) {
            return Err(Error::invalid(format!(
                "horizonMs must be from 1 to 60000, got {}",
                self.horizon_ms
            )));
        }
        if !(self.horizon_ms..=86_400_000).contains(&self.lease_ttl_ms) {
            return Err(Error::invalid(format!(
                "leaseTtlMs must be from horizonMs ({}) to 86400000, got {}",
                self.horizon_ms, self.lease_ttl_ms
            )));
        }
        if self.secret.as_ref().is_some_and(|s| s.is_empty()) {
            return Err(Error::invalid("secret must not be empty"));
        }
        if self.window_guard_ms > 60_000 {
            return Err(Error::invalid(format!(
                "windowGuardMs must be at most 60000, got {}",
                self.window_guard_ms
            )));
        }
        if self.max_buckets == 0 {
            return Err(Error::invalid("maxBuckets must be at least 1"));
        }
        Ok(())
    }
}

/// A bucket's live state, for people and dashboards.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BucketView {
    pub bucket_id: String,
    pub rules: Vec<PacingRule>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configured_requests_per_second: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_requests_per_second: Option<f64>,
    pub next_free_at_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cooldown_until_ms: Option<u64>,
    pub live_leases: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u64>,
    /// Successes clients reported. The rate law credits the time granted
    /// permits matured instead (see the gateway's adaptive module), so this
    /// is for people.
    pub reported_successes: u64,
    pub server_now_ms: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GatewayCore {
    config: GatewayConfig,
    buckets: HashMap<String, Bucket>,
    ledgers: HashMap<String, Ledger>,
    ids: LeaseIds,
    /// No bucket made from now on places a permit before this: the latest
    /// time any forgotten bucket had reserved.
    floor: Micros,
}

impl GatewayCore {
    /// `seed` makes the lease ids of this gateway unlike any other's; hosts
    /// pass fresh randomness, tests a fixed number.
    pub fn new(config: GatewayConfig, seed: u64) -> Result<Self> {
        config.validate()?;
        Ok(GatewayCore {
            config,
            buckets: HashMap::new(),
            ledgers: HashMap::new(),
            ids: LeaseIds::new(seed),
            floor: 0,
        })
    }

    pub fn config(&self) -> &GatewayConfig {
        &self.config
    }

    fn authorize(&self, bucket_id: &str, token: Option<&str>, now_ms: u64) -> Result<()> {
        match &self.config.secret {
            Some(secret) => verify_rate_scope_token(secret, bucket_id, token, now_ms),
            None => Ok(()),
        }
    }

    /// Makes the bucket at the floor if it is new. Making one may first
    /// forget idle buckets to stay within `max_buckets`.
    fn ensure_bucket(&mut self, bucket_id: &str, now: Micros) {
        if !self.buckets.contains_key(bucket_id) {
            self.evict_idle(now);
            self.buckets
                .insert(bucket_id.to_owned(), Bucket::new(self.floor));
        }
    }

    fn evict_idle(&mut self, now: Micros) {
        if self.buckets.len() < self.config.max_buckets {
            return;
        }
        let mut floor = self.floor;
        self.buckets.retain(|_, b| {
            let idle = b.is_idle(now);
            if idle {
                floor = floor.max(b.next_free(0));
            }
            !idle
        });
        self.floor = floor;
    }

    pub fn acquire(&mut self, req: &AcquireRequest, now_ms: u64) -> Result<AcquireResponse> {
        self.authorize(&req.bucket_id, req.rate_scope_token.as_deref(), now_ms)?;
        let signature = rules_signature(&req.rules);
        if let Some(existing) = self.buckets.get(&req.bucket_id) {
            existing.check_rules_change(&req.rules, &signature, &req.bucket_id)?;
        }
        let now = micros(now_ms);
        let horizon = now + micros(self.config.horizon_ms);
        let lease_ttl = micros(self.config.lease_ttl_ms);
        self.ensure_bucket(&req.bucket_id, now);
        let bucket = self.buckets.get_mut(&req.bucket_id).expect("ensured");
        bucket.apply_rules(&req.rules, signature, self.config.window_guard_ms);
        bucket.retire(now);
        bucket.mature(now);
        if let Some(report) = &req.quota {
            bucket.observe_quota(report, now);
        }
        bucket.reported_successes = bucket
            .reported_successes
            .saturating_add(req.observed_successes);
        let grant = bucket.grant(req.requested, now, horizon, lease_ttl, &mut self.ids);
        Ok(bucket.response(grant, now))
    }

    pub fn release(&mut self, req: &ReleaseRequest, now_ms: u64) -> Result<ReleaseResponse> {
        self.authorize(&req.bucket_id, req.rate_scope_token.as_deref(), now_ms)?;
        let released = self.buckets.get_mut(&req.bucket_id).map_or(0, |b| {
            b.leases.release(
                &req.lease_ids,
                micros(now_ms),
                micros(self.config.lease_ttl_ms),
            )
        });
        Ok(ReleaseResponse { released })
    }

    pub fn penalize(&mut self, req: &PenalizeRequest, now_ms: u64) -> Result<PenalizeResponse> {
        self.authorize(&req.bucket_id, req.rate_scope_token.as_deref(), now_ms)?;
        let now = micros(now_ms);
        self.ensure_bucket(&req.bucket_id, now);
        let bucket = self.buckets.get_mut(&req.bucket_id).expect("ensured");
        bucket.mature(now);
        if let Some(report) = &req.quota {
            bucket.observe_quota(report, now);
        }
        bucket.penalize(now, micros(req.cooldown_ms));
        Ok(PenalizeResponse {
            effective_requests_per_second: bucket.effective_rps(),
            cooldown_until_ms: ceil_ms(bucket.cooldown_until),
        })
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
        bucket.observe_quota(&req.quota, now);
        Ok(ObserveResponse {
            effective_requests_per_second: bucket.effective_rps(),
        })
    }

    pub fn charge(&mut self, req: &ChargeRequest, _now_ms: u64) -> Result<ChargeResponse> {
        self.ledgers
            .entry(req.root_run_id.clone())
            .or_default()
            .charge(req)
    }

    /// The bucket's live state, or `None` if the gateway holds none for it.
    /// With a secret configured this needs the bucket's token like any
    /// other rate call.
    pub fn bucket(
        &mut self,
        bucket_id: &str,
        token: Option<&str>,
        now_ms: u64,
    ) -> Result<Option<BucketView>> {
        self.authorize(bucket_id, token, now_ms)?;
        let now = micros(now_ms);
        Ok(self.buckets.get_mut(bucket_id).map(|b| BucketView {
            bucket_id: bucket_id.to_owned(),
            rules: b.rules.clone(),
            configured_requests_per_second: b.adaptive.as_ref().map(|a| a.cap),
            effective_requests_per_second: b.effective_rps(),
            next_free_at_ms: ceil_ms(b.next_free(now)),
            cooldown_until_ms: b.cooldown_until_ms(now),
            live_leases: b.leases.live(now) as u64,
            max_concurrency: b.max_concurrency(),
            reported_successes: b.reported_successes,
            server_now_ms: now_ms,
        }))
    }

    /// A run's budget counter for `key` (0 if never charged).
    pub fn budget_counter(&self, root_run_id: &str, key: &str) -> u64 {
        self.ledgers.get(root_run_id).map_or(0, |l| l.count(key))
    }

    pub fn bucket_count(&self) -> usize {
        self.buckets.len()
    }
}
