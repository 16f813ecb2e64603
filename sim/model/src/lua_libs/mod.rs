//! The C libraries Redis 7.0 loads into every script's Lua state, in Rust: `cjson` (Lua CJSON
//! 2.1.0), `bit` (LuaBitOp 1.0.2), `struct` (Roberto Ierusalimschy's struct 1.4) and `cmsgpack`
//! (lua-cmsgpack 0.4.0), with the fixes Redis 7.0.15 ships.
//!
//! Each is a translation of the C code Redis compiles, down to its quirks, because a script sees
//! their output and their errors: CJSON prints numbers with `%.14g` and escapes `/`, cmsgpack
//! decodes a 64-bit unsigned integer through a signed cast, struct's `c0` reads its length off
//! the previous result. Only the libraries' tables are built when the engine starts; a script that
//! does not use them pays nothing.
//!
//! **Errors.** These libraries raise plain Lua strings with `luaL_error`, prefixed with where the
//! calling Lua code is ("user_script:3: ..."), and argument errors name the function the way
//! `luaL_argerror` does ("bad argument #1 to 'encode' (expected 1 argument)", "... to 'f' ..."
//! when called through a local `f`). A Rust function cannot raise a Lua string through mlua, so
//! the text travels as a [`LuaError`] and the sandbox's `pcall`, `xpcall` and error handler turn
//! it back into the string (see `script`). The position and the name come from the Lua debug
//! interface, as in C: the function itself is level 0 and its caller level 1.
//!
//! **Nesting.** C walks nested tables and JSON/msgpack documents recursively and stops where
//! Lua's C stack (8000 slots, `LUAI_MAXCSTACK`) runs out; the translations walk them with explicit
//! stacks and count the slots C would use, so they stop at the same depth with the same error
//! without deep Rust recursion.

use std::borrow::Cow;

use mlua::{Lua, MultiValue, Table, Value};

mod bit;
mod cjson;
mod cmsgpack;
mod structs;

pub(crate) use cjson::CjsonConfig;

/// Lua's limit on the stack slots one C function may use (`LUAI_MAXCSTACK`).
const MAX_C_STACK: usize = 8000;

/// A string error as `luaL_error` or the Lua core raises it (see the module docs).
#[derive(Debug)]
pub(crate) struct LuaError(pub(crate) Vec<u8>);

impl std::fmt::Display for LuaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

impl std::error::Error for LuaError {}

/// Raises `text` as a Lua string, as it stands.
fn raise(text: Vec<u8>) -> mlua::Error {
    mlua::Error::external(LuaError(text))
}

/// The libraries' tables, for the sandbox to make read-only and publish as globals.
pub(crate) struct Libraries {
    pub(crate) cjson: Table,
    pub(crate) bit: Table,
    pub(crate) structs: Table,
    pub(crate) cmsgpack: Table,
}

/// Builds the four libraries. `cjson` keeps its settings in `config`, which SCRIPT FLUSH resets
/// (Redis builds a new Lua state then).
pub(crate) fn install(lua: &Lua, config: &CjsonConfig) -> mlua::Result<Libraries> {
    Ok(Libraries {
        cjson: cjson::module(lua, config.clone())?,
        bit: bit::module(lua)?,
        structs: structs::module(lua)?,
        cmsgpack: cmsgpack::module(lua)?,
    })
}

/// A library function's arguments, numbered from 1 as in C.
pub(super) struct Args(pub(super) Vec<Value>);

impl Args {
    fn new(args: MultiValue) -> Self {
        Args(args.into_iter().collect())
    }

    /// `lua_gettop`.
    fn len(&self) -> usize {
        self.0.len()
    }

    /// Argument `n`, `None` past the last one (`lua_isnone`).
    fn get(&self, n: usize) -> Option<&Value> {
        n.checked_sub(1).and_then(|i| self.0.get(i))
    }

    /// Argument `n` as `lua_tonumber` reads it: numbers and numeric strings; `None` otherwise.
    fn number(&self, lua: &Lua, n: usize) -> Option<f64> {
        to_number(lua, self.get(n)?)
    }

    /// `luaL_checknumber`.
    fn check_number(&self, lua: &Lua, n: usize) -> mlua::Result<f64> {
        self.number(lua, n).ok_or_else(|| self.type_error(lua, n, "number"))
    }

    /// `luaL_checkinteger`: the number cast to an integer as C casts it.
    fn check_integer(&self, lua: &Lua, n: usize) -> mlua::Result<i64> {
        self.check_number(lua, n).map(c_long)
    }

    /// `luaL_optinteger`.
    fn opt_integer(&self, lua: &Lua, n: usize, default: i64) -> mlua::Result<i64> {
        match self.get(n) {
            None | Some(Value::Nil) => Ok(default),
            Some(_) => self.check_integer(lua, n),
        }
    }

    /// `luaL_checklstring`: strings, and numbers as Lua prints them.
    fn check_string(&self, lua: &Lua, n: usize) -> mlua::Result<Vec<u8>> {
        match self.get(n) {
            Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
            Some(v @ (Value::Integer(_) | Value::Number(_))) => match lua.coerce_string(v.clone())? {
                Some(s) => Ok(s.as_bytes().to_vec()),
                None => Err(self.type_error(lua, n, "string")),
            },
            _ => Err(self.type_error(lua, n, "string")),
        }
    }

    /// `luaL_typerror`: "<expected> expected, got <type>".
    fn type_error(&self, lua: &Lua, n: usize, expected: &str) -> mlua::Error {
        let got = self.get(n).map_or("no value", type_name);
        arg_error(lua, n as i64, format!("{expected} expected, got {got}").as_bytes())
    }
}

