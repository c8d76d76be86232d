//! The JS classes a governor is built from (`GatewayRateState`,
//! `GatewayBudgetState`, ...) are handed to `createGovernor` as JS objects;
//! each keeps its core value here under a handle the object reports, so the
//! governor shares that very state instead of a copy.

use std::cell::RefCell;
use std::rc::Rc;

use crate::client::{BudgetState, GatewayRateState};

thread_local! {
    static RATE_STATES: RefCell<Vec<GatewayRateState>> = const { RefCell::new(Vec::new()) };
    static BUDGET_STATES: RefCell<Vec<Rc<dyn BudgetState>>> = const { RefCell::new(Vec::new()) };
}

pub(crate) fn keep_rate_state(state: &GatewayRateState) -> u32 {
    RATE_STATES.with(|r| {
        let mut r = r.borrow_mut();
        r.push(state.clone());
        (r.len() - 1) as u32
    })
}

pub(crate) fn rate_state(handle: u32) -> Option<GatewayRateState> {
    RATE_STATES.with(|r| r.borrow().get(handle as usize).cloned())
}

pub(crate) fn keep_budget_state(state: &Rc<dyn BudgetState>) -> u32 {
    BUDGET_STATES.with(|r| {
        let mut r = r.borrow_mut();
        r.push(state.clone());
        (r.len() - 1) as u32
    })
}

pub(crate) fn budget_state(handle: u32) -> Option<Rc<dyn BudgetState>> {
    BUDGET_STATES.with(|r| r.borrow().get(handle as usize).cloned())
}
