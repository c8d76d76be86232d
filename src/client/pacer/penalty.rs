//! A provider's 429 as the pacer takes it: the gateway hears first, and
//! the permits held here inside its cooldown, or past the rate it cut to,
//! go unsent. That includes a permit a caller already drew and is waiting
//! on: it was granted before the 429 at the rate refused, and is checked
//! once more when its time comes, against every cooldown learned since,
//! whether answered to this isolate's penalize or to any acquire after
//! another isolate's 429.

use super::GatewayRateState;
use crate::error::Result;
use crate::protocol::{limits, PenalizeRequest};
use crate::time::Millis;

/// A cut to at least this share of the rate before is shallow: a failed
/// probe or a drift step takes 5-15% off, a cut for a limit that fell 30%.
const SHALLOW_CUT: f64 = 0.85;
/// A cut of a rate at least this share of the rules' is thinned whole.
const NEAR_RULES: f64 = 0.9;
/// A shallow cut keeps the permits due within this long.
const SHALLOW_CUT_KEEPS_MS: Millis = 700;

impl GatewayRateState {
    /// A provider answered 429: tell the gateway, then drop the bucket's
    /// cached permits inside the cooldown it answers with (so the cooldown
    /// applies to the very next call) and thin the rest to the rate it was
    /// cut to. A 429 the gateway takes for noise leaves the cooldown, and so
    /// the block, as it was; if the gateway cannot be told, the whole block
    /// goes. `sent_at` is when the refused call went out (this isolate's
    /// clock), if the caller knows: the gateway then reads what the
    /// provider took in the second before it, rather than before the
    /// report, which a slow answer leaves calls sent since to inflate.
    pub async fn penalize(
        &self,
        bucket_id: &str,
        rate_scope_token: Option<&str>,
        cooldown_ms: Millis,
        sent_at: Option<Millis>,
    ) -> Result<()> {
        let answered_at = self.inner.rt.now_ms();
        let (quota, sent_at_ms) = self.state(bucket_id, |s| {
            let sent_at = sent_at.map(|at| s.clock.to_gateway(at));
            (s.quota.pending.take(), sent_at)
        });
        let request = PenalizeRequest {
            bucket_id: bucket_id.to_owned(),
            rate_scope_token: rate_scope_token.map(str::to_owned),
            // A 429 that asked for no wait is still a 429: the gateway
            // cuts the rate for it, with the shortest cooldown it takes.
            cooldown_ms: cooldown_ms.clamp(1, limits::MAX_COOLDOWN_MS),
            scheduler_schema: self.inner.options.scheduler_schema.clone(),
            quota,
            sent_at_ms,
        };
        let outcome = self.inner.port.penalize(request).await.map_err(|mut e| {
            e.message = format!("penalize failed for {bucket_id}: {}", e.message);
            e
        });
        let until = outcome
            .as_ref()
            .map_or(Millis::MAX, |r| r.cooldown_until_ms);
        let cut_to = outcome
            .as_ref()
            .ok()
            .and_then(|r| r.effective_requests_per_second);
        let now = self.inner.rt.now_ms();
        let mut cut = false;
        let dropped = self.state(bucket_id, |s| {
            s.calls.end(answered_at);
            if until != Millis::MAX {
                s.unsent_before = s.unsent_before.max(s.clock.to_local(until));
            }
            let previous = s.effective_rps;
            // A 429 the gateway took for noise leaves the rate as it was,
            // and an isolate's stream with it.
            cut = cut_to.is_some_and(|to| previous.is_none_or(|from| to < from));
            s.effective_rps = cut_to.or(previous);
            s.cancel_dissolved_starts();
            if let Some(pool) = &mut s.pool {
                let local = if until == Millis::MAX {
                    Millis::MAX
                } else {
                    s.clock.to_local(until)
                };
                pool.cooldown_until = pool.cooldown_until.max(local);
            }
            let block = s.block.as_mut()?;
            let inside_cooldown = block
                .slots
                .partition_point(|slot| slot.at.is_none_or(|at| at < until));
            let mut dropped = block.slots.take_front(inside_cooldown);
            // Permits held were granted at the rate the provider refused:
            // a cut thins them to the new one. A shallow cut (a failed
            // probe, a drift step) refused a rate a few percent over the
            // limit, so the permits due soon hold a fraction of a call too
            // many, and keeping one per new spacing would drop every other
            // one: they stay. Later ones are thinned, since a long block
            // holds more of the excess, and the fleet's other blocks theirs.
            // A cut of a rate at or near the rules' own is thinned whole: a
            // 429 there may be the rule's edge met by dispatch jitter, and
            // the gaps thinning leaves keep it from happening again.
            if let (Some(rps), Some(previous)) = (cut_to, previous) {
                if rps < previous {
                    let spacing = (1_000.0 / rps) as Millis;
                    let mut rules_rps = f64::INFINITY;
                    for r in &block.rules {
                        let rps = r.requests_per_second();
                        rules_rps =
                            rules_rps.min(r.adaptive_max_rps.map_or(rps, |max| rps.min(max)));
                    }
                    let kept_until = (rps >= SHALLOW_CUT * previous
                        && previous < NEAR_RULES * rules_rps)
                        .then(|| s.clock.to_gateway(now).saturating_add(SHALLOW_CUT_KEEPS_MS));
                    let mut last: Option<Millis> = None;
                    let mut kept = crate::queue::Queue::new();
                    for slot in std::mem::take(&mut block.slots) {
                        let at = slot.at.unwrap_or(0);
                        if kept_until.is_some_and(|until| at < until)
                            || last.is_none_or(|l| at >= l.saturating_add(spacing))
                        {
                            last = Some(at);
                            kept.push_back(slot);
                        } else {
                            dropped.push(slot);
                        }
                    }
                    block.slots = kept;
                }
            }
            let (token, rules) = (block.token.clone(), block.rules.clone());
            if block.slots.is_empty() {
                s.block = None;
            }
            Some((token, rules, dropped))
        });
        if let Some((token, rules, dropped)) = dropped {
            // The cut voids their times at the gateway.
            self.void(bucket_id, token, &rules, dropped);
        }
        let streamed = self.pool(bucket_id, |p| !p.paced()) == Some(true);
        if cut && streamed {
            // A cut rate is not streamed: kept leases go back, and the next
            // permits come one lease each, paced at the cut. Paced slots
            // stay: their calls take the timeline's permits, which the cut
            // paces.
            self.dissolve_pool(bucket_id, false);
        }
        outcome.map(|_| ())
    }

    /// Whether a permit due at `due` (our clock) falls inside a cooldown
    /// the gateway announced after it was drawn: sent, it would reach a
    /// provider that is refusing.
    pub(super) fn unsent(&self, bucket_id: &str, due: Millis) -> bool {
        self.state(bucket_id, |s| due < s.unsent_before)
    }
}
