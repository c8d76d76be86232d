//! The demo's case through the governor's `callTool`: one isolate's rate
//! state shared by runs that call back to back and retry their 429s, as
//! the demo does (the fleet's callers do not retry).

use crate::protocol::PacingRule;
use crate::time::Millis;

/// What the provider saw in [`overstated_rule_through_call_tool`].
#[derive(Debug, Clone)]
pub struct CallToolRun {
    /// Calls accepted in each second of the run.
    pub accepted_per_second: Vec<u64>,
    pub dispatched: u64,
    pub refused: u64,
    /// When each 429 was answered, ms since the start.
    pub refused_at: Vec<Millis>,
}

/// The demo's case through the governor: one isolate's rate state shared
/// by four runs that call back to back with `callTool` (retry-safe, three
/// attempts), told 25 req/s by a provider that takes 15 over a sliding
/// second and answers 429 with `Retry-After: 1` above it; the gateway's
/// default config (1 s horizon), 10 ms to it, 20 ms calls.
pub fn overstated_rule_through_call_tool(duration_ms: Millis) -> CallToolRun {
    overstated_rule_through_stalling_call_tool(duration_ms, 0, 0)
}

/// [`overstated_rule_through_call_tool`] on a host that stalls: each call
/// leaves up to `max_stall_ms` after its permit's time (uniform, drawn from
/// `seed`), as on a busy machine whose timers fire late.
pub fn overstated_rule_through_stalling_call_tool(
    duration_ms: Millis,
    max_stall_ms: Millis,
    seed: u64,
) -> CallToolRun {
    use std::rc::Rc;

    use super::{Answer, FaultyPort, Provider, SimRuntime, T0};
    use crate::client::{GatewayRateState, InProcessGateway, PacerOptions};
    use crate::gateway::{GatewayConfig, GatewayCore};
    use crate::governor::{
        Adapter, CallOptions, Governor, GovernorConfig, PacingDeclaration, ProviderResponse,
        RunScope, ToolPacing,
    };
    use crate::rt::Runtime;
    use crate::time::Clock;

    let rt = SimRuntime::new(T0);
    let end = T0 + duration_ms;
    let clock: Rc<dyn Clock> = Rc::new(rt.clone());
    let core = GatewayCore::new(GatewayConfig::default(), 7).expect("valid gateway config");
    let mut port = FaultyPort::over(InProcessGateway::new(core, clock), &rt);
    port.latency_ms = 10;
    let runtime: Rc<dyn Runtime> = Rc::new(rt.clone());
    let pacer = GatewayRateState::new(Rc::new(port), runtime.clone(), PacerOptions::default());
    let provider = Rc::new(Provider::new(|_| 15, None));
    let stalls = Rc::new(std::cell::RefCell::new(super::arrivals::Rng::new(seed)));
    for run in 0..4 {
        let config = GovernorConfig::new(
            Adapter::EsmWorkers,
            RunScope {
                org_id: "org".into(),
                root_run_id: format!("run-{run}"),
            },
            pacer.clone(),
            Box::new(|_| {
                Box::pin(async {
                    Ok(PacingDeclaration::Declared(ToolPacing {
                        provider: "provider".into(),
                        rules: vec![PacingRule::new(25, 1_000)],
                    }))
                })
            }),
            runtime.clone(),
        );
        let governor = Governor::new(config).expect("valid governor config");
        let (rt, provider, stalls) = (rt.clone(), provider.clone(), stalls.clone());
        let options = CallOptions {
            retry_safe: true,
            ..CallOptions::default()
        };
        rt.clone().spawn(Box::pin(async move {
            while rt.now_ms() < end {
                let call = |_| {
                    let (rt, provider) = (rt.clone(), provider.clone());
                    let stall = stalls.borrow_mut().below(max_stall_ms + 1);
                    async move {
                        if stall > 0 {
                            rt.sleep(stall).await;
                        }
                        let reply = provider.begin(rt.now_ms());
                        if reply.answer == Answer::Ok {
                            rt.sleep(20).await;
                            provider.end();
                        }
                        let status = match reply.answer {
                            Answer::Ok => 200,
                            Answer::TooManyRequests => 429,
                        };
                        Ok::<_, ()>(ProviderResponse {
                            status,
                            retry_after: reply.retry_after,
                            quota_headers: reply.quota_headers,
                            body: (),
                        })
                    }
                };
                if let Err(e) = governor.call_tool("provider.enrich", options, call).await {
                    panic!("a governed call failed: {e:?}");
                }
            }
        }));
    }
    rt.run_until(end);
    let second = |at: Millis| ((at - T0) / 1_000) as usize;
    let seconds = duration_ms.div_ceil(1_000) as usize;
    let mut accepted = vec![0i64; seconds + 1];
    let (dispatches, refusals) = (provider.dispatches(), provider.rejections());
    for &at in &dispatches {
        accepted[second(at)] += 1;
    }
    for &at in &refusals {
        accepted[second(at)] -= 1;
    }
    accepted.truncate(seconds);
    CallToolRun {
        accepted_per_second: accepted.into_iter().map(|n| n.max(0) as u64).collect(),
        dispatched: dispatches.len() as u64,
        refused: refusals.len() as u64,
        refused_at: refusals.iter().map(|&at| at - T0).collect(),
    }
}
