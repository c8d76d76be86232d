//! A JSON value as the crate's reader makes it and its decoders read it:
//! what `serde_json::Value` is, with an object kept as a list sorted by key
//! (sorted once, when the reader has it whole) rather than a `BTreeMap`,
//! whose tree code was the wasm modules' last copy of one. Objects read
//! here hold a few keys; lookups are a binary search.

/// A number as serde_json keeps one: an integer that fits stays exact.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Number(N);

#[derive(Debug, Clone, Copy, PartialEq)]
enum N {
    PosInt(u64),
    /// Always negative.
    NegInt(i64),
    /// Always finite.
    Float(f64),
}

impl Number {
    /// `None` for a value JSON cannot write (NaN, an infinity).
    pub fn from_f64(x: f64) -> Option<Number> {
        x.is_finite().then_some(Number(N::Float(x)))
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self.0 {
            N::PosInt(n) => Some(n),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self.0 {
            N::PosInt(n) => i64::try_from(n).ok(),
            N::NegInt(n) => Some(n),
            N::Float(_) => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        Some(match self.0 {
            N::PosInt(n) => n as f64,
            N::NegInt(n) => n as f64,
            N::Float(x) => x,
        })
    }
}

impl From<u64> for Number {
    fn from(n: u64) -> Self {
        Number(N::PosInt(n))
    }
}

impl From<i64> for Number {
    fn from(n: i64) -> Self {
        match u64::try_from(n) {
            Ok(n) => Number(N::PosInt(n)),
            Err(_) => Number(N::NegInt(n)),
        }
    }
}

/// An object's fields, sorted by key, each key once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Map(Vec<(String, Value)>);

impl Map {
    pub fn new() -> Self {
        Map(Vec::new())
    }

    /// The fields as written: sorted by key, and of a key written twice
    /// the last value, as serde_json keeps.
    pub fn from_fields(fields: Vec<(String, Value)>) -> Self {
        // The crate's one heap sort (core's stable sort would add its code
        // for this element type), by key and then by place, so the fields
        // of one key stay in written order.
        let mut placed: Vec<(usize, (String, Value))> = fields.into_iter().enumerate().collect();
        crate::sort::heap_sort_by(&mut placed, |a, b| (&a.1 .0, a.0) < (&b.1 .0, b.0));
        let mut kept: Vec<(String, Value)> = Vec::with_capacity(placed.len());
        for (_, field) in placed {
            match kept.last_mut() {
                Some(last) if last.0 == field.0 => *last = field,
                _ => kept.push(field),
            }
        }
        Map(kept)
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|at| &self.0[at].1)
    }

    /// Sets `key`, replacing a value it had.
    pub fn insert(&mut self, key: String, value: Value) {
        match self.0.binary_search_by(|(k, _)| k.as_str().cmp(&key)) {
            Ok(at) => self.0[at].1 = value,
            Err(at) => self.0.insert(at, (key, value)),
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.iter().map(|(k, _)| k)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'a> IntoIterator for &'a Map {
    type Item = (&'a String, &'a Value);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, Value)>,
        fn(&'a (String, Value)) -> (&'a String, &'a Value),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Value>),
    Object(Map),
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Number(n) => n.as_i64(),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => n.as_f64(),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&Map> {
        match self {
            Value::Object(map) => Some(map),
            _ => None,
        }
    }

    /// An object's field `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_object().and_then(|map| map.get(key))
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    pub fn is_string(&self) -> bool {
        matches!(self, Value::String(_))
    }

    pub fn is_object(&self) -> bool {
        matches!(self, Value::Object(_))
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_owned())
    }
}

/// A float JSON cannot write is `null`, as with serde_json.
impl From<f64> for Value {
    fn from(x: f64) -> Self {
        Number::from_f64(x).map_or(Value::Null, Value::Number)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Value::Number(n.into())
    }
}

/// serde_json's value as this one, for tests that hold the crate's reader
/// and writer to serde_json's.
#[cfg(test)]
pub(crate) fn from_serde(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => Value::Number(match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => u.into(),
            (None, Some(i)) => i.into(),
            (None, None) => Number::from_f64(n.as_f64().expect("a finite number")).expect("finite"),
        }),
        serde_json::Value::String(s) => Value::String(s.clone()),
        serde_json::Value::Array(items) => Value::Array(items.iter().map(from_serde).collect()),
        serde_json::Value::Object(map) => Value::Object(Map::from_fields(
            map.iter()
                .map(|(k, v)| (k.clone(), from_serde(v)))
                .collect(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_s_fields_are_sorted_and_a_repeated_key_keeps_its_last_value() {
        let map = Map::from_fields(vec![
            ("b".into(), Value::from(1u64)),
            ("a".into(), Value::from(2u64)),
            ("b".into(), Value::from(3u64)),
        ]);
        assert_eq!(map.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(map.get("b"), Some(&Value::from(3u64)));
        assert_eq!(map.get("c"), None);
    }

    #[test]
    fn numbers_read_as_serde_json_s_do() {
        let n = |v: Value| (v.as_u64(), v.as_i64(), v.as_f64());
        assert_eq!(n(Value::from(5u64)), (Some(5), Some(5), Some(5.0)));
        assert_eq!(
            n(Value::Number((-5i64).into())),
            (None, Some(-5), Some(-5.0))
        );
        assert_eq!(n(Value::from(2.5)), (None, None, Some(2.5)));
        assert_eq!(n(Value::from(u64::MAX)).1, None);
        assert_eq!(Value::from(f64::NAN), Value::Null);
    }
}
