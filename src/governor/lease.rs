//! Clearing one tool call to run: a provider permit, then a tool slot, then
//! the budget, each step undone if a later one fails or is aborted.

use std::fmt;
use std::future::Future;

use super::pacing::RateScope;
use super::play::Governor;
use crate::client::{Permit, PermitRequest};
use crate::error::Result;
use crate::protocol::BudgetKind;
use crate::rt::{abortable, AbortSignal, LocalBoxFuture, SlotPermit};

/// A tool call's provider permit and tool slot. Dropping it (or
/// `release()`) gives both back.
#[must_use = "a lease holds a tool slot and a provider permit until released or dropped"]
pub struct ToolLease {
    slot: SlotPermit,
    permit: Permit,
    provider: Option<String>,
    scope: Option<RateScope>,
}

impl ToolLease {
    /// Frees the slot and the permit. Idempotent.
    pub fn release(&mut self) {
        drop(self.release_settled());
    }

    /// Frees both at once; the future settles when the permit's lease is
    /// back at the gateway (see [`Permit::release_settled`]).
    pub fn release_settled(&mut self) -> LocalBoxFuture<'static, ()> {
        self.slot.release();
        self.permit.release_settled()
    }

    /// The provider the call goes to; `None` for a tool declared unpaced.
    pub fn provider(&self) -> Option<&str> {
        self.provider.as_deref()
    }

    /// The bucket the permit came from: where this call's 429 belongs.
    pub fn rate_scope(&self) -> Option<&RateScope> {
        self.scope.as_ref()
    }

    pub fn permit(&self) -> &Permit {
        &self.permit
    }
}

impl fmt::Debug for ToolLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolLease")
            .field("slot", &self.slot)
            .field("permit", &self.permit)
            .field("provider", &self.provider)
            .field("scope", &self.scope)
            .finish()
    }
}

impl Governor {
    /// Waits until a call of `tool_id` may go out, and charges one tool call.
    ///
    /// The provider permit comes first so a call parked until its dispatch
    /// time holds no scarce tool slot; the budget comes last so a call that
    /// never runs spends none. A failure or abort at any step drops what the
    /// earlier steps took: the permit's concurrency lease goes back to the
    /// gateway and the slot to the next waiter.
    pub fn acquire_tool_slot<'a>(
        &'a self,
        tool_id: &'a str,
        signal: Option<&'a AbortSignal>,
    ) -> impl Future<Output = Result<ToolLease>> + 'a {
        self.clear_call(tool_id, signal, BudgetKind::ToolCall)
    }

    /// [`Governor::acquire_tool_slot`] charging `budget`: a retry of a call
    /// spends the retry budget, not another tool call.
    pub(super) async fn clear_call(
        &self,
        tool_id: &str,
        signal: Option<&AbortSignal>,
        budget: BudgetKind,
    ) -> Result<ToolLease> {
        let shared = &self.shared;
        let pacing = abortable(
            signal,
            || format!("the pacing of tool {tool_id}"),
            shared.pacing.resolve(tool_id),
        )
        .await?;
        let (provider, scope, permit) = match pacing {
            Some(pacing) => {
                let resolving = shared.pacing.resolve_scope(tool_id, &pacing.provider);
                let scope = abortable(
                    signal,
                    || format!("the rate scope of tool {tool_id}"),
                    resolving,
                )
                .await?;
                let permit = shared
                    .rate_state
                    .acquire(PermitRequest {
                        bucket_id: &scope.bucket_id,
                        rate_scope_token: scope.token.as_deref(),
                        rules: &pacing.rules,
                        signal,
                    })
                    .await?;
                shared.pacing.remember(tool_id, &scope);
                (Some(pacing.provider), Some(scope), permit)
            }
            None => (None, None, Permit::unpaced()),
        };
        let slot = shared.tool_slots.acquire(signal).await?;
        // Not abortable: a charge abandoned in flight may still land at the
        // gateway, spending budget this run would never count.
        shared.budgets.charge(budget, 1).await?;
        Ok(ToolLease {
            slot,
            permit,
            provider,
            scope,
        })
    }
}
