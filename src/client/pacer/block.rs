//! A block: the permits one refill brought, each a dispatch time on the
//! gateway's clock (and a lease when the rules bound concurrency). A permit
//! is good from its time up to the tolerance the gateway accounted for in
//! every window; after that it is dead and never dispatched, because the
//! gateway counted it in a window that has passed and the provider would
//! count it in the current one, on top of the permits other isolates send
//! at their own times.

use super::clock::ClockSync;
use super::refill::Target;
use crate::error::{Error, ErrorCode, Result};
use crate::protocol::{has_concurrency, AcquireResponse, PacingRule};
use crate::queue::Queue;
use crate::time::Millis;

/// A grant's tolerance when the gateway announces none (an older one): it
/// accounted for no slack, so only timer jitter is allowed.
pub const LEGACY_TOLERANCE_MS: Millis = 25;

#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct Slot {
    /// The dispatch time on the gateway's clock; `None` from a gateway
    /// that grants without a schedule (usable at once, never dead).
    pub at: Option<Millis>,
    pub lease: Option<String>,
}

pub(super) struct Block {
    /// Earliest first.
    pub slots: Queue<Slot>,
    pub rules_key: String,
    pub rules: Vec<PacingRule>,
    pub token: Option<String>,
    pub tolerance_ms: Millis,
    /// When the block was first granted, and how many permits were drawn
    /// from it since: the rate its callers draw at now, which a decaying
    /// average of a demand that just started does not show yet.
    pub opened_at: Millis,
    pub drawn: u64,
}

/// The leases of `slots`, and their times still ahead of `gateway_now`:
/// what goes back to the gateway when they are given up.
pub(super) fn leases_and_times(
    slots: impl IntoIterator<Item = Slot>,
    gateway_now: Millis,
) -> (Vec<String>, Vec<Millis>) {
    let mut leases = Vec::new();
    let mut times = Vec::new();
    for slot in slots {
        if let Some(lease) = slot.lease {
            leases.push(lease);
        }
        if let Some(at) = slot.at.filter(|&at| at > gateway_now) {
            times.push(at);
        }
    }
    (leases, times)
}

/// A permit taken out of a block: when to dispatch it (our clock) and the
/// latest moment it is still good.
pub(super) struct Drawn {
    pub slot: Slot,
    pub due: Millis,
    pub deadline: Millis,
}

impl Block {
    /// Whether this block's permits are for a caller with these rules and
    /// this scope token.
    pub fn serves(&self, target: &Target) -> bool {
        self.rules_key == target.rules_key && self.token == target.token
    }

    /// Takes the earliest permit still good at `now`, if it is due by
    /// `due_by` (a later one stays). Dead ones are moved to `dead` (their
    /// leases must go back).
    pub fn draw(
        &mut self,
        now: Millis,
        due_by: Millis,
        clock: &ClockSync,
        dead: &mut Vec<Slot>,
    ) -> Option<Drawn> {
        while let Some(slot) = self.slots.pop_front() {
            let Some(at) = slot.at else {
                return Some(Drawn {
                    slot,
                    due: now,
                    deadline: Millis::MAX,
                });
            };
            let due = clock.to_local(at);
            let deadline = due.saturating_add(self.tolerance_ms);
            if deadline < now {
                dead.push(slot);
                continue;
            }
            if due > due_by {
                self.slots.push_front(slot);
                return None;
            }
            self.drawn += 1;
            return Some(Drawn {
                slot,
                due,
                deadline,
            });
        }
        None
    }

    /// Permits this isolate will not use: with draws at `rate_per_s`, the
    /// isolate takes about `rate * span` of the permits over the block's
    /// remaining span, so it keeps that many of the earliest (at least the
    /// next one) and gives the later ones up. Those due within `reach` of
    /// now stay too: a time given back must still be ahead when another
    /// isolate could be granted it.
    pub fn surplus(
        &mut self,
        now: Millis,
        clock: &ClockSync,
        rate_per_s: f64,
        reach: Millis,
    ) -> Vec<Slot> {
        let span = self
            .slots
            .back()
            .and_then(|s| s.at)
            .map_or(0, |at| clock.to_local(at).saturating_sub(now));
        let too_near = self
            .slots
            .iter()
            .take_while(|s| s.at.is_none_or(|at| clock.to_local(at) < now + reach))
            .count();
        let keep = (1 + (rate_per_s * span as f64 / 1_000.0) as usize).max(too_near);
        if keep >= self.slots.len() {
            return Vec::new();
        }
        self.slots.split_off(keep).into()
    }

