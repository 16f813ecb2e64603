//! EVAL and EVALSHA: Lua 5.1 run the way Redis 7.0 runs it.
//!
//! One Lua state lives as long as the model. Scripts are compiled once and cached by SHA1, so
//! EVALSHA costs a table lookup plus the script itself. What a script sees is Redis's sandbox:
//!
//! - `KEYS` and `ARGV` as fresh string tables per call (Redis builds new ones too, and a script
//!   may write into them, so reusing them would leak one call's edits into the next).
//! - `redis.call`/`redis.pcall`, `redis.status_reply`, `redis.error_reply`, `redis.sha1hex`,
//!   `redis.log` and `redis.LOG_*`, `redis.setresp` (RESP3 replies inside the script included),
//!   `redis.set_repl`, `redis.replicate_commands`, `redis.REDIS_VERSION`.
//! - Globals that cannot be created, changed or read when missing, with Redis 7.0's messages
//!   ("Attempt to modify a readonly table", "Script attempted to access nonexistent global
//!   variable 'x'"). Library tables (`string`, `math`, `table`, `redis`, `coroutine`) are
//!   read-only proxies, so one script cannot break the next. A consequence: `pairs(string)`
//!   and `pairs(_G)` see an empty table, where Redis would list the contents.
//! - No `os`, `io`, `debug`, `print`, `dofile`, `loadfile`, `require`. Redis's `cjson`, `bit`,
//!   `struct` and `cmsgpack` libraries are not provided either.
//! - `math.random` is Redis's `rand48`, seeded 0 when the model starts (Redis 7.0 seeds it
//!   once per process too, so sequences carry across calls).
//!
//! Conversions between Lua and Redis replies follow Redis's `luaReplyToRedisReply` and
//! `redisProtocolToLuaType` exactly; see [`lua_to_reply`] and [`reply_to_lua`].
//!
//! **Busy scripts.** Redis lets a script run past `busy-reply-threshold` (5 s) and answers other
//! clients BUSY until someone sends SCRIPT KILL. The model has no second client to do that while
//! a script holds it, so it kills a script itself once it has executed
//! [`ModelConfig::script_instruction_budget`] Lua VM instructions (counted in blocks of
//! 100 000 by a Lua count hook, deterministic unlike a timer). The script gets an error raised
//! inside it; once killed, the hook fires on every instruction so `pcall` cannot swallow the
//! kill and loop on. Memory is capped with [`ModelConfig::lua_memory_limit`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use mlua::{chunk::ChunkMode, Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};

use super::commands::{cstr, lookup, Ctx, Db, Handler, Lookup};
use super::num::{format_g17, lua_number_to_i64, parse_i64};
use super::resp::Reply;
use super::ModelConfig;

/// Name of the chunk holding the model's own Lua code; frames from it are skipped when an
/// error's position is reported, so positions point into the user's script as in Redis.
const INTERNAL_CHUNK: &str = "=redis_model";

/// Chunk name Redis gives every script: errors read "user_script:3: ...".
const USER_CHUNK: &str = "@user_script";

/// Lua instructions between two runs of the budget hook (Redis uses the same period).
const HOOK_PERIOD: u32 = 100_000;

/// Deepest table nesting converted to a reply. Redis stops at its Lua stack limit (a few
/// thousand levels); the model stops earlier so the conversion cannot exhaust a thread stack.
const MAX_REPLY_DEPTH: usize = 512;

/// The Lua side of the sandbox, run once when the engine starts. It receives a table of Rust
/// functions and returns the runner (an `xpcall` with Redis's error handler) and the script
/// environment.
const SANDBOX: &str = r#"
local rust = ...
local G = _G
local error, type, tostring, tonumber, select, setmetatable, rawget =
      error, type, tostring, tonumber, select, setmetatable, rawget
local raw_rawset, raw_pcall, xpcall, pairs = rawset, pcall, xpcall, pairs
local floor, ceil = math.floor, math.ceil

local function trunc(x)
  if x ~= x then return x end
  if x >= 0 then return floor(x) else return ceil(x) end
end

-- Read-only tables. Redis 7.0 marks its tables read-only inside the VM; plain Lua 5.1 can only
-- guard them with proxies whose __newindex refuses every write.
local protected = setmetatable({}, {__mode = 'k'})
local function readonly() error("Attempt to modify a readonly table", 2) end
local function proxy(t)
  local p = setmetatable({}, {__index = t, __newindex = readonly, __metatable = false})
  protected[p] = true
  return p
end

local redis = {}
local raise = rust.raise
redis.call = rust.call
redis.pcall = rust.pcall
redis.sha1hex = rust.sha1hex
local function wrong_args() return {err = 'ERR wrong number or type of arguments'} end
redis.status_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then return wrong_args() end
  return {ok = s}
end
redis.error_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then return wrong_args() end
  return {err = rust.error_text(s)}
