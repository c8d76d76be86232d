//! JSON text written by hand for the wire's messages and for JSON values:
//! the same text as serde_json's (strings escaped and floats written as it
//! writes them), without its serializer and the derived encoders it
//! inlines into each caller, which cost the limiter module 2.2 KB gzip
//! more than this.

use crate::json_value::Value;

/// A value that writes itself as JSON.
pub trait Encode {
    fn write_json(&self, out: &mut String);
}

/// `value` as JSON text.
pub fn to_text<T: Encode + ?Sized>(value: &T) -> String {
    let mut out = String::new();
    value.write_json(&mut out);
    out
}

/// Appends `n` in decimal, without core's formatter: keys and signatures
/// written on the success path would otherwise compile it for a first
/// permit.
pub(crate) fn push_decimal(out: &mut String, n: u64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    let mut rest = n;
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for &digit in &digits[start..] {
        out.push(char::from(digit));
    }
}

/// An object being written: `field` by field, then `end`.
pub struct ObjectWriter<'a> {
    out: &'a mut String,
    empty: bool,
}

impl<'a> ObjectWriter<'a> {
    pub fn new(out: &'a mut String) -> Self {
        out.push('{');
        ObjectWriter { out, empty: true }
    }

    fn key(&mut self, name: &str) {
        if !self.empty {
            self.out.push(',');
        }
        self.empty = false;
        write_str(self.out, name);
        self.out.push(':');
    }

    pub fn field<T: Encode + ?Sized>(&mut self, name: &str, value: &T) -> &mut Self {
        self.key(name);
        value.write_json(self.out);
        self
    }

    /// The field if it is present.
    pub fn opt<T: Encode>(&mut self, name: &str, value: &Option<T>) -> &mut Self {
        if let Some(value) = value {
            self.field(name, value);
        }
        self
    }

    /// The field unless it is empty.
    pub fn list<T: Encode>(&mut self, name: &str, items: &[T]) -> &mut Self {
        if !items.is_empty() {
            self.field(name, items);
        }
        self
    }

    /// The field only when it is set.
    pub fn flag(&mut self, name: &str, set: bool) -> &mut Self {
        if set {
            self.field(name, &true);
        }
        self
    }

    pub fn end(&mut self) {
        self.out.push('}');
    }
}

/// `text` as a JSON string, escaped as serde_json escapes it: quotes,
/// backslashes and control characters; everything else as it is.
pub fn write_str(out: &mut String, text: &str) {
    out.push('"');
    let mut start = 0;
    for (i, byte) in text.bytes().enumerate() {
        let short = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        // Every byte matched above is ASCII, so these cuts fall on
        // characters.
        out.push_str(text.get(start..i).unwrap_or_default());
        start = i + 1;
        if short.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        } else {
            out.push_str(short);
        }
    }
    out.push_str(text.get(start..).unwrap_or_default());
    out.push('"');
}

impl Encode for str {
    fn write_json(&self, out: &mut String) {
        write_str(out, self);
    }
}

impl Encode for String {
    fn write_json(&self, out: &mut String) {
        write_str(out, self);
    }
}

impl Encode for u64 {
    fn write_json(&self, out: &mut String) {
        push_decimal(out, *self);
    }
}

impl Encode for bool {
    fn write_json(&self, out: &mut String) {
        out.push_str(if *self { "true" } else { "false" });
    }
}

/// A finite number in the shortest form that reads back the same (what
/// serde_json writes); `null` for NaN and the infinities, as serde_json.
impl Encode for f64 {
    fn write_json(&self, out: &mut String) {
        if self.is_finite() {
            crate::json_float::push_finite(out, *self);
        } else {
            out.push_str("null");
        }
    }
}

impl<T: Encode> Encode for [T] {
    fn write_json(&self, out: &mut String) {
        out.push('[');
        for (i, item) in self.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            item.write_json(out);
        }
        out.push(']');
    }
}

impl<T: Encode> Encode for Vec<T> {
    fn write_json(&self, out: &mut String) {
        self.as_slice().write_json(out);
    }
}

impl Encode for Value {
    fn write_json(&self, out: &mut String) {
        match self {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => b.write_json(out),
            Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => push_decimal(out, u),
                (None, Some(i)) => {
                    out.push('-');
                    push_decimal(out, i.unsigned_abs());
                }
                (None, None) => n.as_f64().unwrap_or(f64::NAN).write_json(out),
            },
            Value::String(s) => write_str(out, s),
            Value::Array(items) => items.write_json(out),
            Value::Object(map) => {
                let mut object = ObjectWriter::new(out);
                for (key, value) in map {
                    object.field(key, value);
                }
                object.end();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire's readers (older gateways and clients among them) were
    /// written against serde_json's output; these pin the same text.
    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let every_ascii: String = (0u8..0x80).map(char::from).collect();
        for text in [
            every_ascii.as_str(),
            "",
            "plain",
            "é ünïcödé ✓ 😀",
            "a\"b\\c/d\u{7f}",
        ] {
            assert_eq!(to_text(text), serde_json::to_string(text).unwrap());
        }
    }

    #[test]
    fn floats_are_written_as_serde_json_writes_them() {
        for x in [
            0.0,
            -0.0,
            1.0,
            0.1,
            2.5,
            -7.25,
            1e21,
            1e-7,
            123_456.789,
            1_000_000.0,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            assert_eq!(to_text(&x), serde_json::to_string(&x).unwrap(), "{x:?}");
        }
    }

    #[test]
    fn json_values_are_written_as_serde_json_writes_them() {
        let value: serde_json::Value = serde_json::from_str(
            r#"{"z":[1,-2,3.5,1e300,null,true,false],"a":{"nested":"x\ny","empty":{}},"n":-9223372036854775808,"u":18446744073709551615,"list":[]}"#,
        )
        .unwrap();
        assert_eq!(
            to_text(&crate::json_value::from_serde(&value)),
            serde_json::to_string(&value).unwrap()
        );
    }
}