    /// Takes out the permits no paced slot here will be free for. `free`
    /// holds when each slot is free (local time), and a call keeps its slot
    /// `hold_ms`: in time order, each permit takes the slot free soonest if
    /// it is free by the permit's deadline. The permits left over would die
    /// unsent, so those due from `reach_at` on go, while another isolate
    /// can still be granted them.
    pub fn unserved(
        &mut self,
        clock: &ClockSync,
        free: &mut [Millis],
        hold_ms: Millis,
        reach_at: Millis,
    ) -> Vec<Slot> {
        let tolerance = self.tolerance_ms;
        self.take_where(&mut |s| {
            let (Some(at), Some(slot)) = (s.at, free.iter_mut().min()) else {
                return false;
            };
            let due = clock.to_local(at);
            if *slot <= due + tolerance {
                *slot = due.max(*slot) + hold_ms;
                return false;
            }
            due >= reach_at
        })
    }

    /// Takes out the permits `take` picks. Through `dyn`, so the module
    /// holds one copy of the list's retain for every caller.
    pub fn take_where(&mut self, take: &mut dyn FnMut(&Slot) -> bool) -> Vec<Slot> {
        let mut out = Vec::new();
        self.slots.retain_mut(|s| {
            let taken = take(s);
            if taken {
                out.push(std::mem::take(s));
            }
            !taken
        });
        out
    }

    /// Takes out the permits whose time and tolerance have passed.
    pub fn take_dead(&mut self, now: Millis, clock: &ClockSync) -> Vec<Slot> {
        let alive = self
            .slots
            .iter()
            .position(|s| {
                s.at.is_none_or(|at| clock.to_local(at).saturating_add(self.tolerance_ms) >= now)
            })
            .unwrap_or(self.slots.len());
        self.slots.take_front(alive)
    }

    /// Permits per second drawn since the block was granted, once a
    /// millisecond has passed.
    pub fn draw_rate(&self, now: Millis) -> f64 {
        match now.saturating_sub(self.opened_at) {
            0 => 0.0,
            ms => self.drawn as f64 * 1_000.0 / ms as f64,
        }
    }

    /// The local due time of the earliest permit, if it has one.
    pub fn next_due(&self, clock: &ClockSync) -> Option<Millis> {
        self.slots.front()?.at.map(|at| clock.to_local(at))
    }
}

