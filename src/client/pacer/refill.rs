//! The single-flight refill of one bucket: one gateway request at a time,
//! for a block sized to the isolate's demand, however many callers wait.

use std::future::Future;

use super::{BucketState, GatewayRateState, REFILL_POLL_MS, REFILL_TIMEOUT_MS};
use crate::error::{Error, ErrorCode, Result};
use crate::protocol::{has_concurrency, PacingRule};
use crate::rt::{abortable, AbortSignal, Event};
use crate::time::Millis;

/// After a refill fails for want of the gateway (its retries spent), the
/// next one waits this long: callers that come back meanwhile wait for it
/// rather than meet a gateway that is down once more each. Asked again at
/// once, an isolate whose callers retried met a 5 s outage every half
/// second (a fleet of 32 x 8 callers saw GATEWAY_UNAVAILABLE 344 times);
/// the wait costs at most a second of service after a short one.
const GATEWAY_FAILED_PAUSE_MS: Millis = 1_000;

#[derive(Default)]
pub(super) struct Refill {
    running: bool,
    /// Refills are numbered; `landed` is the latest that finished.
    generation: u64,
    landed: u64,
    /// When the refill in flight counts as lost.
    deadline: Millis,
    /// The failure of the last refill, for the callers that waited on it.
    error: Option<(u64, Error)>,
    /// The gateway asked this client not to refill before this local time.
    pub not_before: Millis,
    /// The turn ticket the gateway gave with its last refusal for want of
    /// a slot, to show with the next acquire.
    pub turn_ticket: Option<u64>,
    /// The claim on the bucket's slots the gateway gave this isolate.
    pub slot_claim: Option<u64>,
    /// When callers began waiting on the refill in flight.
    pub started_at: Millis,
    /// When the block last ran dry.
    pub exhausted_at: Option<Millis>,
    pub ever_granted: bool,
    /// The gateway has answered this bucket before.
    pub answered: bool,
    /// Callers drained the last block and came straight back for more: the
    /// isolate would use all the horizon holds. Kept across refusals until
    /// a grant comes.
    pub draining: bool,
    /// How many permits a block here serves, learned when the isolate gave
    /// permits back unused: what its callers drew of the block and what it
    /// kept. Callers whose calls outlast the permits' spacing draw a few
    /// of each block, however large, since the gateway spaces a block at
    /// the bucket's rate: an isolate asks for no more than this beyond
    /// its waiting callers, twice as many each time its callers drain a
    /// block again (a block is never more than the horizon's), and one
    /// fewer each time a permit of its block dies undrawn.
    pub usable: Option<u64>,
    /// Notified when a refill lands, for the caller that started it (its
    /// own I/O, so waking it is safe in workerd).
    landed_event: Event,
}

impl Refill {
    /// The isolate's demand turned out smaller than it asked for: its next
    /// refill need not wait for the turn the gateway booked for it.
    pub fn forget_turn(&mut self) {
        self.not_before = 0;
        self.draining = false;
    }

    pub fn is_idle(&self) -> bool {
        !self.running && self.error.is_none()
    }

    /// Starts a refill from `now` unless one is running; its generation.
    pub fn begin_unless_running(&mut self, now: Millis) -> Option<u64> {
        (!self.running).then(|| self.begin(now))
    }

    /// The failure of the last refill, when none is on its way. `forget`
    /// when no caller is waiting to read it, so the next refill starts clean.
    pub fn failure(&mut self, forget: bool) -> Option<Error> {
        if self.running {
            return None;
        }
        if forget {
            return self.error.take().map(|(_, e)| e);
        }
        self.error.as_ref().map(|(_, e)| e.clone())
    }

    /// Marks a refill running from `now`; returns its generation.
    fn begin(&mut self, now: Millis) -> u64 {
        self.running = true;
        self.started_at = now;
        self.generation += 1;
        self.deadline = now.max(self.not_before) + REFILL_TIMEOUT_MS;
        self.generation
    }

    /// Begins a refill unless one runs or the gateway asked to wait.
    pub(super) fn begin_if_free(&mut self, now: Millis) -> Option<u64> {
        (!self.running && self.not_before <= now).then(|| self.begin(now))
    }
}

/// What one refill asks for: the gateway bucket and the rules it is for.
#[derive(Clone)]
pub(super) struct Target {
    pub bucket_id: String,
    pub token: Option<String>,
    pub rules: Vec<PacingRule>,
    pub rules_key: String,
}

/// Starts the bucket's next refill while its block still has permits: a
/// round trip and a poll before the isolate will have drawn them all (at
/// its recent rate of draws or the block's own, whichever is faster, and
/// no sooner than the last one's time), so its callers do not stop at the
/// end of every block to wait for the gateway. Not under rules that bound
/// concurrency with a lease per permit: such a permit holds a slot others
/// may be waiting for.
/// Returns the refill's generation, for the caller to spawn.
pub(super) fn ahead(s: &mut BucketState, target: &Target, now: Millis) -> Option<u64> {
    // A paced pool's permits hold no slot: its slots are the leases it keeps.
    if has_concurrency(&target.rules) && !s.pool.as_ref().is_some_and(|p| p.paced()) {
        return None;
    }
    let block = s.block.as_ref().filter(|b| b.serves(target))?;
    let last_due = block.slots.back()?.at.map(|at| s.clock.to_local(at))?;
    let rate = s.draw_rate.rate_at(now).max(block.draw_rate(now));
    let drawn_in = match rate > 0.0 {
        true => (block.slots.len() as f64 * 1_000.0 / rate) as Millis,
        false => Millis::MAX,
    };
    let runs_out = last_due.max(now.saturating_add(drawn_in));
    if runs_out > now.saturating_add(s.clock.rtt_ms() + REFILL_POLL_MS) {
        return None;
    }
    s.refill.begin_unless_running(now)
}

