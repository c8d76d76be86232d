//! A run ledger's record in a snapshot. Version 1 kept each reservation's
//! charges and answer in full; version 2 keeps a digest of the charges and
//! the answer's numbers (see the ledger module), and a version-1 record is
//! read into that form. Version 6 adds when the run last forgot a
//! reservation; for an older record it is worked out by [`forgot_before_v6`].

use crate::gateway::map_hash::KeyedMap;

use super::codec::{Reader, Writer};
use crate::error::{Error, Result};
use crate::gateway::ledger::{
    charges_digest, Ledger, Outcome, Reservation, FORGOT_AT_UNKNOWN,
    REMEMBERED_RESERVATIONS_BEFORE_V6,
};
use crate::gateway::timeline::Micros;
use crate::protocol::BudgetCharge;
use crate::sorted_map::SortedMap;

pub(super) fn write_ledger(w: &mut Writer, l: &Ledger) {
    w.uint(l.counters.len() as u64);
    for (key, count) in &l.counters {
        w.str(key);
        w.uint(*count);
    }
    w.uint(l.order.len() as u64);
    for id in &l.order {
        let seen = &l.reservations[id];
        w.str(id);
        w.bytes(&seen.digest);
        match &seen.outcome {
            Outcome::Charged(counts) => {
                w.0.push(0);
                w.uint(counts.len() as u64);
                for &n in counts {
                    w.uint(n);
                }
            }
            Outcome::Exceeded {
                index,
                observed,
                limit,
            } => {
                w.0.push(1);
                w.uint(*index as u64);
                w.uint(*observed);
                w.uint(*limit);
            }
        }
    }
    w.opt_uint(l.forgot_at);
}

pub(super) fn read_ledger(r: &mut Reader, version: u8) -> Result<Ledger> {
    let mut ledger = Ledger {
        counters: SortedMap::new(),
        reservations: KeyedMap::default(),
        order: Vec::new(),
        forgot_at: None,
    };
    for _ in 0..r.len()? {
        ledger.counters.insert(r.str()?, r.uint()?);
    }
    for _ in 0..r.len()? {
        let id = r.str()?;
        let reservation = if version == 1 {
            read_reservation_v1(r)?
        } else {
            read_reservation(r)?
        };
        ledger.order.push(id.clone());
        ledger.reservations.insert(id, reservation);
    }
    if version >= 6 {
        ledger.forgot_at = r.opt_uint()?;
    }
    Ok(ledger)
}

/// When a run from a record older than version 6 may last have forgotten
/// a reservation: if it held as many as it kept then, it may have forgotten
/// one at any charge up to its last (`last_charge`; unknown in version 1).
/// A client's resent id the ledger does not know is then refused while a
/// client could still send it, rather than counted twice.
pub(super) fn forgot_before_v6(ledger: &Ledger, last_charge: Option<Micros>) -> Option<Micros> {
    (ledger.order.len() >= REMEMBERED_RESERVATIONS_BEFORE_V6)
        .then_some(last_charge.unwrap_or(FORGOT_AT_UNKNOWN))
}

fn read_reservation(r: &mut Reader) -> Result<Reservation> {
    let digest = r.array()?;
    let outcome = match r.byte()? {
        0 => {
            let mut counts = Vec::new();
            for _ in 0..r.len()? {
                counts.push(r.uint()?);
            }
            Outcome::Charged(counts)
        }
        _ => Outcome::Exceeded {
            index: r.uint()? as usize,
            observed: r.uint()?,
            limit: r.uint()?,
        },
    };
    Ok(Reservation { digest, outcome })
}

fn read_reservation_v1(r: &mut Reader) -> Result<Reservation> {
    let mut charges = Vec::new();
    for _ in 0..r.len()? {
        charges.push(BudgetCharge {
            key: r.str()?,
            amount: r.uint()?,
            limit: r.uint()?,
        });
    }
    let at = r.at;
    let unknown_key = || {
        Error::invalid(format!(
            "snapshot names a key its charge lacks at byte {at}"
        ))
    };
    let outcome = match r.byte()? {
        0 => {
            let mut after = SortedMap::new();
            for _ in 0..r.len()? {
                after.insert(r.str()?, r.uint()?);
            }
            let counts = charges
                .iter()
                .map(|c| after.get(&c.key).copied().ok_or_else(unknown_key))
                .collect::<Result<_>>()?;
            Outcome::Charged(counts)
        }
        _ => {
            let key = r.str()?;
            Outcome::Exceeded {
                index: charges
                    .iter()
                    .position(|c| c.key == key)
                    .ok_or_else(unknown_key)?,
                observed: r.uint()?,
                limit: r.uint()?,
            }
        }
    };
    Ok(Reservation {
        digest: charges_digest(&charges),
        outcome,
    })
}
