//! The rate endpoints: acquire scheduled permits, release concurrency leases,
//! report a provider's backpressure.

use crate::json_value::Value;

use super::limits;
use super::quota::QuotaReport;
use super::rule::{rules_from, PacingRule};
use crate::error::{Error, Result};
use crate::json::{as_object, millis_of, quote, read_items, Decode, Fields};

/// `POST /v1/rate/acquire`: ask for up to `requested` permits of a bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct AcquireRequest {
    pub bucket_id: String,
    pub rate_scope_token: Option<String>,
    pub rules: Vec<PacingRule>,
    pub requested: u64,
    /// Confirmed provider successes since this client's previous acquire.
    pub observed_successes: u64,
    pub scheduler_schema: Option<String>,
    /// Asks that no granted time be earlier than this far past the
    /// gateway's now: the answer's trip back to the client, so the first
    /// permit is still good when it arrives.
    pub dispatch_lead_ms: Option<u64>,
    /// Times this client was granted earlier and will not use: the gateway
    /// hands them to the next acquirer before extending the timeline. An
    /// older gateway ignores them (the times are then simply not used).
    pub returned_at_ms: Vec<u64>,
    /// The client's callers drained its last block and came straight back:
    /// it will want another block as soon as this one is drawn, so the
    /// gateway books its next turn with this grant (and says when, in
    /// `waitMs`) instead of letting it come back to be refused.
    pub book_next_turn: bool,
    /// How many of this client's callers wait for a permit: while other
    /// clients wait for their turns, the gateway sizes this client's turn
    /// by its callers (a round of a central queue), not by the horizon. An
    /// older gateway ignores it; without it (an older client) turns are
    /// sized by `requested`.
    pub waiting_callers: Option<u64>,
    /// Leases this client is done with, riding on the acquire instead of a
    /// release of their own; the gateway ends them before it grants. A
    /// client sends them only to a gateway that announced
    /// `dispatchToleranceMs` (an older one would ignore them, leaving the
    /// leases to their TTL).
    pub released_lease_ids: Vec<String>,
    /// What the provider last said about its quota.
    pub quota: Option<QuotaReport>,
    /// Asks for concurrency slots to keep: the client pools its leases and
    /// hands a freed one to its next caller, spacing the calls on each
    /// lease as the answer's `leaseSpacingMs` says, and wants this many
    /// new ones. A gateway that cannot stream the bucket's slots (or an
    /// older one) grants one lease per time as for any acquire.
    pub slots_wanted: Option<u64>,
    /// Leases this client holds (pooled or in a call) and would keep: the
    /// gateway renews those it still counts, for a full TTL from now, and
    /// names them in `keptLeaseIds`.
    pub held_lease_ids: Vec<String>,
    /// Turn tickets for concurrency slots: the ticket a refusal gave this
    /// client, shown when it comes back at its turn, or `0` from a client
    /// that takes tickets and holds none. Slots freed meanwhile are held for
    /// tickets in the order given. Without it (an older client) refusals
    /// come with no ticket; an older gateway ignores it.
    pub turn_ticket: Option<u64>,
    /// With `slotsWanted`: the claim the gateway gave this client, or `0`
    /// from a client that takes claims and has none yet. The gateway
    /// counts each claim's slots and wants, to split the slots fairly
    /// among clients that keep several. An older client sends none and is
    /// treated as before: it waits only while it holds no slot.
    pub slot_claim: Option<u64>,
    /// With `slotsWanted`: the kind of slots the client keeps. `paced`
    /// (its calls are short): slots kept as a semaphore, each call also
    /// taking a permit of this grant's (`requested`) from the timeline.
    /// `streamed` (the default, and all an older client knows): slots
    /// streamed at a spacing. `either` (it has seen no call yet): whichever
    /// the bucket hands out now. The answer says which it got:
    /// `leaseSpacingMs: 0` for paced slots. An older gateway ignores it and
    /// streams, or grants one lease per time.
    pub slot_kind: SlotKind,
}

/// The kind of kept leases a client asks for (see
/// [`AcquireRequest::slot_kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SlotKind {
    #[default]
    Streamed,
    Paced,
    Either,
}

impl SlotKind {
    pub(super) fn is_streamed(&self) -> bool {
        *self == SlotKind::Streamed
    }

    fn from_fields(f: &Fields) -> Result<Self> {
        Ok(match f.opt_string("slotKind", 16)? {
            None | Some("streamed") => SlotKind::Streamed,
            Some("paced") => SlotKind::Paced,
            Some("either") => SlotKind::Either,
            Some(other) => {
                return Err(Error::invalid(format!(
                    "slotKind must be \"streamed\", \"paced\" or \"either\", got {}",
                    crate::json::quoted(other)
                )))
            }
        })
    }
}

