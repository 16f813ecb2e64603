//! Redis's glob matcher (`stringmatchlen`), for KEYS and the MATCH option of the SCAN family.

/// Redis's `stringmatchlen` (util.c), case-sensitive: `*`, `?`, `[abc]`, `[^a-z]`, `\x`.
///
/// Translated step by step, quirks included, because KEYS must select exactly the keys Redis
/// selects: an unclosed `[` takes the rest of the pattern as its set; a range may be written
/// backwards (`[z-a]`); range ends compare as C's signed `char`, so bytes from 0x80 sort below
/// ASCII; a pattern nested deeper than 1000 `*`s matches nothing; and once `*` found no match
/// for the rest of the pattern anywhere, earlier `*`s give up instead of trying longer spans.
pub(crate) fn string_match(pattern: &[u8], string: &[u8]) -> bool {
    let mut skip_longer = false;
    match_from(pattern, 0, pattern.len() as isize, string, &mut skip_longer, 0)
}

/// `stringmatchlen_impl` on `pattern[p..p + plen]`. C reads one byte past the end (the NUL
/// terminator) in places; `at` answers 0 there.
fn match_from(
    pattern: &[u8],
    mut p: usize,
    mut plen: isize,
    mut s: &[u8],
    skip_longer: &mut bool,
    nesting: u32,
) -> bool {
    if nesting > 1000 {
        return false;
    }
    let at = |i: usize| pattern.get(i).copied().unwrap_or(0);
    // C's `char` is signed on the platforms Redis ships for.
    let signed = |b: u8| i32::from(b as i8);
    while plen > 0 && !s.is_empty() {
        match at(p) {
            b'*' => {
                while plen > 0 && at(p + 1) == b'*' {
                    p += 1;
                    plen -= 1;
                }
                if plen == 1 {
                    return true;
                }
                while !s.is_empty() {
                    if match_from(pattern, p + 1, plen - 1, s, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    s = &s[1..];
                }
                *skip_longer = true;
                return false;
            }
            b'?' => s = &s[1..],
            b'[' => {
                p += 1;
                plen -= 1;
                let not = at(p) == b'^';
                if not {
                    p += 1;
                    plen -= 1;
                }
                let mut matched = false;
                loop {
                    if at(p) == b'\\' && plen >= 2 {
                        p += 1;
                        plen -= 1;
                        if at(p) == s[0] {
                            matched = true;
                        }
                    } else if at(p) == b']' {
                        break;
                    } else if plen == 0 {
                        // Unclosed: step back so the advance below ends the pattern.
                        p -= 1;
                        plen += 1;
                        break;
                    } else if plen >= 3 && at(p + 1) == b'-' {
                        let (mut start, mut end) = (signed(at(p)), signed(at(p + 2)));
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        let c = signed(s[0]);
                        p += 2;
                        plen -= 2;
                        if (start..=end).contains(&c) {
                            matched = true;
                        }
                    } else if at(p) == s[0] {
                        matched = true;
                    }
                    p += 1;
                    plen -= 1;
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                s = &s[1..];
            }
            c => {
                let literal = if c == b'\\' && plen >= 2 {
                    p += 1;
                    plen -= 1;
                    at(p)
                } else {
                    c
                };
                if literal != s[0] {
                    return false;
                }
                s = &s[1..];
            }
        }
        p += 1;
        plen -= 1;
        if s.is_empty() {
            while at(p) == b'*' {
                p += 1;
                plen -= 1;
            }
            break;
        }
    }
    plen == 0 && s.is_empty()
}

#[cfg(test)]
mod tests {
    use super::string_match;

    #[test]
    fn glob_patterns_follow_redis_stringmatchlen() {
        let cases: &[(&str, &str, bool)] = &[
            // Only KEYS's `*` shortcut lists the empty key: the matcher itself needs a byte.
            ("*", "", false),
            ("**", "", false),
            ("*", "anything", true),
            ("", "", true),
            ("", "a", false),
            ("a*", "a", true),
            ("a*b", "ab", true),
            ("a*b", "acb", true),
            ("a*b", "acbd", false),
            ("h?llo", "hello", true),
            ("h?llo", "hllo", false),
            ("h[ae]llo", "hallo", true),
            ("h[ae]llo", "hillo", false),
            ("h[^e]llo", "hallo", true),
            ("h[^e]llo", "hello", false),
            ("h[a-b]llo", "hbllo", true),
            ("h[b-a]llo", "hbllo", true),
            ("h[a-b]llo", "hcllo", false),
            ("h\\*llo", "h*llo", true),
            ("h\\*llo", "hello", false),
            ("[abc", "a", true),
            ("[abc", "ab", false),
            ("a[", "a", false),
            ("ratelimiter:{*}:*", "ratelimiter:{a}:tb", true),
            ("ratelimiter:\\{a\\}*", "ratelimiter:{a}:tb", true),
            ("*:tb", "ratelimiter:{a}:gcra", false),
            ("**a", "ba", true),
            ("a**", "a", true),
            ("a\\", "a\\", true),
        ];
        for &(pattern, string, expected) in cases {
            assert_eq!(string_match(pattern.as_bytes(), string.as_bytes()), expected, "{pattern:?} vs {string:?}");
        }
        // Range ends compare as signed chars: 0xff is -1, below 'a'.
        assert!(string_match(b"[\xff-a]", b"A"));
        assert!(!string_match(b"[a-z]", b"\xe9"));
        // A star more than 1000 stars deep matches nothing.
        assert!(string_match("a*".repeat(1001).as_bytes(), "a".repeat(1001).as_bytes()));
        assert!(!string_match("a*".repeat(1002).as_bytes(), "a".repeat(1002).as_bytes()));
    }
}
