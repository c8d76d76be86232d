//! Run-wide budget counters on the client side. `LocalBudgetState` counts
//! in memory for one isolate; `GatewayBudgetState` makes the gateway the
//! authority across isolates while paying one round trip per block of
//! units, not per unit.

use crate::sorted_map::SortedMap;
use std::cell::Cell;

use crate::cell::RefCell;
use std::rc::Rc;

use super::budget_turn::{Turn, Turns};
use super::port::GatewayPort;
use super::retry::with_retries;
use crate::error::{Error, ErrorCode, Result};
use crate::protocol::limits::RESEND_HORIZON_MS;
use crate::protocol::{BudgetCharge, BudgetKind, ChargeRequest, ChargeResponse, CounterMap};
use crate::rt::{LocalBoxFuture, Runtime};
use crate::time::Millis;

pub trait BudgetState {
    /// Charges every one of `charges` to the run, or none of them.
    fn charge<'a>(
        &'a self,
        root_run_id: &'a str,
        charges: &'a [BudgetCharge],
    ) -> LocalBoxFuture<'a, Result<ChargeResponse>>;
}

/// A run's counter in a map of them: the run id's length, the run id, then
/// the counter's key, so that no two (run, key) pairs share a text. (One
/// map type for the budget states' counters and the governor's latencies,
/// one copy of the map's code in the wasm.)
fn units_key(root_run_id: &str, key: &str) -> String {
    format!("{}:{root_run_id}{key}", root_run_id.len())
}

/// Counters in this isolate's memory.
#[derive(Default)]
pub struct LocalBudgetState {
    /// By run and counter key (see [`units_key`]).
    counters: RefCell<SortedMap<u64>>,
}

impl LocalBudgetState {
    pub fn new() -> Self {
        LocalBudgetState::default()
    }

