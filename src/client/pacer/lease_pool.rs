//! The pool's bookkeeping: which kept leases are idle, which are in calls,
//! until when each may start a call, and what a renewal answered.

use crate::by_name::ByName;
use crate::sorted_map::SortedMap;

use super::pool::{IDLE_KEEP_MS, RENEW_EVERY_MS};
use crate::protocol::{PacingRule, LEASE_CHAIN_MS};
use crate::time::Millis;

#[derive(Debug, Clone)]
pub(super) struct KeptLease {
    pub id: String,
    /// The earliest local time the next call on it may start.
    pub next_at: Millis,
    /// When its last call started here, if one did: it goes back no
    /// sooner than the spacing after.
    pub last_start: Option<Millis>,
    /// The last local time a call may start on it unless it is renewed.
    pub start_by: Millis,
    /// When this isolate was granted it.
    pub granted_at: Millis,
    /// When it last went idle.
    pub idle_since: Millis,
}

pub(super) struct InCall {
    pub lease: KeptLease,
    pub since: Millis,
    /// It may serve another call here after this one.
    pub keep: bool,
}

pub(super) struct LeasePool {
    /// The least time between two calls started on one lease; `0` for
    /// paced slots, whose calls each take a permit from the timeline too.
    pub spacing_ms: Millis,
    pub idle: Vec<KeptLease>,
    pub in_call: ByName<InCall>,
    /// The token and rules the leases were granted under.
    pub token: Option<String>,
    pub rules: Vec<PacingRule>,
    /// The gateway said callers elsewhere wait for a slot.
    pub others_wait: bool,
    /// While others wait: this isolate's share of the slots, the most it
    /// asks to hold, and how many it keeps through the ends of its chains
    /// (`None` from an older gateway: it keeps none of those).
    pub share: Option<u64>,
    pub keep: Option<u64>,
    /// No call starts before this local time (a provider's cooldown).
    pub cooldown_until: Millis,
    /// The leases the refill in flight asked to keep.
    pub renewing: Vec<String>,
    /// A task watches idle leases for lapses.
    pub watching: bool,
    /// Leases on their way back to the gateway: a set, kept as the map
    /// type the module has code for already (the values are unused).
    pub returning: SortedMap<u64>,
    /// This isolate's callers waiting for a kept lease, in arrival order.
    pub queue: Vec<Place>,
    /// Callers that found no lease free (paced: at their permit's time;
    /// either kind: polling through `try_acquire`) since the last request:
    /// a slot more to ask for.
    pub missed: u64,
}

/// A caller's place in the pool's queue.
#[derive(Debug, Clone, Copy)]
pub(super) struct Place {
    pub ticket: u64,
    /// The last local time the caller looked for a lease.
    pub seen: Millis,
}

/// How long a paced lease idle here is kept while nobody else waits: about
/// the gateway's horizon, the longest this isolate's blocks are apart.
pub(super) const PACED_IDLE_KEEP_MS: Millis = 1_000;

/// A caller that has not looked for a lease this long is asleep (on a
/// cooldown, or its request was cancelled and it never will look again):
/// callers behind it may take the idle leases.
pub(super) const PLACE_ASLEEP_MS: Millis = 4 * super::REFILL_POLL_MS;

/// A place not looked at this long is forgotten: its caller is gone.
pub(super) const PLACE_GONE_MS: Millis = super::REFILL_TIMEOUT_MS;

impl LeasePool {
    pub fn new(spacing_ms: Millis, token: Option<String>, rules: Vec<PacingRule>) -> Self {
        LeasePool {
            spacing_ms,
            idle: Vec::new(),
            in_call: ByName::default(),
            token,
            rules,
            others_wait: false,
            share: None,
            keep: None,
            cooldown_until: 0,
            renewing: Vec::new(),
            watching: false,
            returning: SortedMap::new(),
            queue: Vec::new(),
            missed: 0,
        }
    }

    /// Whether the slots are paced (a semaphore beside the timeline's
    /// permits) rather than streamed.
    pub fn paced(&self) -> bool {
        self.spacing_ms == 0
    }

    /// How long a lease idle here is kept for a caller of this isolate.
    /// Paced calls come in the blocks this isolate is granted, with the
    /// fleet's turns between them: their slots wait out a turn unless
    /// others wait for one.
    pub fn idle_keep_ms(&self) -> Millis {
        match self.paced() && !self.others_wait {
            true => PACED_IDLE_KEEP_MS,
            false => IDLE_KEEP_MS,
        }
    }

    /// Every lease here, those going back when their calls end too.
    fn holds(&self) -> u64 {
        (self.idle.len() + self.in_call.len()) as u64
    }

    /// Whether others wait for slots and this isolate holds its share:
    /// its callers are then served by the slots it has. One that holds
    /// less waits for slots too, and asks at the turn it was given.
    pub fn holds_its_share(&self) -> bool {
        self.others_wait && self.share.is_none_or(|share| self.holds() >= share)
    }

    /// Whether leases whose chains ran their length go back when their
    /// calls end: others wait, and this isolate holds more than it keeps
    /// while they do. It gives them back one by one down to that count,
    /// as the gateway's renewals would; both count the leases it would keep
    /// (those it renews), not one already going back.
    pub fn sheds(&self) -> bool {
        self.others_wait && self.coming() as u64 > self.keep.unwrap_or(0)
    }

