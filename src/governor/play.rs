//! The governor of one play run: its policy, slots, budgets and lineage.
//! Inline children are governors too, sharing everything with their root
//! except their place in the lineage.

use crate::sorted_map::SortedMap;
use std::future::Future;
use std::rc::Rc;

use super::budget::RunBudgets;
use super::latency::ToolLatency;
use super::lineage::{GovernanceSnapshot, Lineage};
use super::pacing::{Pacing, PacingResolver, PacingTable, RateScopeResolver, ToolPacing};
use super::policy::{Adapter, ExecutionPolicy, PolicyOverrides};
use crate::client::{BudgetState, GatewayRateState, LocalBudgetState};
use crate::error::{Error, Result};
use crate::protocol::BudgetKind;
use crate::rt::{AbortSignal, Runtime, SlotPermit, Slots};
use crate::time::Millis;

/// Which org's buckets a run draws from, and which run's budgets it spends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunScope {
    pub org_id: String,
    pub root_run_id: String,
}

pub struct GovernorConfig {
    pub adapter: Adapter,
    pub scope: RunScope,
    /// A shared gateway's pacer, or a local one (`GatewayRateState::local`).
    pub rate_state: GatewayRateState,
    /// `None` counts budgets in this isolate's memory.
    pub budget_state: Option<Rc<dyn BudgetState>>,
    pub resolve_pacing: PacingResolver,
    pub resolve_rate_scope: Option<RateScopeResolver>,
    /// Pacing the host knows better than any tool's declaration, by tool id.
    pub builtin_pacing: PacingTable,
    /// How long each tool's calls usually take, until its calls are seen.
    pub tool_latency_ms: SortedMap<Millis>,
    /// The play this run executes, so that a child calling it is a cycle.
    /// With `resume`, it must be the snapshot's own.
    pub play_id: Option<String>,
    /// Continue a lineage: a child run's snapshot, or this run's own from
    /// before a restart.
    pub resume: Option<GovernanceSnapshot>,
    pub policy: PolicyOverrides,
    pub runtime: Rc<dyn Runtime>,
}

impl GovernorConfig {
    /// A config with the adapter's policy, budgets in memory, no rate
    /// scopes, no built-in pacing, and a fresh lineage.
    pub fn new(
        adapter: Adapter,
        scope: RunScope,
        rate_state: GatewayRateState,
        resolve_pacing: PacingResolver,
        runtime: Rc<dyn Runtime>,
    ) -> Self {
        GovernorConfig {
            adapter,
            scope,
            rate_state,
            budget_state: None,
            resolve_pacing,
            resolve_rate_scope: None,
            builtin_pacing: PacingTable::default(),
            tool_latency_ms: SortedMap::new(),
            play_id: None,
            resume: None,
            policy: PolicyOverrides::default(),
            runtime,
        }
    }
}

pub(super) struct Shared {
    pub policy: ExecutionPolicy,
    pub rate_state: GatewayRateState,
    pub runtime: Rc<dyn Runtime>,
    pub pacing: Pacing,
    pub latency: ToolLatency,
    pub budgets: RunBudgets,
    pub row_slots: Slots,
    pub tool_slots: Slots,
}

/// Decides when a run's tool calls may go out and how much the run may do.
/// Clones are the same governor.
#[derive(Clone)]
pub struct Governor {
    pub(super) shared: Rc<Shared>,
    pub(super) lineage: Rc<Lineage>,
}

