//! Noticing permits this isolate will not use. A block is sized to recent
//! demand, but demand falls (a burst ends, traffic ramps down, an isolate
//! asked for a whole horizon while it waited behind the fleet). When the
//! earliest cached permit comes near with no caller to take it, demand is
//! below what the block holds, and the permits beyond what the recent draw
//! rate will take go back to the gateway while still ahead, for other
//! isolates.

use super::{GatewayRateState, REFILL_POLL_MS};
use crate::time::Millis;

enum Step {
    Stop,
    Sleep(Millis),
    GiveBack,
}

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
            let mut dead = None;
            let step = self.state(&bucket_id, |s| {
                if let Some(block) = s.block.as_mut() {
                    let gone = block.take_dead(now, &s.clock);
                    if !gone.is_empty() {
                        // Nobody drew it in time: callers that come back
                        // slower than the block's spacing were asked for
                        // one permit too many.
                        let was = s.refill.usable.unwrap_or(block.drawn);
                        s.refill.usable = Some(was.max(2) - 1);
                        dead = Some((block.token.clone(), block.rules.clone(), gone));
                    }
                    if block.slots.is_empty() {
                        s.block = None;
                    }
                }
                let next_due = s.block.as_ref().and_then(|b| b.next_due(&s.clock));
                let Some(due) = next_due else {
                    s.watching = false;
                    return Step::Stop;
                };
                // Look when the earliest permit is a round trip away: if
                // nobody has drawn it by then, nobody is waiting for it.
                let look_at = due.saturating_sub(s.clock.rtt_ms() + REFILL_POLL_MS);
                if look_at > now {
                    Step::Sleep(look_at - now)
                } else if s.waiters == 0 {
                    Step::GiveBack
                } else {
                    Step::Sleep(REFILL_POLL_MS)
                }
            });
            if let Some((token, rules, slots)) = dead {
                self.void(&bucket_id, token, &rules, slots);
            }
            match step {
                Step::Stop => return,
                Step::Sleep(ms) => self.inner.rt.sleep(ms).await,
                Step::GiveBack => {
                    self.give_back_surplus(&bucket_id, now);
                    // The earliest permit stays; look again once it is
                    // drawn or dead.
                    let until_gone = self.state(&bucket_id, |s| {
                        let block = s.block.as_ref();
                        let due = block.and_then(|b| b.next_due(&s.clock)).unwrap_or(now);
                        let tolerance = block.map_or(0, |b| b.tolerance_ms);
                        (due + tolerance + 1).saturating_sub(now).max(1)
                    });
                    self.inner.rt.sleep(until_gone).await;
                }
            }
        }
    }

    fn give_back_surplus(&self, bucket_id: &str, now: Millis) {
        let surplus = self.state(bucket_id, |s| {
            let rate = s.draw_rate.rate_at(now);
            let gateway_now = s.clock.to_gateway(now);
            let block = s.block.as_mut()?;
            let reach = s.clock.give_back_reach_ms();
            let slots = block.surplus(now, &s.clock, rate, reach);
            if !slots.is_empty() {
                // Demand fell short of the block: a turn booked for more is
                // not this isolate's to wait for.
                s.refill.forget_turn();
                s.refill.usable = Some((block.drawn + block.slots.len() as u64).max(1));
            }
            (!slots.is_empty())
                .then(|| (block.token.clone(), block.rules.clone(), slots, gateway_now))
        });
        if let Some((token, rules, slots, gateway_now)) = surplus {
            self.give_back(bucket_id, token, &rules, slots, gateway_now);
        }
    }
}
