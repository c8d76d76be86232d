//! `GatewayBudgetState` and `LocalBudgetState` for JS.

use std::rc::Rc;

use wasm_bindgen::prelude::*;

use super::js::{from_js, promise, random_seed, to_js, Options};
use super::port::JsPort;
use super::registry::keep_budget_state;
use super::runtime::JsRuntime;
use crate::client::{BudgetState, GatewayBudgetState, GatewayPort, LocalBudgetState, Runtime};
use crate::protocol::ChargeRequest;

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

fn charge_promise(state: Rc<dyn BudgetState>, input: JsValue) -> js_sys::Promise {
    promise(async move {
        // The client makes its own reservation ids; a caller's is ignored.
        let with_id = js_sys::Object::assign(&js_sys::Object::new(), &input.unchecked_into());
        js_sys::Reflect::set(&with_id, &"reservationId".into(), &"client".into())?;
        let req: ChargeRequest = from_js(&with_id)?;
        let counters = state.charge(&req.root_run_id, &req.charges).await?;
        to_js(&counters)
    })
}

/// The methods both budget-state classes share; only their constructors
/// differ.
macro_rules! budget_state_class {
    ($(#[$doc:meta])* $name:ident, $js:ident) => {
        $(#[$doc])*
        #[wasm_bindgen(js_name = $js)]
        pub struct $name {
            pub(crate) inner: Rc<dyn BudgetState>,
            handle: u32,
        }

        #[wasm_bindgen(js_class = $js)]
        impl $name {
            /// How `createGovernor` finds this state.
            #[wasm_bindgen(getter, js_name = stateHandle)]
            pub fn state_handle(&self) -> u32 {
                self.handle
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
                let handle = keep_budget_state(&inner);
                $name { inner, handle }
            }
        }
    };
}

budget_state_class!(
    /// Budget counters reserved at the gateway in blocks.
    JsGatewayBudgetState,
    GatewayBudgetState
);

budget_state_class!(
    /// Budget counters in this isolate's memory.
    JsLocalBudgetState,
    LocalBudgetState
);

#[wasm_bindgen(js_class = GatewayBudgetState)]
impl JsGatewayBudgetState {
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "GatewayPortLike")] port: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "GatewayBudgetStateOptions")]
        options: JsValue,
    ) -> Result<JsGatewayBudgetState, JsValue> {
        let token = Options::read(&options)?.field::<String>("runScopeToken")?;
        let port: Rc<dyn GatewayPort> = Rc::new(JsPort::new(port)?);
        let rt: Rc<dyn Runtime> = Rc::new(JsRuntime);
        Ok(Self::keep(Rc::new(
            GatewayBudgetState::new(port, rt, random_seed()).with_run_scope_token(token),
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
