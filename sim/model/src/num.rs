//! Numbers exactly as Redis 7.0 reads and prints them.
//!
//! Clients see numbers as text, so "the same number" is not enough: the model has to produce
//! the same *characters* as Redis. Redis leans on the C library for this, and the C library has
//! opinions a Rust program does not share by default:
//!
//! - Integers go through `string2ll`, which refuses `+1`, `01`, `-0` and spaces.
//! - Scores go through `strtod`, which accepts `inf`, hex floats and leading blanks (some
//!   callers then refuse the blanks, some don't).
//! - Replies with doubles (ZSCORE, WITHSCORES, Lua float arguments) use `"%.17g"`.
//! - INCRBYFLOAT and HINCRBYFLOAT compute in x87 80-bit `long double` and print `"%.17Lf"` with
//!   the trailing zeros cut. With an f64, `0.1 + 0.2` would print `0.30000000000000004`; Redis
//!   prints `0.3`. The arithmetic is done with `rustc_apfloat` (LLVM's APFloat), which rounds
//!   exactly like the hardware, and the printing with a small exact big-integer conversion.

use rustc_apfloat::ieee::{Double, X87DoubleExtended};
use rustc_apfloat::{Float, Round, Status};

/// Longest string Redis accepts as a `long double` (`MAX_LONG_DOUBLE_CHARS`).
pub(crate) const MAX_LONG_DOUBLE_CHARS: usize = 5 * 1024;

