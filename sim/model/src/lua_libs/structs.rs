//! `struct`: struct 1.4 (pack, unpack, size), with Redis's fix for CVE-2020-14147 (a size too
//! big for an `int` is "integral size overflow").
//!
//! Formats: `<` `>` endianness (native: little), `!n` alignment, `x` padding, `b/B h/H l/L T`
//! (1, 2, 8, 8 bytes), `i/In` (default 4, at most 32 bytes), `f` `d`, `cn` (n chars; `c0` the
//! whole string when packing, the previous result's length when unpacking), `s` (zero-ended), and
//! spaces. Integers go through C's `long`/`unsigned long` as the C code casts them.
//!
//! The format string is a C string: it ends at its first NUL byte.

use mlua::{Lua, MultiValue, Table, Value};

use super::{c_long, check_stack, error, Args};

const MAX_INT_SIZE: i64 = 32;
/// `MAXALIGN` on x86-64: the alignment of a double.
const MAX_ALIGN: i64 = 8;

#[derive(Clone, Copy, PartialEq)]
enum Endian {
    Big,
    Little,
}

struct Header {
    endian: Endian,
    align: usize,
}

impl Header {
    fn new() -> Self {
        Header { endian: Endian::Little, align: 1 }
    }
}

/// A C-string cursor over the format.
struct Format<'a> {
    fmt: &'a [u8],
    at: usize,
}

impl Format<'_> {
    fn peek(&self) -> u8 {
        self.fmt.get(self.at).copied().unwrap_or(0)
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek();
        if c == 0 {
            return None;
        }
        self.at += 1;
        Some(c)
    }

    /// `getnum`: a decimal number here, or `default`.
    fn number(&mut self, lua: &Lua, default: i64) -> mlua::Result<i64> {
        if !self.peek().is_ascii_digit() {
            return Ok(default);
        }
        let mut a: i64 = 0;
        while self.peek().is_ascii_digit() {
            let digit = i64::from(self.peek() - b'0');
            if a > i64::from(i32::MAX) / 10 || a * 10 > i64::from(i32::MAX) - digit {
                return Err(error(lua, "integral size overflow"));
            }
            a = a * 10 + digit;
            self.at += 1;
        }
        Ok(a)
    }
}

/// `optsize`: the size of option `opt` (reading its number from the format).
fn opt_size(lua: &Lua, opt: u8, fmt: &mut Format<'_>) -> mlua::Result<usize> {
    Ok(match opt {
        b'B' | b'b' => 1,
        b'H' | b'h' => 2,
        b'L' | b'l' | b'T' | b'd' => 8,
        b'f' => 4,
        b'x' => 1,
        b'c' => fmt.number(lua, 1)? as usize,
        b'i' | b'I' => {
            let size = fmt.number(lua, 4)?;
            if size > MAX_INT_SIZE {
                return Err(error(lua, format!("integral size {size} is larger than limit of {MAX_INT_SIZE}")));
            }
            size as usize
        }
        _ => 0,
    })
}

/// `gettoalign`: padding before an item of `size` bytes at offset `len`.
fn to_align(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size.wrapping_sub(len & (size - 1))) & (size - 1)
}

/// `controloptions`: endianness, alignment, spaces; anything else is an invalid option.
fn control(lua: &Lua, opt: u8, fmt: &mut Format<'_>, h: &mut Header) -> mlua::Result<()> {
    match opt {
        b' ' => {}
        b'>' => h.endian = Endian::Big,
        b'<' => h.endian = Endian::Little,
        b'!' => {
            let a = fmt.number(lua, MAX_ALIGN)?;
            if a <= 0 || a & (a - 1) != 0 {
                return Err(error(lua, format!("alignment {a} is not a power of 2")));
            }
            h.align = a as usize;
        }
        _ => {
            let mut msg = b"invalid format option '".to_vec();
            msg.push(opt);
            msg.push(b'\'');
            return Err(super::arg_error(lua, 1, &msg));
        }
    }
    Ok(())
}