end
redis.log = rust.log
redis.setresp = rust.setresp
redis.set_repl = rust.set_repl
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end
redis.acl_check_cmd = rust.acl_check
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION, redis.REDIS_VERSION_NUM = rust.version, rust.version_num

-- math.random as Redis has it: rand48, so every platform gives the same sequence.
local lrand48 = rust.lrand48
local function checkint(v, n)
  local x = tonumber(v)
  if x == nil then
    error("bad argument #" .. n .. " to 'random' (number expected, got " .. type(v) .. ")", 3)
  end
  return trunc(x)
end
local m = {}
for k, v in pairs(math) do m[k] = v end
m.random = function(...)
  local r = (lrand48() % 2147483647) / 2147483647
  local n = select('#', ...)
  if n == 0 then return r end
  if n == 1 then
    local u = checkint((...), 1)
    if u < 1 then error("bad argument #1 to 'random' (interval is empty)", 2) end
    return floor(r * u) + 1
  end
  if n == 2 then
    local l, u = ...
    l, u = checkint(l, 1), checkint(u, 2)
    if l > u then error("bad argument #2 to 'random' (interval is empty)", 2) end
    return floor(r * (u - l + 1)) + l
  end
  error("wrong number of arguments", 2)
end
m.randomseed = function(s) rust.srand48(checkint(s, 1)) end

-- Redis's pcall hands back the text of a Redis error rather than the error table.
local error_of = rust.error_of
local function unwrap(ok, ...)
  if not ok then
    local e = ...
    if type(e) == 'userdata' then
      local text = error_of(e)
      if text then return false, text end
    elseif type(e) == 'table' then
      local text = rawget(e, 'err')
      if type(text) == 'string' or type(text) == 'number' then return false, text end
    end
  end
  return ok, ...
end

raw_rawset(G, 'pcall', function(...) return unwrap(raw_pcall(...)) end)
-- xpcall's handler sees the {err=...} table, as in Redis, not the Rust error carrying it.
raw_rawset(G, 'xpcall', function(f, h)
  return xpcall(f, function(e)
    if type(e) == 'userdata' then
      local text = error_of(e)
      if text then e = {err = text} end
    end
    return h(e)
  end)
end)
raw_rawset(G, 'rawset', function(t, k, v)
  if protected[t] then error("Attempt to modify a readonly table", 0) end
  return raw_rawset(t, k, v)
end)
for _, name in pairs({'dofile', 'loadfile', 'print', 'newproxy', 'module', 'require',
                      'package', 'debug', 'os', 'io'}) do
  raw_rawset(G, name, nil)
end
raw_rawset(G, 'redis', proxy(redis))
raw_rawset(G, 'math', proxy(m))
raw_rawset(G, 'string', proxy(string))
raw_rawset(G, 'table', proxy(table))
raw_rawset(G, 'coroutine', proxy(coroutine))

local env = setmetatable({}, {__index = G, __newindex = readonly, __metatable = false})
protected[env] = true
protected[G] = true
raw_rawset(G, '_G', env)
setmetatable(G, {
  __index = function(_, k)
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end,
  __newindex = readonly,
  __metatable = false,
})

-- Redis's error handler: keep the error, note where in the user's script it happened.
local where = rust.where
local function handler(e)
  local msg
  if type(e) == 'userdata' then
    local text = error_of(e)
    if text then e = {err = text} end
  end
  if type(e) ~= 'table' then msg = 'ERR ' .. tostring(e) end
  local source, line = where()
  return {e = e, msg = msg, source = source, line = line}
end
local function run(f) return xpcall(f, handler) end
return run, env
"#;

/// Per-call state the Rust callbacks need: the keyspace (lent by the model for the duration of
/// the call), the command time, and the protocol the script asked for.
struct ScriptRun {
    /// `Some` only while a script runs.
    db: Option<Db>,
    now_ms: i64,
    resp: u8,
}

/// Counts hook firings against the budget; shared with the hook closure.
struct Guard {
    fires: AtomicU64,
    limit_fires: u64,
    killed: AtomicBool,
}

/// The Lua state, the compiled-script cache and the sandbox pieces.
pub(crate) struct ScriptEngine {
    lua: Lua,
    runner: Function,
    env: Table,
    globals: Table,
    /// SHA1 (lower-case hex) -> compiled script. Only looked up, never iterated.
    cache: HashMap<String, Function>,
    guard: Arc<Guard>,
    budget: u64,
    keys: FieldKeys,
}

/// The field names a returned table is probed for, interned once: probing with a ready Lua
/// string skips hashing the name again on every reply.
pub(crate) struct FieldKeys {
    err: mlua::LuaString,
    ok: mlua::LuaString,
    double: mlua::LuaString,
    big_number: mlua::LuaString,
    verbatim_string: mlua::LuaString,
    map: mlua::LuaString,
    set: mlua::LuaString,
    format: mlua::LuaString,
    string: mlua::LuaString,
}

