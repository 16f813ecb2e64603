//! `cjson.decode`: Lua CJSON's tokenizer and parser, with an explicit stack of open containers.

use mlua::{Lua, Table, Value};

use super::super::super::num::strtod_prefix;
use super::super::{error, out_of_memory, MAX_C_STACK};
use super::{null, Settings};

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    String,
    Number,
    Boolean,
    Null,
    Colon,
    Comma,
    End,
    Error,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::ObjBegin => "T_OBJ_BEGIN",
            Kind::ObjEnd => "T_OBJ_END",
            Kind::ArrBegin => "T_ARR_BEGIN",
            Kind::ArrEnd => "T_ARR_END",
            Kind::String => "T_STRING",
            Kind::Number => "T_NUMBER",
            Kind::Boolean => "T_BOOLEAN",
            Kind::Null => "T_NULL",
            Kind::Colon => "T_COLON",
            Kind::Comma => "T_COMMA",
            Kind::End => "T_END",
            Kind::Error => "T_ERROR",
        }
    }
}

struct Token {
    kind: Kind,
    /// Offset of the token (or of the error) in the text.
    index: usize,
    string: Vec<u8>,
    number: f64,
    boolean: bool,
    /// What was wrong, for `Kind::Error`.
    error: &'static str,
}

impl Token {
    fn new(kind: Kind, index: usize) -> Token {
        Token { kind, index, string: Vec::new(), number: 0.0, boolean: false, error: "" }
    }

    fn error(index: usize, what: &'static str) -> Token {
        Token { error: what, ..Token::new(Kind::Error, index) }
    }
}

/// The text as C sees it: NUL-terminated, so reading at or past the end gives 0.
struct Parser<'a> {
    data: &'a [u8],
    ptr: usize,
    invalid_numbers: bool,
}

fn hex_digit(c: u8) -> Option<u32> {
    (c as char).to_digit(16)
}