impl Governor {
    pub fn new(config: GovernorConfig) -> Result<Self> {
        let policy = ExecutionPolicy::for_adapter(config.adapter).with_overrides(&config.policy)?;
        let RunScope {
            org_id,
            root_run_id,
        } = config.scope;
        let play_id = config.play_id.as_deref().filter(|p| !p.trim().is_empty());
        let snapshot = match config.resume {
            Some(s) if s.root_run_id != root_run_id => {
                return Err(Error::invalid(format!(
                    "the snapshot to resume belongs to root run {}, not {root_run_id}",
                    s.root_run_id
                )))
            }
            Some(s) if play_id.is_some_and(|p| s.current_play_id.as_deref() != Some(p)) => {
                return Err(Error::invalid(format!(
                    "playId {} is not the play of the snapshot to resume ({})",
                    play_id.unwrap_or_default(),
                    s.current_play_id.as_deref().unwrap_or("none")
                )))
            }
            Some(s) => s,
            None => GovernanceSnapshot::root(&root_run_id, play_id),
        };
        let (lineage, counters) = snapshot.split();
        let default_rule = policy.default_provider_rule();
        let shared = Shared {
            row_slots: Slots::of_kind(policy.concurrency.max_row_concurrency, "a row slot"),
            tool_slots: Slots::of_kind(policy.concurrency.max_tool_concurrency, "a tool slot"),
            budgets: RunBudgets {
                root_run_id,
                policy: policy.budgets.clone(),
                state: config
                    .budget_state
                    .unwrap_or_else(|| Rc::new(LocalBudgetState::new())),
                counters: counters.into(),
            },
            pacing: Pacing::new(
                config.builtin_pacing,
                config.resolve_pacing,
                config.resolve_rate_scope,
                org_id,
                default_rule,
            ),
            latency: ToolLatency::new(config.tool_latency_ms),
            rate_state: config.rate_state,
            runtime: config.runtime,
            policy,
        };
        Ok(Governor {
            shared: Rc::new(shared),
            lineage: Rc::new(lineage),
        })
    }

    pub fn policy(&self) -> &ExecutionPolicy {
        &self.shared.policy
    }

    /// Waits for a map-row slot.
    pub fn acquire_row_slot<'a>(
        &'a self,
        signal: Option<&'a AbortSignal>,
    ) -> impl Future<Output = Result<SlotPermit>> + 'a {
        self.shared.row_slots.acquire(signal)
    }

    /// Rows to run at once: the play's request clamped to the policy's
    /// range, or the policy's default.
    pub fn resolve_row_concurrency(&self, requested: Option<usize>) -> usize {
        let c = &self.shared.policy.concurrency;
        requested.map_or(c.default_row_concurrency, |n| {
            n.clamp(1, c.max_row_concurrency)
        })
    }

    /// The pacing a tool's calls obey, from the first of the host's
    /// built-in table, the tool's declaration and the policy's default
    /// pace; `None` for a tool declared unpaced.
    pub fn resolve_pacing<'a>(
        &'a self,
        tool_id: &'a str,
    ) -> impl Future<Output = Result<Option<ToolPacing>>> + 'a {
        self.shared.pacing.resolve(tool_id)
    }

    /// Spends `amount` of a budget, or fails with `BUDGET_EXCEEDED` and
    /// spends nothing.
    pub fn charge_budget(
        &self,
        kind: BudgetKind,
        amount: u64,
    ) -> impl Future<Output = Result<()>> + '_ {
        self.shared.budgets.charge(kind, amount)
    }

    /// Admits a child play run and returns the snapshot it starts from.
    /// Refused with `CYCLE_DETECTED` if the play is its own ancestor, with
    /// `BUDGET_EXCEEDED` past the depth, per-parent, play-call or
    /// descendant limits; a refusal charges nothing.
    pub async fn fork_child(
        &self,
        child_play_name: &str,
        child_run_id: &str,
    ) -> Result<GovernanceSnapshot> {
        let child = self.fork_inline_child(child_play_name, child_run_id);
        Ok(child.await?.snapshot())
    }

    /// Like [`Governor::fork_child`], for a child that runs in this isolate:
    /// its governor shares this one's slots, pacer and budgets.
    pub async fn fork_inline_child(
        &self,
        child_play_name: &str,
        child_run_id: &str,
    ) -> Result<Governor> {
        let max_depth = self.shared.policy.budgets.max_depth;
        let child = self
            .lineage
            .child(child_play_name, child_run_id, max_depth)?;
        self.shared
            .budgets
            .charge_fork(&self.lineage.current_run_id)
            .await?;
        Ok(Governor {
            shared: self.shared.clone(),
            lineage: Rc::new(child),
        })
    }

    /// This run's lineage and the counters so far, to resume from.
    pub fn snapshot(&self) -> GovernanceSnapshot {
        GovernanceSnapshot::join(
            &self.shared.budgets.root_run_id,
            &self.lineage,
            &self.shared.budgets.counters.borrow(),
        )
    }
}
