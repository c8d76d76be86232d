//! A JSON value as the crate's reader makes it and its decoders read it:
//! what `serde_json::Value` is, with an object kept as a `SortedMap`
//! (sorted once, when the reader has it whole) rather than a `BTreeMap`,
//! whose tree code was the wasm modules' last copy of one.

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
pub type Map = crate::sorted_map::SortedMap<Value>;

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
