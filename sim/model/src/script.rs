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
//!   and `pairs(_G)` see an empty table, where Redis would list the contents (and so do
//!   `cjson.encode(cjson)` and `cmsgpack.pack(string)`). An error of the C libraries that
//!   `coroutine.resume` catches arrives as a userdata rather than as its text.
//! - Redis's `cjson`, `bit`, `struct` and `cmsgpack` libraries, read-only like the others (see
//!   [`super::lua_libs`]). No `os`, `io`, `debug`, `print`, `dofile`, `loadfile`, `require`.
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

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use mlua::{chunk::ChunkMode, Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};

use super::commands::{cstr, Db};
use super::lua_libs::{self, CjsonConfig, LuaError};
use super::lua_stack::{lua_error_text, BridgeBox, PROBE_KEYS};
use super::num::parse_i64;
use super::resp::Reply;
use super::ModelConfig;

/// Name of the chunk holding the model's own Lua code; frames from it are skipped when an
/// error's position is reported, so positions point into the user's script as in Redis.
const INTERNAL_CHUNK: &str = "=redis_model";

/// Chunk name Redis gives every script: errors read "user_script:3: ...".
const USER_CHUNK: &str = "@user_script";

/// Bytecode of the chunks this process compiled, by name and source: each model starts a Lua
/// state of its own (the harness starts thousands, one per schedule it searches), and parsing
/// the sandbox and the script again in each was a tenth of a verification's time. Loading the
/// bytecode a first state dumped gives the same function: the dump keeps the chunk's name and
/// lines, so errors read as they did. Only what compiled is kept; a compile error is Redis's
/// message from a fresh parse every time.
static COMPILED: Mutex<BTreeMap<Chunk, Arc<[u8]>>> = Mutex::new(BTreeMap::new());

