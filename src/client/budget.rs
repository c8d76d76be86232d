//! Run-wide budget counters on the client side. `LocalBudgetState` counts
//! in memory for one isolate; `GatewayBudgetState` makes the gateway the
//! authority across isolates while paying one round trip per block of
//! units, not per unit.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use super::port::GatewayPort;
use super::retry::with_retries;
use crate::error::{Error, ErrorCode, Result};
use crate::protocol::{BudgetCharge, BudgetKind, ChargeRequest, ChargeResponse};
use crate::rt::{LocalBoxFuture, Runtime, Slots};
use crate::time::Millis;

pub trait BudgetState {
    /// Charges every one of `charges` to the run, or none of them.
    fn charge<'a>(
        &'a self,
        root_run_id: &'a str,
        charges: &'a [BudgetCharge],
    ) -> LocalBoxFuture<'a, Result<ChargeResponse>>;
}

/// Counters in this isolate's memory.
#[derive(Default)]
pub struct LocalBudgetState {
    counters: RefCell<HashMap<String, BTreeMap<String, u64>>>,
}

impl LocalBudgetState {
    pub fn new() -> Self {
        LocalBudgetState::default()
    }

    fn charge_now(&self, root_run_id: &str, charges: &[BudgetCharge]) -> Result<ChargeResponse> {
        let mut all = self.counters.borrow_mut();
        let run = all.entry(root_run_id.to_owned()).or_default();
        for c in charges {
            let observed = run
                .get(&c.key)
                .copied()
                .unwrap_or(0)
                .saturating_add(c.amount);
            if observed > c.limit {
                return Err(Error::budget_exceeded(&c.key, observed, c.limit));
            }
        }
        let mut counters = BTreeMap::new();
        for c in charges {
            let n = run.entry(c.key.clone()).or_insert(0);
            *n += c.amount;
            counters.insert(c.key.clone(), *n);
        }
        Ok(ChargeResponse { counters })
    }
}

impl BudgetState for LocalBudgetState {
    fn charge<'a>(
        &'a self,
        root_run_id: &'a str,
        charges: &'a [BudgetCharge],
    ) -> LocalBoxFuture<'a, Result<ChargeResponse>> {
        Box::pin(std::future::ready(self.charge_now(root_run_id, charges)))
    }
}

/// How often a charge waiting for its turn looks whether the turn came.
/// Charges queue only while a reservation is in flight, one round trip.
const TURN_POLL_MS: Millis = 5;

/// Reserves budget at the gateway in coarse blocks and charges each local
/// operation against them exactly once.
pub struct GatewayBudgetState {
    port: Rc<dyn GatewayPort>,
    rt: Rc<dyn Runtime>,
    /// Units reserved at the gateway and not yet used, per run and key.
    remaining: RefCell<HashMap<(String, String), u64>>,
    /// One charge at a time, in arrival order. The state may be shared by
    /// a Worker's requests, so a charge waits for its turn on its own timer
    /// (see [`Slots::acquire_on_own_timer`]).
    turn: Slots,
    id_prefix: String,
    next_id: Cell<u64>,
    /// Sent with every charge, for a gateway with a secret.
    run_scope_token: Option<String>,
}

impl GatewayBudgetState {
    /// `seed` makes this client's reservation ids unlike any other client's.
    pub fn new(port: Rc<dyn GatewayPort>, rt: Rc<dyn Runtime>, seed: u64) -> Self {
        GatewayBudgetState {
            port,
            rt,
            remaining: RefCell::new(HashMap::new()),
            turn: Slots::of_kind(1, "a budget charge's turn"),
            id_prefix: format!("{seed:016x}"),
            next_id: Cell::new(0),
            run_scope_token: None,
        }
    }

    /// Sends `token` (from `mint_run_scope_token` for the run this state
    /// charges) with every charge: a gateway with a secret refuses charges
    /// without one.
    pub fn with_run_scope_token(mut self, token: Option<String>) -> Self {
        self.run_scope_token = token;
        self
    }

    fn reservation_id(&self) -> String {
        let n = self.next_id.get() + 1;
        self.next_id.set(n);
        format!("{}-{n}", self.id_prefix)
    }

    /// Units held locally for a key, for tests and the simulation's books.
    #[cfg(any(test, feature = "sim"))]
    pub fn reserved_unused(&self, root_run_id: &str, key: &str) -> u64 {
        self.remaining
            .borrow()
            .get(&(root_run_id.to_owned(), key.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    async fn charge_serial(
        &self,
        root_run_id: &str,
        charges: &[BudgetCharge],
    ) -> Result<ChargeResponse> {
        let key = |c: &BudgetCharge| (root_run_id.to_owned(), c.key.clone());
        let mut blocks = Vec::new();
        let mut exact = Vec::new();
        let mut previous = Vec::new();
        {
            let mut remaining = self.remaining.borrow_mut();
            for c in charges {
                let held = remaining.get(&key(c)).copied();
                previous.push((key(c), held));
                let held = held.unwrap_or(0);
                if held >= c.amount {
                    remaining.insert(key(c), held - c.amount);
                    continue;
                }
                let shortfall = c.amount - held;
                // Other keys (a parent's fan-out) reserve exactly what
                // they need.
                let ahead = BudgetKind::from_key(&c.key).map_or(1, BudgetKind::reservation_block);
                let block = shortfall.max(ahead).min(c.limit.max(shortfall));
                blocks.push(BudgetCharge {
                    amount: block,
                    ..c.clone()
                });
                exact.push(BudgetCharge {
                    amount: shortfall,
                    ..c.clone()
                });
                remaining.insert(key(c), block - shortfall);
            }
        }
        if blocks.is_empty() {
            return Ok(ChargeResponse {
                counters: BTreeMap::new(),
            });
        }
        let restore = || {
            let mut remaining = self.remaining.borrow_mut();
            for (k, held) in &previous {
                match held {
                    Some(n) => remaining.insert(k.clone(), *n),
                    None => remaining.remove(k),
                };
            }
        };
        match self.reserve(root_run_id, &blocks).await {
            Ok(r) => Ok(r),
            Err(e) if e.code == ErrorCode::BudgetExceeded && blocks != exact => {
                // The block would cross the limit; the exact shortfall may not.
                {
                    let mut remaining = self.remaining.borrow_mut();
                    for c in &exact {
                        remaining.insert(key(c), 0);
                    }
                }
                self.reserve(root_run_id, &exact)
                    .await
                    .inspect_err(|_| restore())
            }
            Err(e) => {
                restore();
                Err(e)
            }
        }
    }

    /// One reservation, retried with the same id so the gateway counts it
    /// once however many attempts reach it.
    async fn reserve(&self, root_run_id: &str, charges: &[BudgetCharge]) -> Result<ChargeResponse> {
        let request = ChargeRequest {
            root_run_id: root_run_id.to_owned(),
            reservation_id: self.reservation_id(),
            run_scope_token: self.run_scope_token.clone(),
            charges: charges.to_vec(),
        };
        with_retries(&*self.rt, || self.port.charge(request.clone())).await
    }
}

impl BudgetState for GatewayBudgetState {
    fn charge<'a>(
        &'a self,
        root_run_id: &'a str,
        charges: &'a [BudgetCharge],
    ) -> LocalBoxFuture<'a, Result<ChargeResponse>> {
        Box::pin(async move {
            let _turn = self
                .turn
                .acquire_on_own_timer(&*self.rt, TURN_POLL_MS, None)
                .await?;
            self.charge_serial(root_run_id, charges).await
        })
    }
}
