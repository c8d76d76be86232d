//! The budget endpoint: charge run-wide counters all-or-nothing.

use crate::json_value::Value;

use super::{limits, CounterMap};
use crate::error::{Error, Result};
use crate::json::{as_object, quote, Decode};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetCharge {
    pub key: String,
    pub amount: u64,
    pub limit: u64,
}

/// `POST /v1/budget/charge`. Retrying with the same `reservationId` returns
/// the first answer and counts once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChargeRequest {
    pub root_run_id: String,
    pub reservation_id: String,
    /// With a secret at the gateway: a token for `root_run_id` from
    /// `mint_run_scope_token`.
    pub run_scope_token: Option<String>,
    pub charges: Vec<BudgetCharge>,
    /// Set when this id was sent before and its answer was not read: the
    /// gateway then refuses it if it may have forgotten the id, rather than
    /// count it a second time. A client resends an id for at most
    /// [`limits::RESEND_HORIZON_MS`] after its first send.
    pub resent: bool,
}

impl Decode for ChargeRequest {
    fn from_value(value: &Value) -> Result<Self> {
        let mut r = ChargeRequest::default();
        r.read(value)?;
        Ok(r)
    }
}

impl ChargeRequest {
    /// Reads the fields into `self`, as `AcquireResponse::read` does.
    fn read(&mut self, value: &Value) -> Result<()> {
        let f = as_object(value, "")?;
        let items = f.array("charges", 1, limits::MAX_CHARGES)?;
        let charges = &mut self.charges;
        charges.reserve(items.len());
        for (i, item) in items.iter().enumerate() {
            let c = f.item("charges", i, item)?;
            let charge = BudgetCharge {
                key: c.string("key", limits::MAX_BUDGET_KEY_BYTES)?.to_owned(),
                amount: c.integer("amount", 1, limits::MAX_BUDGET)?,
                limit: c.integer("limit", 0, limits::MAX_BUDGET)?,
            };
            if charges.iter().any(|seen| seen.key == charge.key) {
                return Err(Error::invalid(format!(
                    "{} repeats the key {}; charge each key once per request",
                    c.name("key"),
                    super::encode(&charge.key)
                )));
            }
            charges.push(charge);
        }
        self.root_run_id = f.string("rootRunId", limits::MAX_ID_BYTES)?.to_owned();
        self.reservation_id = f
            .string("reservationId", limits::MAX_RESERVATION_ID_BYTES)?
            .to_owned();
        self.run_scope_token = f
            .opt_string("runScopeToken", limits::MAX_TOKEN_BYTES)?
            .map(|t| t.trim().to_owned());
        self.resent = f.opt_bool("resent")?.unwrap_or(false);
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChargeResponse {
    /// The run's counters after this charge, for the keys it named.
    pub counters: CounterMap,
}

impl Decode for ChargeResponse {
    fn from_value(value: &Value) -> Result<Self> {
        let f = as_object(value, "")?;
        let counters = match value.get("counters") {
            Some(Value::Object(_)) => f.opt_counters("counters")?,
            Some(other) => {
                return Err(Error::invalid(format!(
                    "counters must be an object, got {}",
                    quote(other)
                )))
            }
            None => return Err(Error::invalid("counters is required and must be an object")),
        };
        Ok(ChargeResponse { counters })
    }
}