    fn charge_now(&self, root_run_id: &str, charges: &[BudgetCharge]) -> Result<ChargeResponse> {
        let mut all = self.counters.borrow_mut();
        for c in charges {
            let observed = all
                .get(&units_key(root_run_id, &c.key))
                .copied()
                .unwrap_or(0)
                .saturating_add(c.amount);
            if observed > c.limit {
                return Err(Error::budget_exceeded(&c.key, observed, c.limit));
            }
        }
        let mut counters = CounterMap::new();
        for c in charges {
            let n = all.get_or_insert_with(&units_key(root_run_id, &c.key), || 0);
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

/// Reservations whose answer no charge has read are kept at most this
/// many; past it the oldest is forgotten. Each comes from a charge that
/// lost its request at the gateway, and the next charge settles it.
const MAX_UNSETTLED: usize = 16;

/// A reservation sent and not settled, with when it was first sent: it is
/// sent again only within [`RESEND_HORIZON_MS`] of that, the time for
/// which the gateway vouches never to count a resent id twice.
struct Unsettled {
    request: ChargeRequest,
    first_sent: Millis,
}

/// Reserves budget at the gateway in coarse blocks and charges each local
/// operation against them exactly once.
///
/// A reservation whose answer its charge never read (the charge was
/// dropped with its request, or lost its turn waiting) stays unsettled
/// until the next charge asks the gateway again with the same reservation
/// id: the gateway counts it once and returns its first answer, and the
/// units it reserved are this state's to use. The charge that sent it
/// never applies it: if it wakes after losing its turn, it charges again
/// from the start.
pub struct GatewayBudgetState {
    port: Rc<dyn GatewayPort>,
    rt: Rc<dyn Runtime>,
    /// Units reserved at the gateway and not yet used, per run and key.
    remaining: RefCell<SortedMap<u64>>,
    /// One charge at a time, in arrival order, each for a bounded time.
    turns: Turns,
    /// Reservations sent and not settled, oldest first.
    unsettled: RefCell<Vec<Unsettled>>,
    id_prefix: String,
    next_id: Cell<u64>,
    /// Sent with every charge, for a gateway with a secret.
    run_scope_token: Option<String>,
}

/// What a charge reserves, and the units each key it touches keeps.
struct Plan {
    /// Blocks to reserve; none when the units held cover the charge.
    blocks: Vec<BudgetCharge>,
    /// The exact shortfalls behind the blocks.
    exact: Vec<BudgetCharge>,
    /// Each touched key's units left once the blocks are reserved.
    after: Vec<(String, u64)>,
}

impl GatewayBudgetState {
    /// `seed` makes this client's reservation ids unlike any other client's.
    pub fn new(port: Rc<dyn GatewayPort>, rt: Rc<dyn Runtime>, seed: u64) -> Self {
        GatewayBudgetState {
            port,
            rt,
            remaining: RefCell::new(SortedMap::new()),
            turns: Turns::default(),
            unsettled: RefCell::new(Vec::new()),
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
            .get(&units_key(root_run_id, key))
            .copied()
            .unwrap_or(0)
    }

    fn plan(&self, root_run_id: &str, charges: &[BudgetCharge]) -> Plan {
        let remaining = self.remaining.borrow();
        let mut plan = Plan {
            blocks: Vec::new(),
            exact: Vec::new(),
            after: Vec::new(),
        };
        for c in charges {
            let key = units_key(root_run_id, &c.key);
            // A key named twice charges on from what its first left.
            let held = match plan.after.iter().rposition(|(k, _)| *k == key) {
                Some(at) => plan.after[at].1,
                None => remaining.get(&key).copied().unwrap_or(0),
            };
            if held >= c.amount {
                plan.after.push((key, held - c.amount));
                continue;
            }
            let shortfall = c.amount - held;
            // Other keys (a parent's fan-out) reserve exactly what they need.
            let ahead = BudgetKind::from_key(&c.key).map_or(1, BudgetKind::reservation_block);
            let block = shortfall.max(ahead).min(c.limit.max(shortfall));
            plan.blocks.push(BudgetCharge {
                amount: block,
                ..c.clone()
            });
            plan.exact.push(BudgetCharge {
                amount: shortfall,
                ..c.clone()
            });
            plan.after.push((key, block - shortfall));
        }
        plan
    }

    fn keep(&self, after: Vec<(String, u64)>) {
        let mut remaining = self.remaining.borrow_mut();
        for (key, units) in after {
            remaining.insert(key, units);
        }
    }

    /// Charges within `turn`; `None` if the turn passed to another charge
    /// while this one waited on the gateway.
    async fn charge_in_turn(
        &self,
        turn: &Turn,
        root_run_id: &str,
        charges: &[BudgetCharge],
    ) -> Option<Result<ChargeResponse>> {
        self.settle(turn).await?;
        let mut plan = self.plan(root_run_id, charges);
        if plan.blocks.is_empty() {
            self.keep(plan.after);
            return Some(Ok(ChargeResponse {
                counters: CounterMap::new(),
            }));
        }
        // One reservation awaited in one place (its future is then in this
        // one's once): the blocks, then the exact shortfall if need be.
        let mut exact = false;
        let answer = loop {
            let charges = if exact { &plan.exact } else { &plan.blocks };
            match self.reserve(turn, root_run_id, charges).await? {
                Err(e)
                    if !exact
                        && e.code == ErrorCode::BudgetExceeded
                        && plan.blocks != plan.exact =>
                {
                    // The block would cross the limit; the exact shortfall
                    // may not, and leaves nothing over.
                    for (key, units) in &mut plan.after {
                        if plan
                            .exact
                            .iter()
                            .any(|c| *key == units_key(root_run_id, &c.key))
                        {
                            *units = 0;
                        }
                    }
                    exact = true;
                }
                answer => break answer,
            }
        };
        if answer.is_ok() {
            self.keep(plan.after);
        }
        Some(answer)
    }

    /// One reservation, retried with the same id so the gateway counts it
    /// once however many attempts reach it. `None` if the turn was lost
    /// meanwhile: the reservation is then left for the next charge to
    /// settle.
    async fn reserve(
        &self,
        turn: &Turn,
        root_run_id: &str,
        charges: &[BudgetCharge],
    ) -> Option<Result<ChargeResponse>> {
        let request = ChargeRequest {
            root_run_id: root_run_id.to_owned(),
            reservation_id: self.reservation_id(),
            run_scope_token: self.run_scope_token.clone(),
            charges: charges.to_vec(),
            resent: false,
        };
        let first_sent = self.rt.now_ms();
        {
            let mut unsettled = self.unsettled.borrow_mut();
            if unsettled.len() >= MAX_UNSETTLED {
                // Units it may have reserved stay counted and unused: the
                // run stops short of its limit by them, never past it.
                unsettled.remove(0);
            }
            unsettled.push(Unsettled {
                request: request.clone(),
                first_sent,
            });
        }
        let answer = self.send(&request, first_sent).await;
        self.settled(turn, &request).then_some(answer)
    }

    /// Sends `request` until the gateway answers or the retries run out.
    /// Every attempt after its first ever is marked resent, so a gateway
    /// that may have forgotten the id refuses it rather than count it
    /// again; none goes out past [`RESEND_HORIZON_MS`] after `first_sent`.
    async fn send(&self, request: &ChargeRequest, first_sent: Millis) -> Result<ChargeResponse> {
        let mut resent = request.resent;
        with_retries(&*self.rt, || {
            let attempt = ChargeRequest {
                resent,
                ..request.clone()
            };
            resent = true;
            let age = self.rt.now_ms().saturating_sub(first_sent);
            async move {
                if attempt.resent && age > RESEND_HORIZON_MS {
                    return Err(Error::unavailable(format!(
                        "reservation {} was first sent {age} ms ago, past the {RESEND_HORIZON_MS} ms \
                         for which a gateway tells a resent id from a new one: it is not sent again",
                        attempt.reservation_id
                    )));
                }
                self.port.charge(attempt).await
            }
        })
        .await
    }

    /// Takes `request` off the unsettled list if `turn` still holds the
    /// turn; false if not.
    fn settled(&self, turn: &Turn, request: &ChargeRequest) -> bool {
        if !turn.held() {
            return false;
        }
        let mut unsettled = self.unsettled.borrow_mut();
        if let Some(at) = unsettled
            .iter()
            .position(|u| u.request.reservation_id == request.reservation_id)
        {
            unsettled.remove(at);
        }
        true
    }

    /// Asks the gateway again for every reservation whose answer no charge
    /// read, and keeps the units each reserved. A refused one reserved
    /// nothing; one that fails again, or is too old to send again, is let
    /// go, its units (if the gateway counted them) never used. `None` if
    /// the turn was lost meanwhile.
    async fn settle(&self, turn: &Turn) -> Option<()> {
        loop {
            let next = self
                .unsettled
                .borrow()
                .first()
                .map(|u| (u.request.clone(), u.first_sent));
            let Some((request, first_sent)) = next else {
                return Some(());
            };
            if self.rt.now_ms().saturating_sub(first_sent) > RESEND_HORIZON_MS {
                self.unsettled.borrow_mut().remove(0);
                continue;
            }
            let resend = ChargeRequest {
                resent: true,
                ..request
            };
            let answer = self.send(&resend, first_sent).await;
            let request = resend;
            if !self.settled(turn, &request) {
                return None;
            }
            if answer.is_ok() {
                let mut remaining = self.remaining.borrow_mut();
                for c in &request.charges {
                    let key = units_key(&request.root_run_id, &c.key);
                    let units = remaining.get(&key).copied().unwrap_or(0);
                    remaining.insert(key, units.saturating_add(c.amount));
                }
            }
        }
    }
}

impl BudgetState for GatewayBudgetState {
    fn charge<'a>(
        &'a self,
        root_run_id: &'a str,
        charges: &'a [BudgetCharge],
    ) -> LocalBoxFuture<'a, Result<ChargeResponse>> {
        Box::pin(async move {
            loop {
                let turn = self.turns.take(&*self.rt, TURN_POLL_MS).await;
                if let Some(answer) = self.charge_in_turn(&turn, root_run_id, charges).await {
                    return answer;
                }
                // Its turn passed on while it waited on the gateway: what
                // it sent is the holder's to settle, and it charges again.
            }
        })
    }
}
