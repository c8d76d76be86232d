//! What a fleet run reports: every dispatch instant, 429, grant and wait,
//! and the window counts and shares read off them.

use std::collections::BTreeMap;

use crate::time::Millis;

#[derive(Debug, Clone, Default)]
pub struct FleetReport {
    /// Every provider dispatch, ms since start.
    pub dispatches: Vec<Millis>,
    /// Dispatches the provider answered 429.
    pub rejections: Vec<Millis>,
    /// Every time the gateway granted, ms since start.
    pub granted: Vec<Millis>,
    pub gateway_round_trips: u64,
    /// Gateway calls by endpoint (`acquire`, `release`, `penalize`, `charge`).
    pub round_trips_by_kind: BTreeMap<&'static str, u64>,
    /// Each dispatched call's wait from its arrival to its dispatch, ms.
    pub waits: Vec<f64>,
    /// Calls that arrived (open loop) or were attempted (closed loop).
    pub calls: u64,
    pub max_in_flight: u64,
    /// Errors callers saw, by code.
    pub errors: BTreeMap<&'static str, u64>,
    /// `(ms since start, effective req/s)` after every acquire the gateway answered.
    pub effective_rps: Vec<(Millis, f64)>,
    /// `(ms since start, isolate)` of every dispatch.
    pub dispatch_log: Vec<(Millis, usize)>,
    pub isolates: usize,
    /// The budget: calls charged locally, and the gateway's counter.
    pub budget_used: u64,
    pub budget_counter_at_gateway: u64,
    pub budget_reserved_unused: u64,
}

impl FleetReport {
    /// Sliding windows `[t, t + window)` starting at a dispatch that hold
    /// more than `limit` dispatches.
    pub fn windows_over(&self, limit: u64, window_ms: Millis) -> usize {
        self.window_counts(window_ms).filter(|&n| n > limit).count()
    }

    /// The most dispatches in any half-open window of `window_ms`.
    pub fn densest_window(&self, window_ms: Millis) -> u64 {
        self.window_counts(window_ms).max().unwrap_or(0)
    }

    /// How many dispatches each window `[t, t + window_ms)` starting at a
    /// dispatch holds.
    fn window_counts(&self, window_ms: Millis) -> impl Iterator<Item = u64> + '_ {
        let d = &self.dispatches;
        let mut end = 0;
        (0..d.len()).map(move |start| {
            end = end.max(start);
            while end < d.len() && d[end] < d[start] + window_ms {
                end += 1;
            }
            (end - start) as u64
        })
    }

    /// Each isolate's dispatches in `[from, to)`.
    pub fn shares_between(&self, from: Millis, to: Millis) -> Vec<u64> {
        let mut shares = vec![0; self.isolates];
        for &(at, isolate) in &self.dispatch_log {
            if at >= from && at < to {
                shares[isolate] += 1;
            }
        }
        shares
    }

    /// How far the isolate furthest from an equal share of `[from, to)`
    /// strays from it, as a fraction of the equal share.
    pub fn share_spread(&self, from: Millis, to: Millis) -> f64 {
        let shares = self.shares_between(from, to);
        let mean = shares.iter().sum::<u64>() as f64 / shares.len().max(1) as f64;
        shares
            .iter()
            .map(|&n| (n as f64 / mean - 1.0).abs())
            .fold(0.0, f64::max)
    }

    /// The waits of the calls dispatched at or after `from` (ms since
    /// start): a fleet's waits once its start is past.
    pub fn waits_from(&self, from: Millis) -> Vec<f64> {
        self.dispatch_log
            .iter()
            .zip(&self.waits)
            .filter(|((at, _), _)| *at >= from)
            .map(|(_, &wait)| wait)
            .collect()
    }

    /// The longest any dispatched call waited from its arrival, ms.
    pub fn longest_wait_ms(&self) -> f64 {
        self.waits.iter().copied().fold(0.0, f64::max)
    }

    pub fn dispatches_between(&self, from: Millis, to: Millis) -> usize {
        self.dispatches
            .iter()
            .filter(|&&t| t >= from && t < to)
            .count()
    }

    pub fn accepted_between(&self, from: Millis, to: Millis) -> usize {
        self.dispatches_between(from, to)
            - self
                .rejections
                .iter()
                .filter(|&&t| t >= from && t < to)
                .count()
    }

    pub fn rejection_share(&self, from: Millis, to: Millis) -> f64 {
        let all = self.dispatches_between(from, to);
        let rejected = self
            .rejections
            .iter()
            .filter(|&&t| t >= from && t < to)
            .count();
        if all == 0 {
            0.0
        } else {
            rejected as f64 / all as f64
        }
    }

    pub fn round_trips_per_permit(&self) -> f64 {
        self.gateway_round_trips as f64 / self.dispatches.len().max(1) as f64
    }

    /// Whether every dispatch used a time the gateway granted, at or after it.
    pub fn every_dispatch_had_a_reserved_time(&self) -> bool {
        let mut granted = self.granted.clone();
        granted.sort_unstable();
        let mut dispatches = self.dispatches.clone();
        dispatches.sort_unstable();
        let mut next = 0;
        dispatches.iter().all(|&d| {
            if next < granted.len() && granted[next] <= d {
                next += 1;
                true
            } else {
                false
            }
        })
    }
}
