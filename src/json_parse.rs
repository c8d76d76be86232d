//! JSON text to a `Value` (`crate::json_value`), by hand: serde_json's own parser
//! goes through serde's deserializer machinery, some 10 KB of wasm for what
//! one recursive reader does here. It accepts exactly RFC 8259 JSON, as
//! serde_json does: UTF-8 text, no trailing commas or characters, no
//! unpaired surrogates in escapes, nesting at most 128 deep; a repeated key
//! keeps its last value.

use crate::json_value::{Map, Number, Value};

/// How deep arrays and objects may nest (serde_json's limit).
const MAX_DEPTH: usize = 128;

/// Parses `text` as one JSON value; the error says what was wrong and at
/// which byte.
pub(crate) fn parse(text: &[u8]) -> Result<Value, String> {
    let Ok(text) = std::str::from_utf8(text) else {
        return Err("it is not UTF-8".to_owned());
    };
    let mut p = Parser {
        s: text.as_bytes(),
        at: 0,
        depth: 0,
    };
    let value = p.value()?;
    p.space();
    if p.at < p.s.len() {
        return Err(p.fail("trailing characters"));
    }
    Ok(value)
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
    depth: usize,
}

impl Parser<'_> {
    fn fail(&self, what: &str) -> String {
        format!("{what} at byte {}", self.at)
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> bool {
        self.space();
        let found = self.peek() == Some(byte);
        if found {
            self.at += 1;
        }
        found
    }

    fn word(&mut self, word: &str, value: Value) -> Result<Value, String> {
        if self.s[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(value)
        } else {
            Err(self.fail("expected a value"))
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        self.space();
        match self.peek() {
            None => Err(self.fail("unexpected end of input")),
            Some(b'n') => self.word("null", Value::Null),
            Some(b't') => self.word("true", Value::Bool(true)),
            Some(b'f') => self.word("false", Value::Bool(false)),
            Some(b'"') => self.string().map(Value::String),
            Some(b'[') => self.nested(Self::array),
            Some(b'{') => self.nested(Self::object),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.fail("expected a value")),
        }
    }

    fn nested(&mut self, read: fn(&mut Self) -> Result<Value, String>) -> Result<Value, String> {
        if self.depth == MAX_DEPTH {
            return Err(self.fail("nested too deep"));
        }
        self.depth += 1;
        self.at += 1;
        let value = read(self);
        self.depth -= 1;
        value
    }

    fn array(&mut self) -> Result<Value, String> {
        let mut items = Vec::new();
        if self.eat(b']') {
            return Ok(Value::Array(items));
        }
        loop {
            items.push(self.value()?);
            if self.eat(b']') {
                return Ok(Value::Array(items));
            }
            if !self.eat(b',') {
                return Err(self.fail("expected `,` or `]`"));
            }
        }
    }

    fn object(&mut self) -> Result<Value, String> {
        let mut fields = Vec::new();
        if self.eat(b'}') {
            return Ok(Value::Object(Map::new()));
        }
        loop {
            self.space();
            if self.peek() != Some(b'"') {
                return Err(self.fail("expected a string key"));
            }
            let key = self.string()?;
            if !self.eat(b':') {
                return Err(self.fail("expected `:`"));
            }
            let value = self.value()?;
            fields.push((key, value));
            if self.eat(b'}') {
                return Ok(Value::Object(Map::from_fields(fields)));
            }
            if !self.eat(b',') {
                return Err(self.fail("expected `,` or `}`"));
            }
        }
    }

    /// A string, from its opening quote. The text is valid UTF-8 already, so
    /// runs between escapes are copied as they are.
    fn string(&mut self) -> Result<String, String> {
        self.at += 1;
        let mut out = Vec::new();
        loop {
            let start = self.at;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.at += 1;
            }
            out.extend_from_slice(&self.s[start..self.at]);
            match self.peek() {
                Some(b'"') => {
                    self.at += 1;
                    // Built from whole UTF-8 runs and encoded chars.
                    return String::from_utf8(out).map_err(|_| self.fail("invalid string"));
                }
                Some(b'\\') => {
                    self.at += 1;
                    let escaped = match self.peek() {
                        Some(b'u') => self.unicode_escape()?,
                        Some(e) => {
                            self.at += 1;
                            match e {
                                b'"' => '"',
                                b'\\' => '\\',
                                b'/' => '/',
                                b'b' => '\u{8}',
                                b'f' => '\u{c}',
                                b'n' => '\n',
                                b'r' => '\r',
                                b't' => '\t',
                                _ => return Err(self.fail("invalid escape")),
                            }
                        }
                        None => return Err(self.fail("unterminated string")),
                    };
                    out.extend_from_slice(escaped.encode_utf8(&mut [0; 4]).as_bytes());
                }
                Some(_) => return Err(self.fail("control character in a string")),
                None => return Err(self.fail("unterminated string")),
            }
        }
    }

    /// `\uXXXX` (the `u` under the cursor), with the low surrogate that
    /// must follow a high one; leaves the cursor after the escape.
    fn unicode_escape(&mut self) -> Result<char, String> {
        let high = self.hex4()?;
        let code = match high {
            0xD800..=0xDBFF => {
                if !self.s[self.at..].starts_with(b"\\u") {
                    return Err(self.fail("unpaired surrogate in escape"));
                }
                self.at += 1;
                let low = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&low) {
                    return Err(self.fail("unpaired surrogate in escape"));
                }
                0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(self.fail("unpaired surrogate in escape")),
            _ => high,
        };
        char::from_u32(code).ok_or_else(|| self.fail("invalid escape"))
    }

    /// The four hex digits after the `u` under the cursor.
    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .s
            .get(self.at + 1..self.at + 5)
            .ok_or_else(|| self.fail("invalid escape"))?;
        let mut code = 0;
        for &d in digits {
            let v = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return Err(self.fail("invalid escape")),
            };
            code = code * 16 + u32::from(v);
        }
        self.at += 5;
        Ok(code)
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        self.at - start
    }

    /// A number: an integer that fits a u64, or a negative one that fits an
    /// i64, stays one; anything else (`-0` too) is an f64, as serde_json
    /// reads them.
    fn number(&mut self) -> Result<Value, String> {
        let start = self.at;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.at += 1;
        }
        let int_start = self.at;
        let int_len = self.digits();
        if int_len == 0 || (int_len > 1 && self.s[int_start] == b'0') {
            return Err(self.fail("invalid number"));
        }
        let mut frac = (self.at, self.at);
        if self.peek() == Some(b'.') {
            self.at += 1;
            let from = self.at;
            if self.digits() == 0 {
                return Err(self.fail("invalid number"));
            }
            frac = (from, self.at);
        }
        let mut exp: i64 = 0;
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            let exp_negative = match self.peek() {
                Some(b'-') => {
                    self.at += 1;
                    true
                }
                Some(b'+') => {
                    self.at += 1;
                    false
                }
                _ => false,
            };
            let from = self.at;
            if self.digits() == 0 {
                return Err(self.fail("invalid number"));
            }
            for &d in &self.s[from..self.at] {
                exp = (exp * 10 + i64::from(d - b'0')).min(100_000);
            }
            if exp_negative {
                exp = -exp;
            }
        }
        let int_digits = &self.s[int_start..int_start + int_len];
        let is_integer = frac.0 == frac.1 && self.at == int_start + int_len;
        if is_integer {
            if let Some(n) = whole(int_digits) {
                if !negative {
                    return Ok(Value::Number(n.into()));
                }
                let negated = (n as i64).wrapping_neg();
                if n <= 1 << 63 && negated < 0 {
                    return Ok(Value::Number(negated.into()));
                }
            }
        }
        let x = decimal(int_digits, &self.s[frac.0..frac.1], exp);
        let x = if negative { -x } else { x };
        Number::from_f64(x).map(Value::Number).ok_or_else(|| {
            self.at = start;
            self.fail("number out of range")
        })
    }
}