impl FieldKeys {
    fn new(lua: &Lua) -> mlua::Result<Self> {
        Ok(FieldKeys {
            err: lua.create_string("err")?,
            ok: lua.create_string("ok")?,
            double: lua.create_string("double")?,
            big_number: lua.create_string("big_number")?,
            verbatim_string: lua.create_string("verbatim_string")?,
            map: lua.create_string("map")?,
            set: lua.create_string("set")?,
            format: lua.create_string("format")?,
            string: lua.create_string("string")?,
        })
    }
}

/// An `err` string as Redis's `luaPushErrorBuff` builds it from a reply or message: an
/// "-CODE msg" text keeps its code, anything else gets "ERR"; CR/LF at the ends are trimmed.
fn lua_error_text(raw: &[u8]) -> Vec<u8> {
    let (code, msg): (&[u8], &[u8]) = match raw.split_first() {
        Some((b'-', rest)) => match rest.iter().position(|&c| c == b' ') {
            Some(sp) => (&rest[..sp], &rest[sp + 1..]),
            None => (b"ERR", rest),
        },
        _ => (b"ERR", raw),
    };
    let is_crlf = |c: &u8| *c == b'\r' || *c == b'\n';
    let start = msg.iter().position(|c| !is_crlf(c)).unwrap_or(msg.len());
    let end = msg.iter().rposition(|c| !is_crlf(c)).map_or(start, |e| e + 1);
    let mut out = code.to_vec();
    out.push(b' ');
    out.extend_from_slice(&msg[start..end.max(start)]);
    out
}

fn err_table(lua: &Lua, text: &[u8]) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(text)?)?;
    Ok(Value::Table(t))
}

/// One argument of `redis.call`: borrowed from a Lua string or formatted from a number.
enum Arg {
    Lua(mlua::BorrowedBytes),
    Owned(Vec<u8>),
}

/// `luaArgsToRedisArgv`: strings as they are, numbers in `%.17g` (so 2^63 reaches Redis as
/// "9.2233720368547758e+18"), anything else is refused.
fn args_to_argv(args: &MultiValue) -> Result<Vec<Arg>, &'static [u8]> {
    if args.is_empty() {
        return Err(b"Please specify at least one argument for this redis lib call");
    }
    let mut argv = Vec::with_capacity(args.len());
    for v in args.iter() {
        argv.push(match v {
            Value::String(s) => Arg::Lua(s.as_bytes()),
            Value::Integer(i) => Arg::Owned(format_g17(*i as f64).into_bytes()),
            Value::Number(n) => Arg::Owned(format_g17(*n).into_bytes()),
            _ => return Err(b"Lua redis lib command arguments must be strings or integers"),
        });
    }
    Ok(argv)
}

/// A Redis error raised inside Lua by a Rust function (`redis.call` and friends). Rust cannot
/// raise a Lua table directly, so the text travels inside mlua's error userdata and the
/// error handler (and `pcall`) turn it back into the `{err=...}` table Redis would raise.
/// Raising from Rust rather than from a Lua wrapper matters: a Rust function is never
/// tail-called away, so the error still points at the user's line (`return redis.call(..)`).
#[derive(Debug)]
struct RedisError(Vec<u8>);

impl std::fmt::Display for RedisError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

impl std::error::Error for RedisError {}

fn raise(text: Vec<u8>) -> mlua::Error {
    mlua::Error::external(RedisError(text))
}

/// Finds a [`RedisError`] inside an error value that came back from Lua.
fn redis_error_text(e: &mlua::Error) -> Option<Vec<u8>> {
    match e {
        mlua::Error::ExternalError(inner) => inner.downcast_ref::<RedisError>().map(|r| r.0.clone()),
        mlua::Error::CallbackError { cause, .. } => redis_error_text(cause),
        mlua::Error::WithContext { cause, .. } => redis_error_text(cause),
        _ => None,
    }
}

/// The arguments as the byte slices a command reads.
fn slices(argv: &[Arg]) -> Vec<&[u8]> {
    argv.iter()
        .map(|a| match a {
            Arg::Lua(b) => &b[..],
            Arg::Owned(v) => &v[..],
        })
        .collect()
}