impl Parser<'_> {
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    fn starts_with(&self, word: &[u8]) -> bool {
        word.iter().enumerate().all(|(i, &c)| self.at(self.ptr + i) == c)
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        (0..4).try_fold(0u32, |acc, i| hex_digit(self.at(at + i)).map(|d| (acc << 4) | d))
    }

    /// `json_append_unicode_escape`: `\uXXXX` (a surrogate pair takes two) as UTF-8.
    fn unicode_escape(&mut self, out: &mut Vec<u8>) -> bool {
        let Some(mut cp) = self.hex4(self.ptr + 2) else { return false };
        let mut escape_len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 || self.at(self.ptr + 6) != b'\\' || self.at(self.ptr + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.ptr + 8) else { return false };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            escape_len = 12;
        }
        match cp {
            0..=0x7F => out.push(cp as u8),
            0x80..=0x7FF => out.extend_from_slice(&[(cp >> 6) as u8 | 0xC0, (cp & 0x3F) as u8 | 0x80]),
            0x800..=0xFFFF => out.extend_from_slice(&[
                (cp >> 12) as u8 | 0xE0,
                ((cp >> 6) & 0x3F) as u8 | 0x80,
                (cp & 0x3F) as u8 | 0x80,
            ]),
            _ => out.extend_from_slice(&[
                (cp >> 18) as u8 | 0xF0,
                ((cp >> 12) & 0x3F) as u8 | 0x80,
                ((cp >> 6) & 0x3F) as u8 | 0x80,
                (cp & 0x3F) as u8 | 0x80,
            ]),
        }
        self.ptr += escape_len;
        true
    }

    fn string_token(&mut self) -> Token {
        let start = self.ptr;
        self.ptr += 1;
        let mut out = Vec::new();
        loop {
            let ch = self.at(self.ptr);
            if ch == b'"' {
                break;
            }
            if ch == 0 {
                return Token::error(self.ptr, "unexpected end of string");
            }
            let mut c = ch;
            if ch == b'\\' {
                c = match self.at(self.ptr + 1) {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 0x08,
                    b't' => b'\t',
                    b'n' => b'\n',
                    b'f' => 0x0c,
                    b'r' => b'\r',
                    b'u' => {
                        if self.unicode_escape(&mut out) {
                            continue;
                        }
                        return Token::error(self.ptr, "invalid unicode escape code");
                    }
                    _ => return Token::error(self.ptr, "invalid escape code"),
                };
                self.ptr += 1;
            }
            out.push(c);
            self.ptr += 1;
        }
        self.ptr += 1;
        Token { string: out, ..Token::new(Kind::String, start) }
    }

    /// `json_is_invalid_number`: what strtod takes but JSON does not (+1, 0x10, 01, inf, nan).
    fn is_invalid_number(&self) -> bool {
        let mut p = self.ptr;
        if self.at(p) == b'+' {
            return true;
        }
        if self.at(p) == b'-' {
            p += 1;
        }
        let c = self.at(p);
        if c == b'0' {
            let c2 = self.at(p + 1);
            return (c2 | 0x20) == b'x' || c2.is_ascii_digit();
        }
        // C compares a signed char: bytes from 0x80 are below '9' too.
        if (c as i8) <= b'9' as i8 {
            return false;
        }
        let word = |w: &[u8]| w.iter().enumerate().all(|(i, x)| self.at(p + i).eq_ignore_ascii_case(x));
        word(b"inf") || word(b"nan")
    }

    fn number_token(&mut self) -> Token {
        let start = self.ptr;
        let (value, used) = strtod_prefix(&self.data[start.min(self.data.len())..]);
        if used == 0 {
            return Token::error(start, "invalid number");
        }
        self.ptr += used;
        Token { number: value, ..Token::new(Kind::Number, start) }
    }

    /// `json_next_token`.
    fn next(&mut self) -> Token {
        while matches!(self.at(self.ptr), b' ' | b'\t' | b'\n' | b'\r') {
            self.ptr += 1;
        }
        let at = self.ptr;
        let single = |kind| Token::new(kind, at);
        let ch = self.at(at);
        let simple = match ch {
            b'{' => Some(Kind::ObjBegin),
            b'}' => Some(Kind::ObjEnd),
            b'[' => Some(Kind::ArrBegin),
            b']' => Some(Kind::ArrEnd),
            b',' => Some(Kind::Comma),
            b':' => Some(Kind::Colon),
            _ => None,
        };
        if let Some(kind) = simple {
            self.ptr += 1;
            return single(kind);
        }
        match ch {
            0 => single(Kind::End),
            b'"' => self.string_token(),
            b'-' | b'0'..=b'9' => {
                if !self.invalid_numbers && self.is_invalid_number() {
                    return Token::error(at, "invalid number");
                }
                self.number_token()
            }
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'+' => {
                if self.starts_with(b"true") {
                    self.ptr += 4;
                    Token { boolean: true, ..single(Kind::Boolean) }
                } else if self.starts_with(b"false") {
                    self.ptr += 5;
                    single(Kind::Boolean)
                } else if self.starts_with(b"null") {
                    self.ptr += 4;
                    single(Kind::Null)
                } else if self.invalid_numbers && self.is_invalid_number() {
                    self.number_token()
                } else {
                    Token::error(at, "invalid token")
                }
            }
            _ => Token::error(at, "invalid token"),
        }
    }
}

/// An array or object being filled.
enum OpenValue {
    Array { table: Table, next: i64 },
    Object { table: Table, key: Option<Vec<u8>> },
}

fn parse_error(lua: &Lua, expected: &str, token: &Token) -> mlua::Error {
    let found = if token.kind == Kind::Error { token.error } else { token.kind.name() };
    error(lua, format!("Expected {expected} but found {found} at character {}", token.index + 1))
}