impl Decode for AcquireRequest {
    fn from_value(value: &Value) -> Result<Self> {
        let f = as_object(value, "")?;
        Ok(AcquireRequest {
            bucket_id: f.string("bucketId", limits::MAX_ID_BYTES)?.to_owned(),
            rate_scope_token: scope_token(&f)?,
            rules: rules_from(&f, "rules")?,
            requested: f.integer("requested", 1, limits::MAX_REQUESTED)?,
            observed_successes: f
                .opt_integer("observedSuccesses", 0, limits::MAX_OBSERVED_SUCCESSES)?
                .unwrap_or(0),
            scheduler_schema: schema(&f)?,
            dispatch_lead_ms: f.opt_integer("dispatchLeadMs", 0, limits::MAX_DISPATCH_LEAD_MS)?,
            returned_at_ms: returned_times(&f)?,
            book_next_turn: f.opt_bool("bookNextTurn")?.unwrap_or(false),
            waiting_callers: f.opt_integer("waitingCallers", 0, limits::MAX_REQUESTED)?,
            released_lease_ids: match f.opt_array("releasedLeaseIds", limits::MAX_RELEASE_BATCH)? {
                Some(items) => lease_id_list(&f, "releasedLeaseIds", items)?,
                None => Vec::new(),
            },
            quota: QuotaReport::from_fields(&f, "quota")?,
            slots_wanted: f.opt_integer("slotsWanted", 0, limits::MAX_REQUESTED)?,
            held_lease_ids: match f.opt_array("heldLeaseIds", limits::MAX_RELEASE_BATCH)? {
                Some(items) => lease_id_list(&f, "heldLeaseIds", items)?,
                None => Vec::new(),
            },
            turn_ticket: f.opt_integer("turnTicket", 0, limits::MAX_TURN_TICKET)?,
            slot_claim: f.opt_integer("slotClaim", 0, limits::MAX_TURN_TICKET)?,
            slot_kind: SlotKind::from_fields(&f)?,
        })
    }
}

/// While callers elsewhere wait for a concurrency slot, how long one lease
/// may be kept through renewals before it goes back when its call ends.
/// Clients and gateways both hold to it: a client that knows others wait
/// gives a lease back at its chain's end without asking first.
pub const LEASE_CHAIN_MS: u64 = 3_000;

/// The gateway's answer to an acquire. `granted == 0` is a refusal with the
/// time to wait, not an error.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AcquireResponse {
    pub granted: u64,
    pub wait_ms: u64,
    /// One globally reserved dispatch time per granted permit, earliest
    /// first. An older gateway sends none; its permits are usable at once.
    pub scheduled_at_ms: Option<Vec<u64>>,
    /// One lease per permit when a rule bounds concurrency.
    pub lease_ids: Option<Vec<String>>,
    pub effective_requests_per_second: Option<f64>,
    pub cooldown_until_ms: Option<u64>,
    /// The gateway's clock when it answered, so a client can correct its own
    /// skew before sleeping until a scheduled time.
    pub server_now_ms: Option<u64>,
    /// How late after its scheduled time a permit may still be dispatched:
    /// the slack the gateway accounted for in every window. Past it a
    /// permit is dead. An older gateway sends none.
    pub dispatch_tolerance_ms: Option<u64>,
    /// Answer to `slotsWanted`: the held leases renewed. One held but not
    /// named here must not start another call; it goes back when its call
    /// ends. An older gateway sends none, and its leases come one per time.
    pub kept_lease_ids: Option<Vec<String>>,
    /// With `keptLeaseIds`: the least time between two calls started on
    /// one lease. Each new lease's first call may start at its time in
    /// `scheduledAtMs`; a lease goes back no sooner than this long after
    /// its last call started. Spacing every slot so keeps each rule's
    /// windows within their limits, whoever holds the slots.
    ///
    /// `0` (to a client that sent `pacedSlots`): the slots are paced, not
    /// streamed. `keptLeaseIds` then lists every lease the client holds,
    /// renewed or new, and `scheduledAtMs` are permits without leases; each
    /// call takes one of them and a kept lease.
    pub lease_spacing_ms: Option<u64>,
    /// How long a lease lives from its grant or renewal unless released.
    pub lease_ttl_ms: Option<u64>,
    /// Callers elsewhere wait for a concurrency slot: a lease this client
    /// is done with should go back now rather than wait for a ride.
    pub slot_waiters: bool,
    /// To a client that showed `slotClaim`: the claim to show next time.
    pub slot_claim: Option<u64>,
    /// With `slotWaiters`, to a client that showed `slotClaim`: its fair
    /// share of the slots, the most it asks to hold while others wait.
    pub slot_share: Option<u64>,
    /// With `slotShare`: how many it keeps through the ends of its chains
    /// (one less than the share when the slots do not split evenly, so
    /// that the odd ones move round the fleet). It gives back chains that
    /// ran their length down to this many. Without it (an older gateway)
    /// a client gives back every chain that ran its length.
    pub slot_keep: Option<u64>,
    /// With a refusal for want of a slot, to a client that sent
    /// `turnTicket`: its place in line, to show when it comes back after
    /// `waitMs`.
    pub turn_ticket: Option<u64>,
}

