//! Fair shares of a bucket's slots among clients that keep several. Each
//! client that keeps slots shows a claim the gateway gave it, with the
//! slots it holds and how many more its callers want; the gateway splits
//! the slots among the claims heard from lately by max-min fairness (each
//! gets what it wants up to an even level, the level rising until the
//! slots run out). A client over its share gives chains that ran their
//! length back; one under it is granted first.
//!
//! Knowing only that some client holds no slot, as an older client tells,
//! an isolate holding four of ten slots and one holding one look alike:
//! neither waits, and nothing moves them towards two and a half each.

use super::lease_id::LeaseIds;
use super::timeline::Micros;
use crate::protocol::{limits, AcquireResponse};

/// How long a claim counts after its client last spoke: a client that
/// keeps slots renews them well within this, and one that waits comes back
/// at its turn. A claim not heard from for longer holds nothing the shares
/// should count.
pub(crate) const CLAIM_MEMORY_US: Micros = 5_000_000;

/// How long a caller refused for want of a slot counts as waiting.
pub(crate) const WAITERS_MEMORY_US: Micros = 1_000_000;

/// The most claims a bucket remembers: as many as it has slots at most,
/// and twice that for clients waiting with none. The least recently heard
/// goes first.
const MAX_CLAIMS: usize = 2 * super::concurrency::MAX_LIVE_LEASES as usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Claim {
    holds: u64,
    /// The slots it holds and those it asked for more.
    wants: u64,
    seen: Micros,
    /// It holds more than it keeps while others want slots: when the
    /// oldest of its chains runs out, and a slot goes back at the end of
    /// the call on it.
    sheds_at: Option<Micros>,
}

impl Claim {
    fn heard_lately(&self, now: Micros) -> bool {
        self.seen.saturating_add(CLAIM_MEMORY_US) > now
    }
}

/// A bucket's claims. Not kept in a snapshot: a restored gateway hears
/// every client that keeps slots again within a renewal, and until then
/// splits the slots among those it has heard.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SlotClaims {
    /// By claim id; a few, one per client keeping slots.
    claims: Vec<(u64, Claim)>,
    /// A client that shows no claim (an older one) was refused a slot
    /// holding none, and counts as waiting until about this time.
    unclaimed_waiting_until: Micros,
}

/// One client's share of the slots while others want more than they hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Share {
    /// The most it may hold: the even level, or one more while the slots
    /// do not split evenly, and never more than it wants.
    pub most: u64,
    /// What it keeps through the ends of its chains: the even level.
    pub keep: u64,
    /// Another client holds fewer than it may: this one's slots over
    /// `keep` go back at their chains' ends.
    pub others_short: bool,
    /// Another client holds fewer than it keeps: this one is granted no
    /// slot beyond its own `keep` until that one has its.
    pub others_under_keep: bool,
}

/// What an answer tells a client that showed a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClaimAnswer {
    pub claim: u64,
    /// Its share, while others want more than they hold.
    pub share: Option<Share>,
    /// The slots it holds after this grant.
    pub holds: u64,
    /// A client that shows no claim waits with none.
    pub unclaimed_waiting: bool,
}

impl ClaimAnswer {
    /// Others want more than they hold: it keeps its share. An older
    /// client waits with none: it keeps none through chain ends, as older
    /// clients do. Else it keeps what it holds.
    pub fn write(&self, response: &mut AcquireResponse) {
        let share = self.share.filter(|s| s.others_short);
        response.slot_claim = Some(self.claim);
        response.slot_waiters = share.is_some() || self.unclaimed_waiting;
        response.slot_share = Some(share.map_or(self.holds, |s| s.most));
        response.slot_keep = Some(match share {
            Some(share) => share.keep,
            None if self.unclaimed_waiting => 0,
            None => self.holds,
        });
    }
}

impl SlotClaims {
    /// The claim a client showed if the bucket knows it, else a new one
    /// (a client showing none, `0`, or one forgotten). A new claim is drawn
    /// from the gateway's keyed ids, as lease ids are, so a client cannot
    /// guess another's claim and speak for it.
    pub fn claim(&mut self, shown: u64, now: Micros, ids: &mut LeaseIds) -> u64 {
        if shown != 0 && self.claims.iter().any(|&(id, _)| id == shown) {
            return shown;
        }
        self.forget_stale(now);
        if self.claims.len() >= MAX_CLAIMS {
            let oldest = (0..self.claims.len()).min_by_key(|&i| self.claims[i].1.seen);
            if let Some(i) = oldest {
                self.claims.swap_remove(i);
            }
        }
        loop {
            // Within what a JS number holds exactly; never 0, which shows
            // no claim.
            let id = ids.next_id() as u64 & limits::MAX_TURN_TICKET;
            if id != 0 && !self.claims.iter().any(|&(known, _)| known == id) {
                return id;
            }
        }
    }

    /// What the client of claim `id` holds and wants, as of now, and when
    /// it is to give a slot back (`sheds_at`), if it is.
    pub fn heard(
        &mut self,
        id: u64,
        holds: u64,
        wants: u64,
        sheds_at: Option<Micros>,
        now: Micros,
    ) {
        let claim = Claim {
            holds,
            wants: wants.max(holds),
            seen: now,
            sheds_at,
        };
        match self.claims.iter_mut().find(|(known, _)| *known == id) {
            Some((_, known)) => *known = claim,
            None => self.claims.push((id, claim)),
        }
    }

