//! `bit`: LuaBitOp 1.0.2, 32-bit operations on Lua numbers.
//!
//! An argument becomes 32 bits the way LuaBitOp does it on doubles: add 2^52 + 2^51 and keep the
//! low word of the result, which rounds to the nearest integer (ties to even) and wraps modulo
//! 2^32. Results are signed 32-bit numbers. Lua 5.1's `lua_tonumber` reads numeric strings; only
//! a zero from something that is not a number is an error ("number expected, got string").

use mlua::{Lua, MultiValue, Table};

use super::Args;

/// `barg`: argument `n` as 32 bits.
fn barg(lua: &Lua, args: &Args, n: usize) -> mlua::Result<u32> {
    let x = args.number(lua, n).unwrap_or(0.0);
    let b = (x + 6_755_399_441_055_744.0).to_bits() as u32;
    if b == 0 && args.number(lua, n).is_none() {
        return Err(args.type_error(lua, n, "number"));
    }
    Ok(b)
}

/// `BRET`: a result as a signed 32-bit number.
fn ret(b: u32) -> f64 {
    f64::from(b as i32)
}

type BitOp = fn(u32, u32) -> u32;

fn unary(lua: &Lua, f: fn(u32) -> u32) -> mlua::Result<mlua::Function> {
    lua.create_function(move |lua, args: MultiValue| {
        let args = Args::new(args);
        Ok(ret(f(barg(lua, &args, 1)?)))
    })
}

/// band/bor/bxor: the first argument, then the others from the last one down (C's loop order,
/// which decides which bad argument is reported).
fn fold(lua: &Lua, op: BitOp) -> mlua::Result<mlua::Function> {
    lua.create_function(move |lua, args: MultiValue| {
        let args = Args::new(args);
        let mut b = barg(lua, &args, 1)?;
        for n in (2..=args.len()).rev() {
            b = op(b, barg(lua, &args, n)?);
        }
        Ok(ret(b))
    })
}

/// The shifts and rotations: the count is the second argument's low 5 bits.
fn shift(lua: &Lua, op: BitOp) -> mlua::Result<mlua::Function> {
    lua.create_function(move |lua, args: MultiValue| {
        let args = Args::new(args);
        let b = barg(lua, &args, 1)?;
        let n = barg(lua, &args, 2)? & 31;
        Ok(ret(op(b, n)))
    })
}

/// `tohex(x [, n])`: the low |n| hex digits (at most 8, default 8), upper case for negative n.
fn tohex(lua: &Lua, args: &Args) -> mlua::Result<Vec<u8>> {
    let mut b = barg(lua, args, 1)?;
    let mut n = if args.get(2).is_none() { 8 } else { barg(lua, args, 2)? as i32 };
    // Redis's fix for CVE-2024-31449: -INT32_MIN would overflow.
    if n == i32::MIN {
        n = i32::MIN + 1;
    }
    let digits: &[u8; 16] = if n < 0 { b"0123456789ABCDEF" } else { b"0123456789abcdef" };
    let n = n.unsigned_abs().min(8) as usize;
    let mut out = vec![0u8; n];
    for slot in out.iter_mut().rev() {
        *slot = digits[(b & 15) as usize];
        b >>= 4;
    }
    Ok(out)
}

pub(super) fn module(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("tobit", unary(lua, |b| b)?)?;
    t.set("bnot", unary(lua, |b| !b)?)?;
    t.set("bswap", unary(lua, u32::swap_bytes)?)?;
    t.set("band", fold(lua, |a, b| a & b)?)?;
    t.set("bor", fold(lua, |a, b| a | b)?)?;
    t.set("bxor", fold(lua, |a, b| a ^ b)?)?;
    t.set("lshift", shift(lua, |b, n| b << n)?)?;
    t.set("rshift", shift(lua, |b, n| b >> n)?)?;
    t.set("arshift", shift(lua, |b, n| ((b as i32) >> n) as u32)?)?;
    t.set("rol", shift(lua, u32::rotate_left)?)?;
    t.set("ror", shift(lua, u32::rotate_right)?)?;
    t.set(
        "tohex",
        lua.create_function(|lua, args: MultiValue| {
            let args = Args::new(args);
            lua.create_string(tohex(lua, &args)?)
        })?,
    )?;
    Ok(t)
}