/// C's `(unsigned long)` of a double on x86-64 (what gcc emits): values from 2^63 go through
/// `x - 2^63`, so 2^64 and beyond (and infinity) become 0; NaN becomes 2^63.
fn c_ulong(x: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if x >= TWO_63 {
        (c_long(x - TWO_63) as u64) ^ (1 << 63)
    } else {
        c_long(x) as u64
    }
}

fn pack(lua: &Lua, args: &Args) -> mlua::Result<Vec<u8>> {
    let fmt_bytes = args.check_string(lua, 1)?;
    // C pushes a nil to mark the end of the arguments: a missing one reads as nil, not "no value".
    let mut marked: Vec<Value> = (1..=args.len()).filter_map(|n| args.get(n).cloned()).collect();
    marked.push(Value::Nil);
    let args = &Args(marked);
    let mut fmt = Format { fmt: &fmt_bytes, at: 0 };
    let mut h = Header::new();
    let mut arg = 2;
    let mut out: Vec<u8> = Vec::new();
    while let Some(opt) = fmt.next() {
        let mut size = opt_size(lua, opt, &mut fmt)?;
        let pad = to_align(out.len(), &h, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = args.check_number(lua, arg)?;
                arg += 1;
                let mut value = if n < 0.0 { c_long(n) as u64 } else { c_ulong(n) };
                let mut bytes = vec![0u8; size];
                for b in bytes.iter_mut() {
                    *b = value as u8;
                    value >>= 8;
                }
                if h.endian == Endian::Big {
                    bytes.reverse();
                }
                out.extend_from_slice(&bytes);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = args.check_number(lua, arg)? as f32;
                arg += 1;
                out.extend_from_slice(&if h.endian == Endian::Big { f.to_be_bytes() } else { f.to_le_bytes() });
            }
            b'd' => {
                let d = args.check_number(lua, arg)?;
                arg += 1;
                out.extend_from_slice(&if h.endian == Endian::Big { d.to_be_bytes() } else { d.to_le_bytes() });
            }
            b'c' | b's' => {
                let s = args.check_string(lua, arg)?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    // C reports the argument after the string (it has already moved on).
                    return Err(super::arg_error(lua, arg as i64, b"string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => control(lua, opt, &mut fmt, &mut h)?,
        }
    }
    Ok(out)
}

/// `getinteger`: `size` bytes as C's `unsigned long` (bytes beyond 8 shift out), sign-extended
/// from the top bit of the field for the signed formats.
fn get_integer(bytes: &[u8], endian: Endian, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let mut push = |b: u8| l = (l << 8) | u64::from(b);
    match endian {
        Endian::Big => bytes.iter().for_each(|&b| push(b)),
        Endian::Little => bytes.iter().rev().for_each(|&b| push(b)),
    }
    if !signed {
        return l as f64;
    }
    // `~0UL << (size*8 - 1)`: x86 takes the shift count modulo 64.
    let mask = u64::MAX.wrapping_shl((bytes.len() as u32).wrapping_mul(8).wrapping_sub(1));
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

/// A result of `unpack`, kept as bytes until the end.
enum Item {
    Number(f64),
    Bytes(Vec<u8>),
}

fn unpack(lua: &Lua, args: &Args) -> mlua::Result<MultiValue> {
    let fmt_bytes = args.check_string(lua, 1)?;
    let data = args.check_string(lua, 2)?;
    let start = args.opt_integer(lua, 3, 1)?;
    let mut fmt = Format { fmt: &fmt_bytes, at: 0 };
    let mut h = Header::new();
    let too_short = || super::arg_error(lua, 2, b"data string too short");
    // `size_t pos = luaL_optinteger(L, 3, 1) - 1`: 0 and below wrap around to huge positions,
    // which the bounds checks refuse.
    let mut pos = start.wrapping_sub(1) as u64 as usize;
    let fits = |pos: usize, size: usize| size <= data.len() && pos <= data.len() - size;
    let mut items: Vec<Item> = Vec::new();
    while let Some(opt) = fmt.next() {
        let mut size = opt_size(lua, opt, &mut fmt)?;
        pos = pos.wrapping_add(to_align(pos, &h, opt, size));
        if !fits(pos, size) {
            return Err(too_short());
        }
        // Room for the item and the next position, above the arguments and the results so far.
        check_stack(lua, args.len() + items.len() + 1, "too many results")?;
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.is_ascii_lowercase();
                items.push(Item::Number(get_integer(&data[pos..pos + size], h.endian, signed)));
            }
            b'x' => {}
            b'f' => {
                let mut b = [0u8; 4];
                b.copy_from_slice(&data[pos..pos + 4]);
                let f = if h.endian == Endian::Big { f32::from_be_bytes(b) } else { f32::from_le_bytes(b) };
                items.push(Item::Number(f64::from(f)));
            }
            b'd' => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&data[pos..pos + 8]);
                let d = if h.endian == Endian::Big { f64::from_be_bytes(b) } else { f64::from_le_bytes(b) };
                items.push(Item::Number(d));
            }
            b'c' => {
                if size == 0 {
                    // The length is the previous result, which is consumed.
                    let previous = match items.last() {
                        Some(Item::Number(n)) => Some(*n),
                        Some(Item::Bytes(b)) => super::to_number(lua, &Value::String(lua.create_string(b)?)),
                        None => None,
                    };
                    let Some(n) = previous else {
                        return Err(error(lua, "format 'c0' needs a previous size"));
                    };
                    items.pop();
                    size = usize::try_from(c_ulong(n)).unwrap_or(usize::MAX);
                    if !fits(pos, size) {
                        return Err(too_short());
                    }
                }
                items.push(Item::Bytes(data[pos..pos + size].to_vec()));
            }
            b's' => {
                let Some(len) = data[pos..].iter().position(|&c| c == 0) else {
                    return Err(error(lua, "unfinished string in data"));
                };
                size = len + 1;
                items.push(Item::Bytes(data[pos..pos + len].to_vec()));
            }
            _ => control(lua, opt, &mut fmt, &mut h)?,
        }
        pos = pos.wrapping_add(size);
    }
    let mut out = Vec::with_capacity(items.len() + 1);
    for item in items {
        out.push(match item {
            Item::Number(n) => Value::Number(n),
            Item::Bytes(b) => Value::String(lua.create_string(&b)?),
        });
    }
    out.push(Value::Number(pos.wrapping_add(1) as i64 as f64));
    Ok(MultiValue::from_iter(out))
}