/// `redis.call`/`redis.pcall`: runs one command against the lent keyspace. `Err` carries the
/// error text (`redis.call` raises it, `redis.pcall` returns it as `{err=...}`).
fn redis_call(lua: &Lua, args: MultiValue) -> mlua::Result<Result<Value, Vec<u8>>> {
    let argv = match args_to_argv(&args) {
        Ok(argv) => argv,
        Err(msg) => return Ok(Err(lua_error_text(msg))),
    };
    let argv = slices(&argv);
    let spec = match lookup(&argv) {
        Lookup::Found(spec) => spec,
        _ => return Ok(Err(b"ERR Unknown Redis command called from script".to_vec())),
    };
    if !spec.arity_ok(argv.len()) {
        return Ok(Err(b"ERR Wrong number of args calling Redis command from script".to_vec()));
    }
    let Handler::Data(f) = spec.handler else {
        return Ok(Err(b"ERR This Redis command is not allowed from script".to_vec()));
    };
    debug_assert!(!spec.noscript, "data commands are all allowed in scripts");
    let (reply, resp) = {
        let mut run = lua.app_data_mut::<ScriptRun>();
        let Some(run) = run.as_deref_mut() else {
            return Ok(Err(b"ERR redis.call/pcall can only be called inside a script invocation".to_vec()));
        };
        let (now_ms, resp) = (run.now_ms, run.resp);
        let Some(db) = run.db.as_mut() else {
            return Ok(Err(b"ERR redis.call/pcall can only be called inside a script invocation".to_vec()));
        };
        db.count_call(spec);
        let mut ctx = Ctx { db, now_ms, resp };
        (f(&mut ctx, &argv), resp)
    };
    if let Reply::Error(e) = &reply {
        let mut dashed = Vec::with_capacity(e.len() + 1);
        dashed.push(b'-');
        dashed.extend_from_slice(e);
        return Ok(Err(lua_error_text(&dashed)));
    }
    Ok(Ok(reply_to_lua(lua, reply, resp)?))
}

/// Converts a command's reply for Lua (`redisProtocolToLuaType`). Under RESP2 a script sees
/// what a RESP2 client would parse; after `redis.setresp(3)` it sees the RESP3 types.
pub(crate) fn reply_to_lua(lua: &Lua, reply: Reply, resp: u8) -> mlua::Result<Value> {
    let resp3 = resp >= 3;
    Ok(match reply {
        Reply::Status(s) => {
            let t = lua.create_table()?;
            t.raw_set("ok", lua.create_string(&s)?)?;
            Value::Table(t)
        }
        Reply::Error(e) => {
            let mut dashed = Vec::with_capacity(e.len() + 1);
            dashed.push(b'-');
            dashed.extend_from_slice(&e);
            err_table(lua, &lua_error_text(&dashed))?
        }
        Reply::Integer(i) => Value::Number(i as f64),
        Reply::Bulk(b) => Value::String(lua.create_string(&b)?),
        Reply::Nil | Reply::NilArray => {
            if resp3 {
                Value::Nil
            } else {
                Value::Boolean(false)
            }
        }
        Reply::Array(items) => array_to_lua(lua, items, resp)?,
        Reply::Double(d) => {
            if resp3 {
                let t = lua.create_table()?;
                t.raw_set("double", d)?;
                Value::Table(t)
            } else {
                Value::String(lua.create_string(format_g17(d))?)
            }
        }
        Reply::Map(pairs) => {
            if resp3 {
                let inner = lua.create_table()?;
                for (k, v) in pairs {
                    inner.raw_set(reply_to_lua(lua, k, resp)?, reply_to_lua(lua, v, resp)?)?;
                }
                let t = lua.create_table()?;
                t.raw_set("map", inner)?;
                Value::Table(t)
            } else {
                let flat = pairs.into_iter().flat_map(|(k, v)| [k, v]).collect();
                array_to_lua(lua, flat, resp)?
            }
        }
        Reply::Set(items) => {
            if resp3 {
                let inner = lua.create_table()?;
                for item in items {
                    inner.raw_set(reply_to_lua(lua, item, resp)?, true)?;
                }
                let t = lua.create_table()?;
                t.raw_set("set", inner)?;
                Value::Table(t)
            } else {
                array_to_lua(lua, items, resp)?
            }
        }
        Reply::Bool(b) => {
            if resp3 {
                Value::Boolean(b)
            } else {
                Value::Number(if b { 1.0 } else { 0.0 })
            }
        }
        Reply::Verbatim { format, text } => {
            if resp3 {
                let inner = lua.create_table()?;
                inner.raw_set("string", lua.create_string(&text)?)?;
                inner.raw_set("format", lua.create_string(format)?)?;
                let t = lua.create_table()?;
                t.raw_set("verbatim_string", inner)?;
                Value::Table(t)
            } else {
                Value::String(lua.create_string(&text)?)
            }
        }
        Reply::BigNumber(n) => {
            if resp3 {
                let t = lua.create_table()?;
                t.raw_set("big_number", lua.create_string(&n)?)?;
                Value::Table(t)
            } else {
                Value::String(lua.create_string(&n)?)
            }
        }
    })
}

fn array_to_lua(lua: &Lua, items: Vec<Reply>, resp: u8) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, item) in items.into_iter().enumerate() {
        t.raw_set(i + 1, reply_to_lua(lua, item, resp)?)?;
    }
    Ok(Value::Table(t))
}

fn lua_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        _ => None,
    }
}

