//! A bucket's quota record in a snapshot: the log of grants a provider's
//! stated allowance is checked against, and the window it stated.

use super::codec::{Reader, Writer};
use crate::error::Result;
use crate::gateway::quota::{Quota, QuotaWindow};

/// The grant log is written as differences from the previous time (it is
/// kept in grant order, mostly rising), each as a sign byte and a size.
pub(super) fn write_quota(w: &mut Writer, q: &Quota) {
    w.opt(q.log.as_ref(), |w, log| {
        w.uint(q.complete_from);
        w.uint(log.len() as u64);
        let mut prev = q.complete_from;
        for &t in log {
            w.0.push(u8::from(t < prev));
            w.uint(t.abs_diff(prev));
            prev = t;
        }
    });
    w.opt(q.window.as_ref(), |w, win| {
        w.uint(win.observed_at);
        w.uint(win.reset_at);
        w.uint(win.allowance);
    });
}

pub(super) fn read_quota(r: &mut Reader) -> Result<Quota> {
    let mut q = Quota::default();
    if let Some((complete_from, log)) = r.opt(read_log)? {
        q.complete_from = complete_from;
        q.log = Some(log);
    }
    q.window = r.opt(|r| {
        Ok(QuotaWindow {
            observed_at: r.uint()?,
            reset_at: r.uint()?,
            allowance: r.uint()?,
        })
    })?;
    Ok(q)
}

/// The time the log is complete from, and the grant times after it.
fn read_log(r: &mut Reader) -> Result<(u64, Vec<u64>)> {
    let complete_from = r.uint()?;
    let mut log = Vec::new();
    let mut prev = complete_from;
    for _ in 0..r.len()? {
        let below = r.byte()? != 0;
        let d = r.uint()?;
        prev = if below {
            prev.saturating_sub(d)
        } else {
            prev.saturating_add(d)
        };
        log.push(prev);
    }
    Ok((complete_from, log))
}