impl GatewayRateState {
    /// Joins (or starts) the bucket's one refill and waits for it to land.
    /// The caller that starts it is woken by its landing; others look on
    /// their own timer, never woken by another caller's I/O: in workerd
    /// every request must be woken by its own events, or its continuation
    /// (and every timer it then sets) would belong to another request and
    /// die with it.
    pub(super) async fn await_refill(
        &self,
        target: &Target,
        signal: Option<&AbortSignal>,
    ) -> Result<()> {
        let now = self.inner.rt.now_ms();
        let max_wait = self.inner.options.max_wait_ms;
        let (generation, started) = self.state(&target.bucket_id, |state| {
            let r = &mut state.refill;
            // The gateway just failed, and the pause before asking it
            // again outlasts the caller's longest wait: its failure now,
            // not after the pause.
            if r.not_before > now + max_wait {
                if let Some(e) = r.failure(false) {
                    return Err(e);
                }
            }
            state.waiters += 1;
            if r.running {
                return Ok((r.generation, None));
            }
            Ok((r.begin(now), Some(r.landed_event.listen())))
        })?;
        if started.is_some() {
            self.spawn_refill(generation, target);
        }
        let mut landing = started;
        let rt = &self.inner.rt;
        let bucket_id = target.bucket_id.as_str();
        let waited = abortable(signal, || super::permit_wait(bucket_id), async {
            loop {
                let now = rt.now_ms();
                let (landed, not_before, lost) = self.state(bucket_id, |s| {
                    let r = &mut s.refill;
                    let lost = r.running && now > r.deadline;
                    if lost {
                        r.running = false;
                    }
                    (r.landed >= generation, r.not_before, lost)
                });
                // A call here handed on its streamed lease meanwhile (a
                // paced one serves no call without a permit).
                let handed_on = self
                    .pool(bucket_id, |p| {
                        !p.paced() && p.idle.iter().any(|l| l.start_by >= now)
                    })
                    .unwrap_or(false);
                if landed || lost || handed_on {
                    return Ok(());
                }
                let poll = rt.sleep(not_before.saturating_sub(now).max(REFILL_POLL_MS));
                match landing.take() {
                    Some(event) => {
                        let mut event = std::pin::pin!(event);
                        let mut poll = poll;
                        std::future::poll_fn(|cx| {
                            if event.as_mut().poll(cx).is_ready() {
                                return std::task::Poll::Ready(());
                            }
                            poll.as_mut().poll(cx)
                        })
                        .await;
                    }
                    None => poll.await,
                }
            }
        })
        .await;
        if waited.is_err() {
            let waiters = self.state(bucket_id, |s| s.waiters - 1);
            self.spare(bucket_id, waiters);
        }
        self.state(bucket_id, |state| {
            state.waiters -= 1;
            waited?;
            match &state.refill.error {
                Some((g, e)) if *g == generation => Err(e.clone()),
                _ => Ok(()),
            }
        })
    }

    /// Renews the bucket's kept leases in the background when one would
    /// lapse soon and no refill would carry them.
    pub(super) fn renew_ahead(&self, target: &Target) {
        let now = self.inner.rt.now_ms();
        let generation = self.state(&target.bucket_id, |s| {
            // A streamed pool's renewal goes even before the time the
            // gateway asked this isolate to wait for (its turn at a slot
            // more): a lease not renewed in time would lapse here. A paced
            // pool's slots go with its blocks, whose turns it waits for.
            let pool = s.pool.as_ref().filter(|p| p.renewal_due(now))?;
            match pool.paced() {
                true => s.refill.begin_if_free(now),
                false => (!s.refill.running).then(|| s.refill.begin(now)),
            }
        });
        if let Some(generation) = generation {
            self.spawn_refill(generation, target);
        }
    }

    pub(super) fn spawn_refill(&self, generation: u64, target: &Target) {
        let (this, target) = (self.clone(), target.clone());
        self.inner
            .rt
            .spawn(Box::pin(this.refill(generation, target)));
    }

    /// Runs in the background so an aborted caller never strands a grant in
    /// flight.
    async fn refill(self, generation: u64, target: Target) {
        let result = self.request_block(&target).await;
        let result = result
            .and_then(|(response, sent, received)| self.land(&target, response, sent, received));
        let now = self.inner.rt.now_ms();
        let event = self.state(&target.bucket_id, |state| {
            let r = &mut state.refill;
            if r.generation == generation {
                r.running = false;
            }
            if result
                .as_ref()
                .is_err_and(|e| e.code == ErrorCode::GatewayUnavailable)
            {
                r.not_before = r.not_before.max(now + GATEWAY_FAILED_PAUSE_MS);
            }
            r.landed = r.landed.max(generation);
            r.error = result.err().map(|e| (generation, e));
            r.landed_event.clone()
        });
        event.notify();
        self.watch_surplus(&target.bucket_id);
    }
}
