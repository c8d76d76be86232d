//! Turn tickets for concurrency slots. A client refused for want of a
//! slot is booked a turn, about when a slot should free for it; a client
//! that takes tickets is given one with the refusal and shows it when it
//! comes back. Slots that free meanwhile are held for the tickets in the
//! order they were given, so a booked client finds its slot free rather
//! than taken by whoever asked first (without tickets, isolates whose own
//! callers came straight back took every freed slot and one isolate of
//! four starved). A ticket not shown by its turn plus a grace is void, so
//! a client that went away holds nothing for long.
//!
//! A ticket is a place in line and a secret: its high bits count the
//! tickets given, so tickets order as they were given, and its low
//! [`DRAWN_BITS`] are drawn from the gateway's keyed ids. A client that
//! sees its own ticket learns where the line stands but cannot show the
//! next client's and take its turn (with tickets counted 1, 2, 3 it could).

use super::lease_id::LeaseIds;
use super::timeline::Micros;
use crate::protocol::limits::MAX_TURN_TICKET;

/// How long after its turn a ticket still holds its slots.
const GRACE_US: Micros = 250_000;

/// The most tickets outstanding per bucket; past it the oldest is void.
pub(crate) const MAX_TICKETS: usize = 256;

/// The drawn low bits of a ticket: a guess at another client's ticket is
/// right once in 16 million, and a wrong one is only no ticket.
const DRAWN_BITS: u32 = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Booking {
    pub ticket: u64,
    pub turn: Micros,
    pub slots: u64,
}

/// In a snapshot (a record of its own in the bucket's): a Durable Object
/// can be evicted between a refusal and the client's return, and a
/// restored gateway that forgot them would hand freed slots to whoever
/// asks first, and number new tickets from 1 again, so a ticket shown from
/// before the restore could take another client's place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TurnTickets {
    pub last: u64,
    /// In ticket order.
    pub booked: Vec<Booking>,
}

impl TurnTickets {
    /// Books `slots` at `turn` under a new ticket, or under `redeemed`, a
    /// ticket just taken back from a client that came too early, which
    /// keeps its place.
    pub fn book(
        &mut self,
        redeemed: Option<u64>,
        turn: Micros,
        slots: u64,
        ids: &mut LeaseIds,
    ) -> u64 {
        let booking = |ticket| Booking {
            ticket,
            turn,
            slots,
        };
        if let Some(t) = redeemed {
            let at = self.booked.partition_point(|b| b.ticket < t);
            self.booked.insert(at, booking(t));
            return t;
        }
        if self.booked.len() == MAX_TICKETS {
            self.booked.remove(0);
        }
        let ticket = self.next_ticket(ids);
        self.last = ticket;
        self.booked.push(booking(ticket));
        ticket
    }

    /// The next ticket: one place after the last given, with drawn low
    /// bits. The count starts again from 1 when no booking stands (no
    /// client holds a live ticket to order against), and when it would
    /// pass what a JS number holds exactly the standing bookings are void,
    /// which after some 500 million tickets in one line costs their
    /// clients their places once.
    fn next_ticket(&mut self, ids: &mut LeaseIds) -> u64 {
        let mut place = match self.booked.is_empty() {
            true => 1,
            false => (self.last >> DRAWN_BITS) + 1,
        };
        if place > MAX_TURN_TICKET >> DRAWN_BITS {
            self.booked.clear();
            place = 1;
        }
        let drawn = ids.next_id() as u64 & ((1 << DRAWN_BITS) - 1);
        place << DRAWN_BITS | drawn
    }

    /// Voids the tickets whose turn and grace have passed.
    pub fn expire(&mut self, now: Micros) {
        self.booked
            .retain(|b| b.turn.saturating_add(GRACE_US) >= now);
    }

    /// Takes back `ticket` if it still stands; its slots are no longer held.
    pub fn redeem(&mut self, ticket: u64) -> bool {
        match self.booked.iter().position(|b| b.ticket == ticket) {
            Some(i) => {
                self.booked.remove(i);
                true
            }
            None => false,
        }
    }