/// A chunk's name and source.
type Chunk = (&'static str, Vec<u8>);

/// Chunks [`COMPILED`] keeps at most, past which it starts over, and the longest source it
/// keeps (a longer one is parsed each time): a table in memory is bounded, here to 16 MiB of
/// sources and about as much bytecode.
const COMPILED_MAX: usize = 256;
const COMPILED_MAX_BYTES: usize = 64 * 1024;

/// `code` as a function of `lua` named `name`, with `env` as its environment: loaded from the
/// bytecode [`COMPILED`] holds, or parsed and then kept there.
fn compiled(lua: &Lua, name: &'static str, code: &[u8], env: Option<&Table>) -> mlua::Result<Function> {
    let load = |chunk: &[u8], mode| {
        let chunk = lua.load(chunk).set_name(name).set_mode(mode);
        match env {
            Some(env) => chunk.set_environment(env.clone()),
            None => chunk,
        }
        .into_function()
    };
    if code.len() > COMPILED_MAX_BYTES {
        return load(code, ChunkMode::Text);
    }
    let key = (name, code.to_vec());
    let known = COMPILED.lock().unwrap_or_else(|e| e.into_inner()).get(&key).cloned();
    if let Some(bytecode) = known {
        return load(&bytecode, ChunkMode::Binary);
    }
    let f = load(code, ChunkMode::Text)?;
    let mut table = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
    if table.len() >= COMPILED_MAX {
        table.clear();
    }
    table.insert(key, f.dump(false).into());
    Ok(f)
}

/// Lua instructions between two runs of the budget hook (Redis uses the same period).
const HOOK_PERIOD: u32 = 100_000;

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

-- Redis's pcall hands back the text of a Redis error rather than the error table. Errors the
-- Rust functions raise arrive as userdata: error_of gives their text, and whether Redis raises
-- them as an error table (redis.log and friends) or as a plain string (the C libraries).
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
local function as_raised(e)
  if type(e) == 'userdata' then
    local text, is_table = error_of(e)
    if text then
      if is_table then return {err = text} end
      return text
    end
  end
  return e
end
raw_rawset(G, 'xpcall', function(f, h)
  return xpcall(f, function(e) return h(as_raised(e)) end)
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
raw_rawset(G, 'cjson', proxy(rust.cjson))
raw_rawset(G, 'bit', proxy(rust.bit))
raw_rawset(G, 'struct', proxy(rust.struct))
raw_rawset(G, 'cmsgpack', proxy(rust.cmsgpack))

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
  e = as_raised(e)
  if type(e) ~= 'table' then msg = 'ERR ' .. tostring(e) end
  local source, line = where()
  return {e = e, msg = msg, source = source, line = line}
end
local function run(f) return xpcall(f, handler) end
return run, env
"#;

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
    /// SHA1 (lower-case hex) -> compiled script. Only looked up, never iterated.
    cache: HashMap<[u8; 40], Function>,
    guard: Arc<Guard>,
    budget: u64,
    /// Bytes of Lua memory a script may use ([`ModelConfig::lua_memory_limit`]).
    memory_limit: usize,
    /// The [`PROBE_KEYS`] strings as a Lua array, for reading replies in [`super::lua_stack`].
    probes: Table,
    /// The `cjson` module's settings, which a script may change and SCRIPT FLUSH restores.
    cjson: CjsonConfig,
    /// `math.random`'s rand48 state, which every script call goes on from.
    rand: Arc<AtomicU64>,
    /// Last, so it is dropped after the Lua state whose C functions point at it.
    bridge: BridgeBox,
}

/// A Redis error raised inside Lua by one of the mlua functions (`redis.log`, `redis.setresp`
/// and friends; `redis.call` raises its `{err=...}` table itself, see [`super::lua_stack`]). mlua
/// cannot raise a Lua table, so the text travels inside mlua's error userdata and the error
/// handler (and `pcall`) turn it back into the `{err=...}` table Redis would raise. Raising
/// from Rust rather than from a Lua wrapper matters: a Rust function is never tail-called away,
/// so the error still points at the user's line (`return redis.log(..)`).
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

/// Finds a [`LuaError`] (a plain string error of the C libraries) inside an error from Lua.
fn lua_string_error(e: &mlua::Error) -> Option<Vec<u8>> {
    match e {
        mlua::Error::ExternalError(inner) => inner.downcast_ref::<LuaError>().map(|r| r.0.clone()),
        mlua::Error::CallbackError { cause, .. } => lua_string_error(cause),
        mlua::Error::WithContext { cause, .. } => lua_string_error(cause),
        _ => None,
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
        let bridge = BridgeBox::new();
        rust.set("call", bridge.redis_call(&lua, true)?)?;
        rust.set("pcall", bridge.redis_call(&lua, false)?)?;
        rust.set("acl_check", bridge.acl_check(&lua)?)?;
        rust.set(
            "error_of",
            lua.create_function(|lua, v: Value| {
                let Value::Error(e) = v else { return Ok((Value::Nil, false)) };
                let (text, is_table) = match (redis_error_text(&e), lua_string_error(&e)) {
                    (Some(text), _) => (text, true),
                    (None, Some(text)) => (text, false),
                    (None, None) => return Ok((Value::Nil, false)),
                };
                Ok((Value::String(lua.create_string(text)?), is_table))
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
        let resp = bridge.resp_cell();
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
                resp.store(v as u8, Ordering::Relaxed);
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
        let state = rand_state.clone();
        rust.set(
            "srand48",
            lua.create_function(move |_, seed: i64| {
                state.store(srand48_state(seed), Ordering::Relaxed);
                Ok(())
            })?,
        )?;
        rust.set("version", super::commands::REDIS_VERSION_STR)?;
        rust.set("version_num", 0x07_00_0f)?;

        let cjson = CjsonConfig::default();
        let libs = lua_libs::install(&lua, &cjson)?;
        rust.set("cjson", libs.cjson)?;
        rust.set("bit", libs.bit)?;
        rust.set("struct", libs.structs)?;
        rust.set("cmsgpack", libs.cmsgpack)?;

        let sandbox = compiled(&lua, INTERNAL_CHUNK, SANDBOX.as_bytes(), None)?;
        let (runner, env): (Function, Table) = sandbox.call(rust)?;

        let budget = config.script_instruction_budget;
        let guard = Arc::new(Guard {
            fires: AtomicU64::new(0),
            limit_fires: budget.div_ceil(u64::from(HOOK_PERIOD)).max(1),
            killed: AtomicBool::new(false),
        });
        let probes = lua.create_sequence_from(PROBE_KEYS)?;
        let engine = ScriptEngine {
            lua,
            runner,
            env,
            cache: HashMap::new(),
            guard,
            budget,
            memory_limit: config.lua_memory_limit,
            probes,
            cjson,
            rand: rand_state,
            bridge,
        };
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
        self.cjson.reset();
        self.lua.gc_collect().ok();
    }

    /// As [`ScriptEngine::new`] left it: no script, and `math.random` seeded afresh. Nothing
    /// else a script did outlives its call: the globals and libraries are read-only, and each
    /// call starts with its own RESP version and budget.
    pub(crate) fn reset(&mut self) {
        self.rand.store(srand48_state(0), Ordering::Relaxed);
        self.flush();
    }

    pub(crate) fn exists(&self, sha: &[u8]) -> bool {
        cache_key(sha).is_some_and(|key| self.cache.contains_key(&key))
    }

    /// Compiles `body` unless cached; returns its SHA1 or Redis's compile error.
    pub(crate) fn load(&mut self, body: &[u8]) -> Result<String, Reply> {
        let sha = sha1_smol::Sha1::from(body).digest().to_string();
        let key = cache_key(sha.as_bytes()).expect("a SHA1 digest is 40 hex digits");
        if self.cache.contains_key(&key) {
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
        let compiled = compiled(&self.lua, USER_CHUNK, code, Some(&self.env));
        match compiled {
            Ok(f) => {
                self.cache.insert(key, f);
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
        let key = if evalsha {
            cache_key(args[1])
        } else {
            match self.load(args[1]) {
                Ok(sha) => cache_key(sha.as_bytes()),
                Err(e) => return e,
            }
        };
        let Some((key, func)) = key.and_then(|key| self.cache.get_key_value(&key)) else {
            return noscript();
        };
        let sha = std::str::from_utf8(key).unwrap_or_default();
        db.script_unknown = None;
        let (keys, argv) = rest.split_at(numkeys as usize);
        db.scripts_run += 1;
        let reply = match self.run(db, sha, func, keys, argv) {
            Ok(reply) => reply,
            Err(e) => Reply::error(format!("ERR Error running script {sha}, {e}")),
        };
        self.reclaim();
        reply
    }

    /// Collects now when a script left the state nearly full. Lua 5.1 has no emergency
    /// collection: a script that ran into the memory limit leaves garbage behind, and the next
    /// allocation (compiling the next script, say) would fail before an incremental step got
    /// round to freeing it.
    fn reclaim(&self) {
        if self.lua.used_memory() > self.memory_limit / 4 * 3 {
            self.lua.gc_collect().ok();
        }
    }

    /// Runs a compiled script: `KEYS` and `ARGV` set, the keyspace lent, and the reply read
    /// straight off the Lua stack.
    fn run(&self, db: &mut Db, sha: &str, func: &Function, keys: &[&[u8]], argv: &[&[u8]]) -> mlua::Result<Reply> {
        self.guard.fires.store(0, Ordering::Relaxed);
        let result = self.bridge.lend(db, |call| call.run(&self.lua, &self.probes, &self.runner, func, keys, argv));
        if self.guard.killed.swap(false, Ordering::Relaxed) {
            self.install_hook()?;
            return Ok(Reply::error(format!(
                "ERR Script killed by the model after {} Lua instructions (Redis would answer \
                 BUSY until SCRIPT KILL) script: {sha}",
                self.budget
            )));
        }
        Ok(match result? {
            Ok(reply) => reply,
            Err(wrapper) => script_error(&wrapper, sha),
        })
    }
}

/// The cache key of a SHA1 as a client spells it: lower-cased, or `None` if not 40 bytes.
fn cache_key(sha: &[u8]) -> Option<[u8; 40]> {
    let mut key: [u8; 40] = sha.try_into().ok()?;
    key.make_ascii_lowercase();
    Some(key)
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

    use crate::{ManualServerClock, ModelHandle};

    #[test]
    fn the_model_names_the_unimplemented_command_a_script_called() {
        let model = ModelHandle::new(ManualServerClock::from_millis(1_700_000_000_000));
        let reply = model.call(&[
            b"EVAL",
            b"redis.pcall('NOSUCHCMD', 'k', 0, 'v') return redis.pcall('Object', 'nosuch')",
            b"0",
        ]);
        assert_eq!(reply, Reply::err("ERR Unknown Redis command called from script"));
        assert_eq!(model.script_unknown_command().as_deref(), Some("object|nosuch"), "the last one called");
        assert_eq!(model.call(&[b"EVAL", b"return 1", b"0"]), Reply::Integer(1));
        assert_eq!(model.script_unknown_command(), None, "each script run starts afresh");
        assert!(model.call(&[b"SCRIPT", b"KILL"]).is_error());
        let counted: Vec<(String, u64)> = model.stats().unknown_commands.into_iter().collect();
        let expected = [("nosuchcmd", 1), ("object|nosuch", 1), ("script|kill", 1)].map(|(n, c)| (n.to_string(), c));
        assert_eq!(counted, expected);
    }

    /// A model after the first loads the sandbox and a script as bytecode: errors still point
    /// at the user's lines, in a state of its own, and a script that does not compile is
    /// refused with the parser's words every time.
    #[test]
    fn a_script_loaded_from_bytecode_runs_and_fails_as_one_just_parsed() {
        let script = b"local a = 1\nlocal b = nil\nreturn a + b\n -- bytecode test";
        let broken = b"return (1 +\n-- bytecode test";
        let answers: Vec<(Reply, Reply, Reply)> = (0..3)
            .map(|_| {
                let model = ModelHandle::new(ManualServerClock::from_millis(1_700_000_000_000));
                let ran = model.call(&[b"EVAL", script, b"0"]);
                let refused = model.call(&[b"EVAL", broken, b"0"]);
                let fine = model.call(&[b"EVAL", b"return KEYS[1] .. ARGV[1] -- bytecode test", b"1", b"k", b"v"]);
                (ran, refused, fine)
            })
            .collect();
        let (ran, refused, fine) = &answers[0];
        assert!(matches!(ran, Reply::Error(e) if e.windows(14).any(|w| w == b"user_script:3:")), "{ran:?}");
        assert!(matches!(refused, Reply::Error(e) if e.starts_with(b"ERR Error compiling script")), "{refused:?}");
        assert_eq!(fine, &Reply::Bulk(Bytes::from("kv")));
        assert!(answers.iter().all(|a| a == &answers[0]), "{answers:?}");
    }

    /// Redis never runs two commands in the same microsecond; a clock that stands still (set
    /// by hand, or a simulation between its millisecond ticks) must not make two scripts read
    /// the same `TIME`, or a log keyed by it would collide where Redis never does.
    #[test]
    fn no_two_commands_read_the_same_time_unless_the_clock_steps_back() {
        let clock = ManualServerClock::from_millis(1_700_000_000_000);
        let model = ModelHandle::new(clock.clone());
        let time = "local t = redis.call('TIME') return t[1] * 1000000 + t[2]";
        let read = |model: &ModelHandle| match model.call(&[b"EVAL", time.as_bytes(), b"0"]) {
            Reply::Integer(n) => n as u64,
            other => panic!("TIME from a script: {other:?}"),
        };
        // The EVAL reads the clock itself; the TIME it calls is the next command, 1 µs on.
        let first = read(&model);
        assert_eq!(first, 1_700_000_000_000_001);
        assert_eq!(model.last_command_started_us(), 1_700_000_000_000_000, "when the script ran");
        // Every EVAL and every TIME inside it is a command of its own.
        assert_eq!(read(&model), first + 2);
        let Reply::Array(t) = model.call(&[b"TIME"]) else { panic!("TIME replies with an array") };
        assert_eq!(t[1], Reply::Bulk(Bytes::from("4")), "{t:?}");
        // The clock moving on wins once it passes the commands' own time.
        clock.set_micros(1_700_000_000_010_000);
        assert_eq!(read(&model), 1_700_000_000_010_001);
        assert_eq!(model.last_command_started_us(), 1_700_000_000_010_000);
        // A clock stepped back is followed, as Redis follows the wall clock.
        clock.set_micros(1_600_000_000_000_000);
        assert_eq!(read(&model), 1_600_000_000_000_001);
    }

    /// A recycled model answers as a new one: everything a session leaves behind (keys, the
    /// script cache, `math.random`'s place in its sequence, `cjson`'s settings, the command
    /// clock's last microsecond, the counters) is gone, though its Lua state is the same.
    /// Without the reseeding or the new command clock the second session differs.
    #[test]
    fn a_recycled_model_answers_as_a_new_one() {
        let session = |model: &ModelHandle| -> (Vec<Reply>, crate::ModelStats) {
            let script = b"return {math.random(1000000), math.random(1000000), cjson.encode({{{1}}}), #KEYS}";
            let replies = [
                &[&b"SCRIPT"[..], b"EXISTS", b"e0e1f9fabfc9d4800c877a703b823ac0578ff8db"][..],
                &[b"EVAL", script, b"1", b"k"],
                &[b"EVAL", b"return redis.call('TIME')", b"0"],
                &[b"EVAL", b"cjson.encode_max_depth(2) return 1", b"0"],
                &[b"SET", b"k", b"v", b"PX", b"60000"],
                &[b"DBSIZE"],
                &[b"SCRIPT", b"LOAD", b"return 1"],
            ]
            .iter()
            .map(|args| model.call(args))
            .collect();
            (replies, model.stats())
        };
        let clock = ManualServerClock::from_millis(1_700_000_000_000);
        let used = ModelHandle::new(clock.clone());
        let first = session(&used);
        let (replies, _) = session(&used);
        assert_ne!(replies, first.0, "a second session on the same model meets the first one's traces");
        clock.set_micros(1_700_000_000_000_000);
        used.with_model(crate::Model::recycle);
        // The one difference: the Lua heap holds what the state grew to hold (its string table,
        // mlua's own), which no script can read.
        let heap =
            |(replies, stats): (Vec<Reply>, crate::ModelStats)| (replies, crate::ModelStats { lua_bytes: 0, ..stats });
        let first = heap(first);
        assert_eq!(heap(session(&used)), first, "recycled");
        let fresh = ModelHandle::new(ManualServerClock::from_millis(1_700_000_000_000));
        assert_eq!(heap(session(&fresh)), first, "new");
    }

    #[test]
    fn rand48_starts_like_redis() {
        let state = AtomicU64::new(srand48_state(0));
        // First value of lrand48 after srand48(0), as in glibc and Redis's rand.c.
        assert_eq!(lrand48(&state), 366850414);
    }
}
