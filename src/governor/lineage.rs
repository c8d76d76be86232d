//! Where a run sits in its family of plays, and the snapshot a child (or a
//! resumed run) starts from. Counters travel with the snapshot, so budgets
//! are the lineage's, not each run's.

use crate::json_value::Value;
use serde::ser::{Serialize, SerializeMap, Serializer};

use super::budget::Counters;
use crate::error::{Error, ErrorCode, Result};
use crate::json::{as_object, Decode};
use crate::json_write::{Encode, ObjectWriter};
use crate::protocol::{limits, BudgetCounts, BudgetKind, CounterMap};

/// A run's governance state, for handing to a child run or resuming this
/// one elsewhere, maybe in another isolate. It travels as camelCase JSON
/// (`rootRunId`, `toolCallCount`, …), the shape play runners already pass
/// between runs, so a child started by one runtime can resume in another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GovernanceSnapshot {
    pub root_run_id: String,
    pub current_run_id: String,
    pub current_play_id: Option<String>,
    /// Play names from the root down to and including this run's play.
    pub ancestry_play_ids: Vec<String>,
    pub depth: u64,
    /// What the lineage has used of each budget (`toolCallCount`, …).
    pub counts: BudgetCounts,
    /// Children started so far, by the run id of their parent.
    pub parent_child_calls: CounterMap,
}

/// Read by hand (see `PolicyOverrides`): every counter may be absent
/// (0), none may be negative or fractional.
impl Decode for GovernanceSnapshot {
    fn from_value(value: &Value) -> Result<Self> {
        let f = as_object(value, "resume")?;
        let count = |k: &str| -> Result<u64> { Ok(f.opt_integer(k, 0, u64::MAX)?.unwrap_or(0)) };
        Ok(GovernanceSnapshot {
            root_run_id: f.string("rootRunId", limits::MAX_ID_BYTES)?.to_owned(),
            current_run_id: f.string("currentRunId", limits::MAX_ID_BYTES)?.to_owned(),
            current_play_id: f
                .opt_string("currentPlayId", limits::MAX_ID_BYTES)?
                .map(str::to_owned),
            ancestry_play_ids: f.opt_strings("ancestryPlayIds", 1_000)?,
            depth: count("depth")?,
            counts: {
                let mut counts = BudgetCounts::default();
                for kind in BudgetKind::ALL {
                    counts[kind] = count(kind.count_name())?;
                }
                counts
            },
            parent_child_calls: f.opt_counters("parentChildCalls")?,
        })
    }
}

impl Serialize for GovernanceSnapshot {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("rootRunId", &self.root_run_id)?;
        map.serialize_entry("currentRunId", &self.current_run_id)?;
        if let Some(play) = &self.current_play_id {
            map.serialize_entry("currentPlayId", play)?;
        }
        map.serialize_entry("ancestryPlayIds", &self.ancestry_play_ids)?;
        map.serialize_entry("depth", &self.depth)?;
        self.counts
            .serialize_entries(&mut map, BudgetKind::count_name)?;
        map.serialize_entry("parentChildCalls", &self.parent_child_calls)?;
        map.end()
    }
}

/// The same text as the `Serialize` impl's, written by hand: the wasm
/// bindings hand snapshots to JS this way, without serde's serializer.
impl Encode for GovernanceSnapshot {
    fn write_json(&self, out: &mut String) {
        let mut object = ObjectWriter::new(out);
        object
            .field("rootRunId", &self.root_run_id)
            .field("currentRunId", &self.current_run_id)
            .opt("currentPlayId", &self.current_play_id)
            .field("ancestryPlayIds", &self.ancestry_play_ids)
            .field("depth", &self.depth);
        for kind in BudgetKind::ALL {
            object.field(kind.count_name(), &self.counts[kind]);
        }
        object
            .field("parentChildCalls", &self.parent_child_calls)
            .end();
    }
}

impl GovernanceSnapshot {
    /// A root run before it has done anything. Its own play, when known,
    /// opens the ancestry so that a child calling the root is a cycle too.
    pub fn root(root_run_id: &str, play_id: Option<&str>) -> Self {
        GovernanceSnapshot {
            root_run_id: root_run_id.to_owned(),
            current_run_id: root_run_id.to_owned(),
            current_play_id: play_id.map(str::to_owned),
            ancestry_play_ids: play_id.map_or_else(Vec::new, |p| vec![p.to_owned()]),
            depth: 0,
            counts: BudgetCounts::default(),
            parent_child_calls: CounterMap::new(),
        }
    }

    pub(crate) fn split(self) -> (Lineage, Counters) {
        (
            Lineage {
                current_run_id: self.current_run_id,
                current_play_id: self.current_play_id,
                ancestry: self.ancestry_play_ids,
                depth: self.depth,
            },
            Counters {
                used: self.counts,
                child_calls: self.parent_child_calls,
            },
        )
    }

    pub(crate) fn join(root_run_id: &str, lineage: &Lineage, counters: &Counters) -> Self {
        GovernanceSnapshot {
            root_run_id: root_run_id.to_owned(),
            current_run_id: lineage.current_run_id.clone(),
            current_play_id: lineage.current_play_id.clone(),
            ancestry_play_ids: lineage.ancestry.clone(),
            depth: lineage.depth,
            counts: counters.used,
            parent_child_calls: counters.child_calls.clone(),
        }
    }
}

/// One run's place in the lineage. It never changes: forking makes a new
/// one for the child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lineage {
    pub current_run_id: String,
    pub current_play_id: Option<String>,
    pub ancestry: Vec<String>,
    pub depth: u64,
}

impl Lineage {
    /// The child's place, if the play may be called from here: not one of
    /// its own ancestors, and not past the depth limit.
    pub fn child(&self, play: &str, run_id: &str, max_depth: u64) -> Result<Lineage> {
        if self.ancestry.iter().any(|p| p == play) {
            let mut chain = Vec::with_capacity(self.ancestry.len() + 1);
            for p in &self.ancestry {
                chain.push(p.as_str());
            }
            chain.push(play);
            return Err(Error::new(
                ErrorCode::CycleDetected,
                format!(
                    "play {play} would call itself: {}",
                    crate::json::joined(&chain, " -> ")
                ),
            ));
        }
        let depth = self.depth + 1;
        if depth > max_depth {
            return Err(Error::budget_exceeded("depth", depth, max_depth));
        }
        let mut ancestry = self.ancestry.clone();
        ancestry.push(play.to_owned());
        Ok(Lineage {
            current_run_id: run_id.to_owned(),
            current_play_id: Some(play.to_owned()),
            ancestry,
            depth,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_write::to_text;

    /// JS receives the hand-written text; a Rust caller serialising with
    /// serde gets the same.
    #[test]
    fn a_snapshot_is_written_as_serde_writes_it() {
        let mut snapshot = GovernanceSnapshot::root("root \"1\"", None);
        assert_eq!(
            to_text(&snapshot),
            serde_json::to_string(&snapshot).unwrap()
        );
        snapshot.current_play_id = Some("play/ü".to_owned());
        snapshot.ancestry_play_ids = vec!["a".to_owned(), "b\n".to_owned()];
        snapshot.depth = 2;
        for (i, kind) in BudgetKind::ALL.into_iter().enumerate() {
            snapshot.counts[kind] = 10 * i as u64 + u64::MAX / 2;
        }
        snapshot
            .parent_child_calls
            .insert("root \"1\"".to_owned(), 3);
        snapshot.parent_child_calls.insert("child".to_owned(), 1);
        assert_eq!(
            to_text(&snapshot),
            serde_json::to_string(&snapshot).unwrap()
        );
    }
}
