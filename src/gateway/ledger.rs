//! Run-wide budget counters. A charge applies all of its keys or none, and
//! a retry with the same `reservationId` returns the first answer without
//! counting again.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::error::{Error, Result};
use crate::protocol::{BudgetCharge, ChargeRequest, ChargeResponse};

/// How many reservation ids a run remembers for idempotent retries. A retry
/// comes within seconds of its first try, long before this many newer
/// charges of the same run.
pub(crate) const REMEMBERED_RESERVATIONS: usize = 1_024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Charged(BTreeMap<String, u64>),
    Exceeded {
        key: String,
        observed: u64,
        limit: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reservation {
    pub charges: Vec<BudgetCharge>,
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
        if let Some(seen) = self.reservations.get(&req.reservation_id) {
            if seen.charges != req.charges {
                return Err(Error::invalid(format!(
                    "reservationId {} was already used for different charges",
                    req.reservation_id
                )));
            }
            return answer(&seen.outcome);
        }
        let outcome = self.apply(&req.charges);
        let result = answer(&outcome);
        self.remember(req.reservation_id.clone(), req.charges.clone(), outcome);
        result
    }

    fn apply(&mut self, charges: &[BudgetCharge]) -> Outcome {
        for c in charges {
            let observed = self.count(&c.key).saturating_add(c.amount);
            if observed > c.limit {
                return Outcome::Exceeded {
                    key: c.key.clone(),
                    observed,
                    limit: c.limit,
                };
            }
        }
        let mut after = BTreeMap::new();
        for c in charges {
            let counter = self.counters.entry(c.key.clone()).or_insert(0);
            *counter += c.amount;
            after.insert(c.key.clone(), *counter);
        }
        Outcome::Charged(after)
    }

    pub fn count(&self, key: &str) -> u64 {
        self.counters.get(key).copied().unwrap_or(0)
    }

    pub fn remember(&mut self, id: String, charges: Vec<BudgetCharge>, outcome: Outcome) {
        if self.order.len() >= REMEMBERED_RESERVATIONS {
            if let Some(oldest) = self.order.pop_front() {
                self.reservations.remove(&oldest);
            }
        }
        self.order.push_back(id.clone());
        self.reservations
            .insert(id, Reservation { charges, outcome });
    }
}

fn answer(outcome: &Outcome) -> Result<ChargeResponse> {
    match outcome {
        Outcome::Charged(counters) => Ok(ChargeResponse {
            counters: counters.clone(),
        }),
        Outcome::Exceeded {
            key,
            observed,
            limit,
        } => Err(Error::budget_exceeded(key, *observed, *limit)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    fn req(id: &str, charges: &[(&str, u64, u64)]) -> ChargeRequest {
        ChargeRequest {
            root_run_id: "run".into(),
            reservation_id: id.into(),
            charges: charges
                .iter()
                .map(|(key, amount, limit)| BudgetCharge {
                    key: (*key).into(),
                    amount: *amount,
                    limit: *limit,
                })
                .collect(),
        }
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
            l.charge(&req(&format!("r{i}"), &[("waterfallStep", 1, u64::MAX)]))
                .unwrap();
        }
        assert_eq!(l.reservations.len(), REMEMBERED_RESERVATIONS);
        assert!(!l.reservations.contains_key("r0"));
        assert_eq!(
            l.count("waterfallStep"),
            REMEMBERED_RESERVATIONS as u64 + 10
        );
    }
}