/// Converts a script's return value (`luaReplyToRedisReply`).
///
/// - numbers become integers by C truncation (3.99 -> 3, 2^63 and NaN -> i64::MIN);
/// - `true` is `:1` and `false` is nil (under `setresp(3)`, booleans);
/// - a table with a string `err` is an error reply, checked before `ok` (status), then
///   `double`, `big_number`, `verbatim_string`, `map` and `set`; any other table is an array
///   that ends at its first nil;
/// - functions, userdata and the like are nil.
pub(crate) fn lua_to_reply(v: &Value, resp: u8, depth: usize, keys: &FieldKeys) -> Reply {
    if depth > MAX_REPLY_DEPTH {
        return Reply::err("ERR reached lua stack limit");
    }
    match v {
        Value::Nil => Reply::Nil,
        Value::Boolean(b) => {
            if resp >= 3 {
                Reply::Bool(*b)
            } else if *b {
                Reply::Integer(1)
            } else {
                Reply::Nil
            }
        }
        Value::Integer(i) => Reply::Integer(*i),
        Value::Number(n) => Reply::Integer(lua_number_to_i64(*n)),
        Value::String(s) => Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Table(t) => {
            let field = |name: &mlua::LuaString| t.raw_get::<Value>(name).unwrap_or(Value::Nil);
            if let Some(err) = lua_bytes(&field(&keys.err)) {
                return Reply::Error(Bytes::copy_from_slice(cstr(&err)));
            }
            if let Some(ok) = lua_bytes(&field(&keys.ok)) {
                return Reply::Status(Bytes::copy_from_slice(cstr(&ok)));
            }
            match field(&keys.double) {
                Value::Number(d) => return Reply::Double(d),
                Value::Integer(i) => return Reply::Double(i as f64),
                _ => {}
            }
            if let Some(n) = lua_bytes(&field(&keys.big_number)) {
                return Reply::BigNumber(Bytes::from(n));
            }
            if let Value::Table(vt) = field(&keys.verbatim_string) {
                let format = lua_bytes(&vt.raw_get::<Value>(&keys.format).unwrap_or(Value::Nil));
                let text = lua_bytes(&vt.raw_get::<Value>(&keys.string).unwrap_or(Value::Nil));
                if let (Some(format), Some(text)) = (format, text) {
                    let mut f = *b"txt";
                    for (dst, src) in f.iter_mut().zip(format.iter()) {
                        *dst = *src;
                    }
                    return Reply::Verbatim { format: f, text: Bytes::from(text) };
                }
            }
            if let Value::Table(map) = field(&keys.map) {
                let pairs = map
                    .pairs::<Value, Value>()
                    .filter_map(Result::ok)
                    .map(|(k, v)| (lua_to_reply(&k, resp, depth + 1, keys), lua_to_reply(&v, resp, depth + 1, keys)))
                    .collect();
                return Reply::Map(pairs);
            }
            if let Value::Table(set) = field(&keys.set) {
                let items = set
                    .pairs::<Value, Value>()
                    .filter_map(Result::ok)
                    .map(|(k, _)| lua_to_reply(&k, resp, depth + 1, keys))
                    .collect();
                return Reply::Set(items);
            }
            let mut items = Vec::new();
            for i in 1.. {
                match t.raw_get::<Value>(i) {
                    Ok(Value::Nil) | Err(_) => break,
                    Ok(v) => items.push(lua_to_reply(&v, resp, depth + 1, keys)),
                }
            }
            Reply::Array(items)
        }
        _ => Reply::Nil,
    }
}

/// Redis's `rand48`: x' = 0x5DEECE66D * x + 0xB mod 2^48, output the top 31 bits.
fn lrand48(state: &AtomicU64) -> i64 {
    let x = state.load(Ordering::Relaxed);
    let next = x.wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB) & ((1 << 48) - 1);
    state.store(next, Ordering::Relaxed);
    (next >> 17) as i64
}

fn srand48_state(seed: i64) -> u64 {
    (((seed as u32) as u64) << 16) | 0x330E
}

impl ScriptEngine {
    pub(crate) fn new(config: &ModelConfig) -> Result<Self, mlua::Error> {
        let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, LuaOptions::new())?;
        lua.set_memory_limit(config.lua_memory_limit)?;