/// Decimal digits as a u64, if they fit.
fn whole(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// Exact powers of ten as f64.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// `int.frac × 10^exp` as an f64: the first 19 significant digits as an
/// integer, scaled by powers of ten. Exact (one rounding) when the digits
/// fit in 53 bits and the scale is at most 10^22, as for every count, rate
/// and duration the wire carries; within an ulp or so otherwise, like
/// serde_json's default reader.
fn decimal(int: &[u8], frac: &[u8], exp: i64) -> f64 {
    let mut significand: u64 = 0;
    let mut scale = exp;
    let mut kept = 0;
    for (i, &d) in int.iter().chain(frac).enumerate() {
        let in_frac = i >= int.len();
        if kept < 19 {
            if significand > 0 || d != b'0' {
                kept += 1;
            }
            significand = significand * 10 + u64::from(d - b'0');
            if in_frac {
                scale -= 1;
            }
        } else if !in_frac {
            scale += 1;
        }
    }
    let mut x = significand as f64;
    if x == 0.0 {
        return 0.0;
    }
    while scale > 22 {
        x *= POW10[22];
        scale -= 22;
        if x.is_infinite() {
            return x;
        }
    }
    while scale < -22 {
        x /= POW10[22];
        scale += 22;
        if x == 0.0 {
            return x;
        }
    }
    if scale >= 0 {
        x * POW10[scale as usize]
    } else {
        x / POW10[(-scale) as usize]
    }
}

#[cfg(test)]
#[path = "json_parse_tests.rs"]
mod tests;
