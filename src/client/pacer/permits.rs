//! The permits the pacer hands out: a lease's permit gives it back to the
//! batch when it ends, a kept lease's permit hands it on or back, and a
//! pool granted under other rules or another token goes back first.

use std::rc::{Rc, Weak};

use super::refill::Target;
use super::{GatewayRateState, Inner};
use crate::client::permit::Permit;
use crate::protocol::PacingRule;

impl GatewayRateState {
    /// Whether the target's bucket keeps its leases in a pool. A pool
    /// granted under other rules or another token is handed back first.
    pub(super) fn pooled(&self, target: &Target) -> bool {
        let stale = self.state(&target.bucket_id, |s| match &s.pool {
            None => Err(false),
            Some(p) if p.rules == target.rules && p.token == target.token => Err(true),
            Some(_) => Ok(s.pool.take().expect("checked")),
        });
        match stale {
            Err(pooled) => pooled,
            Ok(pool) => {
                let ids = pool.idle.into_iter().map(|l| l.id).collect();
                self.queue(&target.bucket_id, pool.token, &pool.rules, ids, Vec::new());
                false
            }
        }
    }

    /// A permit on a kept lease: its end hands the lease on or back.
    pub(super) fn kept_permit(&self, bucket_id: &str, lease_id: String) -> Permit {
        let weak: Weak<Inner> = Rc::downgrade(&self.inner);
        let bucket_id = bucket_id.to_owned();
        let id = lease_id.clone();
        Permit::new(
            Some(lease_id),
            Some(Box::new(move || match weak.upgrade() {
                Some(inner) => GatewayRateState { inner }.end_call(&bucket_id, &id),
                None => Box::pin(std::future::ready(())),
            })),
        )
    }

    /// A permit whose drop or `release()` hands its lease to the batch.
    pub(super) fn leased_permit(
        &self,
        bucket_id: &str,
        token: Option<String>,
        rules: Vec<PacingRule>,
        lease_id: String,
    ) -> Permit {
        let weak: Weak<Inner> = Rc::downgrade(&self.inner);
        let bucket_id = bucket_id.to_owned();
        let id = lease_id.clone();
        Permit::new(
            Some(lease_id),
            Some(Box::new(move || match weak.upgrade() {
                Some(inner) => {
                    let this = GatewayRateState { inner };
                    match this.queue(&bucket_id, token, &rules, vec![id], Vec::new()) {
                        Some(ticket) => Box::pin(async move { this.settled(ticket).await }),
                        None => Box::pin(std::future::ready(())),
                    }
                }
                None => Box::pin(std::future::ready(())),
            })),
        )
    }
}
