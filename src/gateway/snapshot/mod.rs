//! The gateway's state as bytes, so a Durable Object can persist it before
//! it answers and a restarted gateway continues the same timelines: it never
//! hands out a time it already granted, nor forgets a lease or a budget
//! count.
//!
//! The state is a set of keyed records: `meta` (the lease-id key and
//! counter, the floor), `bucket:<id>` per bucket and `run:<id>` per run
//! ledger, each written by its own record module. A host stores them under
//! their keys and, after each request, only the ones it changed
//! ([`GatewayCore::take_changed_records`]), so a request's storage cost is
//! bounded by what it touched, not by what the gateway holds.
//!
//! Envelope (a stored record, or the whole state as one snapshot): the
//! magic `PCLN`, a format version byte, the body, then the first 8 bytes of
//! a SHA-256 over everything before them, so a flipped bit or a torn write
//! is refused instead of restored into a gateway that starves a bucket or
//! answers garbage. Bodies are LEB128 integers, little-endian fixed-width
//! numbers and length-prefixed UTF-8 strings; a snapshot's body is the meta
//! record then every bucket and run record, length-prefixed, in key order,
//! so equal states give equal bytes. Version 6 keeps when each run last
//! forgot a reservation, each bucket's turn tickets and which kind of kept
//! leases it hands out; version 5 keeps each bucket's streamed slots;
//! version 4 made records separable. Versions 1 (no checksum, 64-bit lease
//! ids, full reservations), 2 (no counts for the adaptive rate's cuts and
//! probe leash), 3 (records inline), 4 (no slot streams) and 5 (no time a
//! run forgot, no turn tickets, kept leases all streamed) are still read,
//! and a host's stored records may mix versions 4 to 6: it rewrites only
//! the records a request changed.

mod adaptive_record;
mod bucket_record;
mod codec;
mod ledger_record;
mod quota_record;
mod slots_record;
mod throughput_record;
mod tickets_record;

use std::collections::BTreeSet;

use super::map_hash::KeyedMap;

use sha2::{Digest, Sha256};

use super::bucket::Bucket;
use super::idle::{bucket_forgettable_at, IdleIndex, RUN_IDLE_US};
use super::lease_id::{LeaseIds, LeaseKey};
use super::ledger::Ledger;
use super::timeline::Micros;
use super::{GatewayConfig, GatewayCore};
use crate::error::{Error, Result};
use bucket_record::{read_bucket, write_bucket};
use codec::{Reader, Writer};
use ledger_record::{forgot_before_v6, read_ledger, write_ledger};

const MAGIC: &[u8; 4] = b"PCLN";
const FORMAT_VERSION: u8 = 6;
/// The first version whose state was stored as keyed records.
const FIRST_RECORDS_VERSION: u8 = 4;
const CHECKSUM_BYTES: usize = 8;

/// The key of the record holding the lease-id key and counter and the floor.
pub const META_KEY: &str = "meta";
const BUCKET_PREFIX: &str = "bucket:";
const RUN_PREFIX: &str = "run:";

fn checksum(bytes: &[u8]) -> [u8; CHECKSUM_BYTES] {
    Sha256::digest(bytes)[..CHECKSUM_BYTES]
        .try_into()
        .expect("8 of 32 bytes")
}

/// `body` in the envelope.
fn seal(body: &[u8]) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(body.len() + 13));
    w.bytes(MAGIC);
    w.0.push(FORMAT_VERSION);
    w.bytes(body);
    let sum = checksum(&w.0);
    w.bytes(&sum);
    w.0
}

