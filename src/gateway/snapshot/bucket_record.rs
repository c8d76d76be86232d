//! A bucket's record in a snapshot: its rules, timelines, leases and
//! clocks, with its adaptive rate, quota, throughput counts, streamed
//! slots and turn tickets in the records of their own types.

use super::adaptive_record::{read_adaptive, read_adaptive_v1, write_adaptive};
use super::codec::{Reader, Writer};
use super::quota_record::{read_quota, write_quota};
use super::slots_record::{read_streams, write_streams};
use super::throughput_record::{read_throughput, write_throughput};
use super::tickets_record::{read_tickets, write_tickets};
use crate::error::{Error, Result};
use crate::gateway::bucket::Bucket;
use crate::gateway::concurrency::ConcurrencyLimits;
use crate::gateway::lease_id::LeaseId;
use crate::gateway::leases::LeaseTable;
use crate::gateway::quota::Quota;
use crate::gateway::recent::RecentPermits;
use crate::gateway::throughput::Throughput;
use crate::gateway::tickets::TurnTickets;
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
    w.opt(b.adaptive.as_ref(), write_adaptive);
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
    write_throughput(w, &b.throughput);
    let leases: Vec<LeaseId> = b.leases.iter().map(|&(_, id)| id).collect();
    write_streams(w, &b.leases.streams, &leases);
    write_tickets(w, &b.tickets);
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
    let adaptive = r.opt(|r| match version {
        1 => read_adaptive_v1(r),
        _ => read_adaptive(r, version),
    })?;
    let adaptive_tat = r.uint()?;
    let cooldown_until = r.uint()?;
    let pending_cut = r.byte()? != 0;
    // Since version 2 written in expiry order, so each insert lands at the
    // back of the table's queue and a restore is linear; such a record out
    // of that order was not written by a gateway. (Version 1 listed them in
    // any order.)
    let mut leases = LeaseTable::default();
    let mut lease_ids = Vec::new();
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
        lease_ids.push(id);
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
        tickets: TurnTickets::default(),
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
        fair_turns: Default::default(),
        returns: Default::default(),
        throughput: Throughput::default(),
    };
    bucket.leases.hold_us = r.opt_uint()?;
    if version >= 2 {
        for _ in 0..r.len()? {
            bucket.concurrency.named.push((r.positive()?, r.uint()?));
        }
        for _ in 0..r.len()? {
            bucket.recent.entries.push((r.uint()?, r.uint()?));
        }
    } else if let Some(last) = bucket.last_at {
        // Version 1 kept no count of recent permits: assume the most.
        bucket.recent.entries.push((last, u64::MAX));
    }
    // Before version 3 no counts were kept for a cut to read: the next
    // cuts go by their factors until the counts fill again.
    if version >= 3 {
        bucket.throughput = read_throughput(r)?;
    }
    // Before version 5 the slots' streams were not kept: every freed slot
    // reads as ready, as a restore then had it.
    if version >= 5 {
        bucket.leases.streams = read_streams(r, &lease_ids, version)?;
    }
    // Before version 6 every kept lease was streamed.
    if version < 6 {
        bucket.leases.streams.paced = false;
    }
    // Before version 6 no turn tickets were kept: clients that show one
    // are served as clients without one.
    if version >= 6 {
        bucket.tickets = read_tickets(r)?;
    }
    Ok(bucket)
}
