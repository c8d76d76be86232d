//! An adaptive rate's record in a snapshot: its cap, the curve it climbs,
//! its pause, its counts and the probe's leash.

use super::codec::{Reader, Writer};
use crate::error::Result;
use crate::gateway::adaptive::{AdaptiveRate, Curve, Pause};
use crate::gateway::leash::Leash;

pub(super) fn write_adaptive(w: &mut Writer, a: &AdaptiveRate) {
    w.f64(a.cap);
    w.opt_f64(a.stated);
    w.opt(a.curve.as_ref(), |w, c| {
        w.f64(c.w_max);
        w.f64(c.k);
        w.f64(c.c);
        w.uint(c.elapsed_us);
    });
    w.opt_f64(a.memory);
    w.uint(a.trust_us);
    w.uint(a.credited_until);
    w.opt(a.pause.as_ref(), |w, p| {
        w.uint(p.probe_every_us);
        w.opt_uint(p.probe_at);
    });
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

pub(super) fn read_adaptive(r: &mut Reader, version: u8) -> Result<AdaptiveRate> {
    let mut a = AdaptiveRate {
        cap: r.f64()?,
        stated: r.opt_f64()?,
        stated_at: 0,
        curve: r.opt(|r| {
            Ok(Curve {
                w_max: r.f64()?,
                k: r.f64()?,
                c: r.f64()?,
                elapsed_us: r.uint()?,
            })
        })?,
        memory: r.opt_f64()?,
        trust_us: r.uint()?,
        credited_until: r.uint()?,
        pause: r.opt(|r| {
            Ok(Pause {
                probe_every_us: r.uint()?,
                probe_at: r.opt_uint()?,
            })
        })?,
        resumed: r.byte()? != 0,
        granted: r.f64()?,
        refused: r.f64()?,
        counted_at: r.uint()?,
        event_until: r.uint()?,
        leash: Leash::default(),
        plateau_guessed: false,
    };
    // Before version 3 the leash was not kept: it is slack until the next
    // cut sets it.
    if version >= 3 {
        a.leash.accepted = r.f64()?;
        if let Some(at) = r.opt_uint()? {
            a.leash.trial = Some((at, r.f64()?));
        }
        a.leash.steps = r.small()?;
        a.leash.refused = r.f64()?;
    }
    Ok(a)
}

/// Version 1's rate, a curve over successes: its cap, plateau, successes to
/// the plateau, steepness and successes so far. It is read as the rate it
/// stood at, held there (never above what version 1 allowed).
pub(super) fn read_adaptive_v1(r: &mut Reader) -> Result<AdaptiveRate> {
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
