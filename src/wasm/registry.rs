//! The JS classes a governor is built from (`GatewayRateState`,
//! `GatewayBudgetState`, ...) reach `createGovernor` as plain JS values
//! inside its options. Each state object has a token only it holds (a
//! fresh empty JS object), and the core state is found by that token. The
//! token is read by `pacelineStateToken(value)`, a function the build adds
//! to the generated glue: it asks the glue's own record of the objects it
//! made (the brand maps), so nothing on the object itself is public and a
//! look-alike finds nothing. An entry lives as long as its JS object:
//! `free()`, or the collector, drops it; a governor built from the state
//! keeps its own reference.

use crate::cell::RefCell;
use std::rc::Rc;

use js_sys::{Object, WeakMap};
use wasm_bindgen::prelude::*;

use super::global::Global;
use crate::client::{BudgetState, GatewayRateState};
use crate::error::{Error, Result};

#[derive(Clone)]
enum State {
    Rate(GatewayRateState),
    Budget(Rc<dyn BudgetState>),
}

/// Live states in slots; a freed slot is reused, and its old token (still
/// a key in the weak map) no longer matches the slot's.
struct States {
    /// Token → slot number; made with the first state, so that the
    /// registry itself needs no code to set it up.
    tokens: Option<WeakMap>,
    slots: Vec<Option<(JsValue, State)>>,
    free: Vec<usize>,
}

static STATES: Global<RefCell<States>> = Global::new(RefCell::new(States {
    tokens: None,
    slots: Vec::new(),
    free: Vec::new(),
}));

/// A state's entry in the registry, removed when the JS object goes.
pub(crate) struct Registration {
    token: Object,
    slot: usize,
}

impl Registration {
    fn new(state: State) -> Self {
        let token = Object::new();
        let slot = STATES.with(|s| {
            let mut s = s.borrow_mut();
            let entry = Some((token.clone().into(), state));
            let slot = match s.free.pop() {
                Some(slot) => {
                    s.slots[slot] = entry;
                    slot
                }
                None => {
                    s.slots.push(entry);
                    s.slots.len() - 1
                }
            };
            s.tokens
                .get_or_insert_with(WeakMap::new)
                .set(&token, &JsValue::from_f64(slot as f64));
            slot
        });
        Registration { token, slot }
    }

    pub fn rate(state: &GatewayRateState) -> Self {
        Self::new(State::Rate(state.clone()))
    }

    pub fn budget(state: &Rc<dyn BudgetState>) -> Self {
        Self::new(State::Budget(state.clone()))
    }

    /// The object's token, for `pacelineStateToken`.
    pub fn token(&self) -> JsValue {
        self.token.clone().into()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        STATES.with(|s| {
            let mut s = s.borrow_mut();
            s.slots[self.slot] = None;
            s.free.push(self.slot);
        });
    }
}

#[wasm_bindgen]
extern "C" {
    /// Defined in the glue by the build (js/scripts/glue-rewrites.mjs).
    #[wasm_bindgen(catch, js_name = pacelineStateToken)]
    fn state_token(value: &JsValue) -> std::result::Result<JsValue, JsValue>;
}

/// The live state behind `value`, a state object from this package.
fn find(value: &JsValue) -> Option<State> {
    if !value.is_object() {
        return None;
    }
    let token = state_token(value).ok()?;
    if !token.is_object() {
        return None;
    }
    STATES.with(|s| {
        let s = s.borrow();
        let slot = s.tokens.as_ref()?.get(token.unchecked_ref()).as_f64()? as usize;
        match s.slots.get(slot) {
            Some(Some((owner, state))) if *owner == token => Some(state.clone()),
            _ => None,
        }
    })
}

pub(crate) fn rate_state(value: &JsValue, path: &str) -> Result<GatewayRateState> {
    match find(value) {
        Some(State::Rate(state)) => Ok(state),
        _ => Err(Error::invalid(format!(
            "{path} must be a live GatewayRateState or LocalRateState made by this package"
        ))),
    }
}

pub(crate) fn budget_state(value: &JsValue, path: &str) -> Result<Rc<dyn BudgetState>> {
    match find(value) {
        Some(State::Budget(state)) => Ok(state),
        _ => Err(Error::invalid(format!(
            "{path} must be a live GatewayBudgetState or LocalBudgetState made by this package"
        ))),
    }
}
