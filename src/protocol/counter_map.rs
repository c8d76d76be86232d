//! Named counters in key order: a charge's answer (`counters`) and a
//! snapshot's children per parent (`parentChildCalls`). They hold a few
//! keys each, so a `SortedMap` does what a `BTreeMap` would, without a
//! tree's code in the client module.

use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::error::Result;
use crate::json::Fields;
use crate::json_write::{Encode, ObjectWriter};
use crate::sorted_map::SortedMap;

/// Counters by name, kept sorted by name: written as a JSON object whose
/// keys come in that order, as a `BTreeMap`'s would.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CounterMap(SortedMap<u64>);

impl CounterMap {
    pub fn new() -> Self {
        CounterMap(SortedMap::new())
    }

    pub fn get(&self, key: &str) -> Option<&u64> {
        self.0.get(key)
    }

    /// Sets `key` to `count`, returning what it held before.
    pub fn insert(&mut self, key: String, count: u64) -> Option<u64> {
        self.0.insert(key, count)
    }

    /// Adds one to `key`'s count (from 0 if it has none).
    pub fn add_one(&mut self, key: &str) {
        *self.0.get_or_insert_with(key, || 0) += 1;
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.0.iter().map(|(k, n)| (k.as_str(), *n))
    }
}

impl Fields<'_> {
    /// An object of counters: every value an integer >= 0.
    pub fn opt_counters(&self, field: &str) -> Result<CounterMap> {
        let Some(object) = self.opt_object(field)? else {
            return Ok(Default::default());
        };
        let mut counters = CounterMap::new();
        for k in object.keys() {
            counters.insert(k.clone(), object.integer(k, 0, u64::MAX)?);
        }
        Ok(counters)
    }
}

/// `map["key"]`, as on a `BTreeMap`: panics when the key is absent.
impl std::ops::Index<&str> for CounterMap {
    type Output = u64;

    fn index(&self, key: &str) -> &u64 {
        self.get(key).expect("no counter of that name")
    }
}

impl Encode for CounterMap {
    fn write_json(&self, out: &mut String) {
        let mut object = ObjectWriter::new(out);
        for (key, count) in self.iter() {
            object.field(key, &count);
        }
        object.end();
    }
}

impl Serialize for CounterMap {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (key, count) in self.iter() {
            map.serialize_entry(key, &count)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Whatever order keys arrive in, the map answers and writes as a
    /// `BTreeMap` given the same inserts does.
    #[test]
    fn a_counter_map_keeps_and_writes_keys_as_a_btree_map_does() {
        let keys = ["m", "a", "z", "m", "b", "a", "", "ü", "Z", "a"];
        let mut map = CounterMap::new();
        let mut tree = BTreeMap::new();
        for (n, key) in keys.iter().enumerate() {
            let n = n as u64 * 7;
            assert_eq!(
                map.insert((*key).to_owned(), n),
                tree.insert((*key).to_owned(), n)
            );
        }
        map.add_one("b");
        *tree.entry("b".to_owned()).or_insert(0) += 1;
        map.add_one("new");
        *tree.entry("new".to_owned()).or_insert(0) += 1;
        for key in keys.iter().chain(&["new", "absent"]) {
            assert_eq!(map.get(key), tree.get(*key));
        }
        assert_eq!(map.iter().count(), tree.len());
        assert_eq!(map["new"], 1);
        assert_eq!(
            crate::json_write::to_text(&map),
            serde_json::to_string(&tree).unwrap()
        );
        assert_eq!(
            serde_json::to_string(&map).unwrap(),
            serde_json::to_string(&tree).unwrap()
        );
    }
}
