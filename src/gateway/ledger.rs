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
//! is under 24 KiB a run.

use std::collections::{BTreeMap, HashMap, VecDeque};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::protocol::{BudgetCharge, ChargeRequest, ChargeResponse};

/// How many reservation ids a run remembers for idempotent retries; older
/// ones are forgotten first. A retry comes within seconds of its first try
/// (the clients' retry delays add up to well under a minute), long before
/// this many newer charges of the same run.
pub(crate) const REMEMBERED_RESERVATIONS: usize = 128;

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
    pub counters: BTreeMap<String, u64>,
    pub reservations: HashMap<String, Reservation>,
    /// Reservation ids, oldest first, for forgetting beyond the bound.
    pub order: VecDeque<String>,
}

impl Ledger {
    pub fn charge(&mut self, req: &ChargeRequest) -> Result<ChargeResponse> {
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
        self.remember(req.reservation_id.clone(), Reservation { digest, outcome });
        result
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
                    let counter = self.counters.entry(c.key.clone()).or_insert(0);
                    *counter += c.amount;
                    *counter
                })
                .collect(),
        )
    }

    pub fn count(&self, key: &str) -> u64 {
        self.counters.get(key).copied().unwrap_or(0)
    }

    pub fn remember(&mut self, id: String, reservation: Reservation) {
        if self.order.len() >= REMEMBERED_RESERVATIONS {
            if let Some(oldest) = self.order.pop_front() {
                self.reservations.remove(&oldest);
            }
        }
        self.order.push_back(id.clone());
        self.reservations.insert(id, reservation);
    }
}

fn answer(outcome: &Outcome, charges: &[BudgetCharge]) -> Result<ChargeResponse> {
    match outcome {
        Outcome::Charged(counts) => {
            // Inserted one by one: collecting into a map sorts the pairs
            // first, with a sort of its own in the wasm build.
            let mut counters = BTreeMap::new();
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
        l.charge(&req("r1", &[("toolCall", 2, 3)])).unwrap();
        let e = l
            .charge(&req("r2", &[("playCall", 1, 5), ("toolCall", 2, 3)]))
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::BudgetExceeded);
        assert_eq!(e.message, "Play execution toolCall budget exceeded (4/3).");
        assert_eq!(l.count("playCall"), 0);
        assert_eq!(l.count("toolCall"), 2);
    }

    #[test]
    fn a_retried_reservation_returns_the_first_answer_and_counts_once() {
        let mut l = Ledger::default();
        let first = l.charge(&req("r1", &[("retry", 1, 9)])).unwrap();
        let again = l.charge(&req("r1", &[("retry", 1, 9)])).unwrap();
        assert_eq!(first, again);
        assert_eq!(l.count("retry"), 1);
        let refused = l.charge(&req("r2", &[("retry", 9, 9)])).unwrap_err();
        let refused_again = l.charge(&req("r2", &[("retry", 9, 9)])).unwrap_err();
        assert_eq!(refused, refused_again);
    }

    #[test]
    fn a_reused_reservation_id_with_other_charges_is_refused_without_counting() {
        let mut l = Ledger::default();
        l.charge(&req("r1", &[("retry", 1, 9)])).unwrap();
        let e = l.charge(&req("r1", &[("retry", 2, 9)])).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert_eq!(l.count("retry"), 1);
    }

    #[test]
    fn reservation_memory_is_bounded() {
        let mut l = Ledger::default();
        for i in 0..REMEMBERED_RESERVATIONS + 10 {
            l.charge(&req(&format!("r{i}"), &[("waterfallStep", 1, 1_000)]))
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
            l.charge(&req(&format!("r{i}"), &[(&format!("k{i}"), 1, 9)]))
                .unwrap();
        }
        let before = l.clone();
        let e = l.charge(&req("over", &[("k0", 1, 9), ("new", 1, 9)]));
        assert_eq!(e.unwrap_err().code, ErrorCode::InvalidInput);
        assert_eq!(l, before);
        assert!(l.charge(&req("old", &[("k0", 1, 9)])).is_ok());
    }
}
