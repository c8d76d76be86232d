//! Where a run sits in its family of plays, and the snapshot a child (or a
//! resumed run) starts from. Counters travel with the snapshot, so budgets
//! are the lineage's, not each run's.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::budget::Counters;
use crate::error::{Error, ErrorCode, Result};
use crate::json::as_object;
use crate::protocol::{limits, Message};

/// A run's governance state in the seeds' shape, for handing to a child
/// run or resuming this one elsewhere.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GovernanceSnapshot {
    pub root_run_id: String,
    pub current_run_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_play_id: Option<String>,
    /// Play names from the root down to and including this run's play.
    pub ancestry_play_ids: Vec<String>,
    pub depth: u64,
    pub play_call_count: u64,
    pub tool_call_count: u64,
    pub retry_count: u64,
    pub descendant_count: u64,
    pub waterfall_step_executions: u64,
    /// Children started so far, by the run id of their parent.
    pub parent_child_calls: BTreeMap<String, u64>,
}

/// Read by hand (see `PolicyOverrides`): every counter may be absent
/// (0), none may be negative or fractional.
impl Message for GovernanceSnapshot {
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
            play_call_count: count("playCallCount")?,
            tool_call_count: count("toolCallCount")?,
            retry_count: count("retryCount")?,
            descendant_count: count("descendantCount")?,
            waterfall_step_executions: count("waterfallStepExecutions")?,
            parent_child_calls: f.opt_counters("parentChildCalls")?,
        })
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
            ancestry_play_ids: play_id.map(str::to_owned).into_iter().collect(),
            depth: 0,
            play_call_count: 0,
            tool_call_count: 0,
            retry_count: 0,
            descendant_count: 0,
            waterfall_step_executions: 0,
            parent_child_calls: BTreeMap::new(),
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
                play_call: self.play_call_count,
                tool_call: self.tool_call_count,
                retry: self.retry_count,
                descendant: self.descendant_count,
                waterfall_step: self.waterfall_step_executions,
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
            play_call_count: counters.play_call,
            tool_call_count: counters.tool_call,
            retry_count: counters.retry,
            descendant_count: counters.descendant,
            waterfall_step_executions: counters.waterfall_step,
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
            let chain: Vec<&str> = self
                .ancestry
                .iter()
                .map(String::as_str)
                .chain([play])
                .collect();
            return Err(Error::new(
                ErrorCode::CycleDetected,
                format!("play {play} would call itself: {}", chain.join(" -> ")),
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
