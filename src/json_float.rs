//! Finite floats written as serde_json writes them (through zmij): the
//! shortest digits that read back the same number, laid out in plain
//! decimal from 1e-5 up to below 1e16 (with ".0" after a whole number) and
//! as `d.ddde+x` outside that. In the wasm the digits come from JS's own
//! shortest form (`Number#toExponential()`), so zmij's tables and digit
//! code (2.8 KB of every module) stay out of it; natively zmij writes
//! them directly.

/// Appends finite `x`.
pub(crate) fn push_finite(out: &mut String, x: f64) {
    #[cfg(target_arch = "wasm32")]
    {
        if x.is_sign_negative() {
            out.push('-');
        }
        lay_out(
            out,
            &crate::wasm::float_digits::shortest_exponential(x.abs()),
        );
    }
    #[cfg(not(target_arch = "wasm32"))]
    out.push_str(zmij::Buffer::new().format_finite(x));
}

/// Lays out a positive number given as `d[.ddd]e[+|-]x` (its shortest
/// digits and the power of ten of the first) as zmij does.
#[cfg(any(target_arch = "wasm32", test))]
fn lay_out(out: &mut String, exponential: &str) {
    let text = exponential.as_bytes();
    let e = text.iter().position(|&b| b == b'e').unwrap_or(text.len());
    let (mantissa, exponent) = text.split_at(e);
    let (negative, power_digits) = match exponent.get(1..).unwrap_or_default() {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] | rest => (false, rest),
    };
    let power = power_digits
        .iter()
        .fold(0usize, |n, &b| n * 10 + usize::from(b - b'0'));
    let plain = if negative { power <= 5 } else { power <= 15 };
    // 1234e-3 -> 0.001234
    if plain && negative {
        out.push_str("0.");
        for _ in 1..power {
            out.push('0');
        }
    }
    // The point after the whole digits (1234e1 -> 12.34), or after the
    // first one before an exponent (1234e30 -> 1.234e+33).
    let point = match (plain, negative) {
        (true, false) => power + 1,
        (true, true) => usize::MAX,
        (false, _) => 1,
    };
    let mut written = 0;
    for &digit in mantissa.iter().filter(|&&b| b != b'.') {
        if written == point {
            out.push('.');
        }
        out.push(char::from(digit));
        written += 1;
    }
    if !plain {
        out.push_str(if negative { "e-" } else { "e+" });
        for &digit in power_digits {
            out.push(char::from(digit));
        }
    } else if !negative && written <= power + 1 {
        // Whole: 1234e7 -> 12340000000.0
        for _ in written..power + 1 {
            out.push('0');
        }
        out.push_str(".0");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `x` laid out from the digits and power of ten of zmij's own text (in
    /// the wasm they come from JS; tests/web.rs compares the two there).
    fn laid_out(x: f64) -> String {
        let text = zmij::Buffer::new().format_finite(x).to_string();
        let (number, power) = match text.find('e') {
            Some(e) => (&text[..e], text[e + 1..].parse::<i32>().unwrap()),
            None => (text.as_str(), 0),
        };
        let (negative, number) = match number.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, number),
        };
        let whole = number.split('.').next().unwrap().len() as i32;
        let all: String = number.chars().filter(|&c| c != '.').collect();
        let lead = all.len() - all.trim_start_matches('0').len();
        let digits = all[lead..].trim_end_matches('0');
        let (digits, power) = match digits {
            "" => ("0", 0),
            d => (d, whole - 1 - lead as i32 + power),
        };
        let mut out = String::from(if negative { "-" } else { "" });
        lay_out(
            &mut out,
            &format!("{}.{}e{power}", &digits[..1], &digits[1..]),
        );
        out
    }

    #[test]
    fn floats_are_laid_out_as_zmij_lays_out_its_digits() {
        let mut xs = vec![
            0.0,
            -0.0,
            1.0,
            -1.5,
            12.5,
            0.1,
            1e-5,
            1.5e-5,
            9.99e-6,
            1e-6,
            1e-7,
            1e15,
            9.999e15,
            1e16,
            1.5e16,
            123_456_789_012.0,
            0.3 + 0.6,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            2.5e-308,
            1e100,
            1.7976931348623e-300,
            33.333333333333336,
            1234.5678,
        ];
        // A spread of magnitudes and digit counts.
        let mut x: f64 = 1.234_567_890_123_4e-9;
        while x < 1e22 {
            xs.extend([x, x.round(), 1.0 / x, x * 3.0]);
            x *= 7.3;
        }
        // And 20,000 finite numbers from across the bit patterns.
        let mut bits: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            bits = bits
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let x = f64::from_bits(bits);
            if x.is_finite() {
                xs.push(x);
            }
        }
        for x in xs {
            let expected = zmij::Buffer::new().format_finite(x).to_string();
            assert_eq!(laid_out(x), expected, "{x:e}");
        }
    }

    #[test]
    fn an_exponent_written_with_or_without_its_plus_sign_reads_the_same() {
        let (mut a, mut b) = (String::new(), String::new());
        lay_out(&mut a, "1.25e+21");
        lay_out(&mut b, "1.25e21");
        assert_eq!((a.as_str(), b.as_str()), ("1.25e+21", "1.25e+21"));
    }
}
