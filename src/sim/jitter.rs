//! The slack between a permit's time and what the provider sees: a call's
//! way to the provider after the pacer let it go, timers that fire late in
//! a busy isolate, gateway trips whose two ways take different times, and
//! isolate clocks that run off the gateway's.
//! Each delay is drawn from a seeded generator of its own, so every run
//! with the same seed is the same run, and widening one delay leaves the
//! others' draws as they were.

use std::cell::RefCell;
use std::rc::Rc;

use super::arrivals::Rng;
use super::executor::SimRuntime;
use crate::rt::{LocalBoxFuture, Runtime};
use crate::time::{Clock, Millis};

/// How one kind of delay is drawn: `per_million` of the draws are uniform
/// from zero to `max_ms` (whole milliseconds), the others zero. The
/// default never delays.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spread {
    pub max_ms: Millis,
    pub per_million: u64,
}

impl Spread {
    /// Every draw uniform from zero to `max_ms`.
    pub fn upto(max_ms: Millis) -> Self {
        Spread {
            max_ms,
            per_million: 1_000_000,
        }
    }

    /// `per_million` of the draws uniform from zero to `max_ms`: the rare
    /// stall of a host that is otherwise on time.
    pub fn rare(max_ms: Millis, per_million: u64) -> Self {
        Spread {
            max_ms,
            per_million,
        }
    }
}

/// The delays of a run, each drawn from its own seeded generator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Jitter {
    /// From the moment a caller holds its permit to the call's arrival at
    /// the provider: the host's event loop, the network, the provider's
    /// own event loop. Nobody can check this part against the permit.
    pub transit: Spread,
    /// How late each timer in an isolate fires (a busy or stalled event
    /// loop): the pacer's sleeps until a permit's time among them.
    pub timer_late: Spread,
    /// How much longer each way of a gateway trip takes, drawn per way, so
    /// a trip's two halves differ.
    pub gateway_way: Spread,
    /// Each isolate's clock runs off the gateway's by up to this much,
    /// either way (drawn once per isolate).
    pub clock_skew_ms: Millis,
    /// How much longer than the fleet's `call_latency_ms` each accepted call
    /// holds its slot at the provider.
    pub call_hold: Spread,
    pub seed: u64,
}

impl Jitter {
    /// This jitter with a real machine's timing, as the deployed guard
    /// meets it: timers and gateway ways up to 10 ms late, calls up to 5 ms
    /// on their way, drawn from `seed`.
    pub fn on_a_real_machine(self, seed: u64) -> Jitter {
        Jitter {
            timer_late: Spread::upto(10),
            gateway_way: Spread::upto(10),
            transit: Spread::upto(5),
            seed,
            ..self
        }
    }

    /// The seed of the `n`th kind of delay.
    fn stream(&self, n: u64) -> u64 {
        self.seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    /// The transit delays of a run.
    pub fn transit(&self) -> Delays {
        Delays::new(self.transit, self.stream(1))
    }

    /// The timer lateness of a run (shared by all its isolates).
    pub fn timer_lateness(&self) -> Delays {
        Delays::new(self.timer_late, self.stream(2))
    }

    /// The extra time of each way of a gateway trip.
    pub fn gateway_ways(&self) -> Delays {
        Delays::new(self.gateway_way, self.stream(3))
    }

    /// The extra time each call holds its slot at the provider.
    pub fn call_holds(&self) -> Delays {
        Delays::new(self.call_hold, self.stream(5))
    }

    /// Each isolate's clock skew, in isolate order.
    pub fn clock_skews(&self) -> impl FnMut() -> i64 {
        let mut rng = Rng::new(self.stream(4));
        let span = 2 * self.clock_skew_ms + 1;
        let skew = self.clock_skew_ms as i64;
        move || rng.below(span) as i64 - skew
    }
}

/// Seeded delays drawn from a [`Spread`]. Clones share one generator.
#[derive(Clone)]
pub struct Delays {
    spread: Spread,
    rng: Rc<RefCell<Rng>>,
}

impl Delays {
    fn new(spread: Spread, seed: u64) -> Self {
        Delays {
            spread,
            rng: Rc::new(RefCell::new(Rng::new(seed))),
        }
    }

    pub fn is_none(&self) -> bool {
        self.spread.max_ms == 0 || self.spread.per_million == 0
    }

    pub fn draw(&self) -> Millis {
        if self.is_none() {
            return 0;
        }
        let mut rng = self.rng.borrow_mut();
        if rng.below(1_000_000) >= self.spread.per_million {
            return 0;
        }
        rng.below(self.spread.max_ms + 1)
    }
}

/// An isolate's runtime on the simulation's timers, which fire late, with
/// a clock of its own that runs off the simulation's by a skew.
pub struct IsolateRuntime {
    rt: SimRuntime,
    lateness: Delays,
    skew_ms: i64,
}

impl IsolateRuntime {
    pub fn new(rt: &SimRuntime, lateness: Delays, skew_ms: i64) -> Self {
        IsolateRuntime {
            rt: rt.clone(),
            lateness,
            skew_ms,
        }
    }
}

impl Clock for IsolateRuntime {
    fn now_ms(&self) -> Millis {
        self.rt.now_ms().saturating_add_signed(self.skew_ms)
    }
}

impl Runtime for IsolateRuntime {
    fn sleep(&self, ms: Millis) -> LocalBoxFuture<'static, ()> {
        self.rt.sleep(ms.saturating_add(self.lateness.draw()))
    }

    fn spawn(&self, task: LocalBoxFuture<'static, ()>) {
        self.rt.spawn(task)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_stay_within_their_bound_and_repeat_with_their_seed() {
        let jitter = Jitter {
            transit: Spread::upto(12),
            seed: 5,
            ..Jitter::default()
        };
        let (a, b) = (jitter.transit(), jitter.transit());
        let drawn: Vec<Millis> = (0..500).map(|_| a.draw()).collect();
        assert!(drawn.iter().all(|&d| d <= 12));
        assert!(drawn.contains(&0) && drawn.contains(&12), "the whole range");
        assert_eq!(drawn, (0..500).map(|_| b.draw()).collect::<Vec<_>>());
        assert!(jitter.timer_lateness().is_none());
        assert_eq!(jitter.timer_lateness().draw(), 0);
    }

    #[test]
    fn a_rare_spread_delays_about_its_share() {
        let d = Delays::new(Spread::rare(50, 100_000), 9);
        let delayed = (0..10_000).filter(|_| d.draw() > 0).count();
        assert!((850..1_050).contains(&delayed), "{delayed} of 10000");
    }

    #[test]
    fn an_isolate_s_timers_fire_late_and_its_clock_reads_its_skew() {
        let rt = SimRuntime::new(1_000);
        let isolate = IsolateRuntime::new(&rt, Delays::new(Spread::upto(30), 1), -200);
        assert_eq!(isolate.now_ms(), 800);
        let woke = rt.spawn_output({
            let rt = rt.clone();
            let sleep = isolate.sleep(100);
            async move {
                sleep.await;
                rt.now_ms()
            }
        });
        rt.run_to_completion();
        let woke = woke.borrow().expect("the timer fired");
        assert!((1_100..=1_130).contains(&woke), "woke at {woke}");
    }
}
