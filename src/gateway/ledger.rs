//! Run-wide budget counters. A charge applies all of its keys or none, and
//! a retry with the same `reservationId` returns the first answer without
//! counting again.
//!
//! A ledger's size is bounded whatever its callers send, so a run's stored
//! record stays far below a Durable Object's 128 KiB limit on one value:
//! keys and reservation ids are at most 64 bytes (checked when a request is
//! decoded), a run counts at most [`MAX_BUDGET_KEYS`] distinct keys, and it
//! remembers only its latest [`REMEMBERED_RESERVATIONS`] reservations, each
//! as a digest of its charges and the numbers of its answer. Together that
//! is under 44 KiB a run.
//!
//! Forgetting a reservation must never let it count twice. A client marks
//! an id it sends again as `resent`, and does so only within
//! [`RESEND_HORIZON_MS`](crate::protocol::limits::RESEND_HORIZON_MS) of
//! its first send. So an unknown resent id is either one that never
//! arrived (count it) or one this ledger forgot: the latter is possible
//! only if the ledger forgot a reservation within [`RESENT_REACH_MS`] (the
//! client's horizon plus time in transit), and then the id is refused with
//! a message saying so, never counted again. A run with fewer reservations
//! than the bound in that time forgets none a client may still send.

use super::map_hash::KeyedMap;

use sha2::{Digest, Sha256};

use super::timeline::{micros, Micros};
use crate::error::{Error, Result};
use crate::protocol::limits::RESENT_REACH_MS;
use crate::protocol::{BudgetCharge, ChargeRequest, ChargeResponse, CounterMap};
use crate::sorted_map::SortedMap;

/// How many reservation ids a run remembers for idempotent retries; older
/// ones are forgotten first. Clients reserve in blocks (256 tool calls at a
/// time), so a run makes this many reservations within
/// [`RESENT_REACH_MS`] only with hundreds of isolates charging at once.
pub(crate) const REMEMBERED_RESERVATIONS: usize = 256;

/// How many reservations a run remembered before version 6 of the
/// snapshot, which did not record when it last forgot one.
pub(crate) const REMEMBERED_RESERVATIONS_BEFORE_V6: usize = 128;

/// Distinct budget keys one run may count. The runtime's own keys are five.
pub const MAX_BUDGET_KEYS: usize = 32;

/// The first 16 bytes of a SHA-256 over a reservation's charges: enough to
/// tell a retry from a reused id without keeping the charges.
pub(crate) type ChargesDigest = [u8; 16];

pub(crate) fn charges_digest(charges: &[BudgetCharge]) -> ChargesDigest {
    let mut hash = Sha256::new();
    for c in charges {
        hash.update((c.key.len() as u64).to_le_bytes());
        hash.update(c.key.as_bytes());
        hash.update(c.amount.to_le_bytes());
        hash.update(c.limit.to_le_bytes());
    }
    hash.finalize()[..16].try_into().expect("16 of 32 bytes")
}

