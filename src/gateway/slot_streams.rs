//! Where each of a bucket's concurrency slots stands between grants: when
//! a freed slot's stream lets it start its next call, the kept leases'
//! chains, whether callers wait for a slot, and which kind of kept leases
//! the bucket hands out. The grants that read and move it are in `slots`.

use std::collections::HashMap;

use super::concurrency::MAX_LIVE_LEASES;
use super::lease_id::LeaseId;
use super::slot_claims::{SlotClaims, WAITERS_MEMORY_US};
use super::timeline::Micros;
use crate::protocol::LEASE_CHAIN_MS;

/// How long a lease may be kept through renewals while others wait.
pub(crate) const MAX_CHAIN_US: Micros = LEASE_CHAIN_MS * 1_000;

/// Where each slot's stream stands. Part of the bucket's snapshot (its own
/// record there): a gateway restored without it would take every freed
/// slot for ready and could start a call on it up to a spacing early.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SlotStreams {
    /// When each freed, not yet re-granted slot may start its next call.
    pub free_ready: Vec<Micros>,
    /// Leases granted one per time: when their slot may start its next call.
    pub ready_after: HashMap<LeaseId, Micros>,
    /// Kept leases: when each one's chain began.
    pub chains: HashMap<LeaseId, Micros>,
    /// A caller wanted a slot and found none, until about this time.
    pub waiters_until: Micros,
    /// The shares of clients that keep several slots.
    pub claims: SlotClaims,
    /// How long after its chain's end a kept lease usually comes back (a
    /// moving average): its last call ends, then the release travels.
    pub return_delay_us: Option<Micros>,
    /// The bucket's kept leases are paced (a semaphore beside the
    /// timeline's permits), not streamed.
    pub paced: bool,
    /// When the last kept lease that may have started a call off the
    /// timeline ended: such calls may still be in a window until a window
    /// after.
    pub kept_ended_at: Micros,
    /// The kind the last client that knew its calls asked for: clients
    /// that have seen no call yet are handed it, so a fleet turns to the
    /// kind its calls need as soon as one isolate has seen one end. Not
    /// kept in a snapshot.
    pub asked_paced: Option<bool>,
    /// No slot's stream starts before this: the bucket turned from paced
    /// to streamed slots, and no streamed call may share a window with the
    /// paced calls the timeline granted before.
    pub streams_from: Micros,
    /// The narrowest spacing streamed leases were granted at (`0` before
    /// any): a lease ended sooner than twice that after its grant started
    /// no call but its first, which was on the timeline. Not kept in a
    /// snapshot: a restored gateway counts every ended lease.
    pub spacing_floor_us: Micros,
}

impl SlotStreams {
    /// The lease `id` ended at `at` (released, or lapsed at its expiry).
    pub fn freed(&mut self, id: LeaseId, at: Micros) {
        if let Some(start) = self.chains.remove(&id) {
            let second_call = start.saturating_add(self.spacing_floor_us.saturating_mul(2));
            if self.paced || self.spacing_floor_us == 0 || at >= second_call {
                self.kept_ended_at = self.kept_ended_at.max(at);
            }
            let end = start.saturating_add(MAX_CHAIN_US);
            if at > end && at < end.saturating_add(MAX_CHAIN_US) {
                let delay = at - end;
                self.return_delay_us = Some(match self.return_delay_us {
                    None => delay,
                    Some(avg) => avg - avg / 4 + delay / 4,
                });
            }
        }
        let ready = self.ready_after.remove(&id).unwrap_or(at);
        if self.free_ready.len() >= MAX_LIVE_LEASES as usize {
            // Forgetting the earliest leaves only later ready times.
            let earliest = (0..self.free_ready.len())
                .min_by_key(|&i| self.free_ready[i])
                .expect("not empty");
            self.free_ready.swap_remove(earliest);
        }
        self.free_ready.push(ready);
    }

    /// When the slot a new lease takes may start its first call: now for
    /// a slot never used (fewer freed slots are known than `free`), else
    /// the earliest freed one.
    pub fn take_slot(&mut self, now: Micros, free: u64) -> Micros {
        let now = now.max(self.streams_from);
        if (self.free_ready.len() as u64) < free {
            return now;
        }
        let earliest = (0..self.free_ready.len()).min_by_key(|&i| self.free_ready[i]);
        earliest.map_or(now, |i| self.free_ready.swap_remove(i).max(now))
    }

    /// Puts back a slot taken but not granted.
    pub fn untake(&mut self, ready: Micros) {
        self.free_ready.push(ready);
    }

    /// A lease granted one per time at a time whose slot may start its
    /// next call at `ready`.
    pub fn spaced(&mut self, id: LeaseId, ready: Micros) {
        self.ready_after.insert(id, ready);
    }

    /// The soonest a slot held now could start a call again: a kept
    /// streamed lease goes back no sooner than `spacing` after its chain
    /// began, a lease granted one per permit frees its slot for its next
    /// call a spacing after its time. `None` when no slot is held.
    pub fn soonest_ready(&self, spacing: Micros) -> Option<Micros> {
        let chains = self
            .chains
            .values()
            .map(|&start| start.saturating_add(spacing));
        chains.chain(self.ready_after.values().copied()).min()
    }

    pub fn contended(&self, now: Micros) -> bool {
        now < self.waiters_until
    }

    pub fn refused(&mut self, now: Micros) {
        self.waiters_until = self
            .waiters_until
            .max(now.saturating_add(WAITERS_MEMORY_US));
    }
}
