//! The run's budgets: checked here against the policy, then charged through
//! the budget state, which is the authority when many isolates share a run.

use crate::cell::RefCell;
use std::rc::Rc;

use super::policy::BudgetPolicy;
use crate::client::BudgetState;
use crate::error::{Detail, Error, ErrorCode, Result};
use crate::protocol::{BudgetCharge, BudgetCounts, BudgetKind, ChargeResponse, CounterMap};

/// Prefix of the per-parent key; the parent's run id follows it.
pub(crate) const CHILD_PER_PARENT: &str = "childPerParent";

/// What the lineage has used so far. Children start from their parent's
/// counts, so every limit holds across the whole lineage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    pub used: BudgetCounts,
    /// Children started, by the run id of their parent.
    pub child_calls: CounterMap,
}

pub(crate) struct RunBudgets {
    pub root_run_id: String,
    pub policy: BudgetPolicy,
    pub state: Rc<dyn BudgetState>,
    pub counters: RefCell<Counters>,
}

impl RunBudgets {
    pub async fn charge(&self, kind: BudgetKind, amount: u64) -> Result<()> {
        if amount == 0 {
            return Ok(());
        }
        let limit = self.policy.max[kind];
        let observed = self.counters.borrow().used[kind].saturating_add(amount);
        if observed > limit {
            return Err(Error::budget_exceeded(kind.key(), observed, limit));
        }
        let charges = [BudgetCharge {
            key: kind.key().to_owned(),
            amount,
            limit,
        }];
        parent_named(self.state.charge(&self.root_run_id, &charges).await)?;
        self.counters.borrow_mut().used[kind] += amount;
        Ok(())
    }

    /// One child of `parent_run_id`: playCall, descendant and the parent's
    /// fan-out together, or none of them.
    pub async fn charge_fork(&self, parent_run_id: &str) -> Result<()> {
        use BudgetKind::{Descendant, PlayCall};
        let p = &self.policy;
        let per_parent_limit = p.max_child_play_calls_per_parent;
        let checks = {
            let c = self.counters.borrow();
            let children = c.child_calls.get(parent_run_id).copied().unwrap_or(0);
            [
                (CHILD_PER_PARENT, children + 1, per_parent_limit),
                (PlayCall.key(), c.used[PlayCall] + 1, p.max[PlayCall]),
                (Descendant.key(), c.used[Descendant] + 1, p.max[Descendant]),
            ]
        };
        if let Some(&(key, observed, limit)) = checks.iter().find(|(_, o, l)| o > l) {
            return Err(Error::budget_exceeded(key, observed, limit));
        }
        let charge = |key: String, limit| BudgetCharge {
            key,
            amount: 1,
            limit,
        };
        let charges = [
            charge(PlayCall.key().into(), p.max[PlayCall]),
            charge(Descendant.key().into(), p.max[Descendant]),
            charge(
                format!("{CHILD_PER_PARENT}:{parent_run_id}"),
                per_parent_limit,
            ),
        ];
        parent_named(self.state.charge(&self.root_run_id, &charges).await)?;
        let mut c = self.counters.borrow_mut();
        c.used[PlayCall] += 1;
        c.used[Descendant] += 1;
        c.child_calls.add_one(parent_run_id);
        Ok(())
    }
}

/// A budget state's answer to a charge. Its refusal names the per-parent
/// key with the parent's id; callers see the budget's name alone, as for a
/// local refusal. A function on the answer, not an async fn round the
/// charge: a state machine (and its panic location) fewer.
fn parent_named(answer: Result<ChargeResponse>) -> Result<()> {
    match answer {
        Ok(_) => Ok(()),
        Err(e) => match (e.code, &e.detail) {
            (
                ErrorCode::BudgetExceeded,
                Some(Detail::Budget {
                    key,
                    observed,
                    limit,
                }),
            ) if key.starts_with(CHILD_PER_PARENT) => {
                Err(Error::budget_exceeded(CHILD_PER_PARENT, *observed, *limit))
            }
            _ => Err(e),
        },
    }
}
