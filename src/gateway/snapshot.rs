//! The gateway's state as bytes, so a Durable Object can persist it before
//! it answers and a restarted gateway continues the same timelines: it never
//! hands out a time it already granted, nor forgets a lease or a budget
//! count.
//!
//! Layout: the magic `PCLN`, a format version byte, then LEB128 integers,
//! little-endian `f64`s and length-prefixed UTF-8 strings. Maps are written
//! in key order, so equal states give equal bytes.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::adaptive::{AdaptiveRate, Curve, Pause};
use super::bucket::Bucket;
use super::leases::{LeaseIds, LeaseTable};
use super::ledger::{Ledger, Outcome, Reservation};
use super::quota::{Quota, QuotaWindow};
use super::timeline::Timeline;
use super::{GatewayConfig, GatewayCore};
use crate::error::{Error, Result};
use crate::protocol::{rules_signature, BudgetCharge, PacingRule};

const MAGIC: &[u8; 4] = b"PCLN";
const FORMAT_VERSION: u8 = 1;

impl GatewayCore {
    pub fn snapshot(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(256));
        w.0.extend_from_slice(MAGIC);
        w.0.push(FORMAT_VERSION);
        w.u64(self.ids.nonce);
        w.uint(self.ids.counter);
        w.uint(self.floor);
        let mut buckets: Vec<_> = self.buckets.iter().collect();
        buckets.sort_by(|a, b| a.0.cmp(b.0));
        w.uint(buckets.len() as u64);
        for (id, bucket) in buckets {
            w.str(id);
            write_bucket(&mut w, bucket);
        }
        let mut ledgers: Vec<_> = self.ledgers.iter().collect();
        ledgers.sort_by(|a, b| a.0.cmp(b.0));
        w.uint(ledgers.len() as u64);
        for (id, ledger) in ledgers {
            w.str(id);
            write_ledger(&mut w, ledger);
        }
        w.0
    }

    /// A gateway that continues from `bytes`, with `config` (the secret and
    /// the limits are the host's to set, not part of the state).
    pub fn restore(bytes: &[u8], config: GatewayConfig) -> Result<Self> {
        config.validate()?;
        let mut r = Reader { bytes, at: 0 };
        if r.take(4)? != MAGIC {
            return Err(Error::invalid(
                "snapshot does not start with PCLN; it is not a paceline gateway snapshot",
            ));
        }
        let version = r.byte()?;
        if version != FORMAT_VERSION {
            return Err(Error::invalid(format!(
                "snapshot format version {version} is not supported (this build reads {FORMAT_VERSION})"
            )));
        }
        let ids = LeaseIds {
            nonce: r.u64()?,
            counter: r.uint()?,
        };
        let floor = r.uint()?;
        let mut buckets = HashMap::new();
        for _ in 0..r.len()? {
            let id = r.str()?;
            buckets.insert(id, read_bucket(&mut r, config.window_guard_ms)?);
        }
        let mut ledgers = HashMap::new();
        for _ in 0..r.len()? {
            let id = r.str()?;
            ledgers.insert(id, read_ledger(&mut r)?);
        }
        if r.at != bytes.len() {
            return Err(Error::invalid(format!(
                "snapshot has {} bytes after its end",
                bytes.len() - r.at
            )));
        }
        Ok(GatewayCore {
            config,
            buckets,
            ledgers,
            ids,
            floor,
        })
    }
}

fn write_bucket(w: &mut Writer, b: &Bucket) {
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
    let mut leases: Vec<_> = b.leases.iter().collect();
    leases.sort();
    w.uint(leases.len() as u64);
    for (id, expires_at) in leases {
        w.u64(*id);
        w.uint(*expires_at);
    }
    w.opt_uint(b.last_at);
    w.uint(b.turns_tat);
    write_quota(w, &b.quota);
    w.uint(b.reported_successes);
    w.uint(b.slot_turns_tat);
    w.opt_uint(b.leases.hold_us);
}

fn read_bucket(r: &mut Reader, guard_ms: u64) -> Result<Bucket> {
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
        _ => Some(read_adaptive(r)?),
    };
    let adaptive_tat = r.uint()?;
    let cooldown_until = r.uint()?;
    let pending_cut = r.byte()? != 0;
    let mut leases = LeaseTable::default();
    for _ in 0..r.len()? {
        let id = r.u64()?;
        leases.insert(id, r.uint()?);
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
        last_at: r.opt_uint()?,
        turns_tat: r.uint()?,
        quota: read_quota(r)?,
        reported_successes: r.uint()?,
        slot_turns_tat: r.uint()?,
    };
    bucket.leases.hold_us = r.opt_uint()?;
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
}

