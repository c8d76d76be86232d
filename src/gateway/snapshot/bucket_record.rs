//! A bucket's record in a snapshot.

use std::collections::VecDeque;

use super::codec::{Reader, Writer};
use crate::error::{Error, Result};
use crate::gateway::adaptive::{AdaptiveRate, Curve, Pause};
use crate::gateway::bucket::Bucket;
use crate::gateway::concurrency::ConcurrencyLimits;
use crate::gateway::leases::{LeaseId, LeaseTable};
use crate::gateway::leash::Leash;
use crate::gateway::quota::{Quota, QuotaWindow};
use crate::gateway::recent::RecentPermits;
use crate::gateway::throughput::Throughput;
use crate::gateway::timeline::Timeline;
use crate::protocol::{rules_signature, PacingRule};

pub(super) fn write_bucket(w: &mut Writer, b: &Bucket) {
    w.uint(b.rules.len() as u64);
    for rule in &b.rules {
        w.uint(rule.requests_per_window);
        w.uint(rule.window_ms);
        w.opt_uint(rule.max_concurrency);
        w.opt_f64(rule.adaptive_max_rps);
    }
    w.uint(b.timelines.len() as u64);
    for t in &b.timelines {
        w.uint(t.requests_per_window);
        w.uint(t.window_ms);
        w.uint(t.tat);
        w.opt_uint(t.retire_at);
    }
    match &b.adaptive {
        None => w.0.push(0),
        Some(a) => {
            w.0.push(1);
            write_adaptive(w, a);
        }
    }
    w.uint(b.adaptive_tat);
    w.uint(b.cooldown_until);
    w.0.push(u8::from(b.pending_cut));
    w.uint(b.leases.iter().count() as u64);
    for (expires_at, id) in b.leases.iter() {
        w.bytes(&id.to_le_bytes());
        w.uint(*expires_at);
    }
    w.opt_uint(b.last_at);
    w.uint(b.turns_tat);
    write_quota(w, &b.quota);
    w.uint(b.reported_successes);
    w.uint(b.slot_turns_tat);
    w.opt_uint(b.leases.hold_us);
    w.uint(b.concurrency.named.len() as u64);
    for &(max, until) in &b.concurrency.named {
        w.uint(max);
        w.uint(until);
    }
    w.uint(b.recent.entries.len() as u64);
    for &(at, n) in &b.recent.entries {
        w.uint(at);
        w.uint(n);
    }
    for slots in [&b.throughput.granted, &b.throughput.refused] {
        w.uint(slots.len() as u64);
        for &(slot, n) in slots {
            w.uint(slot);
            w.uint(u64::from(n));
        }
    }
}

/// Reads a bucket record of format `version`: version 1 had 64-bit lease
/// ids, no concurrency limits of its own, no quota, and a rate counted in
/// successes (read as a rate held where it stood).
pub(super) fn read_bucket(r: &mut Reader, guard_ms: u64, version: u8) -> Result<Bucket> {
    let mut rules = Vec::new();
    for _ in 0..r.len()? {
        rules.push(PacingRule {
            requests_per_window: r.positive()?,
            window_ms: r.positive()?,
            max_concurrency: r.opt_uint()?,
            adaptive_max_rps: r.opt_f64()?,
        });
    }
    let mut timelines = Vec::new();
    for _ in 0..r.len()? {
        let rule = PacingRule::new(r.positive()?, r.positive()?);
        let mut t = Timeline::for_rule(&rule, r.uint()?, guard_ms);
        t.retire_at = r.opt_uint()?;
        timelines.push(t);
    }
    let adaptive = match r.byte()? {
        0 => None,
        _ if version == 1 => Some(read_adaptive_v1(r)?),
        _ => Some(read_adaptive(r, version)?),
    };
    let adaptive_tat = r.uint()?;
    let cooldown_until = r.uint()?;
    let pending_cut = r.byte()? != 0;
    // Since version 2 written in expiry order, so each insert lands at the
    // back of the table's queue and a restore is linear; such a record out
    // of that order was not written by a gateway. (Version 1 listed them in
    // any order.)
    let mut leases = LeaseTable::default();
    let mut last = None;
    for _ in 0..r.len()? {
        let id = if version == 1 {
            LeaseId::from(r.u64()?)
        } else {
            LeaseId::from_le_bytes(r.array()?)
        };
        let entry = (r.uint()?, id);
        if version >= 2 && last.is_some_and(|last| entry < last) {
            return Err(Error::invalid(format!(
                "snapshot lists a bucket's leases out of expiry order at byte {}",
                r.at
            )));
        }
        last = Some(entry);
        leases.insert(id, entry.0);
    }
    let mut bucket = Bucket {
        signature: if rules.is_empty() {
            String::new()
        } else {
            rules_signature(&rules)
        },
        rules,
        timelines,
        adaptive,
        adaptive_tat,
        cooldown_until,
        pending_cut,
        leases,
        concurrency: ConcurrencyLimits::default(),
        recent: RecentPermits::default(),
        last_at: r.opt_uint()?,
        turns_tat: r.uint()?,
        quota: if version == 1 {
            // Version 1 kept permits maturing toward the success count;
            // the rate's clock is time now, so they are read and dropped.
            for _ in 0..r.len()? {
                r.uint()?;
                r.uint()?;
            }
            Quota::default()
        } else {
            read_quota(r)?
        },
        reported_successes: r.uint()?,
        slot_turns_tat: r.uint()?,
        returns: Default::default(),
        throughput: Throughput::default(),
    };
    bucket.leases.hold_us = r.opt_uint()?;
    if version >= 2 {
        for _ in 0..r.len()? {
            bucket.concurrency.named.push((r.positive()?, r.uint()?));
        }
        for _ in 0..r.len()? {
            bucket.recent.entries.push_back((r.uint()?, r.uint()?));
        }
    } else if let Some(last) = bucket.last_at {
        // Version 1 kept no count of recent permits: assume the most.
        bucket.recent.entries.push_back((last, u64::MAX));
    }
    // Before version 3 no counts were kept for a cut to read: the next
    // cuts go by their factors until the counts fill again.
    if version >= 3 {
        bucket.throughput = Throughput {
            granted: read_slots(r)?,
            refused: read_slots(r)?,
        };
    }
    Ok(bucket)
}

