//! Values by name, found through their place in a list. The places are a
//! `SortedMap<u64>`, a type the client module has code for already (named
//! counters, the budget states' units, the governor's latencies), so a map
//! of this kind brings no lookup code of its own into the wasm, as a
//! `SortedMap<T>` per value type would.

use crate::sorted_map::SortedMap;

/// The place of an entry `retain` drops.
const GONE: u64 = u64::MAX;

#[derive(Debug, Clone)]
pub struct ByName<T> {
    place: SortedMap<u64>,
    /// Each value with its name (a removal moves the last one into the
    /// gap, whose place must then change).
    entries: Vec<(String, T)>,
}

impl<T> Default for ByName<T> {
    fn default() -> Self {
        ByName {
            place: SortedMap::new(),
            entries: Vec::new(),
        }
    }
}

impl<T> ByName<T> {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.place.contains_key(name)
    }

    pub fn get(&self, name: &str) -> Option<&T> {
        let i = *self.place.get(name)?;
        self.entries.get(i as usize).map(|(_, value)| value)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut T> {
        let i = *self.place.get(name)?;
        self.entries.get_mut(i as usize).map(|(_, value)| value)
    }

    /// Sets the value of `name`, returning the one it replaces.
    pub fn insert(&mut self, name: String, value: T) -> Option<T> {
        match self.place.get(&name) {
            Some(&i) => Some(std::mem::replace(&mut self.entries[i as usize].1, value)),
            None => {
                self.place.insert(name.clone(), self.entries.len() as u64);
                self.entries.push((name, value));
                None
            }
        }
    }

    /// The value of `name`, made by `make` if it has none.
    pub fn get_or_insert_with(&mut self, name: &str, make: impl FnOnce() -> T) -> &mut T {
        let i = match self.place.get(name) {
            Some(&i) => i as usize,
            None => {
                self.place
                    .insert(name.to_owned(), self.entries.len() as u64);
                self.entries.push((name.to_owned(), make()));
                self.entries.len() - 1
            }
        };
        &mut self.entries[i].1
    }

    pub fn remove(&mut self, name: &str) -> Option<T> {
        let i = self.place.remove(name)? as usize;
        let (_, value) = self.entries.swap_remove(i);
        if let Some((moved, _)) = self.entries.get(i) {
            self.place.insert(moved.clone(), i as u64);
        }
        Some(value)
    }

    /// Keeps the entries for which `keep` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(&String, &mut T) -> bool) {
        // Each entry's place once the others are gone (`GONE` if it goes).
        let mut moved = Vec::with_capacity(self.entries.len());
        let mut kept = 0;
        for (name, value) in &mut self.entries {
            if keep(name, value) {
                moved.push(kept);
                kept += 1;
            } else {
                moved.push(GONE);
            }
        }
        let new_place = |old: u64| moved.get(old as usize).copied().unwrap_or(GONE);
        let mut old = 0;
        self.entries.retain(|_| {
            old += 1;
            new_place(old - 1) != GONE
        });
        self.place.retain_mut(|_, place| {
            *place = new_place(*place);
            *place != GONE
        });
    }

    /// Takes every entry out.
    pub fn drain(&mut self) -> std::vec::IntoIter<(String, T)> {
        self.place = SortedMap::new();
        std::mem::take(&mut self.entries).into_iter()
    }

    /// Names and values, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &T)> {
        self.entries.iter().map(|(name, value)| (name, value))
    }

    /// In no particular order.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.entries.iter().map(|(_, value)| value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_found_by_name_after_removals_move_others() {
        let mut map = ByName::default();
        for (i, name) in ["a", "b", "c", "d"].into_iter().enumerate() {
            assert_eq!(map.insert(name.to_owned(), i), None);
        }
        assert_eq!(map.insert("b".to_owned(), 10), Some(1));
        assert_eq!(map.remove("a"), Some(0), "d moves into a's place");
        assert_eq!(map.remove("a"), None);
        *map.get_mut("d").unwrap() += 100;
        assert_eq!(map.remove("c"), Some(2));
        assert_eq!(
            (map.get("b"), map.get("c"), map.get("d"), map.len()),
            (Some(&10), None, Some(&103), 2)
        );
        let mut values: Vec<_> = map.values().copied().collect();
        values.sort_unstable();
        assert_eq!(values, vec![10, 103]);
        assert_eq!(map.remove("d"), Some(103), "the last one removed");
        assert_eq!(map.get("b"), Some(&10));
    }

    #[test]
    fn retain_and_made_values_keep_every_name_at_its_value() {
        let mut map = ByName::default();
        for i in 0..6 {
            *map.get_or_insert_with(&i.to_string(), || 0) += i;
        }
        *map.get_or_insert_with("4", || 99) += 10;
        map.retain(|name, value| name != "1" && *value != 3);
        assert!(!map.contains_key("1") && !map.contains_key("3"));
        assert_eq!(
            ["0", "2", "4", "5"].map(|n| map.get(n).copied()),
            [Some(0), Some(2), Some(14), Some(5)]
        );
        let mut drained: Vec<_> = map.drain().collect();
        drained.sort_unstable();
        assert_eq!(drained.len(), 4);
        assert_eq!((map.len(), map.get("0")), (0, None));
    }
}
