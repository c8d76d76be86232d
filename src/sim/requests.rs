//! Request builders shared by the crate's unit tests and the integration
//! tests.

use crate::protocol::{BudgetCharge, ChargeRequest};

/// A charge request for `run` from `(key, amount, limit)` triples.
pub fn charge_request(
    run: &str,
    id: &str,
    token: Option<String>,
    charges: &[(&str, u64, u64)],
) -> ChargeRequest {
    ChargeRequest {
        root_run_id: run.into(),
        reservation_id: id.into(),
        run_scope_token: token,
        charges: charges
            .iter()
            .map(|(key, amount, limit)| BudgetCharge {
                key: (*key).into(),
                amount: *amount,
                limit: *limit,
            })
            .collect(),
        resent: false,
    }
}