/// `json_decode` after its argument checks, with an explicit stack of open containers.
pub(super) fn decode(lua: &Lua, data: &[u8], s: &Settings) -> mlua::Result<Value> {
    let mut p = Parser { data, ptr: 0, invalid_numbers: s.decode_invalid_numbers != 0 };
    let mut open: Vec<OpenValue> = Vec::new();
    let mut token = p.next();
    loop {
        // json_process_value: a complete value, or a new container to descend into.
        let mut value = match token.kind {
            Kind::String => Value::String(lua.create_string(&token.string).map_err(out_of_memory)?),
            Kind::Number => Value::Number(token.number),
            Kind::Boolean => Value::Boolean(token.boolean),
            Kind::Null => null(),
            Kind::ObjBegin | Kind::ArrBegin => {
                let is_array = token.kind == Kind::ArrBegin;
                // json_decode_descend: the depth, and room for the table plus key and value.
                let depth = open.len() + 1;
                let used = 1 + open
                    .iter()
                    .map(|o| match o {
                        OpenValue::Object { key: Some(_), .. } => 2,
                        _ => 1,
                    })
                    .sum::<usize>();
                let slots = if is_array { 2 } else { 3 };
                if depth > s.decode_max_depth.max(0) as usize || used + slots > MAX_C_STACK {
                    return Err(error(
                        lua,
                        format!("Found too many nested data structures ({depth}) at character {}", p.ptr),
                    ));
                }
                let table = lua.create_table().map_err(out_of_memory)?;
                token = p.next();
                let empty = if is_array { Kind::ArrEnd } else { Kind::ObjEnd };
                if token.kind == empty {
                    Value::Table(table)
                } else if is_array {
                    open.push(OpenValue::Array { table, next: 1 });
                    continue;
                } else {
                    token = object_key(lua, &mut p, token, &mut open, table)?;
                    continue;
                }
            }
            _ => return Err(parse_error(lua, "value", &token)),
        };
        // Store the value where it belongs, closing containers that end here.
        loop {
            match open.last_mut() {
                None => {
                    let end = p.next();
                    if end.kind != Kind::End {
                        return Err(parse_error(lua, "the end", &end));
                    }
                    return Ok(value);
                }
                Some(OpenValue::Array { table, next }) => {
                    table.raw_set(*next, value).map_err(out_of_memory)?;
                    *next += 1;
                    token = p.next();
                    if token.kind == Kind::ArrEnd {
                        value = Value::Table(table.clone());
                        open.pop();
                        continue;
                    }
                    if token.kind != Kind::Comma {
                        return Err(parse_error(lua, "comma or array end", &token));
                    }
                    token = p.next();
                    break;
                }
                Some(OpenValue::Object { table, key }) => {
                    let k = lua.create_string(key.take().unwrap_or_default()).map_err(out_of_memory)?;
                    table.raw_set(k, value).map_err(out_of_memory)?;
                    token = p.next();
                    if token.kind == Kind::ObjEnd {
                        value = Value::Table(table.clone());
                        open.pop();
                        continue;
                    }
                    if token.kind != Kind::Comma {
                        return Err(parse_error(lua, "comma or object end", &token));
                    }
                    let table = table.clone();
                    open.pop();
                    let first = p.next();
                    token = object_key(lua, &mut p, first, &mut open, table)?;
                    break;
                }
            }
        }
    }
}

/// Reads `"key" :` in an object (`token` is the key) and opens it for its value; returns the
/// value's first token.
fn object_key(
    lua: &Lua,
    p: &mut Parser<'_>,
    token: Token,
    open: &mut Vec<OpenValue>,
    table: Table,
) -> mlua::Result<Token> {
    if token.kind != Kind::String {
        return Err(parse_error(lua, "object key string", &token));
    }
    open.push(OpenValue::Object { table, key: Some(token.string) });
    let colon = p.next();
    if colon.kind != Kind::Colon {
        return Err(parse_error(lua, "colon", &colon));
    }
    Ok(p.next())
}
