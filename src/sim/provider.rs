//! A provider that enforces a limit the clients are not told: requests per
//! second over a sliding second and calls in flight. Over either it answers
//! 429 with `Retry-After: 1`. It records every dispatch.

use std::cell::RefCell;
use std::collections::VecDeque;

use crate::time::Millis;

pub const RETRY_AFTER_MS: Millis = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Ok,
    TooManyRequests,
}

#[derive(Default)]
struct State {
    accepted_recent: VecDeque<Millis>,
    in_flight: u64,
    max_in_flight: u64,
    dispatches: Vec<Millis>,
    rejections: Vec<Millis>,
}

/// `limit_at(t)` gives the true requests-per-second limit at time `t`.
pub struct Provider {
    limit_at: Box<dyn Fn(Millis) -> u64>,
    max_concurrency: Option<u64>,
    state: RefCell<State>,
}

impl Provider {
    pub fn new(limit_at: impl Fn(Millis) -> u64 + 'static, max_concurrency: Option<u64>) -> Self {
        Provider {
            limit_at: Box::new(limit_at),
            max_concurrency,
            state: RefCell::new(State::default()),
        }
    }

    /// A call arrives at `now`; the caller must call [`Provider::end`] when
    /// it completes.
    pub fn begin(&self, now: Millis) -> Answer {
        let mut s = self.state.borrow_mut();
        s.dispatches.push(now);
        s.in_flight += 1;
        s.max_in_flight = s.max_in_flight.max(s.in_flight);
        while s.accepted_recent.front().is_some_and(|&t| t + 1_000 <= now) {
            s.accepted_recent.pop_front();
        }
        let over_rate = s.accepted_recent.len() as u64 >= (self.limit_at)(now);
        let over_concurrency = self.max_concurrency.is_some_and(|max| s.in_flight > max);
        if over_rate || over_concurrency {
            s.rejections.push(now);
            Answer::TooManyRequests
        } else {
            s.accepted_recent.push_back(now);
            Answer::Ok
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