/// The version and the body of an envelope, its checksum checked (version
/// 1 had none).
fn open(bytes: &[u8]) -> Result<(u8, Reader<'_>)> {
    let mut r = Reader { bytes, at: 0 };
    if r.take(4)? != MAGIC {
        return Err(Error::invalid(
            "snapshot does not start with PCLN; it is not a paceline gateway snapshot",
        ));
    }
    match r.byte()? {
        1 => Ok((1, r)),
        version @ (2..=FORMAT_VERSION) => {
            let body_end = bytes.len().checked_sub(CHECKSUM_BYTES).filter(|&e| e >= 5);
            let body_end = body_end.ok_or_else(|| r.truncated())?;
            if checksum(&bytes[..body_end]) != bytes[body_end..] {
                return Err(Error::invalid(
                    "snapshot checksum does not match its bytes: it is corrupt",
                ));
            }
            Ok((
                version,
                Reader {
                    bytes: &bytes[..body_end],
                    at: r.at,
                },
            ))
        }
        version => Err(Error::invalid(format!(
            "snapshot format version {version} is not supported (this build reads 1 to {FORMAT_VERSION})"
        ))),
    }
}

fn finished(r: &Reader) -> Result<()> {
    if r.at != r.bytes.len() {
        return Err(Error::invalid(format!(
            "snapshot has {} bytes after its end",
            r.bytes.len() - r.at
        )));
    }
    Ok(())
}

/// A bucket's record and the time it may be forgotten.
fn bucket_entry(r: &mut Reader, guard_ms: u64, version: u8) -> Result<(Bucket, Micros)> {
    let bucket = read_bucket(r, guard_ms, version)?;
    let idle_at = if version == 1 {
        // No time of its last call was kept: take its latest reserved
        // time, which is no later.
        bucket_forgettable_at(&bucket, bucket.next_free(0))
    } else {
        r.uint()?
    };
    Ok((bucket, idle_at))
}

/// A run's ledger and the time it may be forgotten. A run from version 1
/// has no known last charge; its next charge starts its idle time.
fn run_entry(r: &mut Reader, version: u8) -> Result<(Ledger, Option<Micros>)> {
    let mut ledger = read_ledger(r, version)?;
    let idle_at = if version == 1 { None } else { r.opt_uint()? };
    if version < 6 {
        let last_charge = idle_at.map(|at| at.saturating_sub(RUN_IDLE_US));
        ledger.forgot_at = forgot_before_v6(&ledger, last_charge);
    }
    Ok((ledger, idle_at))
}

/// Where a length-prefixed record of a snapshot ends (versions before
/// records wrote them inline).
fn record_end(r: &mut Reader, version: u8) -> Result<Option<usize>> {
    if version < FIRST_RECORDS_VERSION {
        return Ok(None);
    }
    let len = r.len()? as usize;
    Ok(Some(r.at.saturating_add(len)))
}

fn record_ended(r: &Reader, end: Option<usize>) -> Result<()> {
    match end {
        Some(end) if end != r.at => Err(Error::invalid(format!(
            "snapshot record ending at byte {} was declared to end at {end}",
            r.at
        ))),
        _ => Ok(()),
    }
}

/// Every record of `map` in key order (so equal states give equal bytes):
/// the count, then each id and its length-prefixed body.
fn write_keyed<T>(w: &mut Writer, map: &KeyedMap<T>, body: impl Fn(&str, &T, &mut Writer)) {
    let mut entries: Vec<_> = map.iter().collect();
    crate::sort::heap_sort_by(&mut entries, |a, b| a.0 < b.0);
    w.uint(entries.len() as u64);
    let mut record = Writer(Vec::new());
    for (id, value) in entries {
        w.str(id);
        record.0.clear();
        body(id, value, &mut record);
        w.uint(record.0.len() as u64);
        w.bytes(&record.0);
    }
}

/// What changed since the host last stored: the records to write again
/// (or delete, for a bucket or run no longer held).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Changed {
    buckets: BTreeSet<String>,
    runs: BTreeSet<String>,
    /// The lease-id counter and the floor as last stored.
    meta: Option<(u64, Micros)>,
}

impl Changed {
    pub fn bucket(&mut self, id: &str) {
        if !self.buckets.contains(id) {
            self.buckets.insert(id.to_owned());
        }
    }

    pub fn run(&mut self, id: &str) {
        if !self.runs.contains(id) {
            self.runs.insert(id.to_owned());
        }
    }
}

