//! Turns sized by callers: while other clients wait for their turns, a
//! client's turn holds about its callers' share of one round, so a
//! caller's wait across the fleet stays near one central queue's. Before
//! they start, and while the adaptive rate recovers, turns hold a whole
//! horizon.

use super::timeline::Micros;

/// While other clients wait for their turns, a client's turn holds this
/// many permits per caller it has waiting (3 / 2): about its callers' share
/// of one round of a central queue, so the cycle of turns, and a caller's
/// wait across the other clients' turns, stays near what one queue serving
/// every caller in order would give rather than clients x horizon. A turn
/// of one permit per caller would cost a round trip per call; in the fleet
/// simulation 3 / 2 keeps the 4 x 4 and 8 x 4 fleets' p99 wait within
/// 1.5 x that queue's + 250 ms at about one round trip per 7 permits.
const FAIR_TURN_PER_CALLER: (u64, u64) = (3, 2);

/// The shortest turn among contending clients: a third of a second of the
/// rate, so clients with one or two callers each do not pay a round trip
/// per call or two.
const FAIR_TURN_FLOOR_US: Micros = 350_000;

/// Turns are not sized by callers in a bucket's first second: a provider
/// that refuses the rule does so in it, and the adaptive rate reads its
/// first cut on whole-horizon turns (with turns sized by callers from the
/// start, a fleet whose provider takes 40% or a drifting share of the rule
/// met more 429s).
const FAIR_TURNS_WARM_UP_US: Micros = 1_000_000;

/// Nor for this long after the bucket's rate was last cut, paused or
/// capped, or cooling down: turns booked while the rate recovers keep the
/// length the adaptive rate is tuned on.
const FAIR_TURNS_AFTER_CUT_US: Micros = 30_000_000;

/// When a bucket's turns are sized by callers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct FairTurns {
    /// Not before this: the end of the warm-up, or of the wait after a cut.
    from: Micros,
    /// Whether turns were sized by callers at the last update.
    pub on: bool,
    /// The end of the whole-horizon turns booked before they were: a
    /// client whose turn is one of those is granted all of it (the client
    /// after it comes when that turn ends, with no time to spare).
    whole_until: Micros,
}

impl FairTurns {
    /// Whether turns are sized by callers at `now`: not while the rate is
    /// `held_back` (cut, paused or capped, or cooling down), nor for
    /// [`FAIR_TURNS_AFTER_CUT_US`] after, nor in the bucket's first
    /// [`FAIR_TURNS_WARM_UP_US`]. `booked_until` is where the whole-horizon
    /// turns booked so far end.
    pub fn update(&mut self, now: Micros, held_back: bool, booked_until: Micros) -> bool {
        if held_back {
            self.from = now.saturating_add(FAIR_TURNS_AFTER_CUT_US);
        }
        if self.from == 0 {
            self.from = now.saturating_add(FAIR_TURNS_WARM_UP_US).max(1);
        }
        let on = now >= self.from;
        if on && !self.on {
            self.whole_until = booked_until;
        }
        self.on = on;
        on
    }

    /// Whether a grant starting at `at` falls in a whole-horizon turn
    /// booked before turns were sized by callers.
    pub fn in_whole_turns(&self, at: Micros) -> bool {
        at < self.whole_until
    }

    /// The turn of a client with `callers` waiting while other clients
    /// wait for theirs: its callers' share of a round (see
    /// [`FAIR_TURN_PER_CALLER`]), at least [`FAIR_TURN_FLOOR_US`] of the
    /// rate at `interval`.
    pub fn turn(callers: u64, interval: Micros) -> u64 {
        let (per, of) = FAIR_TURN_PER_CALLER;
        let floor = FAIR_TURN_FLOOR_US.div_ceil(interval.max(1));
        callers.saturating_mul(per).div_ceil(of).max(floor)
    }
}