fn size(lua: &Lua, args: &Args) -> mlua::Result<f64> {
    let fmt_bytes = args.check_string(lua, 1)?;
    let mut fmt = Format { fmt: &fmt_bytes, at: 0 };
    let mut h = Header::new();
    let mut pos: usize = 0;
    while let Some(opt) = fmt.next() {
        let size = opt_size(lua, opt, &mut fmt)?;
        pos += to_align(pos, &h, opt, size);
        if opt == b's' {
            return Err(super::arg_error(lua, 1, b"option 's' has no fixed size"));
        } else if opt == b'c' && size == 0 {
            return Err(super::arg_error(lua, 1, b"option 'c0' has no fixed size"));
        }
        // Unknown letters and digits count as nothing here; other bytes are checked.
        if !opt.is_ascii_alphanumeric() {
            control(lua, opt, &mut fmt, &mut h)?;
        }
        pos += size;
    }
    Ok(pos as f64)
}

pub(super) fn module(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            let bytes = pack(lua, &Args::new(args))?;
            lua.create_string(bytes)
        })?,
    )?;
    t.set("unpack", lua.create_function(|lua, args: MultiValue| unpack(lua, &Args::new(args)))?)?;
    t.set("size", lua.create_function(|lua, args: MultiValue| size(lua, &Args::new(args)))?)?;
    Ok(t)
}