        let rust = lua.create_table()?;
        rust.set(
            "call",
            lua.create_function(|lua, args: MultiValue| match redis_call(lua, args)? {
                Ok(v) => Ok(v),
                Err(text) => Err(raise(text)),
            })?,
        )?;
        rust.set(
            "pcall",
            lua.create_function(|lua, args: MultiValue| match redis_call(lua, args)? {
                Ok(v) => Ok(v),
                Err(text) => err_table(lua, &text),
            })?,
        )?;
        rust.set(
            "raise",
            lua.create_function(|_, text: mlua::LuaString| -> mlua::Result<()> {
                Err(raise(text.as_bytes().to_vec()))
            })?,
        )?;
        rust.set(
            "error_of",
            lua.create_function(|lua, v: Value| match v {
                Value::Error(e) => match redis_error_text(&e) {
                    Some(text) => Ok(Value::String(lua.create_string(text)?)),
                    None => Ok(Value::Nil),
                },
                _ => Ok(Value::Nil),
            })?,
        )?;
        rust.set(
            "sha1hex",
            lua.create_function(|lua, args: MultiValue| {
                if args.len() != 1 {
                    return Err(raise(b"ERR wrong number of arguments".to_vec()));
                }
                let first = args.into_iter().next().unwrap_or(Value::Nil);
                let bytes = match lua.coerce_string(first) {
                    Ok(Some(s)) => s.as_bytes().to_vec(),
                    _ => Vec::new(),
                };
                Ok(sha1_smol::Sha1::from(bytes).digest().to_string())
            })?,
        )?;
        rust.set(
            "error_text",
            lua.create_function(|lua, s: mlua::LuaString| {
                let s = s.as_bytes();
                let mut dashed = Vec::with_capacity(s.len() + 1);
                if s.first() != Some(&b'-') {
                    dashed.push(b'-');
                }
                dashed.extend_from_slice(&s);
                lua.create_string(lua_error_text(&dashed))
            })?,
        )?;
        // redis.log, redis.setresp and redis.set_repl: argument checks with Redis's texts. A
        // level is read as C's `(int)lua_tonumber(...)` would read it.
        let c_int = |lua: &Lua, v: Value| -> i64 {
            match lua.coerce_number(v) {
                Ok(Some(n)) if n.is_finite() && n.abs() < 2_147_483_648.0 => n as i64,
                Ok(Some(_)) => i64::from(i32::MIN),
                _ => 0,
            }
        };
        rust.set(
            "log",
            lua.create_function(move |lua, args: MultiValue| -> mlua::Result<()> {
                if args.len() < 2 {
                    return Err(raise(b"ERR redis.log() requires two arguments or more.".to_vec()));
                }
                let first = args.into_iter().next().unwrap_or(Value::Nil);
                if !matches!(lua.coerce_number(first.clone()), Ok(Some(_))) {
                    return Err(raise(b"ERR First argument must be a number (log level).".to_vec()));
                }
                if !(0..=3).contains(&c_int(lua, first)) {
                    return Err(raise(b"ERR Invalid debug level.".to_vec()));
                }
                // The model keeps no log; the call only validates like Redis.
                Ok(())
            })?,
        )?;
        rust.set(
            "setresp",
            lua.create_function(move |lua, args: MultiValue| -> mlua::Result<()> {
                if args.len() != 1 {
                    return Err(raise(b"ERR redis.setresp() requires one argument.".to_vec()));
                }
                let v = c_int(lua, args.into_iter().next().unwrap_or(Value::Nil));
                if v != 2 && v != 3 {
                    return Err(raise(b"ERR RESP version must be 2 or 3.".to_vec()));
                }
                if let Some(mut run) = lua.app_data_mut::<ScriptRun>() {
                    run.resp = v as u8;
                }
                Ok(())
            })?,
        )?;
        rust.set(
            "set_repl",
            lua.create_function(move |lua, args: MultiValue| -> mlua::Result<()> {
                if args.len() != 1 {
                    return Err(raise(b"ERR redis.set_repl() requires two arguments.".to_vec()));
                }
                let flags = c_int(lua, args.into_iter().next().unwrap_or(Value::Nil));
                if flags & !3 != 0 {
                    return Err(raise(
                        b"ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.".to_vec(),
                    ));
                }
                Ok(())
            })?,
        )?;
        rust.set(
            "acl_check",
            lua.create_function(|_, args: MultiValue| {
                let argv = match args_to_argv(&args) {
                    Ok(argv) => argv,
                    Err(msg) => return Err(raise(lua_error_text(msg))),
                };
                let argv = slices(&argv);
                match lookup(&argv) {
                    Lookup::Found(_) => Ok(true),
                    _ => Err(raise(b"ERR Invalid command passed to redis.acl_check_cmd()".to_vec())),
                }
            })?,
        )?;
        rust.set(
            "where",
            lua.create_function(|lua, ()| {
                // Level 0 is this function, 1 the error handler, 2 whatever raised the error.
                for level in 2..64 {
                    let frame = lua.inspect_stack(level, |d| {
                        let src = d.source();
                        let what = src.what;
                        let source = src.source.map(|s| s.into_owned());
                        (what, source, d.current_line())
                    });
                    let Some((what, source, line)) = frame else { break };
                    // Skip Rust/C functions (as Redis skips one C level), the model's own Lua
                    // wrappers, and the marker Lua leaves where a tail call erased a frame.
                    if what == "C" || what == "tail" || source.as_deref() == Some(INTERNAL_CHUNK) {
                        continue;
                    }
                    let line = line.map_or(-1, |l| l as i64);
                    return Ok((source, Some(line)));
                }
                Ok((None, None))
            })?,
        )?;
        let rand_state = Arc::new(AtomicU64::new(srand48_state(0)));
        let state = rand_state.clone();
        rust.set("lrand48", lua.create_function(move |_, ()| Ok(lrand48(&state)))?)?;
        let state = rand_state;
        rust.set(
            "srand48",
            lua.create_function(move |_, seed: i64| {
                state.store(srand48_state(seed), Ordering::Relaxed);
                Ok(())
            })?,
        )?;
        rust.set("version", super::commands::REDIS_VERSION_STR)?;
        rust.set("version_num", 0x07_00_0f)?;