/// Redis's `string2ll`: a strict decimal `i64`. No sign but `-`, no leading zeros, no blanks.
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    // The first digit must be 1-9: "0" alone was handled above, so "01" and "-0" are refused.
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut magnitude: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        magnitude = magnitude.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    if negative {
        if magnitude > (i64::MAX as u64) + 1 {
            None
        } else {
            Some((magnitude as i128).wrapping_neg() as i64)
        }
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// What `strtod`/`strtold` recognised at the start of a byte string.
#[derive(Debug, Clone, PartialEq)]
enum Scanned {
    /// Nothing numeric: the C functions return 0 and consume nothing.
    Nothing,
    Infinity {
        negative: bool,
    },
    NaN,
    Decimal {
        negative: bool,
        int: Vec<u8>,
        frac: Vec<u8>,
        exp: i64,
    },
    Hex {
        negative: bool,
        int: Vec<u8>,
        frac: Vec<u8>,
        exp: i64,
    },
}

fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn starts_with_ignore_case(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// Reads an exponent's digits, saturating far beyond any representable magnitude.
fn scan_exponent(s: &[u8], mut i: usize) -> Option<(i64, usize)> {
    let mut negative = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        negative = s[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut value: i64 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        value = (value * 10 + i64::from(s[i] - b'0')).min(10_000_000);
        i += 1;
    }
    if i == start {
        return None;
    }
    Some((if negative { -value } else { value }, i))
}

/// Scans the longest prefix `strtod` would accept. Returns what it is and its length.
fn scan_c_float(s: &[u8]) -> (Scanned, usize) {
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    let mut negative = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        negative = s[i] == b'-';
        i += 1;
    }
    let rest = &s[i..];
    if starts_with_ignore_case(rest, b"infinity") {
        return (Scanned::Infinity { negative }, i + 8);
    }
    if starts_with_ignore_case(rest, b"inf") {
        return (Scanned::Infinity { negative }, i + 3);
    }
    if starts_with_ignore_case(rest, b"nan") {
        let mut end = i + 3;
        // glibc also takes "nan(chars)" with letters, digits and underscores inside.
        if end < s.len() && s[end] == b'(' {
            let mut j = end + 1;
            while j < s.len() && (s[j].is_ascii_alphanumeric() || s[j] == b'_') {
                j += 1;
            }
            if j < s.len() && s[j] == b')' {
                end = j + 1;
            }
        }
        return (Scanned::NaN, end);
    }
    // Hexadecimal: "0x" followed by at least one hex digit (possibly after the point).
    if rest.len() >= 2 && rest[0] == b'0' && (rest[1] == b'x' || rest[1] == b'X') {
        let mut j = i + 2;
        let int_start = j;
        while j < s.len() && s[j].is_ascii_hexdigit() {
            j += 1;
        }
        let int = s[int_start..j].to_vec();
        let mut frac = Vec::new();
        if j < s.len() && s[j] == b'.' {
            let frac_start = j + 1;
            let mut k = frac_start;
            while k < s.len() && s[k].is_ascii_hexdigit() {
                k += 1;
            }
            if !int.is_empty() || k > frac_start {
                frac = s[frac_start..k].to_vec();
                j = k;
            }
        }
        if !int.is_empty() || !frac.is_empty() {
            let mut exp = 0;
            if j < s.len() && (s[j] == b'p' || s[j] == b'P') {
                if let Some((e, end)) = scan_exponent(s, j + 1) {
                    exp = e;
                    j = end;
                }
            }
            return (Scanned::Hex { negative, int, frac, exp }, j);
        }
        // "0x" without digits: strtod reads the "0" and stops at the 'x'.
        return (Scanned::Decimal { negative, int: b"0".to_vec(), frac: Vec::new(), exp: 0 }, i + 1);
    }
    let mut j = i;
    while j < s.len() && s[j].is_ascii_digit() {
        j += 1;
    }
    let int = s[i..j].to_vec();
    let mut frac = Vec::new();
    if j < s.len() && s[j] == b'.' {
        let mut k = j + 1;
        while k < s.len() && s[k].is_ascii_digit() {
            k += 1;
        }
        frac = s[j + 1..k].to_vec();
        if !int.is_empty() || !frac.is_empty() {
            j = k;
        }
    }
    if int.is_empty() && frac.is_empty() {
        return (Scanned::Nothing, 0);
    }
    let mut exp = 0;
    if j < s.len() && (s[j] == b'e' || s[j] == b'E') {
        if let Some((e, end)) = scan_exponent(s, j + 1) {
            exp = e;
            j = end;
        }
    }
    (Scanned::Decimal { negative, int, frac, exp }, j)
}

fn ascii(v: &[u8]) -> &str {
    // The scanner only ever collects ASCII digits, so this cannot fail; an empty string is a
    // harmless fallback that the callers turn into "0".
    std::str::from_utf8(v).unwrap_or("")
}

fn nonzero_digits(int: &[u8], frac: &[u8]) -> bool {
    int.iter().chain(frac).any(|&c| c != b'0')
}

/// The canonical text APFloat parses: "digits.digitsEexp" or "0xhex.hexPexp".
fn canonical(scanned: &Scanned) -> Option<(bool, String, bool)> {
    match scanned {
        Scanned::Decimal { negative, int, frac, exp } => {
            let int = if int.is_empty() { "0" } else { ascii(int) };
            let frac = if frac.is_empty() { "0" } else { ascii(frac) };
            Some((*negative, format!("{int}.{frac}e{exp}"), false))
        }
        Scanned::Hex { negative, int, frac, exp } => {
            let int = if int.is_empty() { "0" } else { ascii(int) };
            let frac = if frac.is_empty() { "0" } else { ascii(frac) };
            Some((*negative, format!("0x{int}.{frac}p{exp}"), true))
        }
        _ => None,
    }
}

/// Result of a C-style conversion: the value, bytes consumed and whether `errno` would be
/// `ERANGE` with a zero or infinite result (the only case Redis checks).
struct CFloat<T> {
    value: T,
    consumed: usize,
    range_error: bool,
}

fn c_strtod(s: &[u8]) -> CFloat<f64> {
    // Fast path for what scripts mostly pass (timestamps, counts): up to 15 digits, optionally
    // negative. Below 2^53 every such integer is exact, so this is what strtod returns.
    let digits = s.strip_prefix(b"-").unwrap_or(s);
    if !digits.is_empty() && digits.len() <= 15 && digits.iter().all(u8::is_ascii_digit) {
        let n = digits.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')) as f64;
        let value = if digits.len() < s.len() { -n } else { n };
        return CFloat { value, consumed: s.len(), range_error: false };
    }
    c_strtod_scanned(s)
}

/// `strtod` in full: scanned as C scans it, rounded as glibc rounds.
fn c_strtod_scanned(s: &[u8]) -> CFloat<f64> {
    let (scanned, consumed) = scan_c_float(s);
    let value_of = |scanned: &Scanned| -> (f64, bool) {
        match scanned {
            Scanned::Nothing => (0.0, false),
            Scanned::Infinity { negative } => (if *negative { f64::NEG_INFINITY } else { f64::INFINITY }, false),
            Scanned::NaN => (f64::NAN, false),
            Scanned::Decimal { int, frac, .. } | Scanned::Hex { int, frac, .. } => {
                let Some((negative, text, _)) = canonical(scanned) else {
                    return (0.0, false);
                };
                let parsed = Double::from_str_r(&text, Round::NearestTiesToEven);
                let (magnitude, status) = match parsed {
                    Ok(r) => (f64::from_bits(r.value.to_bits() as u64), r.status),
                    Err(_) => (0.0, Status::OK),
                };
                let value = if negative { -magnitude } else { magnitude };
                let overflow = value.is_infinite();
                let underflow = value == 0.0 && (nonzero_digits(int, frac) || status.contains(Status::UNDERFLOW));
                (value, overflow || underflow)
            }
        }
    };
    let (value, range_error) = value_of(&scanned);
    CFloat { value, consumed, range_error }
}

/// Redis's `getDoubleFromObject` (ZADD scores, ZINCRBY increments): the whole string must be
/// a number, no leading blank, no overflow to infinity or underflow to zero, no NaN.
pub(crate) fn parse_f64_strict(s: &[u8]) -> Option<f64> {
    if s.is_empty() || is_c_space(s[0]) {
        return None;
    }
    let r = c_strtod(s);
    if r.consumed != s.len() || r.range_error || r.value.is_nan() {
        return None;
    }
    Some(r.value)
}

/// Score range items (`zslParseRange`): plain `strtod` on the whole string. Blanks, overflow and
/// the empty string are all fine; only trailing garbage and NaN are refused.
pub(crate) fn parse_f64_lenient(s: &[u8]) -> Option<f64> {
    let r = c_strtod(s);
    if r.consumed != s.len() || r.value.is_nan() {
        return None;
    }
    Some(r.value)
}

/// An x87 80-bit extended float, what `long double` is on x86-64 Linux.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LongDouble(X87DoubleExtended);

impl LongDouble {
    pub(crate) fn is_finite(&self) -> bool {
        self.0.is_finite()
    }

    /// `a + b` rounded to nearest, ties to even, as the FPU does.
    pub(crate) fn add(self, other: LongDouble) -> LongDouble {
        LongDouble(self.0.add_r(other.0, Round::NearestTiesToEven).value)
    }

    /// `(long long) ceill(self * 1000.0)` as x86-64 computes it (a timeout in seconds made
    /// milliseconds): "0.001" is a hair below a thousandth there, so `-0.001` gives 0. A result
    /// outside `long long` (an infinity too) converts to the FPU's "integer indefinite",
    /// `LLONG_MIN`.
    pub(crate) fn millis_ceil(self) -> i64 {
        let thousand = X87DoubleExtended::from_i128(1000).value;
        let ms = self.0.mul_r(thousand, Round::NearestTiesToEven).value;
        let ceiled = ms.round_to_integral(Round::TowardPositive).value;
        let mut exact = false;
        let converted = ceiled.to_i128_r(64, Round::TowardZero, &mut exact);
        if converted.status.contains(Status::INVALID_OP) {
            return i64::MIN;
        }
        i64::try_from(converted.value).unwrap_or(i64::MIN)
    }
}

/// Redis's `string2ld`: `strtold` over the whole string, refusing a leading blank, NaN and
/// out-of-range results. Redis 7.0.15 also checks that `strtold` read every byte, so a string
/// with a NUL byte in it (SETRANGE makes them) is no number.
pub(crate) fn parse_long_double(s: &[u8]) -> Option<LongDouble> {
    if s.is_empty() || s.len() >= MAX_LONG_DOUBLE_CHARS || is_c_space(s[0]) || s.contains(&0) {
        return None;
    }
    let (scanned, consumed) = scan_c_float(s);
    if consumed != s.len() {
        return None;
    }
    let value = match &scanned {
        // strtold consumed nothing: only "" would pass, and it was refused above.
        Scanned::Nothing => return None,
        Scanned::NaN => return None,
        Scanned::Infinity { negative } => {
            let inf = X87DoubleExtended::INFINITY;
            if *negative {
                -inf
            } else {
                inf
            }
        }
        Scanned::Decimal { int, frac, .. } | Scanned::Hex { int, frac, .. } => {
            let (negative, text, _) = canonical(&scanned)?;
            let parsed = X87DoubleExtended::from_str_r(&text, Round::NearestTiesToEven).ok()?;
            let magnitude = parsed.value;
            if magnitude.is_infinite() {
                return None;
            }
            if magnitude.is_zero() && (nonzero_digits(int, frac) || parsed.status.contains(Status::UNDERFLOW)) {
                return None;
            }
            if negative {
                -magnitude
            } else {
                magnitude
            }
        }
    };
    Some(LongDouble(value))
}

/// A `long double` from an integer, exact (64-bit significand).
pub(crate) fn long_double_from_i64(v: i64) -> LongDouble {
    LongDouble(X87DoubleExtended::from_i128(i128::from(v)).value)
}

/// Little-endian base 2^32 unsigned integer: just enough for exact decimal printing.
struct BigUint(Vec<u32>);

impl BigUint {
    fn from_u128(v: u128) -> Self {
        let mut limbs = Vec::new();
        let mut v = v;
        while v > 0 {
            limbs.push(v as u32);
            v >>= 32;
        }
        BigUint(limbs)
    }

    fn shl(&mut self, bits: u32) {
        let words = (bits / 32) as usize;
        let bits = bits % 32;
        if bits > 0 {
            let mut carry = 0u32;
            for limb in &mut self.0 {
                let next = *limb >> (32 - bits);
                *limb = (*limb << bits) | carry;
                carry = next;
            }
            if carry > 0 {
                self.0.push(carry);
            }
        }
        if words > 0 && !self.0.is_empty() {
            let mut shifted = vec![0u32; words];
            shifted.extend_from_slice(&self.0);
            self.0 = shifted;
        }
    }

    /// Divides in place by `d`, returning the remainder.
    fn divmod_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for limb in self.0.iter_mut().rev() {
            let cur = (rem << 32) | u64::from(*limb);
            *limb = (cur / u64::from(d)) as u32;
            rem = cur % u64::from(d);
        }
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
        rem as u32
    }

    fn into_decimal(mut self) -> String {
        if self.0.is_empty() {
            return "0".to_string();
        }
        let mut chunks = Vec::new();
        while !self.0.is_empty() {
            chunks.push(self.divmod_small(1_000_000_000));
        }
        let mut out = String::new();
        for (i, chunk) in chunks.iter().rev().enumerate() {
            if i == 0 {
                out.push_str(&chunk.to_string());
            } else {
                out.push_str(&format!("{chunk:09}"));
            }
        }
        out
    }
}

