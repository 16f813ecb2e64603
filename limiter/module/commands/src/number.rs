//! Numbers as the module reads them: its arguments, strictly; and a stored value, as the
//! scripts read one.
//!
//! A script reads a stored value with Lua's `tonumber` and keeps it only if it is a whole
//! number in `0..2^52` (`stored_int`); anything else someone left under the key reads as no
//! state. `tonumber` takes what C's `strtod` takes, with blanks around it, or a hexadecimal
//! integer (`0x1F`). [`stored_int`] takes the same: decimal numbers in every form `strtod`
//! writes (a sign, a fraction, an exponent) and hexadecimal integers. The one form it reads as
//! no state where Lua reads a number is a hexadecimal fraction or exponent (`0x1p4`), which no
//! writer of a counter produces.

use crate::Refusal;

/// The largest whole number a Lua number (a double) holds exactly, plus one: the scripts keep
/// stored values below it.
const EXACT: f64 = 4_503_599_627_370_496.0;

/// A stored value as the scripts' `stored_int(tonumber(v))` reads it: a whole number in
/// `0..2^52`, or None.
pub fn stored_int(bytes: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(bytes).ok()?;
    // Lua's blanks: C's isspace in the "C" locale.
    let text = text.trim_matches(|c: char| matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r'));
    let (negative, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let n = match digits.get(..2) {
        Some("0x" | "0X") => {
            let hex = &digits[2..];
            if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            // Past 2^64 it is no stored value either way.
            u64::from_str_radix(hex, 16).ok()? as f64
        }
        // Rust's float syntax is strtod's decimal one, but for the spellings of infinity and NaN,
        // which no whole number has anyway; the sign was taken above.
        _ if digits.starts_with(['+', '-']) => return None,
        _ => digits.parse::<f64>().ok()?,
    };
    let n = if negative { -n } else { n };
    ((0.0..EXACT).contains(&n) && n.fract() == 0.0).then_some(n as u64)
}

/// A command argument that must be a non-negative integer in decimal digits (what the library
/// sends), or an error naming it.
pub fn argument(bytes: &[u8], name: &str) -> Result<u64, Refusal> {
    digits(bytes).ok_or_else(|| not_an_integer(bytes, name))
}

/// `bytes` as a non-negative integer in decimal digits, or None. Digit by digit, and no error
/// text made unless it is needed: a command's arguments are read on every decision.
pub(super) fn digits(bytes: &[u8]) -> Option<u64> {
    (!bytes.is_empty()).then_some(bytes)?.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// The error for the argument `name` when it is no integer `bytes`.
pub(super) fn not_an_integer(bytes: &[u8], name: &str) -> Refusal {
    Refusal::Error(format!(
        "ERR {name} must be a non-negative integer, got '{}'",
        String::from_utf8_lossy(&bytes[..bytes.len().min(64)])
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_values_read_as_lua_reads_them() {
        for (text, want) in [
            ("12", Some(12)),
            (" 12\t", Some(12)),
            ("+12", Some(12)),
            ("12.0", Some(12)),
            ("1e3", Some(1000)),
            ("1.5e1", Some(15)),
            ("0x1F", Some(31)),
            ("0X10", Some(16)),
            ("-0", Some(0)),
            ("4503599627370495", Some(4_503_599_627_370_495)),
            ("4503599627370496", None),
            ("12.5", None),
            ("-1", None),
            ("abc", None),
            ("", None),
            ("1e", None),
            ("0x", None),
            ("inf", None),
            ("nan", None),
            ("--1", None),
            ("+-1", None),
            ("1 2", None),
        ] {
            assert_eq!(stored_int(text.as_bytes()), want, "{text:?}");
        }
        assert_eq!(stored_int(b"\xff12"), None);
    }

    #[test]
    fn arguments_are_digits_or_an_error_naming_them() {
        assert_eq!(argument(b"250", "burst").ok(), Some(250));
        for bad in [&b""[..], b"-1", b"1.5", b" 1", b"x", b"99999999999999999999999"] {
            let Err(Refusal::Error(err)) = argument(bad, "burst") else { panic!("{bad:?} refused") };
            assert!(err.contains("burst must be a non-negative integer"), "{err}");
        }
    }
}