fn write_adaptive(w: &mut Writer, a: &AdaptiveRate) {
    w.f64(a.cap);
    w.opt_f64(a.stated);
    match &a.curve {
        None => w.0.push(0),
        Some(c) => {
            w.0.push(1);
            w.f64(c.w_max);
            w.f64(c.k);
            w.f64(c.c);
            w.uint(c.elapsed_us);
        }
    }
    w.opt_f64(a.memory);
    w.uint(a.trust_us);
    w.uint(a.credited_until);
    match &a.pause {
        None => w.0.push(0),
        Some(p) => {
            w.0.push(1);
            w.uint(p.probe_every_us);
            w.opt_uint(p.probe_at);
        }
    }
    w.0.push(u8::from(a.resumed));
    w.f64(a.granted);
    w.f64(a.refused);
    w.uint(a.counted_at);
    w.uint(a.event_until);
    let leash = &a.leash;
    w.f64(leash.accepted);
    w.opt_uint(leash.trial.map(|(at, _)| at));
    if let Some((_, rate)) = leash.trial {
        w.f64(rate);
    }
    w.uint(u64::from(leash.steps));
    w.f64(leash.refused);
}

/// A count kept in 32 bits: a larger one is no state this build wrote.
fn small(n: u64) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::invalid(format!("snapshot count {n} is out of range")))
}

fn read_slots(r: &mut Reader) -> Result<VecDeque<(u64, u32)>> {
    let mut slots = VecDeque::new();
    for _ in 0..r.len()? {
        let slot = r.uint()?;
        let n = small(r.uint()?)?;
        slots.push_back((slot, n));
    }
    Ok(slots)
}

fn read_adaptive(r: &mut Reader, version: u8) -> Result<AdaptiveRate> {
    let mut a = AdaptiveRate {
        cap: r.f64()?,
        stated: r.opt_f64()?,
        curve: match r.byte()? {
            0 => None,
            _ => Some(Curve {
                w_max: r.f64()?,
                k: r.f64()?,
                c: r.f64()?,
                elapsed_us: r.uint()?,
            }),
        },
        memory: r.opt_f64()?,
        trust_us: r.uint()?,
        credited_until: r.uint()?,
        pause: match r.byte()? {
            0 => None,
            _ => Some(Pause {
                probe_every_us: r.uint()?,
                probe_at: r.opt_uint()?,
            }),
        },
        resumed: r.byte()? != 0,
        granted: r.f64()?,
        refused: r.f64()?,
        counted_at: r.uint()?,
        event_until: r.uint()?,
        leash: Leash::default(),
    };
    // Before version 3 the leash was not kept: it is slack until the next
    // cut sets it.
    if version >= 3 {
        a.leash.accepted = r.f64()?;
        if let Some(at) = r.opt_uint()? {
            a.leash.trial = Some((at, r.f64()?));
        }
        a.leash.steps = small(r.uint()?)?;
        a.leash.refused = r.f64()?;
    }
    Ok(a)
}

/// Version 1's rate, a curve over successes: its cap, plateau, successes to
/// the plateau, steepness and successes so far. It is read as the rate it
/// stood at, held there (never above what version 1 allowed).
fn read_adaptive_v1(r: &mut Reader) -> Result<AdaptiveRate> {
    let (cap, w_max, k, c, successes) = (r.f64()?, r.f64()?, r.f64()?, r.f64()?, r.uint()?);
    let below_plateau = (successes as f64) < k;
    let s = successes as f64 - k;
    let rate = if below_plateau {
        w_max + c * s * s * s
    } else {
        w_max
    };
    Ok(AdaptiveRate::holding_at(cap, rate))
}

/// The grant log is written as differences from the previous time (it is
/// kept in grant order, mostly rising), each as a sign byte and a size.
fn write_quota(w: &mut Writer, q: &Quota) {
    match &q.log {
        None => w.0.push(0),
        Some(log) => {
            w.0.push(1);
            w.uint(q.complete_from);
            w.uint(log.len() as u64);
            let mut prev = q.complete_from;
            for &t in log {
                w.0.push(u8::from(t < prev));
                w.uint(t.abs_diff(prev));
                prev = t;
            }
        }
    }
    match &q.window {
        None => w.0.push(0),
        Some(win) => {
            w.0.push(1);
            w.uint(win.observed_at);
            w.uint(win.reset_at);
            w.uint(win.allowance);
        }
    }
}

fn read_quota(r: &mut Reader) -> Result<Quota> {
    let mut q = Quota::default();
    if r.byte()? != 0 {
        q.complete_from = r.uint()?;
        let mut log = VecDeque::new();
        let mut prev = q.complete_from;
        for _ in 0..r.len()? {
            let below = r.byte()? != 0;
            let d = r.uint()?;
            prev = if below {
                prev.saturating_sub(d)
            } else {
                prev.saturating_add(d)
            };
            log.push_back(prev);
        }
        q.log = Some(log);
    }
    if r.byte()? != 0 {
        q.window = Some(QuotaWindow {
            observed_at: r.uint()?,
            reset_at: r.uint()?,
            allowance: r.uint()?,
        });
    }
    Ok(q)
}