const TEN_POW_17: u128 = 100_000_000_000_000_000;

/// `snprintf("%.17Lf")` followed by Redis's trimming of trailing zeros (`LD_STR_HUMAN`), with
/// "-0" turned into "0". Callers never pass infinities or NaN (Redis refuses them first).
pub(crate) fn format_long_double_human(v: LongDouble) -> String {
    let bits = v.0.to_bits();
    let mantissa = bits as u64;
    let biased = ((bits >> 64) & 0x7fff) as i64;
    let negative = (bits >> 79) & 1 == 1;
    // value = mantissa * 2^e; subnormals use the minimum exponent.
    let e = if biased == 0 { 1 } else { biased } - 16383 - 63;
    // digits = round_half_even(value * 10^17), the number "%.17Lf" prints without its point.
    let digits = if e >= 0 {
        let mut big = BigUint::from_u128(u128::from(mantissa) * TEN_POW_17);
        big.shl(e as u32);
        big.into_decimal()
    } else {
        let scaled = u128::from(mantissa) * TEN_POW_17; // < 2^121, exact
        let shift = (-e) as u32;
        let q = if shift >= 128 {
            0
        } else {
            let q = scaled >> shift;
            let rem = scaled - (q << shift);
            let half = 1u128 << (shift - 1);
            if rem > half || (rem == half && q & 1 == 1) {
                q + 1
            } else {
                q
            }
        };
        q.to_string()
    };
    let padded = if digits.len() <= 17 { format!("{digits:0>18}") } else { digits };
    let (int_part, frac_part) = padded.split_at(padded.len() - 17);
    let frac_trimmed = frac_part.trim_end_matches('0');
    let mut out = String::with_capacity(padded.len() + 2);
    if negative {
        out.push('-');
    }
    out.push_str(int_part);
    if !frac_trimmed.is_empty() {
        out.push('.');
        out.push_str(frac_trimmed);
    }
    if out == "-0" {
        out = "0".to_string();
    }
    out
}

