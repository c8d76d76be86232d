//! Noticing permits this isolate will not use. A block is sized to recent
//! demand, but demand falls (a burst ends, traffic ramps down, an isolate
//! asked for a whole horizon while it waited behind the fleet). When the
//! earliest cached permit comes near with no caller waiting for it and
//! none in a call that usually ends before the permit's deadline, demand
//! is below what the block holds, and the permits beyond what the recent
//! draw rate will take go back to the gateway while still ahead, for
//! other isolates.
//!
//! Callers in calls count because a looping caller is not waiting while
//! its call runs: the demo's fleet (two callers an isolate, calls longer
//! than the permits' spacing) gave back a quarter of its permits with its
//! booked turn, and asked again seconds behind the fleet.

use super::{GatewayRateState, REFILL_POLL_MS};

impl GatewayRateState {
    /// Starts the bucket's watch if its block has permits and none runs.
    pub(super) fn watch_surplus(&self, bucket_id: &str) {
        let start = self.state(bucket_id, |s| {
            let has_permits = s.block.as_ref().is_some_and(|b| !b.slots.is_empty());
            has_permits && !std::mem::replace(&mut s.watching, true)
        });
        if start {
            let this = self.clone();
            let bucket_id = bucket_id.to_owned();
            self.inner.rt.spawn_watch(Box::pin(this.watch(bucket_id)));
        }
    }

    async fn watch(self, bucket_id: String) {
        loop {
            let now = self.inner.rt.now_ms();
            let mut back = None;
            let sleep = self.state(&bucket_id, |s| {
                let Some(block) = s.block.as_mut() else {
                    s.watching = false;
                    return None;
                };
                // Permits that died undrawn go back with the surplus: their
                // times have passed, so only their leases do.
                let mut gone = block.take_dead(now, &s.clock);
                if !gone.is_empty() {
                    // Nobody drew it in time: callers that come back
                    // slower than the block's spacing were asked for
                    // one permit too many.
                    let was = s.refill.usable.unwrap_or(block.drawn);
                    s.refill.usable = Some(was.max(2) - 1);
                }
                let mut sleep = None;
                if let Some(due) = block.next_due(&s.clock) {
                    // Look when the earliest permit is a round trip away:
                    // if nobody has drawn it by then, and no caller in a
                    // call is due back for it, nobody will take it.
                    let look_at = due.saturating_sub(s.clock.rtt_ms() + REFILL_POLL_MS);
                    let deadline = due + block.tolerance_ms;
                    sleep = Some(if look_at > now {
                        look_at - now
                    } else if s.waiters > 0 || s.calls.back_by(now, deadline) {
                        REFILL_POLL_MS
                    } else {
                        let rate = s.draw_rate.rate_at(now);
                        let reach = s.clock.give_back_reach_ms();
                        let mut surplus = block.surplus(now, &s.clock, rate, reach);
                        if !surplus.is_empty() {
                            // Demand fell short of the block: a turn booked
                            // for more is not this isolate's to wait for.
                            s.refill.forget_turn();
                            s.refill.usable = Some((block.drawn + block.slots.len() as u64).max(1));
                            gone.append(&mut surplus);
                        }
                        // The earliest permit stays; look again once it is
                        // drawn or dead.
                        (deadline + 1).saturating_sub(now).max(1)
                    });
                }
                if !gone.is_empty() {
                    let gateway_now = s.clock.to_gateway(now);
                    back = Some((block.token.clone(), block.rules.clone(), gone, gateway_now));
                }
                if block.slots.is_empty() {
                    s.block = None;
                }
                s.watching = sleep.is_some();
                sleep
            });
            if let Some((token, rules, slots, gateway_now)) = back {
                self.give_back(&bucket_id, token, &rules, slots, gateway_now);
            }
            match sleep {
                Some(ms) => self.inner.rt.sleep(ms).await,
                None => return,
            }
        }
    }
}
