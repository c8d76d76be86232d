//! The gateway's state as bytes, so a Durable Object can persist it before
//! it answers and a restarted gateway continues the same timelines: it never
//! hands out a time it already granted, nor forgets a lease or a budget
//! count.
//!
//! Envelope: the magic `PCLN`, a format version byte, the state, then the
//! first 8 bytes of a SHA-256 over everything before them, so a flipped bit
//! or a torn write is refused instead of restored into a gateway that
//! starves a bucket or answers garbage. The state is LEB128 integers,
//! little-endian fixed-width numbers and length-prefixed UTF-8 strings;
//! maps are written in key order, so equal states give equal bytes.
//! Version 1 (no checksum, 64-bit lease ids, full reservations) and
//! version 2 (no counts for the adaptive rate's cuts and probe leash) are
//! still read.

mod bucket_record;
mod codec;
mod ledger_record;

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use super::idle::{bucket_forgettable_at, IdleIndex};
use super::leases::{LeaseIds, LeaseKey};
use super::{GatewayConfig, GatewayCore};
use crate::error::{Error, Result};
use bucket_record::{read_bucket, write_bucket};
use codec::{Reader, Writer};
use ledger_record::{read_ledger, write_ledger};

const MAGIC: &[u8; 4] = b"PCLN";
const FORMAT_VERSION: u8 = 3;
const CHECKSUM_BYTES: usize = 8;

fn checksum(bytes: &[u8]) -> [u8; CHECKSUM_BYTES] {
    Sha256::digest(bytes)[..CHECKSUM_BYTES]
        .try_into()
        .expect("8 of 32 bytes")
}

impl GatewayCore {
    pub fn snapshot(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(256));
        w.bytes(MAGIC);
        w.0.push(FORMAT_VERSION);
        w.bytes(&self.ids.key.0);
        w.uint(self.ids.counter);
        w.uint(self.floor);
        let mut buckets: Vec<_> = self.buckets.iter().collect();
        buckets.sort_by(|a, b| a.0.cmp(b.0));
        w.uint(buckets.len() as u64);
        for (id, bucket) in buckets {
            w.str(id);
            write_bucket(&mut w, bucket);
            w.uint(self.idle_buckets.get(id).unwrap_or(0));
        }
        let mut ledgers: Vec<_> = self.ledgers.iter().collect();
        ledgers.sort_by(|a, b| a.0.cmp(b.0));
        w.uint(ledgers.len() as u64);
        for (id, ledger) in ledgers {
            w.str(id);
            write_ledger(&mut w, ledger);
            w.opt_uint(self.idle_runs.get(id));
        }
        let sum = checksum(&w.0);
        w.bytes(&sum);
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
        match version {
            1 => Self::restore_state(r, config, 1),
            2 | FORMAT_VERSION => {
                let body_end = bytes.len().checked_sub(CHECKSUM_BYTES).filter(|&e| e >= 5);
                let body_end = body_end.ok_or_else(|| r.truncated())?;
                if checksum(&bytes[..body_end]) != bytes[body_end..] {
                    return Err(Error::invalid(
                        "snapshot checksum does not match its bytes: it is corrupt",
                    ));
                }
                let body = Reader {
                    bytes: &bytes[..body_end],
                    at: r.at,
                };
                Self::restore_state(body, config, version)
            }
            _ => Err(Error::invalid(format!(
                "snapshot format version {version} is not supported (this build reads 1 to {FORMAT_VERSION})"
            ))),
        }
    }

    fn restore_state(mut r: Reader, config: GatewayConfig, version: u8) -> Result<Self> {
        let ids = LeaseIds {
            key: if version == 1 {
                v1_lease_key(r.u64()?)
            } else {
                LeaseKey(r.array()?)
            },
            counter: r.uint()?,
        };
        let floor = r.uint()?;
        let mut buckets = HashMap::new();
        let mut idle_buckets = IdleIndex::default();
        for _ in 0..r.len()? {
            let id = r.str()?;
            let bucket = read_bucket(&mut r, config.window_guard_ms, version)?;
            let idle_at = if version == 1 {
                // No time of its last call was kept: take its latest
                // reserved time, which is no later.
                bucket_forgettable_at(&bucket, bucket.next_free(0))
            } else {
                r.uint()?
            };
            idle_buckets.set(&id, idle_at);
            buckets.insert(id, bucket);
        }
        let mut ledgers = HashMap::new();
        let mut idle_runs = IdleIndex::default();
        for _ in 0..r.len()? {
            let id = r.str()?;
            ledgers.insert(id.clone(), read_ledger(&mut r, version)?);
            // A run from version 1 has no known last charge; its next
            // charge starts its idle time.
            if let Some(idle_at) = if version == 1 { None } else { r.opt_uint()? } {
                idle_runs.set(&id, idle_at);
            }
        }
        if r.at != r.bytes.len() {
            return Err(Error::invalid(format!(
                "snapshot has {} bytes after its end",
                r.bytes.len() - r.at
            )));
        }
        Ok(GatewayCore {
            config,
            buckets,
            ledgers,
            idle_buckets,
            idle_runs,
            ids,
            floor,
        })
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
