//! One way to write a duration, in rules files and on command lines: a whole number and its
//! unit, `250ms`, `30s`, `5m`, `1h`, `1d`. A bare number is refused: `30` could mean seconds or
//! milliseconds, and a period off by a thousand is no limit at all, or an outage.

/// The units, smallest first, and the milliseconds in one.
const UNITS: [(&str, u64); 5] = [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)];

/// What every message says the units are.
const NAMED: &str = "units: ms, s, m, h, d";

/// Reads `text` (`250ms`, `30s`, ...) as milliseconds. The error says what is wrong with it and
/// names the units.
///
/// ```
/// use redis_ratelimit::duration::parse_ms;
/// assert_eq!(parse_ms("250ms"), Ok(250));
/// assert_eq!(parse_ms("1d"), Ok(86_400_000));
/// assert!(parse_ms("30").unwrap_err().contains("no unit"));
/// ```
pub fn parse_ms(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let unit = unit.trim();
    if number.is_empty() {
        return Err(format!("{text:?} is not a duration: write a whole number and its unit, e.g. \"250ms\" ({NAMED})"));
    }
    if unit.is_empty() {
        return Err(format!("{text:?} has no unit: write e.g. \"{number}s\" or \"{number}ms\" ({NAMED})"));
    }
    let Some(&(_, scale)) = UNITS.iter().find(|(u, _)| *u == unit) else {
        return Err(format!("{text:?}: {unit:?} is no unit of time here ({NAMED})"));
    };
    number.parse::<u64>().ok().and_then(|n| n.checked_mul(scale)).ok_or_else(|| format!("{text:?} is too long"))
}

/// `ms` in the largest unit that writes it exactly (`12s`, `250ms`, `1d`), which [`parse_ms`]
/// reads back.
pub fn format_ms(ms: u64) -> String {
    let (unit, scale) = UNITS.iter().rev().copied().find(|&(_, s)| ms >= s && ms % s == 0).unwrap_or(("ms", 1));
    format!("{}{unit}", ms / scale)
}

use std::time::Duration;

use crate::error::Error;

/// The longest block: about 34 years, so that the instant it ends stays an exact integer in
/// Lua's doubles for any clock this century.
pub(crate) const MAX_BLOCK_MS: u64 = 1 << 40;

/// `duration` in whole milliseconds, a fraction of one dropped (the unit Redis keeps time in),
/// and at most `u64::MAX`.
pub(crate) const fn whole_ms(duration: Duration) -> u64 {
    let ms = duration.as_millis();
    if ms > u64::MAX as u128 {
        u64::MAX
    } else {
        ms as u64
    }
}

/// `duration` in whole milliseconds, a fraction of one rounded up (so only zero lifts a block),
/// refused past [`MAX_BLOCK_MS`].
pub(crate) fn block_ms(duration: Duration) -> Result<u64, Error> {
    let ms = duration.as_nanos().div_ceil(1_000_000);
    match u64::try_from(ms) {
        Ok(ms) if ms <= MAX_BLOCK_MS => Ok(ms),
        _ => Err(Error::config(
            "block",
            format!("must last at most {MAX_BLOCK_MS} ms (about 34 years), got {duration:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_reads_and_writes_back() {
        for (text, ms) in [("250ms", 250), ("30s", 30_000), ("5m", 300_000), ("1h", 3_600_000), ("2d", 172_800_000)] {
            assert_eq!(parse_ms(text), Ok(ms), "{text}");
            assert_eq!(format_ms(ms), text);
        }
        assert_eq!(format_ms(1500), "1500ms");
        assert_eq!(format_ms(0), "0ms");
        assert_eq!(parse_ms(" 12s "), Ok(12_000));
    }

    #[test]
    fn a_block_lasts_whole_milliseconds_rounded_up_and_at_most_34_years() {
        assert_eq!(block_ms(Duration::ZERO).ok(), Some(0));
        assert_eq!(block_ms(Duration::from_nanos(1)).ok(), Some(1), "only zero lifts a block");
        assert_eq!(block_ms(Duration::from_micros(1_500)).ok(), Some(2));
        assert_eq!(block_ms(Duration::from_millis(MAX_BLOCK_MS)).ok(), Some(MAX_BLOCK_MS));
        let e = block_ms(Duration::from_millis(MAX_BLOCK_MS + 1)).unwrap_err().to_string();
        assert!(e.contains("block") && e.contains("at most"), "{e}");
        assert!(block_ms(Duration::MAX).is_err());
    }

    #[test]
    fn a_bare_number_a_strange_unit_and_an_overflow_are_refused_by_name() {
        let bare = parse_ms("30").unwrap_err();
        assert!(bare.contains("no unit") && bare.contains("\"30s\"") && bare.contains(NAMED), "{bare}");
        let odd = parse_ms("1 fortnight").unwrap_err();
        assert!(odd.contains("\"fortnight\"") && odd.contains(NAMED), "{odd}");
        for text in ["", "s", "-5s", "1.5s"] {
            assert!(parse_ms(text).is_err(), "{text:?}");
        }
        assert!(parse_ms("99999999999999999999s").unwrap_err().contains("too long"));
        assert!(parse_ms("18446744073709551615s").unwrap_err().contains("too long"));
    }
}
