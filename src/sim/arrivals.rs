//! Open-loop traffic for the fleet: when each call arrives and at which
//! isolate, drawn from a seeded generator so every run is the same run,
//! and the oracle the fleet is measured against.

use crate::time::Millis;

/// One call: when it arrives (ms since start) and the isolate it lands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    pub at: Millis,
    pub isolate: usize,
}

/// splitmix64: small, seeded, and good enough for traffic shapes.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// An exponential gap for a Poisson process of `rate_per_s`, in ms.
    pub fn exp_gap_ms(&mut self, rate_per_s: f64) -> f64 {
        -(1.0 - self.unit()).ln() / rate_per_s * 1_000.0
    }
}

/// A Poisson stream whose total rate follows `rate_at(t)` (req/s at ms
/// `t`, at most `peak`), spread evenly over `isolates` (thinning).
pub fn poisson(
    isolates: usize,
    peak: f64,
    rate_at: impl Fn(Millis) -> f64,
    duration_ms: Millis,
    seed: u64,
) -> Vec<Arrival> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    let mut t = 0.0;
    loop {
        t += rng.exp_gap_ms(peak);
        if t >= duration_ms as f64 {
            return out;
        }
        let at = t as Millis;
        if rng.unit() * peak < rate_at(at) {
            out.push(Arrival {
                at,
                isolate: rng.below(isolates as u64) as usize,
            });
        }
    }
}

/// Each isolate sends a burst of `burst` calls every `period_ms`, at a
/// phase of its own.
pub fn bursts(
    isolates: usize,
    burst: usize,
    period_ms: Millis,
    duration_ms: Millis,
    seed: u64,
) -> Vec<Arrival> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    for isolate in 0..isolates {
        let mut at = rng.below(period_ms);
        while at < duration_ms {
            out.extend((0..burst).map(|_| Arrival { at, isolate }));
            at += period_ms;
        }
    }
    out.sort_by_key(|a| a.at);
    out
}

/// Workers churn: `slots` isolate slots share a Poisson stream of
/// `rate_per_s`; each isolate serves 1 to `max_calls` calls and is then
/// evicted (a fresh isolate takes its slot). Isolates are numbered in the
/// order they appear.
pub fn churn(
    slots: usize,
    rate_per_s: f64,
    max_calls: u64,
    duration_ms: Millis,
    seed: u64,
) -> Vec<Arrival> {
    let mut rng = Rng::new(seed ^ 0xC0FFEE);
    let mut current: Vec<(usize, u64)> = Vec::new();
    let mut next_isolate = 0;
    let mut out = poisson(slots, rate_per_s, |_| rate_per_s, duration_ms, seed);
    for a in &mut out {
        let slot = a.isolate;
        if current.len() <= slot {
            current.resize(slot + 1, (usize::MAX, 0));
        }
        if current[slot].1 == 0 {
            current[slot] = (next_isolate, 1 + rng.below(max_calls));
            next_isolate += 1;
        }
        a.isolate = current[slot].0;
        current[slot].1 -= 1;
    }
    out
}

/// The oracle: one central FIFO queue that dispatches each call at
/// `max(arrival, previous dispatch + 1 / rate)` with no round trips.
/// Returns each call's wait, in arrival order.
pub fn oracle_waits(arrivals: &[Millis], rate_per_s: f64) -> Vec<f64> {
    let interval = 1_000.0 / rate_per_s;
    let mut previous = f64::NEG_INFINITY;
    arrivals
        .iter()
        .map(|&at| {
            let at = at as f64;
            let dispatch = at.max(previous + interval);
            previous = dispatch;
            dispatch - at
        })
        .collect()
}

/// The `p`-th percentile (0-100) of `values`, nearest rank.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oracle_queues_calls_that_arrive_faster_than_the_rate() {
        let waits = oracle_waits(&[0, 0, 0, 500], 20.0);
        assert_eq!(waits, vec![0.0, 50.0, 100.0, 0.0]);
    }

    #[test]
    fn a_poisson_stream_has_about_its_rate() {
        let a = poisson(10, 18.0, |_| 18.0, 100_000, 1);
        assert!((1_700..1_900).contains(&a.len()), "{}", a.len());
        assert!(a.iter().all(|x| x.isolate < 10));
    }

    #[test]
    fn churned_isolates_each_serve_a_few_calls_and_never_come_back() {
        let a = churn(20, 10.0, 4, 60_000, 3);
        let isolates = a.iter().map(|x| x.isolate).max().unwrap() + 1;
        assert!(
            isolates > a.len() / 4,
            "{isolates} isolates for {} calls",
            a.len()
        );
        let mut count = vec![0; isolates];
        for x in &a {
            count[x.isolate] += 1;
        }
        assert!(count.iter().all(|&n| (1..=4).contains(&n)));
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
    }
}