fn read_adaptive(r: &mut Reader) -> Result<AdaptiveRate> {
    Ok(AdaptiveRate {
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
    })
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

fn write_ledger(w: &mut Writer, l: &Ledger) {
    w.uint(l.counters.len() as u64);
    for (key, count) in &l.counters {
        w.str(key);
        w.uint(*count);
    }
    w.uint(l.order.len() as u64);
    for id in &l.order {
        let seen = &l.reservations[id];
        w.str(id);
        w.uint(seen.charges.len() as u64);
        for c in &seen.charges {
            w.str(&c.key);
            w.uint(c.amount);
            w.uint(c.limit);
        }
        match &seen.outcome {
            Outcome::Charged(counters) => {
                w.0.push(0);
                w.uint(counters.len() as u64);
                for (key, count) in counters {
                    w.str(key);
                    w.uint(*count);
                }
            }
            Outcome::Exceeded {
                key,
                observed,
                limit,
            } => {
                w.0.push(1);
                w.str(key);
                w.uint(*observed);
                w.uint(*limit);
            }
        }
    }
}

fn read_ledger(r: &mut Reader) -> Result<Ledger> {
    let mut counters = BTreeMap::new();
    for _ in 0..r.len()? {
        counters.insert(r.str()?, r.uint()?);
    }
    let mut ledger = Ledger {
        counters,
        reservations: HashMap::new(),
        order: VecDeque::new(),
    };
    for _ in 0..r.len()? {
        let id = r.str()?;
        let mut charges = Vec::new();
        for _ in 0..r.len()? {
            charges.push(BudgetCharge {
                key: r.str()?,
                amount: r.uint()?,
                limit: r.uint()?,
            });
        }
        let outcome = match r.byte()? {
            0 => {
                let mut after = BTreeMap::new();
                for _ in 0..r.len()? {
                    after.insert(r.str()?, r.uint()?);
                }
                Outcome::Charged(after)
            }
            _ => Outcome::Exceeded {
                key: r.str()?,
                observed: r.uint()?,
                limit: r.uint()?,
            },
        };
        ledger.order.push_back(id.clone());
        ledger
            .reservations
            .insert(id, Reservation { charges, outcome });
    }
    Ok(ledger)
}

struct Writer(Vec<u8>);

impl Writer {
    fn uint(&mut self, mut n: u64) {
        while n >= 0x80 {
            self.0.push((n as u8) | 0x80);
            n >>= 7;
        }
        self.0.push(n as u8);
    }

    fn u64(&mut self, n: u64) {
        self.0.extend_from_slice(&n.to_le_bytes());
    }

    fn f64(&mut self, f: f64) {
        self.0.extend_from_slice(&f.to_le_bytes());
    }

    fn str(&mut self, s: &str) {
        self.uint(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }

    fn opt_uint(&mut self, n: Option<u64>) {
        match n {
            None => self.0.push(0),
            Some(n) => {
                self.0.push(1);
                self.uint(n);
            }
        }
    }

    fn opt_f64(&mut self, f: Option<f64>) {
        match f {
            None => self.0.push(0),
            Some(f) => {
                self.0.push(1);
                self.f64(f);
            }
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn truncated(&self) -> Error {
        Error::invalid(format!("snapshot is truncated at byte {}", self.at))
    }

    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| self.truncated())?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn byte(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn uint(&mut self) -> Result<u64> {
        let mut n: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(Error::invalid(format!(
            "snapshot has an integer longer than 64 bits at byte {}",
            self.at
        )))
    }

    fn positive(&mut self) -> Result<u64> {
        match self.uint()? {
            0 => Err(Error::invalid(format!(
                "snapshot has a zero where a rule needs a positive number, at byte {}",
                self.at
            ))),
            n => Ok(n),
        }
    }

    /// A count of items; each takes at least one byte, so a count larger
    /// than the bytes left is corrupt, not a reason to allocate.
    fn len(&mut self) -> Result<u64> {
        let n = self.uint()?;
        if n > (self.bytes.len() - self.at) as u64 {
            return Err(self.truncated());
        }
        Ok(n)
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    fn f64(&mut self) -> Result<f64> {
        let f = f64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes"));
        if f.is_finite() {
            Ok(f)
        } else {
            Err(Error::invalid(format!(
                "snapshot has a non-finite number at byte {}",
                self.at - 8
            )))
        }
    }

    fn str(&mut self) -> Result<String> {
        let n = self.len()? as usize;
        let at = self.at;
        String::from_utf8(self.take(n)?.to_vec())
            .map_err(|_| Error::invalid(format!("snapshot has invalid UTF-8 at byte {at}")))
    }

    fn opt_uint(&mut self) -> Result<Option<u64>> {
        match self.byte()? {
            0 => Ok(None),
            _ => self.uint().map(Some),
        }
    }

    fn opt_f64(&mut self) -> Result<Option<f64>> {
        match self.byte()? {
            0 => Ok(None),
            _ => self.f64().map(Some),
        }
    }
}
