//! The counts an adaptive cut reads, in a snapshot: per time slot, the
//! permits granted and the 429s reported.

use super::codec::{Reader, Writer};
use crate::error::Result;
use crate::gateway::throughput::Throughput;

pub(super) fn write_throughput(w: &mut Writer, t: &Throughput) {
    for slots in [&t.granted, &t.refused] {
        w.uint(slots.len() as u64);
        for &(slot, n) in slots {
            w.uint(slot);
            w.uint(u64::from(n));
        }
    }
}

pub(super) fn read_throughput(r: &mut Reader) -> Result<Throughput> {
    Ok(Throughput {
        granted: read_slots(r)?,
        refused: read_slots(r)?,
    })
}

fn read_slots(r: &mut Reader) -> Result<Vec<(u64, u32)>> {
    let mut slots = Vec::new();
    for _ in 0..r.len()? {
        let slot = r.uint()?;
        let n = r.small()?;
        slots.push((slot, n));
    }
    Ok(slots)
}
