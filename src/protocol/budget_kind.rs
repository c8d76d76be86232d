//! The budgets a run charges, by kind: each kind's counter key on the wire,
//! its names in the policy and the governance snapshot, and how far ahead a
//! client reserves it. Everything that counts per kind holds one
//! [`BudgetCounts`] indexed by kind rather than a field per budget.

use std::ops::{Index, IndexMut};

use serde::ser::{Serialize, SerializeMap};

/// The budgets a host may charge directly. The per-parent fan-out and the
/// depth limit are charged only by forking a child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BudgetKind {
    PlayCall,
    ToolCall,
    Retry,
    Descendant,
    WaterfallStep,
}

/// Per kind, in the order of [`BudgetKind::ALL`]: the wire key, the
/// policy's limit, the snapshot's count, and the reservation block.
const NAMES: [(&str, &str, &str, u64); 5] = [
    ("playCall", "maxPlayCallCount", "playCallCount", 16),
    ("toolCall", "maxToolCallCount", "toolCallCount", 256),
    ("retry", "maxRetryCount", "retryCount", 16),
    ("descendant", "maxDescendants", "descendantCount", 16),
    (
        "waterfallStep",
        "maxWaterfallStepExecutions",
        "waterfallStepExecutions",
        256,
    ),
];

impl BudgetKind {
    pub const ALL: [BudgetKind; 5] = [
        BudgetKind::PlayCall,
        BudgetKind::ToolCall,
        BudgetKind::Retry,
        BudgetKind::Descendant,
        BudgetKind::WaterfallStep,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// The counter's key on the wire and in error messages.
    pub fn key(self) -> &'static str {
        NAMES[self.index()].0
    }

    /// The kind whose wire key is `key`.
    pub fn from_key(key: &str) -> Option<BudgetKind> {
        BudgetKind::ALL.into_iter().find(|k| k.key() == key)
    }

    /// The policy's name for this kind's limit (`maxToolCallCount`).
    pub fn limit_name(self) -> &'static str {
        NAMES[self.index()].1
    }

    /// The governance snapshot's name for this kind's count
    /// (`toolCallCount`).
    pub fn count_name(self) -> &'static str {
        NAMES[self.index()].2
    }

    /// How many units one reservation at the gateway takes ahead. Tool
    /// calls and waterfall steps come by the hundred in a run, so a large
    /// block saves most round trips; plays and retries are rarer, and a
    /// smaller block strands less of the budget in one isolate.
    pub fn reservation_block(self) -> u64 {
        NAMES[self.index()].3
    }
}

/// One value per budget kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BudgetCounts<T = u64>([T; 5]);

impl<T> BudgetCounts<T> {
    /// Each kind's value from `f`.
    pub fn from_fn(mut f: impl FnMut(BudgetKind) -> T) -> Self {
        BudgetCounts(BudgetKind::ALL.map(&mut f))
    }

    /// Every kind with its value, in the order of [`BudgetKind::ALL`].
    pub fn iter(&self) -> impl Iterator<Item = (BudgetKind, &T)> {
        BudgetKind::ALL.into_iter().zip(&self.0)
    }

    /// Writes each kind's value into `map` under `name(kind)`.
    pub(crate) fn serialize_entries<M: SerializeMap>(
        &self,
        map: &mut M,
        name: fn(BudgetKind) -> &'static str,
    ) -> Result<(), M::Error>
    where
        T: Serialize,
    {
        self.iter()
            .try_for_each(|(kind, value)| map.serialize_entry(name(kind), value))
    }
}

impl<T> Index<BudgetKind> for BudgetCounts<T> {
    type Output = T;
    fn index(&self, kind: BudgetKind) -> &T {
        &self.0[kind.index()]
    }
}

impl<T> IndexMut<BudgetKind> for BudgetCounts<T> {
    fn index_mut(&mut self, kind: BudgetKind) -> &mut T {
        &mut self.0[kind.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_from_its_own_key_and_no_other() {
        for kind in BudgetKind::ALL {
            assert_eq!(BudgetKind::from_key(kind.key()), Some(kind));
        }
        assert_eq!(BudgetKind::from_key("childPerParent"), None);
        assert_eq!(BudgetKind::from_key("ToolCall"), None);
    }

    #[test]
    fn counts_are_indexed_by_kind() {
        let mut counts = BudgetCounts::default();
        counts[BudgetKind::Retry] += 2;
        assert_eq!(counts[BudgetKind::Retry], 2);
        assert_eq!(counts.iter().map(|(_, n)| n).sum::<u64>(), 2);
        let blocks = BudgetCounts::from_fn(BudgetKind::reservation_block);
        assert_eq!(blocks[BudgetKind::ToolCall], 256);
        assert_eq!(blocks[BudgetKind::Descendant], 16);
    }
}