/// A reservation's answer, by the position of each charge in its request
/// (the keys come back from the retried request, which must be the same).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Each charged key's counter after the charge.
    Charged(Vec<u64>),
    Exceeded {
        index: usize,
        observed: u64,
        limit: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reservation {
    pub digest: ChargesDigest,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Ledger {
    pub counters: SortedMap<u64>,
    pub reservations: KeyedMap<Reservation>,
    /// Reservation ids, oldest first, for forgetting beyond the bound.
    pub order: Vec<String>,
    /// When this run last forgot a reservation to stay within the bound
    /// ([`FORGOT_AT_UNKNOWN`] until its next charge, for a run restored
    /// from a record that kept no times).
    pub forgot_at: Option<Micros>,
}

/// A run restored from a version-1 record may have forgotten reservations
/// at any time before its next charge, which then stands for that time.
pub(crate) const FORGOT_AT_UNKNOWN: Micros = Micros::MAX;

impl Ledger {
    pub fn charge(&mut self, req: &ChargeRequest, now: Micros) -> Result<ChargeResponse> {
        if self.forgot_at == Some(FORGOT_AT_UNKNOWN) {
            self.forgot_at = Some(now);
        }
        let digest = charges_digest(&req.charges);
        if let Some(seen) = self.reservations.get(&req.reservation_id) {
            if seen.digest != digest {
                return Err(Error::invalid(format!(
                    "reservationId {} was already used for different charges",
                    req.reservation_id
                )));
            }
            return answer(&seen.outcome, &req.charges);
        }
        if req.resent && self.may_have_forgotten(now) {
            return Err(Error::invalid(format!(
                "reservationId {} was resent, and run {} forgot reservations in the last \
                 {RESENT_REACH_MS} ms (it remembers its latest {REMEMBERED_RESERVATIONS}): \
                 it may have been counted already, so it is not counted again; \
                 charge under a new reservationId",
                req.reservation_id, req.root_run_id
            )));
        }
        let new_keys = req
            .charges
            .iter()
            .filter(|c| !self.counters.contains_key(&c.key))
            .count();
        if self.counters.len() + new_keys > MAX_BUDGET_KEYS {
            return Err(Error::invalid(format!(
                "run {} would count {} distinct budget keys; a run counts at most {MAX_BUDGET_KEYS}",
                req.root_run_id,
                self.counters.len() + new_keys
            )));
        }
        let outcome = self.apply(&req.charges);
        let result = answer(&outcome, &req.charges);
        self.remember(
            req.reservation_id.clone(),
            Reservation { digest, outcome },
            now,
        );
        result
    }

    /// Whether an id a client may still resend at `now` could have been
    /// forgotten: one was forgotten within the resent ids' reach.
    fn may_have_forgotten(&self, now: Micros) -> bool {
        self.forgot_at
            .is_some_and(|at| at.saturating_add(micros(RESENT_REACH_MS)) >= now)
    }

    fn apply(&mut self, charges: &[BudgetCharge]) -> Outcome {
        for (index, c) in charges.iter().enumerate() {
            let observed = self.count(&c.key).saturating_add(c.amount);
            if observed > c.limit {
                return Outcome::Exceeded {
                    index,
                    observed,
                    limit: c.limit,
                };
            }
        }
        Outcome::Charged(
            charges
                .iter()
                .map(|c| {
                    let counter = self.counters.get_or_insert_with(&c.key, || 0);
                    *counter += c.amount;
                    *counter
                })
                .collect(),
        )
    }

    pub fn count(&self, key: &str) -> u64 {
        self.counters.get(key).copied().unwrap_or(0)
    }

    fn remember(&mut self, id: String, reservation: Reservation, now: Micros) {
        if self.order.len() >= REMEMBERED_RESERVATIONS {
            let oldest = self.order.remove(0);
            self.reservations.remove(&oldest);
            self.forgot_at = Some(self.forgot_at.map_or(now, |at| at.max(now)));
        }
        self.order.push(id.clone());
        self.reservations.insert(id, reservation);
    }
}

fn answer(outcome: &Outcome, charges: &[BudgetCharge]) -> Result<ChargeResponse> {
    match outcome {
        Outcome::Charged(counts) => {
            let mut counters = CounterMap::new();
            for (c, &n) in charges.iter().zip(counts) {
                counters.insert(c.key.clone(), n);
            }
            Ok(ChargeResponse { counters })
        }
        Outcome::Exceeded {
            index,
            observed,
            limit,
        } => Err(Error::budget_exceeded(
            // The digest matched, so the index names one of these charges.
            charges.get(*index).map_or("", |c| c.key.as_str()),
            *observed,
            *limit,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    fn req(id: &str, charges: &[(&str, u64, u64)]) -> ChargeRequest {
        crate::sim::charge_request("run", id, None, charges)
    }

    #[test]
    fn a_charge_over_any_limit_applies_none_of_its_keys() {
        let mut l = Ledger::default();
        l.charge(&req("r1", &[("toolCall", 2, 3)]), 0).unwrap();
        let e = l
            .charge(&req("r2", &[("playCall", 1, 5), ("toolCall", 2, 3)]), 0)
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::BudgetExceeded);
        assert_eq!(e.message, "Play execution toolCall budget exceeded (4/3).");
        assert_eq!(l.count("playCall"), 0);
        assert_eq!(l.count("toolCall"), 2);
    }

    #[test]
    fn a_retried_reservation_returns_the_first_answer_and_counts_once() {
        let mut l = Ledger::default();
        let first = l.charge(&req("r1", &[("retry", 1, 9)]), 0).unwrap();
        let again = l.charge(&req("r1", &[("retry", 1, 9)]), 0).unwrap();
        assert_eq!(first, again);
        assert_eq!(l.count("retry"), 1);
        let refused = l.charge(&req("r2", &[("retry", 9, 9)]), 0).unwrap_err();
        let refused_again = l.charge(&req("r2", &[("retry", 9, 9)]), 0).unwrap_err();
        assert_eq!(refused, refused_again);
    }

    #[test]
    fn a_reused_reservation_id_with_other_charges_is_refused_without_counting() {
        let mut l = Ledger::default();
        l.charge(&req("r1", &[("retry", 1, 9)]), 0).unwrap();
        let e = l.charge(&req("r1", &[("retry", 2, 9)]), 0).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert_eq!(l.count("retry"), 1);
    }

    #[test]
    fn reservation_memory_is_bounded() {
        let mut l = Ledger::default();
        for i in 0..REMEMBERED_RESERVATIONS + 10 {
            l.charge(&req(&format!("r{i}"), &[("waterfallStep", 1, 1_000)]), 0)
                .unwrap();
        }
        assert_eq!(l.reservations.len(), REMEMBERED_RESERVATIONS);
        assert!(!l.reservations.contains_key("r0"));
        assert_eq!(
            l.count("waterfallStep"),
            REMEMBERED_RESERVATIONS as u64 + 10
        );
    }

    #[test]
    fn a_run_counts_at_most_max_budget_keys_and_a_refusal_counts_nothing() {
        let mut l = Ledger::default();
        for i in 0..MAX_BUDGET_KEYS {
            l.charge(&req(&format!("r{i}"), &[(&format!("k{i}"), 1, 9)]), 0)
                .unwrap();
        }
        let before = l.clone();
        let e = l.charge(&req("over", &[("k0", 1, 9), ("new", 1, 9)]), 0);
        assert_eq!(e.unwrap_err().code, ErrorCode::InvalidInput);
        assert_eq!(l, before);
        assert!(l.charge(&req("old", &[("k0", 1, 9)]), 0).is_ok());
    }

    fn resent(id: &str) -> ChargeRequest {
        ChargeRequest {
            resent: true,
            ..req(id, &[("toolCall", 256, 100_000)])
        }
    }

    /// A run that makes `newer` reservations after `lost`, from `at` on.
    fn lost_then(newer: usize, at: Micros) -> Ledger {
        let mut l = Ledger::default();
        l.charge(&req("lost", &[("toolCall", 256, 100_000)]), at)
            .unwrap();
        for i in 0..newer {
            l.charge(&req(&format!("r{i}"), &[("toolCall", 1, 100_000)]), at)
                .unwrap();
        }
        l
    }

    #[test]
    fn a_lost_reservation_resent_after_more_than_128_newer_ones_is_not_counted_twice() {
        let mut l = lost_then(129, 0);
        l.charge(&resent("lost"), micros(60_000)).unwrap();
        assert_eq!(
            l.count("toolCall"),
            256 + 129,
            "the lost block counted once"
        );
    }

    #[test]
    fn a_resent_id_the_run_may_have_forgotten_is_refused_not_counted_again() {
        let mut l = lost_then(REMEMBERED_RESERVATIONS, 0);
        assert!(!l.reservations.contains_key("lost"), "forgotten");
        let before = l.clone();
        let e = l.charge(&resent("lost"), micros(60_000)).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert!(e.message.contains("may have been counted already"), "{e}");
        assert_eq!(l, before, "nothing counted, nothing remembered");
        // The same id sent for the first time is a new reservation.
        l.charge(&req("lost", &[("toolCall", 256, 100_000)]), micros(60_000))
            .unwrap();
        assert_eq!(
            l.count("toolCall"),
            2 * 256 + REMEMBERED_RESERVATIONS as u64
        );
    }

    #[test]
    fn a_resent_id_is_counted_when_no_reservation_was_forgotten_within_its_reach() {
        // Never forgotten: a resent id it does not know never arrived.
        let mut l = lost_then(3, 0);
        l.charge(&resent("never-arrived"), micros(60_000)).unwrap();
        assert_eq!(l.count("toolCall"), 2 * 256 + 3);
        // Forgotten, but longer ago than any client still resends.
        let mut l = lost_then(REMEMBERED_RESERVATIONS, 0);
        assert!(l.charge(&resent("late"), micros(RESENT_REACH_MS)).is_err());
        l.charge(&resent("late"), micros(RESENT_REACH_MS) + 1)
            .unwrap();
        assert_eq!(
            l.count("toolCall"),
            2 * 256 + REMEMBERED_RESERVATIONS as u64
        );
    }

    #[test]
    fn a_run_that_forgot_at_an_unknown_time_counts_its_next_charge_as_that_time() {
        let mut l = lost_then(REMEMBERED_RESERVATIONS, 0);
        l.forgot_at = Some(FORGOT_AT_UNKNOWN);
        let at = micros(3_600_000);
        assert!(l.charge(&resent("lost"), at).is_err());
        assert!(l
            .charge(&resent("lost"), at + micros(RESENT_REACH_MS))
            .is_err());
        l.charge(&resent("lost"), at + micros(RESENT_REACH_MS) + 1)
            .unwrap();
    }
}
