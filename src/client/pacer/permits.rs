//! The permits the pacer hands out: a lease's permit gives it back to the
//! batch when it ends, a kept lease's permit hands it on or back, and a
//! pool granted under other rules or another token goes back first.

use std::rc::{Rc, Weak};

use super::refill::Target;
use super::{GatewayRateState, Inner};
use crate::client::permit::Permit;
use crate::protocol::PacingRule;
use crate::rt::LocalBoxFuture;
use crate::time::Millis;

impl GatewayRateState {
    /// Whether the target's bucket keeps its leases in a pool. A pool
    /// granted under other rules or another token is handed back first,
    /// as a dissolved one is: its idle leases now, its busy ones when
    /// their calls end.
    pub(super) fn pooled(&self, target: &Target) -> bool {
        let serves = self.state(&target.bucket_id, |s| {
            s.pool
                .as_ref()
                .map(|p| p.rules == target.rules && p.token == target.token)
        });
        match serves {
            None => false,
            Some(true) => true,
            Some(false) => {
                self.dissolve_pool(&target.bucket_id, false);
                false
            }
        }
    }

    /// A permit on a kept lease: its end hands the lease on or back.
    pub(super) fn kept_permit(&self, bucket_id: &str, lease_id: String) -> Permit {
        let bucket_id = bucket_id.to_owned();
        let id = lease_id.clone();
        self.lease_permit(lease_id, move |this| this.end_call(&bucket_id, &id))
    }

    /// A permit whose drop or `release()` hands its lease to the batch.
    /// Its call starts at `due`: how long it then held the lease is
    /// recorded (see `hold`).
    pub(super) fn leased_permit(
        &self,
        bucket_id: &str,
        token: Option<String>,
        rules: Vec<PacingRule>,
        lease_id: String,
        due: Millis,
    ) -> Permit {
        let bucket_id = bucket_id.to_owned();
        let id = lease_id.clone();
        self.lease_permit(lease_id, move |this| {
            let now = this.inner.rt.now_ms();
            if now > due {
                this.state(&bucket_id, |s| s.hold.record(now - due));
            }
            this.release_settled(&bucket_id, token, &rules, vec![id])
        })
    }

    /// A permit holding `lease_id` whose end runs `on_end` on this state,
    /// if the state is still there (a freed one gave its leases back).
    fn lease_permit(
        &self,
        lease_id: String,
        on_end: impl FnOnce(GatewayRateState) -> LocalBoxFuture<'static, ()> + 'static,
    ) -> Permit {
        let weak: Weak<Inner> = Rc::downgrade(&self.inner);
        Permit::new(
            Some(lease_id),
            Some(Box::new(move || match weak.upgrade() {
                Some(inner) => on_end(GatewayRateState { inner }),
                None => Box::pin(std::future::ready(())),
            })),
        )
    }
}