        let (runner, env): (Function, Table) = lua.load(SANDBOX).set_name(INTERNAL_CHUNK).call(rust)?;
        let globals = lua.globals();

        let budget = config.script_instruction_budget;
        let guard = Arc::new(Guard {
            fires: AtomicU64::new(0),
            limit_fires: budget.div_ceil(u64::from(HOOK_PERIOD)).max(1),
            killed: AtomicBool::new(false),
        });
        lua.set_app_data(ScriptRun { db: None, now_ms: 0, resp: 2 });
        let keys = FieldKeys::new(&lua)?;
        let engine = ScriptEngine { lua, runner, env, globals, cache: HashMap::new(), guard, budget, keys };
        engine.install_hook()?;
        Ok(engine)
    }

    /// The budget hook. It runs every [`HOOK_PERIOD`] instructions; once the budget is spent it
    /// marks the script killed, re-arms itself for every instruction and raises.
    fn install_hook(&self) -> mlua::Result<()> {
        let guard = self.guard.clone();
        self.lua.set_global_hook(HookTriggers::new().every_nth_instruction(HOOK_PERIOD), move |lua, _debug| {
            if guard.killed.load(Ordering::Relaxed) {
                return Err(mlua::Error::runtime("script killed"));
            }
            let fires = guard.fires.fetch_add(1, Ordering::Relaxed) + 1;
            if fires >= guard.limit_fires {
                guard.killed.store(true, Ordering::Relaxed);
                let again = guard.clone();
                lua.set_global_hook(HookTriggers::new().every_nth_instruction(1), move |_, _| {
                    if again.killed.load(Ordering::Relaxed) {
                        Err(mlua::Error::runtime("script killed"))
                    } else {
                        Ok(VmState::Continue)
                    }
                })?;
                return Err(mlua::Error::runtime("script killed"));
            }
            Ok(VmState::Continue)
        })
    }

    /// Number of cached scripts.
    pub(crate) fn cached(&self) -> usize {
        self.cache.len()
    }

    /// Bytes the Lua state holds.
    pub(crate) fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// SCRIPT FLUSH (and a restart): forgets every compiled script.
    pub(crate) fn flush(&mut self) {
        self.cache.clear();
        self.lua.gc_collect().ok();
    }

    pub(crate) fn exists(&self, sha: &[u8]) -> bool {
        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
        self.cache.contains_key(&sha)
    }

    /// Compiles `body` unless cached; returns its SHA1 or Redis's compile error.
    pub(crate) fn load(&mut self, body: &[u8]) -> Result<String, Reply> {
        let sha = sha1_smol::Sha1::from(body).digest().to_string();
        if self.cache.contains_key(&sha) {
            return Ok(sha);
        }
        // A "#!lua" first line carries Redis 7 script flags; the model accepts and ignores
        // them, keeping the newline so line numbers stay right.
        let code = if body.starts_with(b"#!lua") {
            let end = body.iter().position(|&c| c == b'\n').unwrap_or(body.len());
            &body[end..]
        } else if body.starts_with(b"#!") {
            let engine_end = body.iter().position(|&c| c == b' ' || c == b'\n').unwrap_or(body.len());
            let engine = String::from_utf8_lossy(&body[2..engine_end]);
            return Err(Reply::error(format!("ERR Unexpected engine in script shebang: {engine}")));
        } else {
            body
        };
        let compiled = self
            .lua
            .load(code)
            .set_name(USER_CHUNK)
            .set_mode(ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function();
        match compiled {
            Ok(f) => {
                self.cache.insert(sha.clone(), f);
                Ok(sha)
            }
            Err(e) => {
                let message = match e {
                    mlua::Error::SyntaxError { message, .. } => message,
                    other => other.to_string(),
                };
                Err(Reply::error(format!("ERR Error compiling script (new function): {message}")))
            }
        }
    }

    fn string_array(&self, items: &[&[u8]]) -> mlua::Result<Table> {
        let t = self.lua.create_table_with_capacity(items.len(), 0)?;
        for (i, item) in items.iter().enumerate() {
            t.raw_set(i + 1, self.lua.create_string(item)?)?;
        }
        Ok(t)
    }

    /// EVAL (`evalsha == false`) and EVALSHA, arguments as the client sent them.
    pub(crate) fn eval(&mut self, db: &mut Db, args: &[&[u8]], evalsha: bool) -> Reply {
        if evalsha && args[1].len() != 40 {
            return noscript();
        }
        let numkeys = match parse_i64(args[2]) {
            Some(n) => n,
            None => return super::commands::not_an_integer(),
        };
        let rest = &args[3..];
        if numkeys > rest.len() as i64 {
            return Reply::err("ERR Number of keys can't be greater than number of args");
        }
        if numkeys < 0 {
            return Reply::err("ERR Number of keys can't be negative");
        }
        let sha = if evalsha {
            let sha = String::from_utf8_lossy(args[1]).to_ascii_lowercase();
            if !self.cache.contains_key(&sha) {
                return noscript();
            }
            sha
        } else {
            match self.load(args[1]) {
                Ok(sha) => sha,
                Err(e) => return e,
            }
        };
        let Some(func) = self.cache.get(&sha).cloned() else {
            return noscript();
        };
        let (keys, argv) = rest.split_at(numkeys as usize);
        match self.run(db, &sha, func, keys, argv) {
            Ok(reply) => reply,
            Err(e) => Reply::error(format!("ERR Error running script {sha}, {e}")),
        }
    }

    fn run(&mut self, db: &mut Db, sha: &str, func: Function, keys: &[&[u8]], argv: &[&[u8]]) -> mlua::Result<Reply> {
        self.globals.raw_set("KEYS", self.string_array(keys)?)?;
        self.globals.raw_set("ARGV", self.string_array(argv)?)?;
        let now_ms = db.now_ms();
        // Lend the keyspace to the Lua state for the call (the slot lives as long as the engine,
        // so a call costs a move in and a move out, no allocation).
        if let Some(mut run) = self.lua.app_data_mut::<ScriptRun>() {
            run.db = Some(db.take());
            run.now_ms = now_ms;
            run.resp = 2;
        }
        self.guard.fires.store(0, Ordering::Relaxed);
        let result = self.runner.call::<(bool, Value)>(func);
        let mut resp = 2;
        if let Some(mut run) = self.lua.app_data_mut::<ScriptRun>() {
            resp = run.resp;
            if let Some(lent) = run.db.take() {
                *db = lent;
            }
        }
        if self.guard.killed.swap(false, Ordering::Relaxed) {
            self.install_hook()?;
            return Ok(Reply::error(format!(
                "ERR Script killed by the model after {} Lua instructions (Redis would answer \
                 BUSY until SCRIPT KILL) script: {sha}",
                self.budget
            )));
        }
        let (ok, value) = result?;
        if ok {
            return Ok(lua_to_reply(&value, resp, 0, &self.keys));
        }
        Ok(script_error(&value, sha))
    }
}