/// `lua_typename(lua_type(v))`.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::LightUserData(_) | Value::UserData(_) | Value::Error(_) => "userdata",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// `lua_tonumber`: numbers, and strings Lua reads as numbers.
fn to_number(lua: &Lua, v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(_) => lua.coerce_number(v.clone()).ok().flatten(),
        _ => None,
    }
}

/// C's `(long)` cast of a double on x86-64: truncation, `i64::MIN` when out of range or NaN.
fn c_long(x: f64) -> i64 {
    super::num::lua_number_to_i64(x)
}

/// C's `(int)` cast of a double on x86-64: truncation, `i32::MIN` when out of range or NaN.
fn c_int(x: f64) -> i32 {
    if x.is_nan() || !(-2_147_483_649.0 < x && x < 2_147_483_648.0) {
        i32::MIN
    } else {
        x as i32
    }
}

/// `luaL_where(L, 1)`: "source:line: " of the Lua code that called the running C function, or
/// nothing when a C function (`pcall`) called it.
fn where_prefix(lua: &Lua) -> Vec<u8> {
    let found = lua.inspect_stack(1, |d| (d.current_line(), d.source().short_src.map(Cow::into_owned)));
    match found {
        Some((Some(line), Some(src))) if line > 0 => format!("{src}:{line}: ").into_bytes(),
        _ => Vec::new(),
    }
}

/// `luaL_error`: `msg` after the caller's position.
fn error(lua: &Lua, msg: impl AsRef<[u8]>) -> mlua::Error {
    let mut text = where_prefix(lua);
    text.extend_from_slice(msg.as_ref());
    raise(text)
}

/// `luaL_argerror`: names the running function as its caller's code calls it ("encode" for
/// `cjson.encode(...)`, "f" through a local `f`, "?" when called from C).
fn arg_error(lua: &Lua, narg: i64, extra: &[u8]) -> mlua::Error {
    let names = lua.inspect_stack(0, |d| {
        let names = d.names();
        (names.name.map(Cow::into_owned), names.name_what)
    });
    let (name, what) = names.unwrap_or((None, None));
    let name = name.unwrap_or_else(|| "?".to_string());
    let mut narg = narg;
    if what == Some("method") {
        narg -= 1;
        if narg == 0 {
            let mut msg = format!("calling '{name}' on bad self (").into_bytes();
            msg.extend_from_slice(extra);
            msg.push(b')');
            return error(lua, msg);
        }
    }
    let mut msg = format!("bad argument #{narg} to '{name}' (").into_bytes();
    msg.extend_from_slice(extra);
    msg.push(b')');
    error(lua, msg)
}

/// `luaL_checkstack(L, 1, msg)` for a C function that has `used` slots on its stack.
fn check_stack(lua: &Lua, used: usize, msg: &str) -> mlua::Result<()> {
    if used + 1 > MAX_C_STACK {
        return Err(error(lua, format!("stack overflow ({msg})")));
    }
    Ok(())
}

/// Lua's message for a failed allocation, raised as Lua raises it.
fn out_of_memory(e: mlua::Error) -> mlua::Error {
    match e {
        mlua::Error::MemoryError(_) => raise(b"not enough memory".to_vec()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use crate::{ManualServerClock, ModelHandle, Reply};

    fn eval(model: &ModelHandle, body: &str) -> Reply {
        model.call(&[b"EVAL", body.as_bytes(), b"0"])
    }

    /// Replies of redis-server 7.0.15 to the same scripts.
    #[test]
    fn library_errors_read_as_redis_raises_them() {
        let model = ModelHandle::new(ManualServerClock::from_millis(1_700_000_000_000));
        let cases: &[(&str, &str)] = &[
            (
                "return cjson.decode('[1,2')",
                "ERR user_script:1: Expected comma or array end but found T_END at character 5",
            ),
            (
                "local f = bit.band return f('x')",
                "ERR user_script:1: bad argument #1 to 'f' (number expected, got string)",
            ),
            ("return cmsgpack.pack()", "ERR user_script:1: bad argument #0 to 'pack' (MessagePack pack needs input.)"),
            ("return struct.size('s')", "ERR user_script:1: bad argument #1 to 'size' (option 's' has no fixed size)"),
        ];
        for (body, text) in cases {
            let Reply::Error(e) = eval(&model, body) else { panic!("{body} did not fail") };
            assert!(e.starts_with(text.as_bytes()), "{body}: {}", String::from_utf8_lossy(&e));
        }
        // pcall hands back the plain string, without a position when pcall itself called the
        // library function.
        let reply = eval(&model, "local ok, e = pcall(cjson.decode, '[') return e");
        assert_eq!(reply, Reply::bulk(b"Expected value but found T_END at character 2"));
        let reply = eval(&model, "return {xpcall(function() return cjson.decode('x') end, function(e) return e end)}");
        let expected = "user_script:1: Expected value but found invalid token at character 1";
        assert_eq!(reply, Reply::Array(vec![Reply::Nil, Reply::bulk(expected.as_bytes())]));
    }

    #[test]
    fn cjson_settings_last_until_script_flush() {
        let model = ModelHandle::new(ManualServerClock::from_millis(1_700_000_000_000));
        assert_eq!(eval(&model, "return cjson.encode(1/3)"), Reply::bulk(b"0.33333333333333"));
        eval(&model, "cjson.encode_number_precision(3)");
        assert_eq!(eval(&model, "return cjson.encode(1/3)"), Reply::bulk(b"0.333"));
        model.call(&[b"SCRIPT", b"FLUSH"]);
        assert_eq!(eval(&model, "return cjson.encode(1/3)"), Reply::bulk(b"0.33333333333333"));
    }
}
