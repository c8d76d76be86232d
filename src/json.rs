//! Reads values out of JSON and turns every way a field can be wrong into an
//! `INVALID_INPUT` error that names the field (with its path inside arrays)
//! and shows what was sent. Wire messages, the governor's options and its
//! snapshots all read through it.

use crate::json_value::{Map, Value};

use crate::error::{Error, Result};

/// A value read from JSON with validation: one that comes back is in range,
/// and every bad field was reported by name.
pub trait Decode: Sized {
    fn from_value(value: &Value) -> Result<Self>;
}

/// Parses `text` as JSON and decodes a `T` from it.
pub fn decode_text<T: Decode>(text: &[u8]) -> Result<T> {
    let value = crate::json_parse::parse(text)
        .map_err(|e| Error::invalid(format!("body is not valid JSON: {e}")))?;
    T::from_value(&value)
}

/// Each of `items` read by `read` (given its index), or the first error: a
/// loop rather than a `collect` into `Result<Vec<_>>`, whose iterator
/// adapters are a few hundred bytes of wasm per item type.
pub(crate) fn read_items<T>(
    items: &[Value],
    mut read: impl FnMut(usize, &Value) -> Result<T>,
) -> Result<Vec<T>> {
    let mut out = Vec::with_capacity(items.len());
    for (i, v) in items.iter().enumerate() {
        out.push(read(i, v)?);
    }
    Ok(out)
}

/// How much of an offending value an error message quotes.
const QUOTE_LIMIT: usize = 48;

pub(crate) fn quote(value: &Value) -> String {
    let text = text_of(value);
    if text.len() <= QUOTE_LIMIT {
        return text;
    }
    format!("{}…", head(&text, QUOTE_LIMIT))
}

/// The longest start of `text` of at most `max` bytes that ends on a
/// character. Through `str::get`, which has no panic path: slicing would
/// bring core's string-slicing panic and its formatting into the wasm.
pub(crate) fn head(text: &str, max: usize) -> &str {
    let mut cut = max.min(text.len());
    loop {
        if let Some(start) = text.get(..cut) {
            return start;
        }
        cut -= 1;
    }
}

/// `parts` with `separator` between them, as `[&str]::join` writes them:
/// the library's join is a generic of its own, three times this loop's
/// size in the wasm.
pub(crate) fn joined(parts: &[&str], separator: &str) -> String {
    let mut text = String::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            text.push_str(separator);
        }
        text.push_str(part);
    }
    text
}

/// `text` as a JSON string, for a message (core's `{:?}` would add its own
/// escaping code and Unicode tables to the wasm).
pub(crate) fn quoted(text: &str) -> String {
    text_of(&Value::from(text))
}

/// A number as JSON writes it. Formatting floats through serde_json keeps
/// core's float formatter (some 15 KB of wasm) out of the build.
pub(crate) fn number_text(x: f64) -> String {
    text_of(&Value::from(x))
}

/// `value` as JSON text, written the way the protocol writes its
/// messages. Not through `Value`'s `Display`, which writes through an I/O
/// adapter whose error type brings core's string escaping and Unicode
/// tables into the wasm.
fn text_of(value: &Value) -> String {
    crate::json_write::to_text(value)
}

pub(crate) fn as_object<'a>(value: &'a Value, path: &'a str) -> Result<Fields<'a>> {
    object_at(value, Place::Named(path))
}

fn object_at<'a>(value: &'a Value, place: Place<'a>) -> Result<Fields<'a>> {
    match value {
        Value::Object(map) => Ok(Fields { map, place }),
        other => {
            let path = place.text();
            Err(Error::invalid(format!(
                "{} must be an object, got {}",
                if path.is_empty() { "body" } else { &path },
                quote(other)
            )))
        }
    }
}

/// Where an object sits in what was read. Written out only when an error
/// names it: a message with a list of rules is read once per permit that
/// goes to the gateway, and writing each item's path would compile core's
/// formatter on that path.
#[derive(Clone, Copy)]
enum Place<'a> {
    /// A path as given ("" for the body itself).
    Named(&'a str),
    /// A field of the object at a place.
    Field(&'a Place<'a>, &'a str),
    /// An item of an array field of the object at a place.
    Item(&'a Place<'a>, &'a str, usize),
}

impl Place<'_> {
    fn text(&self) -> String {
        match self {
            Place::Named(path) => (*path).to_owned(),
            Place::Field(parent, field) => field_of(&parent.text(), field),
            Place::Item(parent, field, index) => {
                format!("{}[{index}]", field_of(&parent.text(), field))
            }
        }
    }
}

fn field_of(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_owned()
    } else {
        format!("{path}.{field}")
    }
}