/// `snprintf("%.17g")` for an f64, as glibc prints it (including "inf", "-inf", "-nan").
pub(crate) fn format_g17(x: f64) -> String {
    // Integers below 10^16 print as themselves (the common case: counts, TTLs, timestamps).
    if x.fract() == 0.0 && x.abs() < 1e16 && x != 0.0 {
        return itoa::Buffer::new().format(x as i64).to_owned();
    }
    format_g(x, 17)
}

/// `snprintf("%.<precision>g")` for an f64, as glibc prints it: `precision` significant digits,
/// correctly rounded (ties to even), trailing zeros dropped, scientific form when the exponent
/// is below -4 or at least `precision`. "inf", "-inf", "nan" and "-nan" as glibc spells them.
pub(crate) fn format_g(x: f64, precision: usize) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan".into() } else { "nan".into() };
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let precision = precision.max(1);
    // `precision` significant digits, correctly rounded, in scientific form: "d.dddde<exp>".
    let sci = format!("{:.*e}", precision - 1, x);
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (sci.as_str(), 0),
    };
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if (-4..precision as i32).contains(&exp) {
        // Fixed notation with precision - 1 - exp decimals, then %g drops trailing zeros.
        let (int_part, frac_part) = if exp >= 0 {
            let split = (exp + 1) as usize;
            (digits[..split].to_string(), digits[split..].to_string())
        } else {
            let zeros = "0".repeat((-exp - 1) as usize);
            ("0".to_string(), format!("{zeros}{digits}"))
        };
        out.push_str(&int_part);
        let frac = frac_part.trim_end_matches('0');
        if !frac.is_empty() {
            out.push('.');
            out.push_str(frac);
        }
    } else {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        let rest = rest.trim_end_matches('0');
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.unsigned_abs()));
    }
    out
}

