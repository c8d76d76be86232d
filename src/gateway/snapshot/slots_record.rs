//! A bucket's streamed slots in a snapshot: when each freed slot may start
//! its next call, and for each live lease when its slot may start the call
//! after the one it was granted for, or when its chain of renewals began.
//! Without them a restored gateway would take every freed slot for ready.
//!
//! A lease is named by its place in the bucket's lease list, written just
//! before: two bytes at most instead of its sixteen.

use std::collections::HashMap;

use super::codec::{Reader, Writer};
use crate::error::{Error, Result};
use crate::gateway::concurrency::MAX_LIVE_LEASES;
use crate::gateway::lease_id::LeaseId;
use crate::gateway::slot_streams::SlotStreams;
use crate::gateway::timeline::Micros;

/// `leases`: the bucket's lease ids in the order its record lists them.
/// Freed slots are written in time order, each as its distance from the
/// one before.
pub(super) fn write_streams(w: &mut Writer, s: &SlotStreams, leases: &[LeaseId]) {
    let mut free = s.free_ready.clone();
    crate::sort::heap_sort_by(&mut free, |a, b| a < b);
    w.uint(free.len() as u64);
    let mut prev = 0;
    for at in free {
        w.uint(at - prev);
        prev = at;
    }
    write_by_lease(w, &s.ready_after, leases);
    write_by_lease(w, &s.chains, leases);
    w.uint(s.waiters_until);
    w.opt_uint(s.return_delay_us);
    w.uint(u64::from(s.paced));
    w.uint(s.kept_ended_at);
    w.uint(s.streams_from);
}

/// The times of the listed leases, by place: an entry for a lease the
/// bucket does not hold is no slot's and is left out.
fn write_by_lease(w: &mut Writer, times: &HashMap<LeaseId, Micros>, leases: &[LeaseId]) {
    let entries: Vec<(usize, Micros)> = leases
        .iter()
        .enumerate()
        .filter_map(|(place, id)| times.get(id).map(|&at| (place, at)))
        .collect();
    w.uint(entries.len() as u64);
    for (place, at) in entries {
        w.uint(place as u64);
        w.uint(at);
    }
}

/// Before version 6 every bucket's kept leases were streamed.
pub(super) fn read_streams(r: &mut Reader, leases: &[LeaseId], version: u8) -> Result<SlotStreams> {
    let freed = r.len()?;
    if freed > MAX_LIVE_LEASES {
        return Err(Error::invalid(format!(
            "snapshot lists {freed} freed slots for a bucket, which keeps at most {MAX_LIVE_LEASES}"
        )));
    }
    let mut free_ready = Vec::with_capacity(freed as usize);
    let mut at: Micros = 0;
    for _ in 0..freed {
        at = at.checked_add(r.uint()?).ok_or_else(|| {
            Error::invalid(format!(
                "snapshot has a slot ready time past any clock at byte {}",
                r.at
            ))
        })?;
        free_ready.push(at);
    }
    let mut streams = SlotStreams {
        free_ready,
        ready_after: read_by_lease(r, leases)?,
        chains: read_by_lease(r, leases)?,
        waiters_until: r.uint()?,
        return_delay_us: r.opt_uint()?,
        ..SlotStreams::default()
    };
    if version >= 6 {
        streams.paced = match r.uint()? {
            0 => false,
            1 => true,
            other => {
                return Err(Error::invalid(format!(
                    "snapshot names kept-lease kind {other} at byte {}; known are 0 and 1",
                    r.at
                )))
            }
        };
        streams.kept_ended_at = r.uint()?;
        streams.streams_from = r.uint()?;
    }
    Ok(streams)
}

/// Places are written rising, each naming one of the bucket's leases.
fn read_by_lease(r: &mut Reader, leases: &[LeaseId]) -> Result<HashMap<LeaseId, Micros>> {
    let mut times = HashMap::new();
    let mut next = 0;
    for _ in 0..r.len()? {
        let place = r.uint()?;
        let id = usize::try_from(place)
            .ok()
            .filter(|&p| p >= next)
            .and_then(|p| leases.get(p));
        let Some(&id) = id else {
            return Err(Error::invalid(format!(
                "snapshot names lease {place} of a bucket that lists {} leases, \
                 out of order or past its end, at byte {}",
                leases.len(),
                r.at
            )));
        };
        next = place as usize + 1;
        times.insert(id, r.uint()?);
    }
    Ok(times)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::slot_claims::SlotClaims;

    fn streams() -> SlotStreams {
        SlotStreams {
            free_ready: vec![900, 300, 600],
            ready_after: HashMap::from([(11, 1_000)]),
            chains: HashMap::from([(22, 50), (99, 70)]),
            waiters_until: 2_000,
            claims: SlotClaims::default(),
            return_delay_us: Some(40),
            paced: true,
            kept_ended_at: 1_500,
            streams_from: 1_800,
            asked_paced: None,
            spacing_floor_us: 0,
        }
    }

    fn read(bytes: &[u8], leases: &[LeaseId]) -> Result<SlotStreams> {
        let mut r = Reader { bytes, at: 0 };
        let s = read_streams(&mut r, leases, super::super::FORMAT_VERSION)?;
        assert_eq!(r.at, bytes.len());
        Ok(s)
    }

    #[test]
    fn streams_read_back_as_written_but_for_leases_the_bucket_does_not_hold() {
        let mut w = Writer(Vec::new());
        write_streams(&mut w, &streams(), &[11, 22]);
        let back = read(&w.0, &[11, 22]).unwrap();
        let mut expected = streams();
        expected.free_ready.sort_unstable();
        expected.chains.remove(&99);
        assert_eq!(back, expected);
    }

    #[test]
    fn a_record_naming_a_lease_past_the_buckets_list_is_refused() {
        let mut w = Writer(Vec::new());
        write_streams(&mut w, &streams(), &[11, 22]);
        let e = read(&w.0, &[11]).unwrap_err();
        assert!(
            e.message
                .contains("names lease 1 of a bucket that lists 1 leases"),
            "{}",
            e.message
        );
    }
}
