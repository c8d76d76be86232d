//! What providers say back, and what the run should do about it.
//!
//! The rate adapts in exactly one place: the scheduler behind the pacer.
//! That is the gateway when the pacer is a shared gateway's, or the
//! isolate's own in-memory scheduler (the same AIMD) when it is local.
//! Either way the governor only forwards, so a 429 is never halved twice.

use std::future::Future;

use super::pacing::RateScope;
use super::play::Governor;
use crate::error::Result;
use crate::protocol::strictest_rps;
use crate::time::Millis;

impl Governor {
    /// A provider answered 429 and asked for `retry_after_ms` of quiet. It
    /// goes to the bucket `tool_id` drew its permit from (a credential's own
    /// bucket, say), whatever the provider is called here, else to the
    /// org's bucket of the provider. `sent_at`, on this isolate's clock, is
    /// when the refused call went out: the gateway then weighs the 429
    /// against what the provider accepted before that call, where the time
    /// of the report would also count calls sent after it.
    pub async fn report_provider_backpressure(
        &self,
        provider: &str,
        tool_id: Option<&str>,
        retry_after_ms: Millis,
        sent_at: Option<Millis>,
    ) -> Result<()> {
        let scope = self.feedback_scope(provider, tool_id);
        self.penalize(&scope, retry_after_ms, sent_at).await
    }

    /// The bucket feedback about `provider` goes to: the one `tool_id` last
    /// drew from, else the org's bucket of the provider.
    pub fn feedback_scope(&self, provider: &str, tool_id: Option<&str>) -> RateScope {
        self.shared.pacing.feedback_scope(provider, tool_id)
    }

    pub(crate) fn penalize<'a>(
        &'a self,
        scope: &'a RateScope,
        cooldown_ms: Millis,
        sent_at: Option<Millis>,
    ) -> impl Future<Output = Result<()>> + 'a {
        self.shared.rate_state.penalize(
            &scope.bucket_id,
            scope.token.as_deref(),
            cooldown_ms,
            sent_at,
        )
    }

    /// A provider call went through, taking `latency_ms` if known; routed
    /// like backpressure.
    pub fn observe_provider_success(
        &self,
        provider: &str,
        tool_id: Option<&str>,
        latency_ms: Option<Millis>,
    ) {
        let scope = self.shared.pacing.feedback_scope(provider, tool_id);
        self.shared.rate_state.observe_success(&scope.bucket_id);
        if let (Some(tool), Some(ms)) = (tool_id, latency_ms) {
            self.shared.latency.observe(tool, ms);
        }
    }

    /// A call of `tool_id` went through, to whichever provider and bucket
    /// its last permit came from. A tool never paced has no bucket to tell,
    /// but its latency still sizes its parallelism.
    pub fn observe_tool_success(&self, tool_id: &str, latency_ms: Option<Millis>) {
        if let Some(scope) = self.shared.pacing.tool_scope(tool_id) {
            self.shared.rate_state.observe_success(&scope.bucket_id);
        }
        if let Some(ms) = latency_ms {
            self.shared.latency.observe(tool_id, ms);
        }
    }

    /// How many calls of `tool_id` to keep in flight: enough to use the
    /// bucket's live rate when each call takes the tool's typical time
    /// (Little's law, `ceil(rate * seconds)`), no more than the rules'
    /// concurrency cap, within `[1, maxToolConcurrency]`. The typical time is
    /// what the tool's calls were seen to take, else its latency hint, else
    /// the policy's. Before the bucket has a live rate, the rules' configured
    /// rate stands in; a tool declared unpaced gets `fallback`, clamped the
    /// same way.
    pub async fn suggested_parallelism(&self, tool_id: &str, fallback: usize) -> Result<usize> {
        let policy = &self.shared.policy;
        let max = policy.concurrency.max_tool_concurrency;
        let Some(pacing) = self.shared.pacing.resolve(tool_id).await? else {
            return Ok(fallback.clamp(1, max));
        };
        // Only read the remembered scope: an in-flight call's 429 must still
        // find the bucket its permit came from.
        let scope = match self.shared.pacing.tool_scope(tool_id) {
            Some(scope) => scope,
            None => {
                let resolving = self.shared.pacing.resolve_scope(tool_id, &pacing.provider);
                resolving.await?
            }
        };
        let rps = self
            .shared
            .rate_state
            .effective_rps(&scope.bucket_id)
            .unwrap_or_else(|| strictest_rps(&pacing.rules));
        let typical_ms = self.shared.latency.typical_ms(tool_id);
        let seconds = typical_ms.unwrap_or(policy.pacing.typical_tool_call_ms) as f64 / 1_000.0;
        let in_flight = (rps * seconds).ceil().min(max as f64) as usize;
        let mut cap = max;
        for r in &pacing.rules {
            if let Some(c) = r.max_concurrency {
                cap = cap.min(usize::try_from(c).unwrap_or(usize::MAX));
            }
        }
        Ok(in_flight.min(cap).max(1))
    }
}