    /// The slots held for tickets given before `ticket` (any, for a
    /// client that shows none).
    pub fn held_before(&self, ticket: Option<u64>) -> u64 {
        self.booked
            .iter()
            .take_while(|b| ticket.is_none_or(|t| b.ticket < t))
            .map(|b| b.slots)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::lease_id::LeaseKey;

    fn ids() -> LeaseIds {
        LeaseIds::new(LeaseKey([3; 32]))
    }

    #[test]
    fn slots_are_held_for_tickets_in_the_order_they_were_given() {
        let (mut t, mut ids) = (TurnTickets::default(), ids());
        let first = t.book(None, 1_000, 2, &mut ids);
        let second = t.book(None, 2_000, 1, &mut ids);
        assert_eq!(
            t.held_before(None),
            3,
            "a client with no ticket waits behind both"
        );
        assert_eq!(
            t.held_before(Some(second)),
            2,
            "the second waits behind the first"
        );
        assert_eq!(t.held_before(Some(first)), 0);
        assert!(t.redeem(first));
        assert!(!t.redeem(first), "a ticket is shown once");
        assert_eq!(t.held_before(None), 1);
    }

    #[test]
    fn a_ticket_shown_too_early_is_booked_again_in_its_place() {
        let (mut t, mut ids) = (TurnTickets::default(), ids());
        let first = t.book(None, 1_000, 1, &mut ids);
        let second = t.book(None, 1_100, 1, &mut ids);
        assert!(t.redeem(first));
        assert_eq!(t.book(Some(first), 1_200, 1, &mut ids), first);
        assert_eq!(t.held_before(Some(second)), 1, "still ahead of the second");
    }

    #[test]
    fn a_ticket_nobody_shows_is_void_after_its_grace() {
        let (mut t, mut ids) = (TurnTickets::default(), ids());
        let gone = t.book(None, 1_000, 3, &mut ids);
        t.expire(1_000 + GRACE_US);
        assert_eq!(t.held_before(None), 3);
        t.expire(1_001 + GRACE_US);
        assert_eq!(t.held_before(None), 0);
        assert!(!t.redeem(gone), "shown after its grace, it is void");
    }

    #[test]
    fn tickets_order_as_given_but_the_next_cannot_be_told_from_the_last_bug_tickets_were_1_2_3() {
        let (mut t, mut ids) = (TurnTickets::default(), ids());
        let given: Vec<u64> = (0..5)
            .map(|i| t.book(None, 1_000 + i, 1, &mut ids))
            .collect();
        assert!(
            given.windows(2).all(|w| w[0] < w[1]),
            "in line order: {given:?}"
        );
        let drawn: Vec<u64> = given.iter().map(|g| g & ((1 << DRAWN_BITS) - 1)).collect();
        let steps: Vec<u64> = given.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(
            steps.windows(2).any(|w| w[0] != w[1]),
            "one ticket and a fixed step would give the next: {given:?}"
        );
        assert!(drawn.iter().any(|&d| d != drawn[0]), "{drawn:?}");
        let guess = given[4] + 1;
        assert!(!t.redeem(guess), "a guessed ticket holds no place");
        assert_eq!(t.held_before(None), 5, "and no booking was taken back");
    }

    #[test]
    fn the_count_starts_again_when_no_booking_stands_and_stays_within_a_js_number() {
        let (mut t, mut ids) = (TurnTickets::default(), ids());
        let first = t.book(None, 1_000, 1, &mut ids);
        assert_eq!(first >> DRAWN_BITS, 1);
        t.book(None, 1_100, 1, &mut ids);
        t.expire(2_000 + GRACE_US);
        assert_eq!(t.book(None, 3_000, 1, &mut ids) >> DRAWN_BITS, 1);
        t.last = MAX_TURN_TICKET;
        let wrapped = t.book(None, 3_100, 1, &mut ids);
        assert!(wrapped <= MAX_TURN_TICKET && wrapped >> DRAWN_BITS == 1);
        assert_eq!(t.booked.len(), 1, "the standing bookings were void");
    }
}