    /// The share of claim `id`, with `max` slots, were it to hold `holds`
    /// and want `wants`; `None` while every claim can have all it wants.
    pub fn share(&self, id: u64, holds: u64, wants: u64, max: u64, now: Micros) -> Option<Share> {
        let wants = wants.max(holds);
        let others = || {
            self.claims
                .iter()
                .filter(move |&&(other, c)| other != id && c.heard_lately(now))
                .map(|&(_, c)| c)
        };
        let (level, odd) = even_level(|| others().map(|c| c.wants).chain([wants]), max)?;
        let top = level + u64::from(odd);
        Some(Share {
            most: wants.min(top),
            keep: wants.min(level),
            others_short: others().any(|c| c.holds < c.wants.min(top)),
            others_under_keep: others().any(|c| c.holds < c.wants.min(level)),
        })
    }

    /// The soonest a client heard from lately is to give a slot back.
    pub fn next_shed(&self, now: Micros) -> Option<Micros> {
        self.claims
            .iter()
            .filter(|(_, c)| c.heard_lately(now))
            .filter_map(|(_, c)| c.sheds_at)
            .min()
    }

    /// A client that shows no claim was refused a slot holding none.
    pub fn unclaimed_refused(&mut self, now: Micros) {
        self.unclaimed_waiting_until = now.saturating_add(WAITERS_MEMORY_US);
    }

    /// Whether a client that shows no claim waits for a slot: it counts
    /// no share, so clients that do give back every chain that ran its
    /// length, as older clients do for it.
    pub fn unclaimed_waiting(&self, now: Micros) -> bool {
        now < self.unclaimed_waiting_until
    }

    fn forget_stale(&mut self, now: Micros) {
        self.claims.retain(|(_, c)| c.heard_lately(now));
    }
}

/// The max-min fair level of `max` slots among clients that want
/// `wants()`: each gets what it wants up to the level, the highest at which
/// they take no more than there are. `None` when all want no more than
/// there are; else the level and whether slots are left over at it (fewer
/// than the clients that want more).
fn even_level<I: Iterator<Item = u64>>(wants: impl Fn() -> I, max: u64) -> Option<(u64, bool)> {
    let taken = |level: u64| {
        wants()
            .map(|w| w.min(level))
            .fold(0u64, u64::saturating_add)
    };
    if wants().fold(0u64, u64::saturating_add) <= max {
        return None;
    }
    // The level is under `max + 1`: a client granted more would take more
    // than there are.
    let (mut fits, mut over) = (0, max + 1);
    while over - fits > 1 {
        let mid = fits + (over - fits) / 2;
        match taken(mid) <= max {
            true => fits = mid,
            false => over = mid,
        }
    }
    Some((fits, taken(fits) < max))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::gateway::lease_id::LeaseKey;

    fn ids() -> LeaseIds {
        LeaseIds::new(LeaseKey([7; 32]))
    }

    /// Claims that hold and want as given, with their ids in that order.
    fn claims(holds_wants: &[(u64, u64)]) -> (SlotClaims, Vec<u64>) {
        let (mut c, mut ids) = (SlotClaims::default(), ids());
        let mut shown = Vec::new();
        for &(holds, wants) in holds_wants {
            let id = c.claim(0, 0, &mut ids);
            c.heard(id, holds, wants, None, 0);
            shown.push(id);
        }
        (c, shown)
    }

    #[test]
    fn ten_slots_among_four_that_want_four_each_are_two_and_a_half_apiece() {
        let (c, shown) = claims(&[(4, 4), (4, 4), (1, 4)]);
        let share = c.share(99, 1, 4, 10, 0).expect("they want 16 of 10");
        assert_eq!((share.keep, share.most), (2, 3));
        let rich = c.share(shown[0], 4, 4, 10, 0).expect("contended");
        assert!(rich.others_short && rich.others_under_keep);
    }

    #[test]
    fn a_client_that_wants_little_gets_it_and_the_rest_split_what_is_left() {
        let (c, _) = claims(&[(1, 1), (5, 9)]);
        let share = c.share(99, 2, 9, 10, 0).expect("they want 19 of 10");
        assert_eq!((share.keep, share.most), (4, 5), "9 left for two");
    }

    #[test]
    fn no_share_while_every_claim_can_have_what_it_wants() {
        let (c, _) = claims(&[(2, 3), (1, 2)]);
        assert_eq!(c.share(99, 0, 5, 10, 0), None);
    }

    #[test]
    fn a_claim_not_heard_from_within_its_memory_counts_no_more() {
        let (c, _) = claims(&[(4, 4), (4, 4)]);
        assert!(c.share(99, 1, 4, 10, 0).is_some());
        assert_eq!(c.share(99, 1, 4, 10, CLAIM_MEMORY_US), None);
    }

    #[test]
    fn a_claim_shown_again_is_kept_and_an_unknown_one_replaced() {
        let (mut c, mut ids) = (SlotClaims::default(), ids());
        let id = c.claim(0, 0, &mut ids);
        c.heard(id, 1, 1, None, 0);
        assert_eq!(c.claim(id, 1, &mut ids), id);
        assert_ne!(c.claim(12_345, 1, &mut ids), 12_345);
    }

    #[test]
    fn new_claims_are_not_a_count_another_client_could_guess_bug_claims_were_1_2_3() {
        let (mut c, mut ids) = (SlotClaims::default(), ids());
        let drawn: Vec<u64> = (0..3).map(|_| c.claim(0, 0, &mut ids)).collect();
        assert!(drawn
            .iter()
            .all(|&id| id != 0 && id <= limits::MAX_TURN_TICKET));
        assert!(
            drawn[1] != drawn[0] + 1 && drawn[2] != drawn[1] + 1,
            "{drawn:?}"
        );
        let (c2, _) = claims(&[(1, 1), (1, 1), (1, 1)]);
        assert!(
            !c2.claims.iter().any(|&(id, _)| id <= 3),
            "ids 1-3 name no claim"
        );
    }
}
