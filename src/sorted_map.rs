//! Values by name in a list kept sorted by name: what a `BTreeMap<String,
//! V>` does for the few keys the crate's JSON objects and named counters
//! hold, without a tree's code in the wasm. Lookups are a binary search;
//! they iterate in key order, as a `BTreeMap` would. The client's maps by
//! name (`SortedMap<u64>`, and `ByName`'s places) are these too, rather
//! than `HashMap`s: the client module then has no hash table code at all
//! (hashbrown's, some 4 KB of the wasm).

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortedMap<V>(Vec<(String, V)>);

impl<V> Default for SortedMap<V> {
    fn default() -> Self {
        SortedMap(Vec::new())
    }
}

impl<V> SortedMap<V> {
    pub fn new() -> Self {
        Self::default()
    }

    /// The fields as written: sorted by key, and of a key written twice
    /// the last value, as serde_json keeps. Sorted once, so many keys cost
    /// O(n log n), not an insert each.
    pub fn from_fields(fields: Vec<(String, V)>) -> Self {
        // The crate's one heap sort (core's stable sort would add its code
        // for this element type), by key and then by place, so the fields
        // of one key stay in written order.
        let mut placed = Vec::with_capacity(fields.len());
        for field in fields.into_iter().enumerate() {
            placed.push(field);
        }
        crate::sort::heap_sort_by(&mut placed, |a, b| (&a.1 .0, a.0) < (&b.1 .0, b.0));
        let mut kept: Vec<(String, V)> = Vec::with_capacity(placed.len());
        for (_, field) in placed {
            match kept.last_mut() {
                Some(last) if last.0 == field.0 => *last = field,
                _ => kept.push(field),
            }
        }
        SortedMap(kept)
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    pub fn get(&self, key: &str) -> Option<&V> {
        let at = self.find(key).ok()?;
        self.0.get(at).map(|(_, value)| value)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        let at = self.find(key).ok()?;
        self.0.get_mut(at).map(|(_, value)| value)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Keeps the entries for which `keep` holds, in key order still.
    pub fn retain_mut(&mut self, mut keep: impl FnMut(&String, &mut V) -> bool) {
        self.0.retain_mut(|(k, v)| keep(k, v));
    }

    pub fn remove(&mut self, key: &str) -> Option<V> {
        let at = self.find(key).ok()?;
        Some(self.0.remove(at).1)
    }

    /// Sets `key` to `value`, returning what it held before.
    pub fn insert(&mut self, key: String, value: V) -> Option<V> {
        match self.find(&key) {
            Ok(at) => Some(std::mem::replace(&mut self.0[at].1, value)),
            Err(at) => {
                self.0.insert(at, (key, value));
                None
            }
        }
    }

    /// `key`'s value, made by `make` if it has none.
    pub fn get_or_insert_with(&mut self, key: &str, make: impl FnOnce() -> V) -> &mut V {
        let at = match self.find(key) {
            Ok(at) => at,
            Err(at) => {
                self.0.insert(at, (key.to_owned(), make()));
                at
            }
        };
        &mut self.0[at].1
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.iter().map(|(k, _)| k)
    }

    /// The first key (in key order) that is not one of `known`. A loop,
    /// not `keys().find(..)`, whose adapter would be a copy of its own in
    /// the wasm.
    #[allow(clippy::manual_find)]
    pub fn key_outside(&self, known: &[&str]) -> Option<&String> {
        for (key, _) in &self.0 {
            if !known.contains(&key.as_str()) {
                return Some(key);
            }
        }
        None
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &V)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'a, V> IntoIterator for &'a SortedMap<V> {
    type Item = (&'a String, &'a V);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, V)>,
        fn(&'a (String, V)) -> (&'a String, &'a V),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_sorted_and_a_repeated_key_keeps_its_last_value() {
        let map = SortedMap::from_fields(vec![("b".into(), 1), ("a".into(), 2), ("b".into(), 3)]);
        assert_eq!(map.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(map.get("b"), Some(&3));
        assert_eq!(map.get("c"), None);
    }

    #[test]
    fn an_insert_keeps_key_order_and_returns_what_it_replaced() {
        let mut map = SortedMap::new();
        assert_eq!(map.insert("m".into(), 1), None);
        assert_eq!(map.insert("a".into(), 2), None);
        assert_eq!(map.insert("m".into(), 3), Some(1));
        *map.get_or_insert_with("z", || 0) += 5;
        assert_eq!(
            map.iter().collect::<Vec<_>>(),
            [
                (&"a".to_owned(), &2),
                (&"m".to_owned(), &3),
                (&"z".to_owned(), &5)
            ]
        );
    }
}