/// A JSON object being read, with the place that names it in errors.
pub(crate) struct Fields<'a> {
    map: &'a Map,
    place: Place<'a>,
}

impl<'a> Fields<'a> {
    /// The object's field names.
    pub fn keys(&self) -> impl Iterator<Item = &'a String> {
        self.map.keys()
    }

    pub fn name(&self, field: &str) -> String {
        field_of(&self.place.text(), field)
    }

    /// Item `index` of the array `field`, read as an object.
    pub fn item(&'a self, field: &'a str, index: usize, value: &'a Value) -> Result<Fields<'a>> {
        object_at(value, Place::Item(&self.place, field, index))
    }

    /// A field that is absent and one that is `null` mean the same: JS
    /// callers write `undefined` and `null` interchangeably.
    fn present(&self, field: &str) -> Option<&'a Value> {
        self.map.get(field).filter(|v| !v.is_null())
    }

    fn wrong(&self, field: &str, expected: &str, got: &Value) -> Error {
        Error::invalid(format!(
            "{} must be {expected}, got {}",
            self.name(field),
            quote(got)
        ))
    }

    fn missing(&self, field: &str, expected: &str) -> Error {
        Error::invalid(format!(
            "{} is required and must be {expected}",
            self.name(field)
        ))
    }

    pub fn string(&self, field: &str, max_len: usize) -> Result<&'a str> {
        let expected = "a non-empty string";
        let value = self
            .present(field)
            .ok_or_else(|| self.missing(field, expected))?;
        self.check_string(field, value, max_len, expected)
    }

    pub fn opt_string(&self, field: &str, max_len: usize) -> Result<Option<&'a str>> {
        match self.present(field) {
            None => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
            Some(value) => self
                .check_string(field, value, max_len, "a string")
                .map(Some),
        }
    }

    fn check_string(
        &self,
        field: &str,
        value: &'a Value,
        max_len: usize,
        expected: &str,
    ) -> Result<&'a str> {
        match value {
            Value::String(s) if s.trim().is_empty() => Err(self.wrong(field, expected, value)),
            Value::String(s) if s.len() > max_len => Err(Error::invalid(format!(
                "{} must be at most {max_len} bytes, got {}",
                self.name(field),
                s.len()
            ))),
            Value::String(s) => Ok(s),
            other => Err(self.wrong(field, expected, other)),
        }
    }

    pub fn opt_bool(&self, field: &str) -> Result<Option<bool>> {
        match self.present(field) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(self.wrong(field, "a boolean", other)),
        }
    }

    /// An integer in `min..=max`. `3.0` counts as the integer 3 (JS has one
    /// number type); `3.5`, strings and booleans do not.
    // The expected kinds below are written only for an error: every
    // message read checks integers, and writing their kind up front would
    // format on the success path.
    pub fn integer(&self, field: &str, min: u64, max: u64) -> Result<u64> {
        let value = self
            .present(field)
            .ok_or_else(|| self.missing(field, &integer_kind(min, max)))?;
        self.check_integer(field, value, min, max)
    }

    pub fn opt_integer(&self, field: &str, min: u64, max: u64) -> Result<Option<u64>> {
        self.present(field)
            .map(|v| self.check_integer(field, v, min, max))
            .transpose()
    }

    fn check_integer(&self, field: &str, value: &Value, min: u64, max: u64) -> Result<u64> {
        let as_int = match value {
            Value::Number(n) => n.as_u64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u64::MAX as f64)
                    .map(|f| f as u64)
            }),
            _ => None,
        };
        match as_int {
            Some(i) if (min..=max).contains(&i) => Ok(i),
            _ => Err(self.wrong(field, &integer_kind(min, max), value)),
        }
    }

    /// A finite number in `(0, max]`.
    pub fn opt_positive_number(&self, field: &str, max: f64) -> Result<Option<f64>> {
        self.present(field)
            .map(|value| match value.as_f64() {
                Some(f) if f.is_finite() && f > 0.0 && f <= max => Ok(f),
                _ => {
                    let expected = format!("a positive number at most {}", number_text(max));
                    Err(self.wrong(field, &expected, value))
                }
            })
            .transpose()
    }

    /// A finite number `>= 0`, rounded up to a whole millisecond: a later
    /// time is always the safe reading of someone else's fractional one.
    pub fn millis(&self, field: &str) -> Result<u64> {
        let expected = "a finite number of milliseconds >= 0";
        let value = self
            .present(field)
            .ok_or_else(|| self.missing(field, expected))?;
        self.check_millis(field, value, expected)
    }

    pub fn opt_millis(&self, field: &str) -> Result<Option<u64>> {
        self.present(field)
            .map(|v| self.check_millis(field, v, "a finite number of milliseconds >= 0"))
            .transpose()
    }

    fn check_millis(&self, field: &str, value: &Value, expected: &str) -> Result<u64> {
        millis_of(value).ok_or_else(|| self.wrong(field, expected, value))
    }

    pub fn opt_array(&self, field: &str, max_len: usize) -> Result<Option<&'a [Value]>> {
        match self.present(field) {
            None => Ok(None),
            Some(Value::Array(items)) if items.len() > max_len => Err(Error::invalid(format!(
                "{} may hold at most {max_len} items, got {}",
                self.name(field),
                items.len()
            ))),
            Some(Value::Array(items)) => Ok(Some(items)),
            Some(other) => Err(self.wrong(field, "an array", other)),
        }
    }

    pub fn array(&self, field: &str, min_len: usize, max_len: usize) -> Result<&'a [Value]> {
        let items = self
            .opt_array(field, max_len)?
            .ok_or_else(|| self.missing(field, "an array"))?;
        if items.len() < min_len {
            return Err(Error::invalid(format!(
                "{} must hold at least {min_len} item{}, got {}",
                self.name(field),
                if min_len == 1 { "" } else { "s" },
                items.len()
            )));
        }
        Ok(items)
    }

    /// A finite number, any sign (the caller checks its range).
    pub fn opt_number(&self, field: &str) -> Result<Option<f64>> {
        self.present(field)
            .map(|value| match value.as_f64() {
                Some(f) if f.is_finite() => Ok(f),
                _ => Err(self.wrong(field, "a finite number", value)),
            })
            .transpose()
    }

    /// The object under `field`, if present.
    pub fn opt_object(&'a self, field: &'a str) -> Result<Option<Fields<'a>>> {
        self.present(field)
            .map(|value| object_at(value, Place::Field(&self.place, field)))
            .transpose()
    }

    /// Refuses any field not in `known`: for options where a misspelt name
    /// would otherwise silently not apply.
    pub fn refuse_unknown(&self, known: &[&str]) -> Result<()> {
        match self.map.key_outside(known) {
            Some(unknown) => Err(Error::invalid(format!(
                "{} is not a known field; known here: {}",
                self.name(unknown),
                joined(known, ", ")
            ))),
            None => Ok(()),
        }
    }

    /// A list of non-empty strings.
    pub fn opt_strings(&self, field: &str, max_len: usize) -> Result<Vec<String>> {
        let items = self.opt_array(field, max_len)?.unwrap_or_default();
        read_items(items, |i, v| match v.as_str() {
            Some(s) if !s.is_empty() => Ok(s.to_owned()),
            _ => Err(Error::invalid(format!(
                "{} must be a non-empty string, got {}",
                self.item_path(field, i),
                quote(v)
            ))),
        })
    }

    pub fn item_path(&self, field: &str, index: usize) -> String {
        format!("{}[{index}]", self.name(field))
    }
}

pub(crate) fn millis_of(value: &Value) -> Option<u64> {
    if let Some(i) = value.as_u64() {
        return Some(i);
    }
    value
        .as_f64()
        .filter(|f| f.is_finite() && *f >= 0.0 && *f <= u64::MAX as f64)
        .map(|f| f.ceil() as u64)
}

fn integer_kind(min: u64, max: u64) -> String {
    match (min, max) {
        (1, u64::MAX) => "a positive integer".to_owned(),
        (0, u64::MAX) => "an integer >= 0".to_owned(),
        (1, max) => format!("a positive integer at most {max}"),
        (min, max) => format!("an integer from {min} to {max}"),
    }
}
