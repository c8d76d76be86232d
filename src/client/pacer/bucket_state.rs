//! What the pacer knows of one bucket: its cached block, its refill, its
//! clock, its demand, its kept leases and what it owes the gateway.

use super::block::Block;
use super::calls::CallsInFlight;
use super::clock::ClockSync;
use super::demand::DrawRate;
use super::hold::HoldTime;
use super::pool::LeasePool;
use super::quota::QuotaState;
use super::refill::Refill;
use crate::protocol::PacingRule;
use crate::time::Millis;

/// A dissolved pool's scope (token, rules) and its leases still in calls.
pub(super) type DissolvedPool = (Option<String>, Vec<PacingRule>, Vec<BusyLease>);

/// A dissolved pool's lease in a call: the time its slot's spacing ends,
/// and whether its call is still to start (it may, at its time; see
/// `GatewayRateState::dissolve_pool`).
pub(super) type BusyLease = (String, Millis, bool);

#[derive(Default)]
pub(super) struct BucketState {
    pub(super) block: Option<Block>,
    pub(super) waiters: u64,
    pub(super) refill: Refill,
    pub(super) clock: ClockSync,
    pub(super) draw_rate: DrawRate,
    pub(super) calls: CallsInFlight,
    /// A task is watching the block for permits nobody will use.
    pub(super) watching: bool,
    pub(super) effective_rps: Option<f64>,
    pub(super) pending_successes: u64,
    pub(super) quota: QuotaState,
    /// Kept leases, once the gateway streams this bucket's slots.
    pub(super) pool: Option<LeasePool>,
    /// A pool the gateway stopped streaming: its scope, and the leases
    /// still in calls, which go back when their calls end.
    /// Each busy lease with the spacing it still owes: its slot's next
    /// call may start no sooner than that after this one started.
    pub(super) dissolved: Option<DissolvedPool>,
    /// How long calls here hold their lease.
    pub(super) hold: HoldTime,
    /// Callers holding a drawn permit that waits for its time and a paced
    /// slot: the slots they need are kept for them.
    pub(super) paced_due: u64,
    /// Our clock: a permit due before this is not sent, even one a caller
    /// already drew (see `penalty`).
    pub(super) unsent_before: Millis,
}

impl BucketState {
    /// A cooldown was learned: leases of a dissolved pool whose calls had
    /// not started go back uncalled, their slots free at once.
    pub(super) fn cancel_dissolved_starts(&mut self) {
        if let Some((_, _, busy)) = &mut self.dissolved {
            for (_, ready, waiting) in busy.iter_mut().filter(|(_, _, w)| *w) {
                *ready = 0;
                *waiting = false;
            }
        }
    }

    /// Nothing cached, waited on or owed. Unreported successes do not
    /// count: the gateway's rate runs on its own clock and shows them only
    /// to people, so a bucket known only from `observe_success` may go.
    pub(super) fn is_idle(&self) -> bool {
        self.block.is_none()
            && self.waiters == 0
            && self.refill.is_idle()
            && !self.watching
            && self.quota.is_idle()
            && self.pool.as_ref().is_none_or(|p| p.coming() == 0)
            && self.dissolved.is_none()
            && self.paced_due == 0
    }
}
