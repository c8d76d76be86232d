//! Turn tickets for concurrency slots. A client refused for want of a
//! slot is booked a turn, about when a slot should free for it; a client
//! that takes tickets is given one with the refusal and shows it when it
//! comes back. Slots that free meanwhile are held for the tickets in the
//! order they were given, so a booked client finds its slot free rather
//! than taken by whoever asked first (without tickets, isolates whose own
//! callers came straight back took every freed slot and one isolate of
//! four starved). A ticket not shown by its turn plus a grace is void, so
//! a client that went away holds nothing for long.

use std::collections::VecDeque;

use super::timeline::Micros;

/// How long after its turn a ticket still holds its slots.
const GRACE_US: Micros = 250_000;

/// The most tickets outstanding per bucket; past it the oldest is void.
pub(crate) const MAX_TICKETS: usize = 256;

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
    pub booked: VecDeque<Booking>,
}

impl TurnTickets {
    /// Books `slots` at `turn` under a new ticket, or under `redeemed`, a
    /// ticket just taken back from a client that came too early, which
    /// keeps its place.
    pub fn book(&mut self, redeemed: Option<u64>, turn: Micros, slots: u64) -> u64 {
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
            self.booked.pop_front();
        }
        self.last += 1;
        self.booked.push_back(booking(self.last));
        self.last
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

    #[test]
    fn slots_are_held_for_tickets_in_the_order_they_were_given() {
        let mut t = TurnTickets::default();
        let first = t.book(None, 1_000, 2);
        let second = t.book(None, 2_000, 1);
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
        let mut t = TurnTickets::default();
        let first = t.book(None, 1_000, 1);
        let second = t.book(None, 1_100, 1);
        assert!(t.redeem(first));
        assert_eq!(t.book(Some(first), 1_200, 1), first);
        assert_eq!(t.held_before(Some(second)), 1, "still ahead of the second");
    }

    #[test]
    fn a_ticket_nobody_shows_is_void_after_its_grace() {
        let mut t = TurnTickets::default();
        let gone = t.book(None, 1_000, 3);
        t.expire(1_000 + GRACE_US);
        assert_eq!(t.held_before(None), 3);
        t.expire(1_001 + GRACE_US);
        assert_eq!(t.held_before(None), 0);
        assert!(!t.redeem(gone), "shown after its grace, it is void");
    }
}