/// C's `strtod` on the start of `s`: the value and how many bytes it read (0: no number).
/// glibc keeps the sign of "-nan", and so does this.
pub(crate) fn strtod_prefix(s: &[u8]) -> (f64, usize) {
    let r = c_strtod_scanned(s);
    let negative = s.iter().find(|c| !is_c_space(**c)) == Some(&b'-');
    let value = if r.value.is_nan() && negative { -f64::NAN } else { r.value };
    (value, r.consumed)
}

/// C's `(long long)` cast of a Lua number on x86-64: truncation, and the "integer indefinite"
/// value `i64::MIN` for NaN and anything out of range (Rust's `as` would saturate instead).
pub(crate) fn lua_number_to_i64(x: f64) -> i64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if x.is_nan() || !(-TWO_63..TWO_63).contains(&x) {
        i64::MIN
    } else {
        x as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(s: &str) -> LongDouble {
        parse_long_double(s.as_bytes()).expect("valid long double")
    }

    #[test]
    fn integer_fast_path_reads_what_the_full_scan_reads() {
        let mut inputs: Vec<String> =
            ["0", "-0", "007", "-000", "999999999999999", "-999999999999999", "1700000000000"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let digits = 1 + (x % 15) as usize;
            let n = x % 10u64.pow(digits as u32);
            inputs.push(if x & 1 == 0 { n.to_string() } else { format!("-{n}") });
        }
        for s in &inputs {
            let (fast, full) = (c_strtod(s.as_bytes()), c_strtod_scanned(s.as_bytes()));
            assert_eq!(fast.value.to_bits(), full.value.to_bits(), "{s}");
            assert_eq!((fast.consumed, fast.range_error), (full.consumed, full.range_error), "{s}");
        }
    }

    #[test]
    fn integers_follow_string2ll() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        for bad in [&b"+1"[..], b"01", b"-0", b" 1", b"1 ", b"", b"-", b"1.0"] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn g17_matches_glibc() {
        assert_eq!(format_g17(1.1), "1.1000000000000001");
        assert_eq!(format_g17(2.5), "2.5");
        assert_eq!(format_g17(100.0), "100");
        assert_eq!(format_g17(1e16), "10000000000000000");
        assert_eq!(format_g17(1e17), "1e+17");
        assert_eq!(format_g17(123456789012345678.0), "1.2345678901234568e+17");
        assert_eq!(format_g17(1e300), "1.0000000000000001e+300");
        assert_eq!(format_g17(0.1), "0.10000000000000001");
        assert_eq!(format_g17("3.14159".parse().unwrap_or(0.0)), "3.1415899999999999");
        assert_eq!(format_g17(2f64.powi(63)), "9.2233720368547758e+18");
        assert_eq!(format_g17(-0.0), "-0");
        assert_eq!(format_g17(0.0001), "0.0001");
        assert_eq!(format_g17(0.00001), "1.0000000000000001e-05");
        assert_eq!(format_g17(f64::INFINITY), "inf");
        assert_eq!(format_g17(-f64::NAN), "-nan");
    }

    #[test]
    fn g_with_any_precision_matches_glibc() {
        assert_eq!(format_g(1.0 / 3.0, 14), "0.33333333333333");
        assert_eq!(format_g(1e300, 14), "1e+300");
        assert_eq!(format_g(123456789012345.0, 14), "1.2345678901234e+14");
        assert_eq!(format_g(12345678901234.0, 14), "12345678901234");
        assert_eq!(format_g(0.5, 1), "0.5");
        assert_eq!(format_g(2.5, 1), "2");
        assert_eq!(format_g(0.00001, 14), "1e-05");
        assert_eq!(format_g(-0.0, 14), "-0");
        assert_eq!(format_g(100.0, 2), "1e+02");
        assert_eq!(format_g(f64::NEG_INFINITY, 14), "-inf");
    }

    #[test]
    fn strtod_reads_a_prefix() {
        assert_eq!(strtod_prefix(b"1.5e3,"), (1500.0, 5));
        assert_eq!(strtod_prefix(b"0x10]"), (16.0, 4));
        assert_eq!(strtod_prefix(b"-x"), (0.0, 0));
        let (nan, used) = strtod_prefix(b"-nan");
        assert!(nan.is_nan() && nan.is_sign_negative() && used == 4);
    }

    #[test]
    fn long_double_sums_print_like_redis() {
        let sum = |a: &str, b: &str| format_long_double_human(ld(a).add(ld(b)));
        assert_eq!(sum("1", "0.1"), "1.1");
        assert_eq!(sum("0.1", "0.2"), "0.3");
        assert_eq!(sum("1.6", "1e5"), "100001.60000000000000142");
        assert_eq!(sum("3", "1.5e-7"), "3.00000015");
        assert_eq!(sum("1e17", "1e17"), "200000000000000000");
        assert_eq!(sum("200000000000000000", "123456789.123456789"), "200000000123456789.125");
        assert_eq!(sum("9223372036854775807", "1"), "9223372036854775808");
        assert_eq!(sum("0", "123456789012345678901234567890"), "123456789012345678899921813504");
        assert_eq!(sum("0", "0.000000000000000015"), "0.00000000000000002");
        assert_eq!(sum("0", "0.000000000000000025"), "0.00000000000000002");
        assert_eq!(sum("0", "-0.000000000000000005"), "0");
        assert_eq!(sum("10", "-10"), "0");
        assert_eq!(sum("0x1p3", "0"), "8");
        assert_eq!(sum("24.1", "1e5"), "100024.10000000000000142");
    }

    #[test]
    fn long_double_parsing_refuses_what_redis_refuses() {
        for bad in ["", " 1", "1 ", "nan", "abc", "1e-5000", "1e5000", "--1"] {
            assert!(parse_long_double(bad.as_bytes()).is_none(), "{bad}");
        }
        for good in ["+1", ".5", "5.", "0x10", "inf", "-infinity", "1e400"] {
            assert!(parse_long_double(good.as_bytes()).is_some(), "{good}");
        }
    }

    #[test]
    fn strict_and_lenient_doubles() {
        assert_eq!(parse_f64_strict(b"1e400"), None);
        assert_eq!(parse_f64_strict(b"1e-400"), None);
        assert_eq!(parse_f64_strict(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64_strict(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64_strict(b"0x10"), Some(16.0));
        assert_eq!(parse_f64_strict(b"nan"), None);
        assert_eq!(parse_f64_strict(b" 1"), None);
        assert_eq!(parse_f64_lenient(b""), Some(0.0));
        assert_eq!(parse_f64_lenient(b" 1"), Some(1.0));
        assert_eq!(parse_f64_lenient(b"1e400"), Some(f64::INFINITY));
        assert_eq!(parse_f64_lenient(b"(1"), None);
    }

    #[test]
    fn lua_numbers_convert_like_a_c_cast() {
        assert_eq!(lua_number_to_i64(3.99), 3);
        assert_eq!(lua_number_to_i64(-3.99), -3);
        assert_eq!(lua_number_to_i64(2f64.powi(63)), i64::MIN);
        assert_eq!(lua_number_to_i64(f64::INFINITY), i64::MIN);
        assert_eq!(lua_number_to_i64(f64::NAN), i64::MIN);
        assert_eq!(lua_number_to_i64(-(2f64.powi(63))), i64::MIN);
    }
}
