//! What SCAN, HSCAN, SSCAN and ZSCAN share (`scanGenericCommand`): the cursor, the options and
//! the reply.
//!
//! Redis returns a small collection (listpack, intset) whole in one call with cursor 0, and
//! walks a hash table a few buckets per call in an order seeded at random. The model answers
//! every scan as Redis answers a small one: everything that matches, in one reply, cursor 0,
//! whatever the cursor and COUNT (a hash table of about COUNT elements or fewer also comes back
//! whole from Redis, in its own order). A client that loops until cursor 0 sees every element
//! either way.

use bytes::Bytes;

use super::super::resp::Reply;
use super::glob::string_match;
use super::{cstr, int_arg, is, syntax_error};

/// `parseScanCursorOrReply`: C's `strtoul` over the whole argument (up to a NUL byte), which
/// takes a sign (so "-1" is the largest cursor) and an empty string (cursor 0), but no leading
/// blank, no trailing text and nothing past 2^64 - 1.
pub(crate) fn parse_cursor(arg: &[u8]) -> Result<u64, Reply> {
    let invalid = || Reply::err("ERR invalid cursor");
    let s = cstr(arg);
    if s.is_empty() {
        return Ok(0);
    }
    let (negative, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        c if c.is_ascii_digit() => (false, s),
        _ => return Err(invalid()),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(invalid());
    }
    let mut value: u64 = 0;
    for &d in digits {
        value = value.checked_mul(10).and_then(|v| v.checked_add(u64::from(d - b'0'))).ok_or_else(invalid)?;
    }
    Ok(if negative { value.wrapping_neg() } else { value })
}

/// MATCH, COUNT and (SCAN only) TYPE, in any order, each a word and a value.
pub(crate) struct ScanOptions<'a> {
    pattern: Option<&'a [u8]>,
    pub(crate) type_name: Option<&'a [u8]>,
}

impl<'a> ScanOptions<'a> {
    pub(crate) fn parse(args: &[&'a [u8]], allow_type: bool) -> Result<Self, Reply> {
        let mut options = ScanOptions { pattern: None, type_name: None };
        let mut j = 0;
        while j < args.len() {
            let has_value = j + 1 < args.len();
            if is(args[j], "count") && has_value {
                if int_arg(args[j + 1])? < 1 {
                    return Err(syntax_error());
                }
            } else if is(args[j], "match") && has_value {
                // "*" alone matches everything and is not used as a pattern at all.
                options.pattern = Some(args[j + 1]).filter(|p| *p != b"*");
            } else if is(args[j], "type") && allow_type && has_value {
                options.type_name = Some(args[j + 1]);
            } else {
                return Err(syntax_error());
            }
            j += 2;
        }
        Ok(options)
    }

    pub(crate) fn matches(&self, element: &[u8]) -> bool {
        self.pattern.is_none_or(|p| string_match(p, element))
    }

    /// Field/value (member/score) pairs whose field matches, flattened.
    pub(crate) fn pairs(&self, pairs: impl Iterator<Item = (Bytes, Bytes)>) -> Vec<Reply> {
        pairs.filter(|(f, _)| self.matches(f)).flat_map(|(f, v)| [Reply::Bulk(f), Reply::Bulk(v)]).collect()
    }
}

/// `[cursor, [elements...]]` with the final cursor, 0.
pub(crate) fn reply(elements: Vec<Reply>) -> Reply {
    Reply::Array(vec![Reply::Bulk(Bytes::from_static(b"0")), Reply::Array(elements)])
}

/// The reply to a scan of a missing key (`shared.emptyscan`).
pub(crate) fn empty() -> Reply {
    reply(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::parse_cursor;

    #[test]
    fn cursors_are_read_as_strtoul_reads_them() {
        for (arg, cursor) in
            [("0", 0), ("", 0), ("-0", 0), ("+7", 7), ("-1", u64::MAX), ("18446744073709551615", u64::MAX)]
        {
            assert_eq!(parse_cursor(arg.as_bytes()).ok(), Some(cursor), "{arg:?}");
        }
        for arg in ["abc", " 1", "1 ", "-", "+", "18446744073709551616", "0x10"] {
            assert!(parse_cursor(arg.as_bytes()).is_err(), "{arg:?}");
        }
        assert_eq!(parse_cursor(b"5\0junk").ok(), Some(5), "C stops at the NUL byte");
    }
}