impl Decode for AcquireResponse {
    fn from_value(value: &Value) -> Result<Self> {
        let mut r = AcquireResponse::default();
        r.read(value)?;
        Ok(r)
    }
}

impl AcquireResponse {
    /// Reads the fields into `self`, in the order their errors are
    /// reported. Into a value the caller owns, not into locals: a field's
    /// error then returns at once, where with the lists read so far in
    /// locals each field's `?` had its own copy of their drops.
    fn read(&mut self, value: &Value) -> Result<()> {
        let f = as_object(value, "")?;
        let granted = f.integer("granted", 0, limits::MAX_REQUESTED)?;
        self.granted = granted;
        self.scheduled_at_ms = f
            .opt_array("scheduledAtMs", limits::MAX_REQUESTED as usize)?
            .map(|items| millis_list(&f, "scheduledAtMs", items))
            .transpose()?;
        if let Some(times) = &self.scheduled_at_ms {
            if times.len() as u64 != granted {
                return Err(Error::invalid(format!(
                    "scheduledAtMs must hold one time per granted permit: granted {granted}, got {} times",
                    times.len()
                )));
            }
        }
        self.lease_ids = f
            .opt_array("leaseIds", limits::MAX_REQUESTED as usize)?
            .map(|items| lease_id_list(&f, "leaseIds", items))
            .transpose()?;
        self.kept_lease_ids = f
            .opt_array("keptLeaseIds", limits::MAX_RELEASE_BATCH)?
            .map(|items| lease_id_list(&f, "keptLeaseIds", items))
            .transpose()?;
        if let Some(ids) = &self.lease_ids {
            if !ids.is_empty() && ids.len() as u64 != granted {
                return Err(Error::invalid(format!(
                    "leaseIds must hold one lease per granted permit: granted {granted}, got {} leases",
                    ids.len()
                )));
            }
        }
        self.wait_ms = f.millis("waitMs")?;
        self.effective_requests_per_second =
            f.opt_positive_number("effectiveRequestsPerSecond", f64::MAX)?;
        self.cooldown_until_ms = f.opt_millis("cooldownUntilMs")?;
        self.server_now_ms = f.opt_millis("serverNowMs")?;
        self.dispatch_tolerance_ms =
            f.opt_integer("dispatchToleranceMs", 0, limits::MAX_DISPATCH_TOLERANCE_MS)?;
        self.lease_spacing_ms = f.opt_integer("leaseSpacingMs", 0, limits::MAX_WINDOW_MS)?;
        self.lease_ttl_ms = f.opt_millis("leaseTtlMs")?;
        self.slot_waiters = f.opt_bool("slotWaiters")?.unwrap_or(false);
        self.slot_claim = f.opt_integer("slotClaim", 1, limits::MAX_TURN_TICKET)?;
        self.slot_share = f.opt_integer("slotShare", 0, limits::MAX_RELEASE_BATCH as u64)?;
        self.slot_keep = f.opt_integer("slotKeep", 0, limits::MAX_RELEASE_BATCH as u64)?;
        self.turn_ticket = f.opt_integer("turnTicket", 1, limits::MAX_TURN_TICKET)?;
        Ok(())
    }
}

/// `POST /v1/rate/release`: hand concurrency leases back.
#[derive(Debug, Clone, PartialEq)]
pub struct ReleaseRequest {
    pub bucket_id: String,
    pub rate_scope_token: Option<String>,
    pub rules: Vec<PacingRule>,
    pub lease_ids: Vec<String>,
    pub scheduler_schema: Option<String>,
    /// Unused granted times going back alone, when no acquire would carry
    /// them in time (see [`AcquireRequest::returned_at_ms`]).
    pub returned_at_ms: Vec<u64>,
}

