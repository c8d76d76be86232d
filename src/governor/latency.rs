//! How long each tool's calls take, for sizing how many to keep in flight:
//! what its calls were seen to take, else the host's hint for it, else the
//! policy's typical call.

use crate::cell::RefCell;
use crate::sorted_map::SortedMap;

use crate::json_value::Value;

use crate::error::{Error, Result};
use crate::json::{millis_of, quote, Decode};
use crate::time::Millis;

/// The newest observation moves the average by this fraction of the gap
/// (1/5): about the last ten calls count, so one slow call does not halve
/// a tool's parallelism.
const NEWEST_SHARE: i64 = 5;
/// Tools whose latency is remembered. A run calls a catalogue of tools, not
/// an unbounded stream of them; past this, new tools use their hint.
const MAX_OBSERVED_TOOLS: usize = 4_096;

/// Whole milliseconds throughout: a millisecond is finer than any call's
/// jitter, and one map type serves hints and observations.
pub(crate) struct ToolLatency {
    hints: SortedMap<Millis>,
    observed: RefCell<SortedMap<Millis>>,
}

impl ToolLatency {
    pub fn new(hints: SortedMap<Millis>) -> Self {
        ToolLatency {
            hints,
            observed: RefCell::new(SortedMap::new()),
        }
    }

    pub fn observe(&self, tool_id: &str, latency_ms: Millis) {
        let mut observed = self.observed.borrow_mut();
        if let Some(average) = observed.get_mut(tool_id) {
            let gap = latency_ms as i64 - *average as i64;
            *average = (*average as i64 + gap / NEWEST_SHARE) as Millis;
        } else if observed.len() < MAX_OBSERVED_TOOLS {
            observed.insert(tool_id.to_owned(), latency_ms);
        }
    }

    /// The tool's typical call in milliseconds, if anything is known of it.
    pub fn typical_ms(&self, tool_id: &str) -> Option<Millis> {
        let observed = self.observed.borrow().get(tool_id).copied();
        observed.or_else(|| self.hints.get(tool_id).copied())
    }
}

/// Latency hints by tool id, as a host's options carry them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolLatencies(pub SortedMap<Millis>);

impl Decode for ToolLatencies {
    fn from_value(value: &Value) -> Result<Self> {
        let Value::Object(map) = value else {
            return Err(Error::invalid(
                "toolLatencyMs must be an object keyed by tool id",
            ));
        };
        let mut latencies = SortedMap::new();
        for (tool, v) in map.iter() {
            let Some(ms) = millis_of(v) else {
                return Err(Error::invalid(format!(
                    "toolLatencyMs.{tool} must be a finite number of milliseconds >= 0, got {}",
                    quote(v)
                )));
            };
            latencies.insert(tool.clone(), ms);
        }
        Ok(ToolLatencies(latencies))
    }
}
