//! The client-side tests' common ground: a simulation on virtual time from
//! `T0` and a scripted gateway port on it, with the client states built on
//! the two.

use std::rc::Rc;

use paceline::client::{GatewayBudgetState, GatewayPort, GatewayRateState, PacerOptions};
use paceline::rt::Runtime;
use paceline::sim::{SimRuntime, T0};

use super::port::ScriptedPort;

pub struct SimRig {
    pub rt: SimRuntime,
    pub port: Rc<ScriptedPort>,
}

impl SimRig {
    /// The gateway's clock runs `skew_ms` ahead of the client's.
    pub fn new(skew_ms: i64) -> Self {
        let rt = SimRuntime::new(T0);
        let port = ScriptedPort::new(&rt, skew_ms);
        SimRig { rt, port }
    }

    pub fn runtime(&self) -> Rc<dyn Runtime> {
        Rc::new(self.rt.clone())
    }

    pub fn gateway_port(&self) -> Rc<dyn GatewayPort> {
        self.port.clone()
    }

    /// A pacer with the default options, leasing from the scripted port.
    pub fn pacer(&self) -> GatewayRateState {
        self.pacer_with(PacerOptions::default())
    }

    /// A pacer with `options`, leasing from the scripted port.
    pub fn pacer_with(&self, options: PacerOptions) -> GatewayRateState {
        GatewayRateState::new(self.gateway_port(), self.runtime(), options)
    }

    /// A budget state reserving through the scripted port; `seed` makes
    /// its reservation ids its own.
    pub fn budget(&self, seed: u64) -> GatewayBudgetState {
        GatewayBudgetState::new(self.gateway_port(), self.runtime(), seed)
    }
}