fn noscript() -> Reply {
    Reply::err("NOSCRIPT No matching script. Please use EVAL.")
}

/// The reply for a script that raised: the error text, then Redis's
/// " script: <sha>, on @user_script:<line>." when the position is known.
fn script_error(wrapper: &Value, sha: &str) -> Reply {
    let Value::Table(w) = wrapper else {
        // Memory errors skip the handler and arrive as plain strings.
        let text = match wrapper {
            Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
            other => format!("{other:?}"),
        };
        return Reply::error(format!("ERR Error running script {sha}, {text}"));
    };
    let get = |k: &str| w.raw_get::<Value>(k).unwrap_or(Value::Nil);
    let mut text: Vec<u8> = match (get("msg"), get("e")) {
        (Value::String(m), _) => m.as_bytes().to_vec(),
        (_, Value::Table(e)) => match e.raw_get::<Value>("err").unwrap_or(Value::Nil) {
            Value::String(s) => s.as_bytes().to_vec(),
            Value::Integer(i) => i.to_string().into_bytes(),
            Value::Number(n) => format!("{n}").into_bytes(),
            // Redis 7.0.15 crashes on `error({})`; the model answers instead.
            _ => b"ERR script raised an error table without an 'err' field".to_vec(),
        },
        _ => b"ERR unknown script error".to_vec(),
    };
    text = cstr(&text).to_vec();
    if let (Value::String(source), Value::Integer(line)) = (get("source"), get("line")) {
        text.extend_from_slice(format!(" script: {sha}, on ").as_bytes());
        text.extend_from_slice(&source.as_bytes());
        text.extend_from_slice(format!(":{line}.").as_bytes());
    }
    Reply::Error(Bytes::from(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_texts_keep_codes_like_lua_push_error() {
        assert_eq!(lua_error_text(b"-WRONGTYPE Operation"), b"WRONGTYPE Operation");
        assert_eq!(lua_error_text(b"-boom"), b"ERR boom");
        assert_eq!(lua_error_text(b"-"), b"ERR ");
        assert_eq!(lua_error_text(b"Unknown Redis command"), b"ERR Unknown Redis command");
        assert_eq!(lua_error_text(b"-X Y\r\n"), b"X Y");
    }

    #[test]
    fn rand48_starts_like_redis() {
        let state = AtomicU64::new(srand48_state(0));
        // First value of lrand48 after srand48(0), as in glibc and Redis's rand.c.
        assert_eq!(lrand48(&state), 366850414);
    }
}
