//! How much a refill asks for: an isolate's demand, from the callers
//! waiting now, its recent rate of draws, and whether its callers drained
//! the last block.

use crate::protocol::{limits, strictest_rps, PacingRule};
use crate::time::Millis;

/// A moving rate of draws (per second, decaying with a two-second time
/// constant): an isolate's recent demand.
#[derive(Default)]
pub(super) struct DrawRate {
    rate: f64,
    at: Millis,
}

const DEMAND_TAU_MS: f64 = 2_000.0;

impl DrawRate {
    pub fn draw(&mut self, now: Millis) {
        self.rate = self.rate_at(now) + 1_000.0 / DEMAND_TAU_MS;
        self.at = now;
    }

    /// Leaves `ms` out of the decay (time the isolate had nothing to draw).
    pub fn skip(&mut self, ms: Millis) {
        self.at = self.at.saturating_add(ms);
    }

    pub fn rate_at(&self, now: Millis) -> f64 {
        let elapsed = now.saturating_sub(self.at) as f64;
        self.rate * exp_neg(elapsed / DEMAND_TAU_MS)
    }
}

/// `e^-y` for `y >= 0`, to within about 1e-6 of it: halved until small, a
/// Taylor polynomial there, squared back up. libm's `exp` would add half a
/// kilobyte to every wasm module for this one decay.
fn exp_neg(y: f64) -> f64 {
    if y.is_nan() || y > 700.0 {
        return 0.0;
    }
    let mut z = y;
    let mut halvings = 0;
    while z > 1.0 / 16.0 {
        z /= 2.0;
        halvings += 1;
    }
    let mut e = 1.0 - z * (1.0 - z * (0.5 - z * (1.0 / 6.0 - z * (1.0 / 24.0 - z / 120.0))));
    for _ in 0..halvings {
        e *= e;
    }
    e
}

/// How many permits one refill asks for: what the isolate will use within
/// the horizon. That is at least every caller waiting now, and the recent
/// draw rate's worth of the horizon (a rate measured while the isolate had
/// permits to draw); a lone caller asks for one. Permits that each hold a
/// lease hold scarce slots, so only the waiting callers' worth.
pub(super) struct Demand {
    pub waiters: u64,
    pub draw_rate_per_s: f64,
    /// The last block ran out with callers still wanting more: a closed
    /// loop of callers that will use every permit the horizon holds (an
    /// over-sized block costs nothing: what goes unused goes back).
    pub draining: bool,
    /// Each permit comes with a lease of its own (rules that bound
    /// concurrency, with no paced slots).
    pub leased: bool,
    /// At most this many beyond the callers waiting: what a block here
    /// serves (see `Refill::usable`).
    pub usable: Option<u64>,
}

pub(super) fn block_size(rules: &[PacingRule], demand: &Demand, horizon_ms: Millis) -> u64 {
    let horizon_budget = horizon_budget(rules, horizon_ms);
    if let Some(max) = rules.iter().filter_map(|r| r.max_concurrency).min() {
        if demand.leased {
            return demand.waiters.max(1).min(max).min(horizon_budget);
        }
    }
    let recent = if demand.draining {
        horizon_budget
    } else {
        ((demand.draw_rate_per_s * horizon_ms as f64 / 1_000.0) as u64).min(horizon_budget)
    };
    let recent = recent.min(demand.usable.unwrap_or(u64::MAX));
    recent.max(demand.waiters).clamp(1, limits::MAX_REQUESTED)
}

/// The most permits one block can hold: the horizon's worth at the
/// configured rate. The gateway spaces every permit evenly, so a block may
/// span more than one rule window; only the horizon bounds it.
pub(super) fn horizon_budget(rules: &[PacingRule], horizon_ms: Millis) -> u64 {
    let configured = strictest_rps(rules);
    ((configured * horizon_ms as f64 / 1_000.0) as u64 + 1).clamp(1, limits::MAX_REQUESTED)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(n: u64) -> Vec<PacingRule> {
        vec![PacingRule::new(n, 1_000)]
    }

    fn block_size(rules: &[PacingRule], waiters: u64, rate: f64, horizon_ms: Millis) -> u64 {
        let demand = Demand {
            waiters,
            draw_rate_per_s: rate,
            draining: false,
            leased: true,
            usable: None,
        };
        super::block_size(rules, &demand, horizon_ms)
    }

    #[test]
    fn a_lone_caller_asks_for_one_permit() {
        assert_eq!(block_size(&rate(20), 1, 0.0, 1_000), 1);
        assert_eq!(block_size(&rate(20), 1, 0.4, 1_000), 1);
    }

    #[test]
    fn a_burst_asks_for_every_waiting_caller() {
        assert_eq!(block_size(&rate(20), 8, 0.0, 1_000), 8);
    }

    #[test]
    fn a_steady_draw_rate_asks_for_the_horizons_worth_of_it() {
        assert_eq!(block_size(&rate(20), 1, 10.0, 1_000), 10);
        assert_eq!(
            block_size(&rate(20), 1, 50.0, 1_000),
            21,
            "capped by the horizon"
        );
        assert_eq!(block_size(&rate(20), 1, 50.0, 2_000), 41);
    }

    #[test]
    fn callers_that_drain_a_block_and_come_straight_back_ask_for_the_whole_horizon() {
        let demand = Demand {
            waiters: 8,
            draw_rate_per_s: 0.0,
            draining: true,
            leased: true,
            usable: None,
        };
        assert_eq!(super::block_size(&rate(20), &demand, 1_000), 21);
        assert_eq!(super::block_size(&rate(20), &demand, 2_000), 41);
    }

    #[test]
    fn concurrency_blocks_hold_only_the_waiting_callers() {
        let rules = vec![PacingRule::new(20, 1_000).with_max_concurrency(5)];
        assert_eq!(block_size(&rules, 8, 30.0, 1_000), 5);
        assert_eq!(block_size(&rules, 0, 0.0, 1_000), 1);
    }
    #[test]
    fn the_draw_rate_follows_a_steady_demand_and_decays_when_it_stops() {
        let mut d = DrawRate::default();
        for t in 0..100 {
            d.draw(t * 100);
        }
        let busy = d.rate_at(9_900);
        assert!((9.0..11.0).contains(&busy), "{busy}");
        assert!(d.rate_at(19_900) < 0.1, "{}", d.rate_at(19_900));
    }

    #[test]
    fn time_without_permits_to_draw_is_left_out_of_the_decay() {
        let mut d = DrawRate::default();
        for t in 0..100 {
            d.draw(t * 100);
        }
        d.skip(10_000);
        assert!(d.rate_at(19_900) > 9.0);
    }

    #[test]
    fn exp_neg_is_within_a_millionth_of_libm_s_exp_over_the_decays_range() {
        for i in 0..=4_000 {
            let y = f64::from(i) / 100.0;
            let (ours, libm) = (exp_neg(y), (-y).exp());
            assert!(
                (ours - libm).abs() <= 1e-6 * libm,
                "e^-{y}: {ours} against {libm}"
            );
        }
        assert_eq!(exp_neg(0.0), 1.0);
        assert_eq!(exp_neg(1e9), 0.0);
    }
}
