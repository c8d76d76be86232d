//! The gateway's clock as this client sees it: dispatch times are on the
//! gateway's clock, timers on ours.

use crate::time::Millis;

/// How many recent round trips the estimate keeps.
const SAMPLES: usize = 8;

/// Before the first round trip, how far ahead of the gateway's now a
/// client asks its first permit to be: about one trip back from a gateway
/// in the same region. A guess too short costs one more round trip, once.
pub const DEFAULT_LEAD_MS: Millis = 20;

#[derive(Default, Clone)]
pub(super) struct ClockSync {
    /// `(gateway clock minus ours, round trip)` of recent answers.
    samples: Vec<(i64, Millis)>,
    /// The offset in use: that of the fastest recent round trip.
    offset_ms: i64,
    /// A slowly forgetting maximum of recent round trips.
    rtt_ms: Millis,
    /// The gateway runs in this isolate on this clock and answers at once:
    /// no offset, no round trip, no lead. (A refill delayed by a pause of
    /// the isolate is not a trip to learn from: it would place the next
    /// blocks ahead of time for nothing.)
    same_clock: bool,
}

impl ClockSync {
    /// Takes one answer's `serverNowMs`, for a request sent at `sent` and
    /// answered at `received` (our clock). The gateway stamped it about
    /// half-way, so the sample is `server_now - midpoint`; the fastest
    /// round trip bounds its error best (NTP's choice). A steady offset
    /// matters more than a fresh one: two blocks converted with different
    /// offsets would land closer together than the gateway spaced them.
    /// The clock of a gateway in this isolate.
    pub fn same_clock() -> Self {
        ClockSync {
            same_clock: true,
            ..ClockSync::default()
        }
    }

    pub fn sample(&mut self, server_now: Option<Millis>, sent: Millis, received: Millis) {
        if self.same_clock {
            return;
        }
        let rtt = received.saturating_sub(sent);
        // One slow answer widens the lead at once; it narrows again over
        // a few answers, down to nothing (a quarter rounded down would
        // keep a trip of 3 ms or less forever).
        self.rtt_ms = rtt.max(self.rtt_ms - self.rtt_ms.div_ceil(4));
        let Some(server_now) = server_now else {
            return;
        };
        if self.samples.len() == SAMPLES {
            self.samples.remove(0);
        }
        let midpoint = (sent + received) as i64 / 2;
        self.samples.push((server_now as i64 - midpoint, rtt));
        // The first sample of the shortest round trip.
        let mut best: Option<&(i64, Millis)> = None;
        for sample in &self.samples {
            if best.is_none_or(|b| sample.1 < b.1) {
                best = Some(sample);
            }
        }
        self.offset_ms = best.map_or(0, |&(offset, rtt)| offset_beyond_error(offset, rtt));
    }

    /// Our clock's reading when the gateway's reads `server_ms`.
    pub fn to_local(&self, server_ms: Millis) -> Millis {
        (server_ms as i64 - self.offset_ms).max(0) as Millis
    }

    /// The gateway's clock reading when ours reads `local_ms`.
    pub fn to_gateway(&self, local_ms: Millis) -> Millis {
        local_ms.saturating_add_signed(self.offset_ms)
    }

    pub fn rtt_ms(&self) -> Millis {
        self.rtt_ms
    }

    /// How far ahead a time given back must be to serve another isolate:
    /// it reaches the gateway, and then that isolate with a grant, before
    /// it passes (a round trip each way and a poll).
    pub fn give_back_reach_ms(&self) -> Millis {
        2 * self.rtt_ms.max(DEFAULT_LEAD_MS) + super::REFILL_POLL_MS
    }

    /// How far past its now the gateway should place this client's first
    /// permit: the answer's trip back, rounded up. None for a gateway that
    /// answers within the millisecond (one in this isolate).
    pub fn lead_ms(&self) -> Millis {
        match (self.samples.is_empty() && !self.same_clock, self.rtt_ms) {
            (true, _) => DEFAULT_LEAD_MS,
            (false, 0) => 0,
            (false, rtt) => rtt.div_ceil(2) + 1,
        }
    }
}

/// A sample's offset, or none when it is within the sample's own error.
/// The gateway stamped its clock somewhere within the trip, so the true
/// offset lies within half a round trip (and a millisecond of rounding) of
/// the midpoint's. When that range holds zero, the clocks may well agree
/// (synchronised hosts, or one machine), and taking the midpoint would only
/// add the trip's asymmetry: two blocks converted with offsets a few
/// milliseconds apart land closer together than the gateway spaced them.
fn offset_beyond_error(offset: i64, rtt: Millis) -> i64 {
    let error = rtt.div_ceil(2) as i64 + 1;
    if offset.abs() <= error {
        0
    } else {
        offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_is_taken_at_the_midpoint_of_the_fastest_round_trip() {
        let mut c = ClockSync::default();
        // Gateway 5 s ahead; a 40 ms trip, then a 10 ms one.
        c.sample(Some(5_020 + 1_000), 1_000, 1_040);
        c.sample(Some(5_005 + 2_000), 2_000, 2_010);
        assert_eq!(c.to_local(7_005), 2_005);
        // A later slow sample does not move it.
        c.sample(Some(5_050 + 3_000), 3_000, 3_100);
        assert_eq!(c.to_local(7_005), 2_005);
    }

    /// Bug: on one machine, answers that came back more slowly than they
    /// went out read as a gateway clock up to half a trip behind, and each
    /// process converted its blocks with its own such offset.
    #[test]
    fn an_offset_within_half_a_round_trip_is_no_offset_bug_asymmetric_trips_read_as_skew() {
        let mut c = ClockSync::default();
        // Same clock; the gateway stamped 2 ms into a 30 ms trip.
        c.sample(Some(1_002), 1_000, 1_030);
        assert_eq!(c.to_local(5_000), 5_000);
        // A skew beyond what the trip can explain is still corrected.
        c.sample(Some(2_050), 2_000, 2_020);
        assert_eq!(c.to_local(5_000), 5_000 - 40);
    }

    #[test]
    fn a_round_trip_estimate_bug_a_slow_millisecond_kept_the_lead_up_forever() {
        let mut c = ClockSync::default();
        c.sample(Some(1_001), 1_000, 1_003);
        assert_eq!(c.lead_ms(), 3);
        for t in 0..4 {
            c.sample(Some(2_000 + t), 2_000 + t, 2_000 + t);
        }
        assert_eq!(c.rtt_ms(), 0, "fast answers bring the trip back down");
        assert_eq!(c.lead_ms(), 0);
    }

    #[test]
    fn a_gateway_on_the_same_clock_never_gets_a_lead_from_a_slow_refill() {
        let mut c = ClockSync::same_clock();
        c.sample(Some(1_000), 1_000, 1_040);
        assert_eq!((c.lead_ms(), c.rtt_ms(), c.to_local(5_000)), (0, 0, 5_000));
    }

    #[test]
    fn the_lead_covers_the_trip_back() {
        let mut c = ClockSync::default();
        assert_eq!(c.lead_ms(), DEFAULT_LEAD_MS);
        c.sample(Some(15), 0, 30);
        assert_eq!(c.lead_ms(), 16);
    }
}
