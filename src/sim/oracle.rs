//! The closed-loop oracle: what one ideal central queue would give a fleet
//! of callers that call back to back. Every caller asks, the queue serves
//! asks in the order they came at the rule's rate (and never more calls at
//! once than its concurrency bound), and a caller asks again when its call
//! completes. No round trips, no blocks, no turns: the wait each call would
//! have had with the whole fleet behind one FIFO.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::fleet::FleetConfig;

/// Each call's wait in the oracle, in dispatch order, for the callers of
/// `config`'s closed loop (`isolates x callers_per_isolate`, all asking at
/// the start) over `duration_ms`. A call takes `call_latency_ms` plus the
/// run's transit and call-hold jitter, drawn from the same seeded streams.
pub fn closed_loop_oracle_waits(config: &FleetConfig) -> Vec<f64> {
    let callers = config.isolates * config.callers_per_isolate;
    let interval = 1_000.0 / config.rule.requests_per_second();
    let (transit, holds) = (config.jitter.transit(), config.jitter.call_holds());
    let call_ms = || (config.call_latency_ms + transit.draw() + holds.draw()) as f64;
    let end = config.duration_ms as f64;
    // Asks in the order they came (ties by caller), as integer micros so
    // the heap orders them exactly.
    let mut asks: BinaryHeap<Reverse<(u64, usize)>> =
        (0..callers).map(|c| Reverse((0, c))).collect();
    // When each call in flight ends, for the concurrency bound.
    let mut in_flight: BinaryHeap<Reverse<u64>> = BinaryHeap::new();
    let max_in_flight = config.rule.max_concurrency.map(|m| m as usize);
    let mut previous = f64::NEG_INFINITY;
    let mut waits = Vec::new();
    while let Some(Reverse((asked_us, caller))) = asks.pop() {
        let asked = asked_us as f64 / 1_000.0;
        let mut dispatch = asked.max(previous + interval);
        if let Some(max) = max_in_flight {
            while in_flight
                .peek()
                .is_some_and(|&Reverse(ends)| ends as f64 / 1_000.0 <= dispatch)
            {
                in_flight.pop();
            }
            if in_flight.len() >= max {
                let &Reverse(ends) = in_flight.peek().expect("a call in flight");
                dispatch = dispatch.max(ends as f64 / 1_000.0);
            }
        }
        if dispatch >= end {
            continue;
        }
        if max_in_flight.is_some_and(|max| in_flight.len() >= max) {
            in_flight.pop();
        }
        previous = dispatch;
        waits.push(dispatch - asked);
        let done = ((dispatch + call_ms()) * 1_000.0) as u64;
        in_flight.push(Reverse(done));
        asks.push(Reverse((done, caller)));
    }
    waits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::PacingRule;
    use crate::sim::arrivals::percentile;
    use crate::time::Millis;

    fn fleet(isolates: usize, callers: usize, call_ms: Millis) -> FleetConfig {
        let mut c = FleetConfig::saturated();
        c.isolates = isolates;
        c.callers_per_isolate = callers;
        c.call_latency_ms = call_ms;
        c.duration_ms = 60_000;
        c
    }

    #[test]
    fn a_saturated_loop_waits_for_every_other_caller_once_per_call() {
        // 16 callers at 20/s: a caller is served every 800 ms, and its
        // 40 ms call is part of that cycle.
        let waits = closed_loop_oracle_waits(&fleet(4, 4, 40));
        let (p50, p99) = (percentile(&waits, 50.0), percentile(&waits, 99.0));
        assert!((755.0..=765.0).contains(&p50), "{p50}");
        assert!((755.0..=765.0).contains(&p99), "{p99}");
    }

    #[test]
    fn callers_fewer_than_the_rate_allows_never_wait_once_the_start_is_past() {
        // 2 callers, 100 ms calls, 20/s: each asks every 100 ms, well
        // under the rate.
        let waits = closed_loop_oracle_waits(&fleet(1, 2, 100));
        assert_eq!(waits[..2], [0.0, 50.0]);
        assert!(waits[2..].iter().all(|&w| w == 0.0), "{:?}", &waits[..8]);
    }

    #[test]
    fn the_concurrency_bound_holds_calls_until_one_ends() {
        // One slot, calls of 1 s: one call a second whatever the rate.
        let mut c = fleet(1, 4, 1_000);
        c.rule = PacingRule::new(20, 1_000).with_max_concurrency(1);
        let waits = closed_loop_oracle_waits(&c);
        assert_eq!(waits.len(), 60, "{waits:?}");
        assert_eq!(waits[..4], [0.0, 1_000.0, 2_000.0, 3_000.0]);
        assert!(waits[4..].iter().all(|&w| w == 3_000.0));
    }
}
