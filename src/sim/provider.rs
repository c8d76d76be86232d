//! A provider that enforces a limit the clients are not told: by default
//! requests per second over a sliding second and calls in flight, over
//! either of which it answers 429 with `Retry-After: 1`. Other models
//! refuse at random, or count fixed windows and say so in quota headers.
//! It records every dispatch.
//!
//! A refused call is answered at once and holds nothing, as the peer
//! benchmark's provider (and a provider's front door) answers it: held as
//! long as an accepted call, its 429 reached the gateway a call's time
//! late, after the next permit's time, and the gateway read the limit a
//! call high (9 a second for 8).

use std::cell::RefCell;
use std::collections::VecDeque;

use crate::governor::QuotaHeaders;
use crate::time::Millis;

pub const RETRY_AFTER_MS: Millis = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Ok,
    TooManyRequests,
}

/// An answer as the client sees it: a status and the headers that matter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub answer: Answer,
    /// `Retry-After` of a 429.
    pub retry_after: Option<String>,
    pub quota_headers: QuotaHeaders,
}

/// How the provider decides, on top of its concurrency limit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ProviderModel {
    /// The rate limit over a sliding second, unannounced.
    #[default]
    SlidingSecond,
    /// The sliding second, and besides it refuses this share of calls (in
    /// millionths) at random: 429s that say nothing about the rate.
    Noise { refused_per_million: u64 },
    /// `quota` calls per fixed window of `window_ms` (windows start at
    /// multiples of it since the epoch), announced on every answer with
    /// `X-RateLimit-Remaining` and `X-RateLimit-Reset` (delay seconds,
    /// rounded up, as most providers send them).
    FixedWindow { quota: u64, window_ms: Millis },
    /// The sliding second, and every answer states the rate in force
    /// (`X-RateLimit-Limit`), as peer scenario c's provider does.
    StatedLimit,
}

#[derive(Default)]
struct State {
    accepted_recent: VecDeque<Millis>,
    in_flight: u64,
    max_in_flight: u64,
    dispatches: Vec<Millis>,
    rejections: Vec<Millis>,
    /// The fixed window's start and the calls accepted in it.
    window: (Millis, u64),
    random: u64,
}

/// `limit_at(t)` gives the true requests-per-second limit at time `t`.
pub struct Provider {
    limit_at: Box<dyn Fn(Millis) -> u64>,
    max_concurrency: Option<u64>,
    model: ProviderModel,
    state: RefCell<State>,
}

impl Provider {
    pub fn new(limit_at: impl Fn(Millis) -> u64 + 'static, max_concurrency: Option<u64>) -> Self {
        Provider::with_model(limit_at, max_concurrency, ProviderModel::default())
    }

    pub fn with_model(
        limit_at: impl Fn(Millis) -> u64 + 'static,
        max_concurrency: Option<u64>,
        model: ProviderModel,
    ) -> Self {
        Provider {
            limit_at: Box::new(limit_at),
            max_concurrency,
            model,
            state: RefCell::new(State {
                random: 0x9e37_79b9_7f4a_7c15,
                ..State::default()
            }),
        }
    }

    /// A call arrives at `now`; the caller must call [`Provider::end`] when
    /// an accepted one completes, and answer a refused one at once.
    pub fn begin(&self, now: Millis) -> Reply {
        let mut s = self.state.borrow_mut();
        s.dispatches.push(now);
        let arriving_in_flight = s.in_flight + 1;
        s.max_in_flight = s.max_in_flight.max(arriving_in_flight);
        while s.accepted_recent.front().is_some_and(|&t| t + 1_000 <= now) {
            s.accepted_recent.pop_front();
        }
        let limit = (self.limit_at)(now);
        let over_rate = s.accepted_recent.len() as u64 >= limit;
        let over_concurrency = self
            .max_concurrency
            .is_some_and(|max| arriving_in_flight > max);
        let mut retry_after_ms = RETRY_AFTER_MS;
        let mut quota_headers = QuotaHeaders::default();
        let refused_by_model = match self.model {
            ProviderModel::SlidingSecond => false,
            ProviderModel::StatedLimit => {
                quota_headers.x_ratelimit_limit = Some(limit.to_string());
                false
            }
            ProviderModel::Noise {
                refused_per_million,
            } => {
                // xorshift64: deterministic, so every run is the same run.
                s.random ^= s.random << 13;
                s.random ^= s.random >> 7;
                s.random ^= s.random << 17;
                s.random % 1_000_000 < refused_per_million
            }
            ProviderModel::FixedWindow { quota, window_ms } => {
                let start = now - now % window_ms;
                if s.window.0 != start {
                    s.window = (start, 0);
                }
                let full = s.window.1 >= quota;
                if !full && !over_rate && !over_concurrency {
                    s.window.1 += 1;
                }
                let reset_ms = start + window_ms - now;
                retry_after_ms = reset_ms;
                quota_headers.x_ratelimit_remaining =
                    Some(quota.saturating_sub(s.window.1).to_string());
                quota_headers.x_ratelimit_reset = Some(reset_ms.div_ceil(1_000).to_string());
                full
            }
        };
        if over_rate || over_concurrency || refused_by_model {
            s.rejections.push(now);
            Reply {
                answer: Answer::TooManyRequests,
                retry_after: Some(retry_after_ms.div_ceil(1_000).max(1).to_string()),
                quota_headers,
            }
        } else {
            s.accepted_recent.push_back(now);
            s.in_flight += 1;
            Reply {
                answer: Answer::Ok,
                retry_after: None,
                quota_headers,
            }
        }
    }

    pub fn end(&self) {
        self.state.borrow_mut().in_flight -= 1;
    }

    pub fn dispatches(&self) -> Vec<Millis> {
        self.state.borrow().dispatches.clone()
    }

    pub fn rejections(&self) -> Vec<Millis> {
        self.state.borrow().rejections.clone()
    }

    pub fn max_in_flight(&self) -> u64 {
        self.state.borrow().max_in_flight
    }
}
