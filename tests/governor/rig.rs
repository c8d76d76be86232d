//! The governor's test rig: a pacer over the real scheduler on virtual
//! time, behind a port that records what it was sent, and the tool catalog
//! the governor tests call.

use std::collections::HashMap;
use std::rc::Rc;

use crate::common::port::ScriptedPort;
use crate::common::rig::SimRig;
use paceline::client::{GatewayRateState, PacerOptions};
use paceline::gateway::BucketView;
use paceline::governor::{
    Adapter, Governor, GovernorConfig, PacingDeclaration, PacingResolver, PolicyOverrides,
    ProviderResponse, RunScope, ToolPacing,
};
use paceline::protocol::{decode, PacingRule};
use paceline::rt::Runtime;
use paceline::sim::SimRuntime;
use paceline::time::Clock;

pub const ORG: &str = "org";
pub const RUN: &str = "run";

/// 20 a second, four in flight: every permit carries a lease.
pub fn apollo_rules() -> Vec<PacingRule> {
    vec![PacingRule::new(20, 1_000).with_max_concurrency(4)]
}

/// The tools the tests call: two on one provider, one that names its
/// provider only, one declared unpaced; any other is undeclared.
pub fn catalog() -> PacingResolver {
    let mut table = HashMap::new();
    for tool in ["apollo.search", "apollo.enrich"] {
        table.insert(
            tool.to_owned(),
            PacingDeclaration::Declared(ToolPacing {
                provider: "apollo".into(),
                rules: apollo_rules(),
            }),
        );
    }
    table.insert(
        "clearbit.lookup".to_owned(),
        PacingDeclaration::Declared(ToolPacing {
            provider: "clearbit".into(),
            rules: vec![],
        }),
    );
    table.insert("local.format".to_owned(), PacingDeclaration::Unpaced);
    Box::new(move |tool| {
        let found = table
            .get(tool)
            .cloned()
            .unwrap_or(PacingDeclaration::Undeclared);
        Box::pin(async move { Ok(found) })
    })
}

pub fn overrides(json: &str) -> PolicyOverrides {
    decode(json.as_bytes()).unwrap()
}

pub struct Rig {
    pub rt: SimRuntime,
    pub port: Rc<ScriptedPort>,
    pub pacer: GatewayRateState,
}

impl Rig {
    pub fn new() -> Self {
        Self::with_options(PacerOptions::default())
    }

    /// A rig whose pacer takes one lease per permit and gives it back when
    /// the permit ends, as it does against gateways that do not stream a
    /// bucket's slots.
    pub fn one_lease_per_permit() -> Self {
        Self::with_options(PacerOptions {
            keep_leases: false,
            ..PacerOptions::default()
        })
    }

    pub fn with_options(options: PacerOptions) -> Self {
        let sim = SimRig::new(0);
        let pacer = GatewayRateState::new(sim.gateway_port(), sim.runtime(), options);
        Rig {
            rt: sim.rt,
            port: sim.port,
            pacer,
        }
    }

    pub fn config(&self) -> GovernorConfig {
        GovernorConfig::new(
            Adapter::EsmWorkers,
            RunScope {
                org_id: ORG.into(),
                root_run_id: RUN.into(),
            },
            self.pacer.clone(),
            catalog(),
            self_runtime(&self.rt),
        )
    }

    pub fn governor(&self, policy: &str) -> Governor {
        let mut config = self.config();
        config.policy = overrides(policy);
        Governor::new(config).unwrap()
    }

    pub fn bucket(&self, id: &str) -> Option<BucketView> {
        let now = self.rt.now_ms();
        self.port
            .gateway
            .core
            .borrow_mut()
            .bucket(id, None, now)
            .unwrap()
    }

    /// Every lease handed back, alone or riding on an acquire.
    pub fn released(&self) -> Vec<String> {
        let alone = self.port.releases.borrow();
        let riding = self.port.acquires.borrow();
        alone
            .iter()
            .flat_map(|r| r.lease_ids.clone())
            .chain(riding.iter().flat_map(|a| a.released_lease_ids.clone()))
            .collect()
    }
}

pub fn self_runtime(rt: &SimRuntime) -> Rc<dyn Runtime> {
    Rc::new(rt.clone())
}

pub fn response(status: u16, retry_after: Option<&str>) -> ProviderResponse<&'static str> {
    ProviderResponse {
        status,
        retry_after: retry_after.map(str::to_owned),
        quota_headers: Default::default(),
        body: "",
    }
}
