//! `GatewayBudgetState` and `LocalBudgetState` for JS.

use std::rc::Rc;

use wasm_bindgen::prelude::*;

use crate::json_value::Value;

use super::js::{promise, random_seed, rejected, to_js};
use super::port::JsPort;
use super::reader::{json, ObjectArg};
use super::registry::Registration;
use super::runtime::JsRuntime;
use crate::client::{BudgetState, GatewayBudgetState, GatewayPort, LocalBudgetState};
use crate::error::Result;
use crate::json::Decode;
use crate::protocol::{limits, ChargeRequest};
use crate::rt::Runtime;

#[wasm_bindgen(typescript_custom_section)]
const TS_BUDGET: &'static str = r#"
export interface BudgetChargeInit { key: string; amount: number; limit: number }
export interface ChargeInput { rootRunId: string; charges: BudgetChargeInit[] }
export interface ChargeResult { counters: Record<string, number> }
export interface GatewayBudgetStateOptions {
  /** From mintRunScopeToken for the run this state charges; a gateway with a secret refuses charges without it. */
  runScopeToken?: string;
}
"#;

/// Reads `{rootRunId, charges}`. The client makes its own reservation
/// ids; a caller's is ignored.
fn charge_input(input: &JsValue) -> Result<ChargeRequest> {
    ObjectArg::new(input, "input")?.only(&[
        "rootRunId",
        "charges",
        "runScopeToken",
        "reservationId",
    ])?;
    let mut request = json(input, "input")?;
    if let Value::Object(fields) = &mut request {
        fields.insert("reservationId".into(), "client".into());
    }
    ChargeRequest::from_value(&request)
}

fn charge_promise(state: Rc<dyn BudgetState>, input: JsValue) -> js_sys::Promise {
    let req = match charge_input(&input) {
        Ok(req) => req,
        Err(e) => return rejected(e),
    };
    promise(async move {
        let counters = state.charge(&req.root_run_id, &req.charges).await?;
        to_js(&counters)
    })
}

/// The methods both budget-state classes share; only their constructors
/// differ.
macro_rules! budget_state_methods {
    ($name:ident, $js:ident) => {
        #[wasm_bindgen(js_class = $js)]
        impl $name {
            /// How `createGovernor` finds this state: a token only this
            /// object hands out. The build takes this method off the class
            /// and keeps it module-private (see `registry`).
            #[wasm_bindgen(js_name = pacelineStateToken, skip_typescript)]
            pub fn state_token(&self) -> JsValue {
                self.registration.token()
            }

            /// Charges every one of `charges` or none; over a limit it
            /// rejects with `BUDGET_EXCEEDED` and the key, observed count
            /// and limit.
            #[wasm_bindgen(unchecked_return_type = "Promise<ChargeResult>")]
            pub fn charge(
                &self,
                #[wasm_bindgen(unchecked_param_type = "ChargeInput")] input: JsValue,
            ) -> js_sys::Promise {
                charge_promise(self.inner.clone(), input)
            }
        }

        impl $name {
            fn keep(inner: Rc<dyn BudgetState>) -> Self {
                let registration = Registration::budget(&inner);
                $name {
                    inner,
                    registration,
                }
            }
        }
    };
}

/// Budget counters reserved at the gateway in blocks.
#[wasm_bindgen(js_name = GatewayBudgetState)]
pub struct JsGatewayBudgetState {
    pub(crate) inner: Rc<dyn BudgetState>,
    registration: Registration,
}

/// Budget counters in this isolate's memory.
#[wasm_bindgen(js_name = LocalBudgetState)]
pub struct JsLocalBudgetState {
    pub(crate) inner: Rc<dyn BudgetState>,
    registration: Registration,
}

budget_state_methods!(JsGatewayBudgetState, GatewayBudgetState);
budget_state_methods!(JsLocalBudgetState, LocalBudgetState);

#[wasm_bindgen(js_class = GatewayBudgetState)]
impl JsGatewayBudgetState {
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "GatewayTransport")] port: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "GatewayBudgetStateOptions")]
        options: JsValue,
    ) -> Result<JsGatewayBudgetState, JsValue> {
        let token = match ObjectArg::optional(&options, "options")? {
            Some(o) => {
                o.only(&["runScopeToken"])?;
                o.opt_string("runScopeToken", limits::MAX_TOKEN_BYTES)?
            }
            None => None,
        };
        let port: Rc<dyn GatewayPort> = Rc::new(JsPort::new(port)?);
        let rt: Rc<dyn Runtime> = Rc::new(JsRuntime::default());
        Ok(Self::keep(Rc::new(
            GatewayBudgetState::new(port, rt, random_seed("new GatewayBudgetState")?)
                .with_run_scope_token(token),
        )))
    }
}

#[wasm_bindgen(js_class = LocalBudgetState)]
impl JsLocalBudgetState {
    #[wasm_bindgen(constructor)]
    pub fn new() -> JsLocalBudgetState {
        Self::keep(Rc::new(LocalBudgetState::new()))
    }
}

impl Default for JsLocalBudgetState {
    fn default() -> Self {
        Self::new()
    }
}