impl Decode for ReleaseRequest {
    fn from_value(value: &Value) -> Result<Self> {
        let f = as_object(value, "")?;
        let lease_ids = f.array("leaseIds", 0, limits::MAX_RELEASE_BATCH)?;
        Ok(ReleaseRequest {
            bucket_id: f.string("bucketId", limits::MAX_ID_BYTES)?.to_owned(),
            rate_scope_token: scope_token(&f)?,
            rules: rules_from(&f, "rules")?,
            lease_ids: lease_id_list(&f, "leaseIds", lease_ids)?,
            scheduler_schema: schema(&f)?,
            returned_at_ms: returned_times(&f)?,
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReleaseResponse {
    /// How many of the ids named a live lease (unknown and expired ids are
    /// a no-op, not an error).
    pub released: u64,
}

impl Decode for ReleaseResponse {
    fn from_value(value: &Value) -> Result<Self> {
        let f = as_object(value, "")?;
        Ok(ReleaseResponse {
            released: f.integer("released", 0, u64::MAX)?,
        })
    }
}

/// `POST /v1/rate/penalize`: the provider answered 429 with this Retry-After.
#[derive(Debug, Clone, PartialEq)]
pub struct PenalizeRequest {
    pub bucket_id: String,
    pub rate_scope_token: Option<String>,
    pub cooldown_ms: u64,
    pub scheduler_schema: Option<String>,
    /// What the 429's headers said about the quota.
    pub quota: Option<QuotaReport>,
    /// When the refused call went out (the gateway's clock), if the client
    /// knows: the second before it is what the provider accepted.
    pub sent_at_ms: Option<u64>,
}

impl Decode for PenalizeRequest {
    fn from_value(value: &Value) -> Result<Self> {
        let f = as_object(value, "")?;
        Ok(PenalizeRequest {
            bucket_id: f.string("bucketId", limits::MAX_ID_BYTES)?.to_owned(),
            rate_scope_token: scope_token(&f)?,
            cooldown_ms: f.integer("cooldownMs", 1, limits::MAX_COOLDOWN_MS)?,
            scheduler_schema: schema(&f)?,
            quota: QuotaReport::from_fields(&f, "quota")?,
            sent_at_ms: f.opt_millis("sentAtMs")?,
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PenalizeResponse {
    /// Absent when the gateway has not yet seen the bucket's rules.
    pub effective_requests_per_second: Option<f64>,
    pub cooldown_until_ms: u64,
}

impl Decode for PenalizeResponse {
    fn from_value(value: &Value) -> Result<Self> {
        let f = as_object(value, "")?;
        Ok(PenalizeResponse {
            effective_requests_per_second: f
                .opt_positive_number("effectiveRequestsPerSecond", f64::MAX)?,
            cooldown_until_ms: f.millis("cooldownUntilMs")?,
        })
    }
}

fn scope_token(f: &Fields<'_>) -> Result<Option<String>> {
    Ok(f.opt_string("rateScopeToken", limits::MAX_TOKEN_BYTES)?
        .map(|t| t.trim().to_owned()))
}

fn schema(f: &Fields<'_>) -> Result<Option<String>> {
    Ok(f.opt_string("schedulerSchema", limits::MAX_ID_BYTES)?
        .map(str::to_owned))
}

fn returned_times(f: &Fields<'_>) -> Result<Vec<u64>> {
    f.opt_array("returnedAtMs", limits::MAX_REQUESTED as usize)?
        .map_or(Ok(Vec::new()), |items| {
            millis_list(f, "returnedAtMs", items)
        })
}

fn millis_list(f: &Fields<'_>, field: &str, items: &[Value]) -> Result<Vec<u64>> {
    read_items(items, |i, v| {
        millis_of(v).ok_or_else(|| {
            Error::invalid(format!(
                "{} must be a finite number of milliseconds >= 0, got {}",
                f.item_path(field, i),
                quote(v)
            ))
        })
    })
}

fn lease_id_list(f: &Fields<'_>, field: &str, items: &[Value]) -> Result<Vec<String>> {
    read_items(items, |i, v| match v {
        Value::String(s) if !s.trim().is_empty() && s.len() <= limits::MAX_ID_BYTES => {
            Ok(s.clone())
        }
        other => Err(Error::invalid(format!(
            "{} must be a non-empty lease id string of at most {} bytes, got {}",
            f.item_path(field, i),
            limits::MAX_ID_BYTES,
            quote(other)
        ))),
    })
}