    /// Whether the caller holding `ticket` may take an idle lease now:
    /// fewer callers awake ahead of it than leases idle. A caller that
    /// just ended a call and comes straight back is behind those already
    /// waiting, so one isolate's callers are served in arrival order.
    pub fn may_take(&mut self, ticket: u64, now: Millis) -> bool {
        self.queue.retain(|p| p.seen + PLACE_GONE_MS >= now);
        match self.queue.iter_mut().find(|p| p.ticket == ticket) {
            Some(place) => place.seen = now,
            // A pool that replaced the one it queued in.
            None => self.queue.push(Place { ticket, seen: now }),
        }
        let mut ahead = 0;
        for p in self.queue.iter() {
            if p.ticket == ticket {
                break;
            }
            ahead += (p.seen + PLACE_ASLEEP_MS >= now) as usize;
        }
        ahead < self.idle.len()
    }

    /// The caller holding `ticket` took a lease or went away.
    pub fn leave(&mut self, ticket: u64) {
        if let Some(at) = self.queue.iter().position(|p| p.ticket == ticket) {
            self.queue.remove(at);
        }
    }

    /// Every lease this isolate would keep: what an acquire renews.
    pub fn held(&self) -> Vec<String> {
        let mut held = Vec::with_capacity(self.idle.len() + self.in_call.len());
        for lease in &self.idle {
            held.push(lease.id.clone());
        }
        for call in self.in_call.values() {
            if call.keep {
                held.push(call.lease.id.clone());
            }
        }
        held
    }

    /// Leases that will be free for a caller here, now or when a call ends.
    pub fn coming(&self) -> usize {
        let mut coming = self.idle.len();
        for call in self.in_call.values() {
            coming += call.keep as usize;
        }
        coming
    }

    /// The idle lease whose next call may start soonest, if any may start
    /// before its renewal lapses; lapsed ones are moved to `lapsed`.
    /// Paced leases have no next start: the one idle the shortest time is
    /// taken, so those this isolate does not need stay idle and go back.
    pub fn take(&mut self, now: Millis, lapsed: &mut Vec<String>) -> Option<KeptLease> {
        self.drop_lapsed(now, lapsed);
        // Paced: the last of the most recently idle (as `max_by_key`
        // picks); streamed: the first of the earliest to start (as
        // `min_by_key` does). A loop, not those adapters' code per key.
        let paced = self.paced();
        let mut pick: Option<(usize, &KeptLease)> = None;
        for (i, lease) in self.idle.iter().enumerate() {
            let better = pick.is_none_or(|(_, p)| match paced {
                true => lease.idle_since >= p.idle_since,
                false => lease.next_at < p.next_at,
            });
            if better {
                pick = Some((i, lease));
            }
        }
        let (at, _) = pick?;
        Some(self.idle.swap_remove(at))
    }

    /// Moves to `lapsed` the idle leases no call may start on any more:
    /// their renewal lapsed.
    pub fn drop_lapsed(&mut self, now: Millis, lapsed: &mut Vec<String>) {
        self.idle.retain(|l| {
            let alive = l.start_by >= now;
            if !alive {
                lapsed.push(l.id.clone());
            }
            alive
        });
    }

    /// When a kept lease's renewal is due: a quarter of the renewal period
    /// before the first would lapse. Not for a lease whose chain ends
    /// before it lapses while others wait: it goes back at the end of its
    /// chain, and the gateway would not renew it anyway.
    pub fn renew_by(&self) -> Option<Millis> {
        let sheds = self.sheds();
        let mut by = None;
        let mut note = |l: &KeptLease| {
            if !(sheds && l.granted_at + LEASE_CHAIN_MS <= l.start_by) {
                let at = l.start_by.saturating_sub(RENEW_EVERY_MS / 4);
                by = Some(by.map_or(at, |by: Millis| by.min(at)));
            }
        };
        for lease in &self.idle {
            note(lease);
        }
        for call in self.in_call.values() {
            if call.keep {
                note(&call.lease);
            }
        }
        by
    }

    pub fn renewal_due(&self, now: Millis) -> bool {
        self.renew_by().is_some_and(|at| at < now)
    }

    /// Applies a renewal: the `kept` of the leases `asked` may start calls
    /// until `start_by`; the rest must go back (idle ones are returned to
    /// give back now, busy ones when their call ends).
    ///
    /// A gateway that counts shares (`restarts_chains_at`, the request's
    /// time) starts a kept lease's chain over once it ran its length: the
    /// lease was renewed as one of this isolate's share.
    pub fn renewed(
        &mut self,
        asked: &[String],
        kept: &[String],
        start_by: Millis,
        restarts_chains_at: Option<Millis>,
    ) -> Vec<KeptLease> {
        let restart = |lease: &mut KeptLease| {
            if let Some(at) = restarts_chains_at {
                if lease.granted_at.saturating_add(LEASE_CHAIN_MS) <= at {
                    lease.granted_at = at;
                }
            }
        };
        let mut back = Vec::new();
        for id in asked {
            let keep = kept.contains(id);
            if let Some(call) = self.in_call.get_mut(id) {
                call.keep &= keep;
                call.lease.start_by = start_by;
                if keep {
                    restart(&mut call.lease);
                }
            } else if let Some(i) = self.idle.iter().position(|l| &l.id == id) {
                if keep {
                    self.idle[i].start_by = start_by;
                    restart(&mut self.idle[i]);
                } else {
                    back.push(self.idle.swap_remove(i));
                }
            }
        }
        back
    }

    /// Idle leases beyond what `waiters` callers can use.
    pub fn beyond(&mut self, waiters: u64) -> Vec<KeptLease> {
        if self.idle.len() as u64 <= waiters {
            return Vec::new();
        }
        crate::sort::sort_by_time(&mut self.idle, |l| l.next_at);
        self.idle.split_off(waiters as usize)
    }
}
