//! A bucket's turn tickets in a snapshot: the last ticket given, and each
//! standing booking (its ticket, as the distance from the one before, its
//! turn and its slots). Without them a restored gateway would hand the
//! slots held for booked clients to whoever asks first, and number its
//! tickets from 1 again.

use super::codec::{Reader, Writer};
use crate::error::{Error, Result};
use crate::gateway::concurrency::MAX_LIVE_LEASES;
use crate::gateway::tickets::{Booking, TurnTickets, MAX_TICKETS};
use crate::protocol::limits::MAX_TURN_TICKET;

pub(super) fn write_tickets(w: &mut Writer, t: &TurnTickets) {
    w.uint(t.last);
    w.uint(t.booked.len() as u64);
    let mut prev = 0;
    for b in &t.booked {
        w.uint(b.ticket - prev);
        w.uint(b.turn);
        w.uint(b.slots);
        prev = b.ticket;
    }
}

/// Refuses a record no gateway writes: more bookings than a bucket keeps,
/// tickets out of order or past the last given, a booking of no slots or
/// of more than a bucket has.
pub(super) fn read_tickets(r: &mut Reader) -> Result<TurnTickets> {
    let last = r.uint()?;
    let count = r.len()?;
    let refuse = |r: &Reader, what: &str| {
        Err(Error::invalid(format!(
            "snapshot lists {what} in a bucket's turn tickets at byte {}",
            r.at
        )))
    };
    if last > MAX_TURN_TICKET {
        return refuse(r, "a ticket past the largest");
    }
    if count > MAX_TICKETS as u64 {
        return refuse(r, "more bookings than a bucket keeps");
    }
    let mut booked = Vec::with_capacity(count as usize);
    let mut ticket: u64 = 0;
    for _ in 0..count {
        let step = r.uint()?;
        ticket = match ticket.checked_add(step) {
            Some(t) if step > 0 && t <= last => t,
            _ => return refuse(r, "a ticket out of order or past the last given"),
        };
        let turn = r.uint()?;
        let slots = r.uint()?;
        if slots == 0 || slots > MAX_LIVE_LEASES {
            return refuse(r, "a booking of no slots or more than a bucket has");
        }
        booked.push(Booking {
            ticket,
            turn,
            slots,
        });
    }
    Ok(TurnTickets { last, booked })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::lease_id::{LeaseIds, LeaseKey};

    fn bytes(t: &TurnTickets) -> Vec<u8> {
        let mut w = Writer(Vec::new());
        write_tickets(&mut w, t);
        w.0
    }

    #[test]
    fn turn_tickets_round_trip() {
        let (mut t, mut ids) = (TurnTickets::default(), LeaseIds::new(LeaseKey([5; 32])));
        t.book(None, 1_000, 1, &mut ids);
        let second = t.book(None, 2_000, 2, &mut ids);
        t.book(None, 3_000, 1, &mut ids);
        assert!(t.redeem(second));
        let bytes = bytes(&t);
        let back = read_tickets(&mut Reader {
            bytes: &bytes,
            at: 0,
        })
        .unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn a_ticket_past_the_last_given_is_refused() {
        let mut t = TurnTickets::default();
        t.book(None, 1_000, 1, &mut LeaseIds::new(LeaseKey([5; 32])));
        t.last = 0;
        let bytes = bytes(&t);
        let e = read_tickets(&mut Reader {
            bytes: &bytes,
            at: 0,
        })
        .unwrap_err();
        assert!(e.message.contains("past the last given"), "{}", e.message);
    }
}