/// A record's keyed value, as a host stores it: `None` to delete the key.
pub type StoredRecord = (String, Option<Vec<u8>>);

impl GatewayCore {
    fn meta_body(&self, w: &mut Writer) {
        w.bytes(&self.ids.key.0);
        w.uint(self.ids.counter);
        w.uint(self.floor);
    }

    fn bucket_body(&self, id: &str, bucket: &Bucket, w: &mut Writer) {
        write_bucket(w, bucket);
        w.uint(self.idle_buckets.get(id).unwrap_or(0));
    }

    fn run_body(&self, id: &str, ledger: &Ledger, w: &mut Writer) {
        write_ledger(w, ledger);
        w.opt_uint(self.idle_runs.get(id));
    }

    /// The whole state in one envelope.
    pub fn snapshot(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(256));
        self.meta_body(&mut w);
        write_keyed(&mut w, &self.buckets, |id, b, r| self.bucket_body(id, b, r));
        write_keyed(&mut w, &self.ledgers, |id, l, r| self.run_body(id, l, r));
        seal(&w.0)
    }

    fn sealed(&self, body: impl FnOnce(&mut Writer)) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(64));
        body(&mut w);
        seal(&w.0)
    }

    /// Every record, each in its own envelope under its key: what a host
    /// stores first (or when moving from one snapshot to records).
    pub fn records(&self) -> Vec<(String, Vec<u8>)> {
        let mut out = vec![(META_KEY.to_owned(), self.sealed(|w| self.meta_body(w)))];
        for (id, bucket) in &self.buckets {
            let value = self.sealed(|w| self.bucket_body(id, bucket, w));
            out.push((format!("{BUCKET_PREFIX}{id}"), value));
        }
        for (id, ledger) in &self.ledgers {
            let value = self.sealed(|w| self.run_body(id, ledger, w));
            out.push((format!("{RUN_PREFIX}{id}"), value));
        }
        out
    }

    /// The records changed since the last call (or since the gateway was
    /// made or restored), each to store under its key, or `None` to delete
    /// the key; a request that changed nothing (a forged token, a bad
    /// body) changes no record.
    pub fn take_changed_records(&mut self) -> Vec<StoredRecord> {
        let changed = std::mem::take(&mut self.changed);
        let mut out = Vec::new();
        let meta = (self.ids.counter, self.floor);
        // Only a change to a bucket or run moves the counter or the floor,
        // and until one is stored an empty storage is this gateway.
        let touched = !changed.buckets.is_empty() || !changed.runs.is_empty();
        if touched && changed.meta != Some(meta) {
            out.push((
                META_KEY.to_owned(),
                Some(self.sealed(|w| self.meta_body(w))),
            ));
            self.changed.meta = Some(meta);
        } else {
            self.changed.meta = changed.meta;
        }
        for id in changed.buckets {
            let value = self
                .buckets
                .get(&id)
                .map(|b| self.sealed(|w| self.bucket_body(&id, b, w)));
            out.push((format!("{BUCKET_PREFIX}{id}"), value));
        }
        for id in changed.runs {
            let value = self
                .ledgers
                .get(&id)
                .map(|l| self.sealed(|w| self.run_body(&id, l, w)));
            out.push((format!("{RUN_PREFIX}{id}"), value));
        }
        out
    }

    /// A gateway that continues from its stored records (keys as
    /// [`GatewayCore::records`] names them, in any order).
    pub fn restore_records<'a>(
        records: impl IntoIterator<Item = (&'a str, &'a [u8])>,
        config: GatewayConfig,
    ) -> Result<Self> {
        config.validate()?;
        let mut core: Option<GatewayCore> = None;
        let mut buckets = Vec::new();
        let mut runs = Vec::new();
        for (key, bytes) in records {
            let (version, mut r) = open(bytes)?;
            if version < FIRST_RECORDS_VERSION {
                return Err(Error::invalid(format!(
                    "record {key} is format version {version}; stored records start at {FIRST_RECORDS_VERSION}"
                )));
            }
            if key == META_KEY {
                core = Some(GatewayCore::from_meta(&mut r, config.clone(), version)?);
                finished(&r)?;
            } else if let Some(id) = key.strip_prefix(BUCKET_PREFIX) {
                let (bucket, idle_at) = bucket_entry(&mut r, config.window_guard_ms, version)?;
                finished(&r)?;
                buckets.push((id.to_owned(), bucket, idle_at));
            } else if let Some(id) = key.strip_prefix(RUN_PREFIX) {
                let (ledger, idle_at) = run_entry(&mut r, version)?;
                finished(&r)?;
                runs.push((id.to_owned(), ledger, idle_at));
            } else {
                return Err(Error::invalid(format!(
                    "{key} is not a gateway record key (meta, bucket:<id>, run:<id>)"
                )));
            }
        }
        let mut core = core.ok_or_else(|| {
            Error::invalid("the records have no meta record: they are not a whole gateway")
        })?;
        core.buckets.reserve(buckets.len());
        for (id, bucket, idle_at) in buckets {
            core.idle_buckets.set(&id, idle_at);
            core.buckets.insert(id, bucket);
        }
        for (id, ledger, idle_at) in runs {
            if let Some(at) = idle_at {
                core.idle_runs.set(&id, at);
            }
            core.ledgers.insert(id, ledger);
        }
        core.changed.meta = Some((core.ids.counter, core.floor));
        Ok(core)
    }

    fn from_meta(r: &mut Reader, config: GatewayConfig, version: u8) -> Result<Self> {
        let ids = LeaseIds {
            key: if version == 1 {
                v1_lease_key(r.u64()?)
            } else {
                LeaseKey(r.array()?)
            },
            counter: r.uint()?,
        };
        let floor = r.uint()?;
        Ok(GatewayCore::empty(config, ids, floor))
    }

    /// A gateway that continues from `bytes`, with `config` (the secret and
    /// the limits are the host's to set, not part of the state).
    pub fn restore(bytes: &[u8], config: GatewayConfig) -> Result<Self> {
        config.validate()?;
        let (version, r) = open(bytes)?;
        let mut core = Self::restore_state(r, config, version)?;
        core.changed.meta = Some((core.ids.counter, core.floor));
        Ok(core)
    }

    fn restore_state(mut r: Reader, config: GatewayConfig, version: u8) -> Result<Self> {
        let mut core = GatewayCore::from_meta(&mut r, config, version)?;
        let guard_ms = core.config.window_guard_ms;
        let mut buckets = KeyedMap::default();
        let mut idle_buckets = IdleIndex::default();
        for _ in 0..r.len()? {
            let id = r.str()?;
            let end = record_end(&mut r, version)?;
            let (bucket, idle_at) = bucket_entry(&mut r, guard_ms, version)?;
            record_ended(&r, end)?;
            idle_buckets.set(&id, idle_at);
            buckets.insert(id, bucket);
        }
        let mut ledgers = KeyedMap::default();
        let mut idle_runs = IdleIndex::default();
        for _ in 0..r.len()? {
            let id = r.str()?;
            let end = record_end(&mut r, version)?;
            let (ledger, idle_at) = run_entry(&mut r, version)?;
            if let Some(idle_at) = idle_at {
                idle_runs.set(&id, idle_at);
            }
            ledgers.insert(id, ledger);
            record_ended(&r, end)?;
        }
        finished(&r)?;
        core.buckets = buckets;
        core.ledgers = ledgers;
        core.idle_buckets = idle_buckets;
        core.idle_runs = idle_runs;
        Ok(core)
    }
}

/// Version 1 made lease ids from a 64-bit random nonce; the key that
/// continues its gateway is derived from that nonce, the only secret it
/// kept.
fn v1_lease_key(nonce: u64) -> LeaseKey {
    let mut hash = Sha256::new();
    hash.update(b"paceline-v1-lease-key\n");
    hash.update(nonce.to_le_bytes());
    LeaseKey(hash.finalize().into())
}
