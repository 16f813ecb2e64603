//! `cmsgpack`: lua-cmsgpack 0.4.0 (pack, unpack, unpack_one, unpack_limit).
//!
//! Packing: a number that survives a round trip through `int64_t` is an integer in its smallest
//! form, any other number a float when `(float)d == d`, else a double; strings are str 8/16/32
//! (`0xd9` for 32..255 bytes); a table whose keys are exactly 1..n (as C `int`s) is an array, any
//! other a map in `next` order; tables 16 deep, nil, functions and userdata are nil. Unpacking
//! reads the same types back, and 64-bit unsigned integers through C's signed cast (so
//! `0xcf ff..ff` is -1).
//!
//! One limit differs: mlua returns at most 7998 values from a Rust function, where Redis's
//! `unpack` returns up to 7999 at once (and refuses more, as the model does).

use mlua::{Lua, MultiValue, Table, Value};

use super::{c_int, c_long, check_stack, error, out_of_memory, Args};

const MAX_NESTING: usize = 16;
const STACK_MESSAGE: &str = "too many return values at once; use unpack_one or unpack_limit instead.";

fn encode_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        match n {
            0..=127 => out.push(n as u8),
            128..=0xff => out.extend_from_slice(&[0xcc, n as u8]),
            0x100..=0xffff => {
                out.push(0xcd);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                out.push(0xce);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            _ => {
                out.push(0xcf);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
    } else if n >= -32 {
        out.push(n as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_number(out: &mut Vec<u8>, n: f64) {
    // IS_INT64_EQUIVALENT: not infinite and unchanged by a cast to int64_t.
    if !n.is_infinite() && c_long(n) as f64 == n {
        encode_int(out, c_long(n));
        return;
    }
    let f = n as f32;
    if f64::from(f) == n {
        out.push(0xca);
        out.extend_from_slice(&f.to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_header(out: &mut Vec<u8>, n: usize, fix: u8, codes: [u8; 2]) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(codes[0]);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(codes[1]);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn encode_bytes(out: &mut Vec<u8>, s: &[u8]) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

/// `table_is_an_array`: every key a positive number equal to its `(int)` cast, and the largest
/// key equal to the number of keys.
fn is_array(t: &Table) -> mlua::Result<bool> {
    let (mut count, mut max) = (0i64, 0i64);
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(false),
        };
        if n <= 0.0 || n.is_infinite() || f64::from(c_int(n)) != n {
            return Ok(false);
        }
        max = max.max(n as i64);
        count += 1;
    }
    Ok(max == count)
}

/// `mp_encode_lua_type`. Depth is bounded (16), so plain recursion is fine here.
fn encode(out: &mut Vec<u8>, v: &Value, level: usize) -> mlua::Result<()> {
    match v {
        Value::String(s) => encode_bytes(out, &s.as_bytes()),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_number(out, *i as f64),
        Value::Number(n) => encode_number(out, *n),
        Value::Table(t) if level < MAX_NESTING => {
            if is_array(t)? {
                let len = t.raw_len();
                encode_header(out, len, 0x90, [0xdc, 0xdd]);
                for i in 1..=len {
                    let item: Value = t.get(i)?;
                    encode(out, &item, level + 1)?;
                }
            } else {
                let pairs: Vec<(Value, Value)> = t.pairs::<Value, Value>().collect::<mlua::Result<_>>()?;
                encode_header(out, pairs.len(), 0x80, [0xde, 0xdf]);
                for (k, v) in &pairs {
                    encode(out, k, level + 1)?;
                    encode(out, v, level + 1)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::LuaString> {
    if args.is_empty() {
        return Err(super::arg_error(lua, 0, b"MessagePack pack needs input."));
    }
    let mut out = Vec::new();
    for v in args.iter() {
        encode(&mut out, v, 0)?;
    }
    lua.create_string(out).map_err(out_of_memory)
}

/// Why decoding stopped.
enum Stop {
    Eof,
    BadFormat,
}

/// A container being filled while decoding.
enum OpenContainer {
    Array { table: Table, next: usize, left: usize },
    Map { table: Table, key: Option<Value>, left: usize },
}

/// One item's head: a complete value, or a container of `n` entries to fill.
enum Head {
    Value(Value),
    Array(usize),
    Map(usize),
}

/// The decoder over `data`, consuming from `at`.
struct Cursor<'a> {
    data: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn need(&self, n: usize) -> Result<&[u8], Stop> {
        self.data.get(self.at..).filter(|rest| rest.len() >= n).map(|rest| &rest[..n]).ok_or(Stop::Eof)
    }

    fn take(&mut self, n: usize) -> Result<&[u8], Stop> {
        let start = self.at;
        self.need(n)?;
        self.at += n;
        Ok(&self.data[start..start + n])
    }

    fn be(&mut self, n: usize) -> Result<u64, Stop> {
        Ok(self.take(n)?.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    /// Reads one item's head (`mp_decode_to_lua_type` without the recursion).
    fn head(&mut self, lua: &Lua) -> Result<mlua::Result<Head>, Stop> {
        let first = self.need(1)?[0];
        let number = |n: f64| Ok(Ok(Head::Value(Value::Number(n))));
        match first {
            0xcc => {
                self.need(2)?;
                self.at += 1;
                number(self.be(1)? as f64)
            }
            0xd0 => {
                self.need(2)?;
                self.at += 1;
                number(f64::from(self.be(1)? as u8 as i8))
            }
            0xcd => {
                self.need(3)?;
                self.at += 1;
                number(self.be(2)? as f64)
            }
            0xd1 => {
                self.need(3)?;
                self.at += 1;
                number(f64::from(self.be(2)? as u16 as i16))
            }
            0xce => {
                self.need(5)?;
                self.at += 1;
                number(self.be(4)? as f64)
            }
            0xd2 => {
                self.need(5)?;
                self.at += 1;
                number(f64::from(self.be(4)? as u32 as i32))
            }
            // uint 64 is pushed with lua_pushinteger: a signed cast.
            0xcf | 0xd3 => {
                self.need(9)?;
                self.at += 1;
                number(self.be(8)? as i64 as f64)
            }
            0xc0 => {
                self.at += 1;
                Ok(Ok(Head::Value(Value::Nil)))
            }
            0xc3 | 0xc2 => {
                self.at += 1;
                Ok(Ok(Head::Value(Value::Boolean(first == 0xc3))))
            }
            0xca => {
                self.need(5)?;
                self.at += 1;
                number(f64::from(f32::from_bits(self.be(4)? as u32)))
            }
            0xcb => {
                self.need(9)?;
                self.at += 1;
                number(f64::from_bits(self.be(8)?))
            }
            0xd9..=0xdb => {
                let width = match first {
                    0xd9 => 1,
                    0xda => 2,
                    _ => 4,
                };
                self.need(1 + width)?;
                let len = u64::from_be_bytes({
                    let mut b = [0u8; 8];
                    b[8 - width..].copy_from_slice(&self.data[self.at + 1..self.at + 1 + width]);
                    b
                }) as usize;
                // raw 8 and 16 check the whole item before consuming; raw 32 the header first.
                if width < 4 {
                    self.need(1 + width + len)?;
                }
                self.at += 1 + width;
                let bytes = self.take(len)?.to_vec();
                Ok(lua.create_string(bytes).map(|s| Head::Value(Value::String(s))))
            }
            0xdc..=0xdf => {
                let width = if first == 0xdc || first == 0xde { 2 } else { 4 };
                self.need(1 + width)?;
                self.at += 1;
                let n = self.be(width)? as usize;
                Ok(Ok(if first <= 0xdd { Head::Array(n) } else { Head::Map(n) }))
            }
            _ if first & 0x80 == 0 => {
                self.at += 1;
                number(f64::from(first))
            }
            _ if first & 0xe0 == 0xe0 => {
                self.at += 1;
                number(f64::from(first as i8))
            }
            _ if first & 0xe0 == 0xa0 => {
                let len = usize::from(first & 0x1f);
                self.need(1 + len)?;
                self.at += 1;
                let bytes = self.take(len)?.to_vec();
                Ok(lua.create_string(bytes).map(|s| Head::Value(Value::String(s))))
            }
            _ if first & 0xf0 == 0x90 => {
                self.at += 1;
                Ok(Ok(Head::Array(usize::from(first & 0xf))))
            }
            _ if first & 0xf0 == 0x80 => {
                self.at += 1;
                Ok(Ok(Head::Map(usize::from(first & 0xf))))
            }
            _ => Err(Stop::BadFormat),
        }
    }
}

/// `lua_settable(t, k, v)` on a fresh table: a nil or NaN key is Lua's error (without position:
/// the Lua core raises it inside a C function).
fn settable(t: &Table, k: Value, v: Value) -> mlua::Result<()> {
    match &k {
        Value::Nil => return Err(super::raise(b"table index is nil".to_vec())),
        Value::Number(n) if n.is_nan() => return Err(super::raise(b"table index is NaN".to_vec())),
        _ => {}
    }
    t.raw_set(k, v).map_err(out_of_memory)
}

/// Decodes one top-level value; `base` is how many stack slots are in use below it.
fn decode_one(lua: &Lua, c: &mut Cursor<'_>, base: usize) -> mlua::Result<Result<Value, Stop>> {
    let mut open: Vec<OpenContainer> = Vec::new();
    // Stack slots C would be using below the next item: each open container holds its table,
    // and an array the index being filled, a map the key once it has been read.
    let used = |open: &[OpenContainer]| {
        base + open
            .iter()
            .map(|o| match o {
                OpenContainer::Array { .. } | OpenContainer::Map { key: Some(_), .. } => 2,
                OpenContainer::Map { key: None, .. } => 1,
            })
            .sum::<usize>()
    };
    loop {
        // Every item decoded first checks for one more stack slot.
        check_stack(lua, used(&open), STACK_MESSAGE)?;
        let head = match c.head(lua) {
            Err(stop) => return Ok(Err(stop)),
            Ok(head) => head?,
        };
        let mut value = match head {
            Head::Value(v) => v,
            Head::Array(n) => {
                let table = lua.create_table().map_err(out_of_memory)?;
                // `mp_decode_to_lua_array` checks for a slot above its new table.
                check_stack(lua, used(&open) + 1, "in function mp_decode_to_lua_array")?;
                if n > 0 {
                    open.push(OpenContainer::Array { table, next: 1, left: n });
                    continue;
                }
                Value::Table(table)
            }
            Head::Map(n) => {
                let table = lua.create_table().map_err(out_of_memory)?;
                if n > 0 {
                    open.push(OpenContainer::Map { table, key: None, left: n });
                    continue;
                }
                Value::Table(table)
            }
        };
        // Store the value in the innermost open container; close the ones that are full.
        loop {
            match open.last_mut() {
                None => return Ok(Ok(value)),
                Some(OpenContainer::Array { table, next, left }) => {
                    settable(table, Value::Number(*next as f64), value)?;
                    *next += 1;
                    *left -= 1;
                    if *left > 0 {
                        break;
                    }
                }
                Some(OpenContainer::Map { table, key, left }) => match key.take() {
                    None => {
                        *key = Some(value);
                        break;
                    }
                    Some(k) => {
                        settable(table, k, value)?;
                        *left -= 1;
                        if *left > 0 {
                            break;
                        }
                    }
                },
            }
            value = match open.pop() {
                Some(OpenContainer::Array { table, .. } | OpenContainer::Map { table, .. }) => Value::Table(table),
                None => return Ok(Ok(Value::Nil)),
            };
        }
    }
}

/// `mp_unpack_full`: every value (`limit` 0 and `offset` 0), or up to `limit` from `offset` and
/// the offset to go on from (-1 at the end) before them.
fn unpack_full(lua: &Lua, data: &[u8], limit: i64, offset: i64) -> mlua::Result<MultiValue> {
    let all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        return Err(error(
            lua,
            format!("Invalid request to unpack with offset of {} and limit of {}.", offset as i32, data.len() as i32),
        ));
    }
    if offset as u64 > data.len() as u64 {
        return Err(error(
            lua,
            format!("Start offset {} greater than input length {}.", offset as i32, data.len() as i32),
        ));
    }
    let limit = if all { i64::from(i32::MAX) } else { limit };
    let mut c = Cursor { data, at: offset as usize };
    let mut values = Vec::new();
    while c.at < data.len() && (values.len() as i64) < limit {
        match decode_one(lua, &mut c, 1 + values.len())? {
            Ok(v) => values.push(v),
            Err(Stop::Eof) => return Err(error(lua, "Missing bytes in input.")),
            Err(Stop::BadFormat) => return Err(error(lua, "Bad data format in input.")),
        }
    }
    if !all {
        let next = if c.at == data.len() { -1.0 } else { c.at as f64 };
        values.insert(0, Value::Number(next));
    }
    Ok(MultiValue::from_iter(values))
}

pub(super) fn module(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("pack", lua.create_function(pack)?)?;
    t.set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| {
            let args = Args::new(args);
            unpack_full(lua, &args.check_string(lua, 1)?, 0, 0)
        })?,
    )?;
    t.set(
        "unpack_one",
        lua.create_function(|lua, args: MultiValue| {
            let args = Args::new(args);
            let offset = args.opt_integer(lua, 2, 0)?;
            unpack_full(lua, &args.check_string(lua, 1)?, 1, offset)
        })?,
    )?;
    t.set(
        "unpack_limit",
        lua.create_function(|lua, args: MultiValue| {
            let args = Args::new(args);
            let limit = args.check_integer(lua, 2)?;
            let offset = args.opt_integer(lua, 3, 0)?;
            unpack_full(lua, &args.check_string(lua, 1)?, limit, offset)
        })?,
    )?;
    t.set("_NAME", "cmsgpack")?;
    t.set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}
