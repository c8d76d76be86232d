//! How long each tool's calls take, for sizing how many to keep in flight:
//! what its calls were seen to take, else the host's hint for it, else the
//! policy's typical call.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::time::Millis;

/// Weight of the newest observation in the moving average: about the last
/// ten calls count, so one slow call does not halve a tool's parallelism.
const NEWEST_WEIGHT: f64 = 0.2;
/// Tools whose latency is remembered. A run calls a catalogue of tools, not
/// an unbounded stream of them; past this, new tools use their hint.
const MAX_OBSERVED_TOOLS: usize = 4_096;

pub(crate) struct ToolLatency {
    hints: HashMap<String, Millis>,
    observed: RefCell<HashMap<String, f64>>,
}

impl ToolLatency {
    pub fn new(hints: HashMap<String, Millis>) -> Self {
        ToolLatency {
            hints,
            observed: RefCell::new(HashMap::new()),
        }
    }

    pub fn observe(&self, tool_id: &str, latency_ms: Millis) {
        let sample = latency_ms as f64;
        let mut observed = self.observed.borrow_mut();
        if let Some(average) = observed.get_mut(tool_id) {
            *average += NEWEST_WEIGHT * (sample - *average);
        } else if observed.len() < MAX_OBSERVED_TOOLS {
            observed.insert(tool_id.to_owned(), sample);
        }
    }

    /// The tool's typical call in milliseconds, if anything is known of it.
    pub fn typical_ms(&self, tool_id: &str) -> Option<f64> {
        let observed = self.observed.borrow().get(tool_id).copied();
        observed.or_else(|| self.hints.get(tool_id).map(|&ms| ms as f64))
    }
}