/// A grant must carry one lease per permit exactly when the rules bound
/// concurrency, and finite times; a grant without times (an older gateway)
/// is usable at once.
pub(super) fn validate_grant(
    bucket_id: &str,
    rules: &[PacingRule],
    response: &AcquireResponse,
) -> Result<Queue<Slot>> {
    let granted = response.granted as usize;
    let leases = response.lease_ids.clone().unwrap_or_default();
    // Paced slots' permits come without leases: the client's kept leases
    // are its slots.
    let concurrency = has_concurrency(rules) && response.lease_spacing_ms != Some(0);
    let bad = |message: String| Err(Error::new(ErrorCode::GatewayUnavailable, message));
    if concurrency && leases.len() != granted {
        return bad(format!(
            "the gateway granted {granted} concurrency permits for {bucket_id} with {} lease ids",
            leases.len()
        ));
    }
    if !concurrency && !leases.is_empty() {
        return bad(format!(
            "the gateway returned {} lease ids with permits of {bucket_id} that take none",
            leases.len()
        ));
    }
    let times = match &response.scheduled_at_ms {
        Some(times) if times.len() != granted => {
            return bad(format!(
                "the gateway granted {granted} permits for {bucket_id} with {} dispatch times",
                times.len()
            ))
        }
        times => times.as_deref().unwrap_or_default(),
    };
    // One loop over the permits, not iterators collected twice (a copy of
    // their adapters per element type).
    let mut leases = leases.into_iter();
    let mut slots = Queue::new();
    for i in 0..granted {
        slots.push_back(Slot {
            at: times.get(i).copied(),
            lease: if concurrency { leases.next() } else { None },
        });
    }
    Ok(slots)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(times: &[Millis]) -> Block {
        Block {
            slots: times
                .iter()
                .map(|&at| Slot {
                    at: Some(at),
                    lease: None,
                })
                .collect(),
            rules_key: String::new(),
            rules: Vec::new(),
            token: None,
            tolerance_ms: 5,
            opened_at: 0,
            drawn: 0,
        }
    }

    #[test]
    fn a_permit_past_its_tolerance_is_dead_and_never_drawn() {
        let clock = ClockSync::default();
        let mut b = block(&[1_000, 1_050, 1_100]);
        let mut dead = Vec::new();
        let drawn = b.draw(1_056, Millis::MAX, &clock, &mut dead).unwrap();
        assert_eq!(drawn.slot.at, Some(1_100), "1 000 and 1 050 have passed");
        assert_eq!(dead.len(), 2);
        let mut b = block(&[1_000]);
        let drawn = b.draw(1_005, Millis::MAX, &clock, &mut dead).unwrap();
        assert_eq!(
            (drawn.due, drawn.deadline),
            (1_000, 1_005),
            "good up to the tolerance"
        );
    }

    #[test]
    fn a_draw_limited_to_due_permits_leaves_a_later_one_in_place() {
        let clock = ClockSync::default();
        let mut b = block(&[1_000, 1_050]);
        let mut dead = Vec::new();
        assert!(b.draw(1_010, 1_010, &clock, &mut dead).is_none());
        assert_eq!(b.slots.len(), 1, "1 000 is dead and gone; 1 050 stays");
        assert_eq!(dead.len(), 1);
        assert_eq!(b.next_due(&clock), Some(1_050));
        let drawn = b.draw(1_050, 1_050, &clock, &mut dead).unwrap();
        assert_eq!(drawn.slot.at, Some(1_050));
    }

    #[test]
    fn permits_no_paced_slot_is_free_for_are_taken_out_once_ahead_of_the_reach() {
        let clock = ClockSync::default();
        let times: Vec<Millis> = (0..10).map(|i| 1_000 + 50 * i).collect();
        let mut b = block(&times);
        // Two slots, one free now and one in a call until 1 100; calls of
        // 290 ms: slots serve 1 000, 1 100, 1 300, 1 400.
        let mut free = [900, 1_100];
        let out = b.unserved(&clock, &mut free, 290, 1_200);
        let kept: Vec<_> = b.slots.iter().filter_map(|s| s.at).collect();
        assert_eq!(kept, [1_000, 1_050, 1_100, 1_150, 1_300, 1_400]);
        let gone: Vec<_> = out.iter().filter_map(|s| s.at).collect();
        assert_eq!(
            gone,
            [1_200, 1_250, 1_350, 1_450],
            "1 050 and 1 150 are too near to serve another isolate"
        );
        let mut b = block(&times);
        assert!(
            b.unserved(&clock, &mut [], 290, 0).is_empty(),
            "no slot yet: the pool is asking for one"
        );
    }

    #[test]
    fn surplus_keeps_the_earliest_permits_the_draw_rate_will_take() {
        let clock = ClockSync::default();
        let times: Vec<Millis> = (1..=20).map(|i| 1_000 + 50 * i).collect();
        let mut b = block(&times);
        assert_eq!(
            b.surplus(1_000, &clock, 0.0, 0).len(),
            19,
            "no demand: all but the next"
        );
        let mut b = block(&times);
        assert_eq!(
            b.surplus(1_000, &clock, 0.0, 120).len(),
            18,
            "none due within the reach of another isolate goes back"
        );
        let mut b = block(&times);
        let returned = b.surplus(1_000, &clock, 10.0, 0);
        assert_eq!(b.slots.len(), 11, "half the rate keeps about half");
        assert_eq!(returned.len(), 9);
        assert_eq!(returned[0].at, Some(1_600), "the later ones go back");
        let mut b = block(&times);
        assert!(
            b.surplus(1_000, &clock, 20.0, 0).is_empty(),
            "full demand keeps all"
        );
    }
}
