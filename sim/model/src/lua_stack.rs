//! The script engine's hot path, written against Lua's C API: `redis.call`/`redis.pcall`,
//! `redis.acl_check_cmd`, building `KEYS`/`ARGV`, and reading a script's return value.
//!
//! These run several times per EVALSHA, and through mlua's safe API each of them paid for value
//! references, argument vectors and a protected call per Lua operation: the simulator spent
//! most of a decision there. On the stack directly they cost what Redis's own C code costs.
//!
//! This is the one place in the workspace with `unsafe` code, and the rules that keep it sound:
//!
//! - **Lua errors are `longjmp`s.** Any Lua function that allocates can raise one (a script's
//!   memory limit), and it jumps over every Rust frame up to the enclosing protected call
//!   without running destructors. So wherever Lua may raise, the Rust frames in between own
//!   nothing with a destructor: command work happens first in [`Bridge::dispatch`], which keeps
//!   its results in the [`Bridge`] (not on the stack) before any value is pushed, and reading a
//!   script's reply ([`ReplyReader`]) calls no Lua function that raises.
//! - **Panics must not cross C frames.** The C functions catch them and turn them into Redis
//!   errors.
//! - **The bridge outlives every call.** [`BridgeBox`] owns it, and the engine drops the Lua
//!   state before it. Its `db` pointer is set only while the engine runs a script on a `&mut Db`
//!   it holds for that whole time.

#![allow(unsafe_code)]

use std::borrow::Cow;
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use mlua::ffi::{self, lua_State};
use mlua::{Function, Lua, Table, Value};

use super::commands::{cstr, lookup, Ctx, Db, Handler, Lookup};
use super::num::{format_g17, lua_number_to_i64};
use super::resp::Reply;

/// Deepest table nesting converted to a reply. Redis stops at its Lua stack limit (a few
/// thousand levels); the model stops earlier so the conversion cannot exhaust a thread stack.
const MAX_REPLY_DEPTH: usize = 512;

/// The field names a returned table is probed for, in the order of the Lua array the engine
/// keeps them in (see [`PROBE_KEYS`]). Holding them in a table keeps the strings alive, so
/// fetching one is an array read rather than a string lookup that could allocate.
#[derive(Clone, Copy)]
#[repr(i32)]
enum Field {
    Err = 1,
    Ok,
    Double,
    BigNumber,
    VerbatimString,
    Map,
    Set,
    Format,
    String,
}

/// The names behind [`Field`], index 0 = `Field::Err`.
pub(crate) const PROBE_KEYS: [&str; 9] =
    ["err", "ok", "double", "big_number", "verbatim_string", "map", "set", "format", "string"];

/// `msg` without the CR/LF at its ends.
fn trim_crlf(msg: &[u8]) -> &[u8] {
    let is_crlf = |c: &u8| *c == b'\r' || *c == b'\n';
    let start = msg.iter().position(|c| !is_crlf(c)).unwrap_or(msg.len());
    let end = msg.iter().rposition(|c| !is_crlf(c)).map_or(start, |e| e + 1);
    &msg[start..end.max(start)]
}

/// The code and message of an error reply's body ("WRONGTYPE Operation ..."): the first word,
/// or "ERR" when there is no space.
fn body_parts(body: &[u8]) -> (&[u8], &[u8]) {
    match body.iter().position(|&c| c == b' ') {
        Some(sp) => (&body[..sp], trim_crlf(&body[sp + 1..])),
        None => (b"ERR", trim_crlf(body)),
    }
}

/// An `err` string as Redis's `luaPushErrorBuff` builds it: a "-CODE msg" text keeps its code,
/// anything else gets "ERR"; CR/LF at the ends are trimmed.
pub(crate) fn lua_error_text(raw: &[u8]) -> Vec<u8> {
    let (code, msg) = match raw.split_first() {
        Some((b'-', rest)) => body_parts(rest),
        _ => (&b"ERR"[..], trim_crlf(raw)),
    };
    [code, b" ", msg].concat()
}

/// The model's side of a running script: the keyspace it may touch and how replies are shaped.
pub(crate) struct Bridge {
    /// The keyspace, non-null only while the engine runs a script.
    db: *mut Db,
    now_ms: i64,
    /// 2, or 3 after `redis.setresp(3)` (which is an mlua function, hence the sharing).
    resp: Arc<AtomicU8>,
    /// The last command's reply, kept here so that pushing it borrows rather than owns.
    reply: Reply,
    /// The last command's error text ("CODE msg"), kept here for the same reason.
    error: Vec<u8>,
    /// Whether Redis marks that error `ignore_error_stats_update`: it does for every error once
    /// the arguments are read (an unknown command, a wrong arity, the command's own error reply),
    /// not for arguments it cannot read.
    error_is_reply: bool,
}

/// Owns the [`Bridge`] at a fixed address the C functions hold as an upvalue.
pub(crate) struct BridgeBox(*mut Bridge);

// SAFETY: the bridge is reached only through the engine that owns this box (its methods take
// `&self`/`&mut self`, and the C functions run only inside those methods), so it moves between
// threads with the engine and is never used from two at once.
unsafe impl Send for BridgeBox {}

impl BridgeBox {
    pub(crate) fn new() -> Self {
        let bridge = Bridge {
            db: ptr::null_mut(),
            now_ms: 0,
            resp: Arc::new(AtomicU8::new(2)),
            reply: Reply::Nil,
            error: Vec::new(),
            error_is_reply: false,
        };
        BridgeBox(Box::into_raw(Box::new(bridge)))
    }

    /// `redis.call` (`raises`) or `redis.pcall` (errors returned as `{err=...}`).
    pub(crate) fn redis_call(&self, lua: &Lua, raises: bool) -> mlua::Result<Function> {
        self.c_function(lua, redis_call, raises)
    }

    /// `redis.acl_check_cmd`.
    pub(crate) fn acl_check(&self, lua: &Lua) -> mlua::Result<Function> {
        self.c_function(lua, acl_check, true)
    }

    fn c_function(&self, lua: &Lua, f: ffi::lua_CFunction, flag: bool) -> mlua::Result<Function> {
        let bridge = self.0;
        // SAFETY: exec_raw reserves three stack slots, which is what the closure takes; the
        // bridge outlives the Lua state (see `Drop`).
        unsafe {
            lua.exec_raw((), |state| {
                ffi::lua_pushlightuserdata(state, bridge.cast::<c_void>());
                ffi::lua_pushboolean(state, c_int::from(flag));
                ffi::lua_pushcclosure(state, f, 2);
            })
        }
    }

    /// Lends `db` to scripts for the duration of `f`.
    pub(crate) fn lend<R>(&self, db: &mut Db, f: impl FnOnce(ScriptCall<'_>) -> R) -> R {
        // SAFETY: no C function runs outside `f`, so nothing else holds the bridge now.
        unsafe {
            (*self.0).now_ms = (db.command_micros() / 1000) as i64;
            (*self.0).resp.store(2, Ordering::Relaxed);
            (*self.0).db = db;
        }
        let out = f(ScriptCall(self));
        // SAFETY: as above; the pointer to `db` is gone before the borrow of `db` ends.
        unsafe {
            (*self.0).db = ptr::null_mut();
            (*self.0).reply = Reply::Nil;
        }
        out
    }

    /// The protocol the running script asked for (`redis.setresp`).
    pub(crate) fn resp(&self) -> u8 {
        // SAFETY: a shared read of a field no C function replaces.
        unsafe { (*self.0).resp.load(Ordering::Relaxed) }
    }

    /// Where `redis.setresp` records the protocol.
    pub(crate) fn resp_cell(&self) -> Arc<AtomicU8> {
        // SAFETY: a shared read of a field no C function replaces.
        unsafe { (*self.0).resp.clone() }
    }
}

impl Drop for BridgeBox {
    fn drop(&mut self) {
        // SAFETY: allocated by `Box::into_raw` in `new`, freed once here; the Lua state whose
        // closures hold the pointer is dropped before the box (field order in the engine).
        drop(unsafe { Box::from_raw(self.0) });
    }
}

/// A script call in progress: the keyspace is lent to the bridge.
pub(crate) struct ScriptCall<'b>(&'b BridgeBox);

impl ScriptCall<'_> {
    /// Sets `KEYS` and `ARGV`, calls `runner(func)` (the sandbox's `xpcall` wrapper) and reads
    /// the script's reply off the stack. `Ok(Err(wrapper))`: the script raised, and `wrapper`
    /// is the error handler's table. `Err`: Lua failed outside the script (memory).
    pub(crate) fn run(
        &self,
        lua: &Lua,
        probes: &Table,
        runner: &Function,
        func: &Function,
        keys: &[&[u8]],
        argv: &[&[u8]],
    ) -> mlua::Result<Result<Reply, Value>> {
        let mut reply = None;
        // SAFETY: the closure runs as a C function in exec_raw's protected call, with the three
        // arguments at 1..=3 and LUA_MINSTACK (20) free slots above them, more than it pushes;
        // `ReplyReader` reserves its own and keeps the rules above.
        let wrapper = unsafe {
            lua.exec_raw::<Value>((probes, runner, func), |state| {
                set_global_array(state, b"KEYS", keys);
                set_global_array(state, b"ARGV", argv);
                // runner(func) -> ok, value (or the error handler's table)
                ffi::lua_call(state, 1, 2);
                if ffi::lua_toboolean(state, 2) != 0 {
                    let reader = ReplyReader { state, probes: 1, resp: self.0.resp() };
                    reply = Some(reader.read(3, 0));
                    ffi::lua_settop(state, 0);
                } else {
                    ffi::lua_replace(state, 1);
                    ffi::lua_settop(state, 1);
                }
            })?
        };
        Ok(reply.ok_or(wrapper))
    }
}

/// The bytes of the string at `idx`. The slice lives as long as the value stays on the stack.
///
/// # Safety
/// `idx` must hold a string.
unsafe fn string_at<'a>(state: *mut lua_State, idx: c_int) -> &'a [u8] {
    let mut len = 0usize;
    let p = ffi::lua_tolstring(state, idx, &mut len);
    if p.is_null() {
        return &[];
    }
    std::slice::from_raw_parts(p.cast::<u8>(), len)
}

unsafe fn push_bytes(state: *mut lua_State, bytes: &[u8]) {
    ffi::lua_pushlstring_(state, bytes.as_ptr().cast(), bytes.len());
}

/// `luaArgsToRedisArgv`: strings as they are, numbers in `%.17g` (so 2^63 reaches Redis as
/// "9.2233720368547758e+18"), anything else is refused. Allocates but never calls into Lua in a
/// way that raises.
unsafe fn read_argv<'a>(state: *mut lua_State) -> Result<Vec<Cow<'a, [u8]>>, &'static [u8]> {
    let n = ffi::lua_gettop(state);
    if n == 0 {
        return Err(b"Please specify at least one argument for this redis lib call");
    }
    let mut argv = Vec::with_capacity(n as usize);
    for i in 1..=n {
        argv.push(match ffi::lua_type(state, i) {
            ffi::LUA_TSTRING => Cow::Borrowed(string_at(state, i)),
            // Read as a number, never through lua_tolstring, which would turn the argument
            // into a string in place (and allocate).
            ffi::LUA_TNUMBER => Cow::Owned(format_g17(ffi::lua_tonumber(state, i)).into_bytes()),
            _ => return Err(b"Lua redis lib command arguments must be strings or integers"),
        });
    }
    Ok(argv)
}

impl Bridge {
    /// Runs the command in the C function's arguments. `true`: the reply is in `self.reply`;
    /// `false`: the error text is in `self.error`. Pushes nothing, so it cannot raise.
    unsafe fn dispatch(&mut self, state: *mut lua_State) -> bool {
        let owned = match read_argv(state) {
            Ok(argv) => argv,
            Err(msg) => return self.fail(&lua_error_text(msg)),
        };
        let argv: Vec<&[u8]> = owned.iter().map(|a| &a[..]).collect();
        let ok = self.run_command(&argv);
        self.error_is_reply = !ok;
        ok
    }

    /// The command in `argv`: `true` with the reply in `self.reply`, or `false` with the error.
    ///
    /// # Safety
    /// As [`Bridge::dispatch`]: `self.db` is null or the `&mut Db` `BridgeBox::lend` holds.
    unsafe fn run_command(&mut self, argv: &[&[u8]]) -> bool {
        let spec = match lookup(argv) {
            Lookup::Found(spec) => spec,
            _ => {
                // SAFETY: non-null only while `BridgeBox::lend` holds the `&mut Db`.
                if let Some(db) = self.db.as_mut() {
                    db.note_unknown(argv, true);
                }
                return self.fail(b"ERR Unknown Redis command called from script");
            }
        };
        if !spec.arity_ok(argv.len()) {
            return self.fail(b"ERR Wrong number of args calling Redis command from script");
        }
        let Handler::Data(f) = spec.handler else {
            return self.fail(b"ERR This Redis command is not allowed from script");
        };
        debug_assert!(!spec.noscript, "data commands are all allowed in scripts");
        // SAFETY: non-null only while `BridgeBox::lend` holds the `&mut Db`.
        let Some(db) = self.db.as_mut() else {
            return self.fail(b"ERR redis.call/pcall can only be called inside a script invocation");
        };
        db.start_command(false);
        db.count_call(spec);
        let mut ctx = Ctx { db, now_ms: self.now_ms, resp: self.resp.load(Ordering::Relaxed) };
        match f(&mut ctx, argv) {
            Reply::Error(e) => {
                let (code, msg) = body_parts(&e);
                self.fail(&[code, b" ", msg].concat())
            }
            reply => {
                self.reply = reply;
                true
            }
        }
    }

    fn fail(&mut self, text: &[u8]) -> bool {
        self.error.clear();
        self.error.extend_from_slice(text);
        self.error_is_reply = false;
        false
    }

    /// `redis.acl_check_cmd`'s verdict: `true` for a known command, else the error in `self.error`.
    unsafe fn check_command(&mut self, state: *mut lua_State) -> bool {
        match read_argv(state) {
            Ok(owned) => {
                let argv: Vec<&[u8]> = owned.iter().map(|a| &a[..]).collect();
                matches!(lookup(&argv), Lookup::Found(_))
                    || self.fail(b"ERR Invalid command passed to redis.acl_check_cmd()")
            }
            Err(msg) => self.fail(&lua_error_text(msg)),
        }
    }
}

/// Runs `work` on the bridge at upvalue 1 with panics caught: a panic must not unwind through
/// Lua's C frames. Returns the bridge and `work`'s verdict.
unsafe fn guarded(state: *mut lua_State, work: unsafe fn(&mut Bridge, *mut lua_State) -> bool) -> (*mut Bridge, bool) {
    let bridge = ffi::lua_touserdata(state, ffi::lua_upvalueindex(1)).cast::<Bridge>();
    let ok = match catch_unwind(AssertUnwindSafe(|| work(&mut *bridge, state))) {
        Ok(ok) => ok,
        Err(_) => (*bridge).fail(b"ERR the model failed running this command (a bug in the model)"),
    };
    (bridge, ok)
}

/// `redis.call` (upvalue 2 true: raise errors) and `redis.pcall` (false: return them).
///
/// # Safety
/// Called by Lua, with upvalue 1 the [`BridgeBox`] pointer.
unsafe extern "C-unwind" fn redis_call(state: *mut lua_State) -> c_int {
    let (bridge, ok) = guarded(state, Bridge::dispatch);
    // Nothing on this frame owns a destructor: Lua may raise from here on.
    if ok {
        push_reply(state, &(*bridge).reply, (*bridge).resp.load(Ordering::Relaxed) >= 3, 0);
        return 1;
    }
    push_error_table(state, &(*bridge).error);
    if (*bridge).error_is_reply {
        mark_command_error(state);
    }
    if ffi::lua_toboolean(state, ffi::lua_upvalueindex(2)) != 0 {
        ffi::lua_error(state);
    }
    1
}

/// `redis.acl_check_cmd`: true for a known command, otherwise Redis's error.
///
/// # Safety
/// Called by Lua, with upvalue 1 the [`BridgeBox`] pointer.
unsafe extern "C-unwind" fn acl_check(state: *mut lua_State) -> c_int {
    let (bridge, known) = guarded(state, Bridge::check_command);
    if known {
        ffi::lua_pushboolean(state, 1);
        return 1;
    }
    push_error_table(state, &(*bridge).error);
    ffi::lua_error(state)
}

/// Pushes `{err = text}`, the error value Redis raises from `redis.call`. Takes three of the
/// LUA_MINSTACK slots a C function starts with.
unsafe fn push_error_table(state: *mut lua_State, text: &[u8]) {
    ffi::lua_createtable(state, 0, 1);
    push_bytes(state, b"err");
    push_bytes(state, text);
    ffi::lua_rawset(state, -3);
}

/// Adds `ignore_error_stats_update = true` to the error table on top, as Redis 7.0 marks an error
/// a command replied with (its statistics were counted when the command ran). Scripts see the
/// field when they look inside the table (`pairs`, `cjson.encode`). Takes two more slots.
unsafe fn mark_command_error(state: *mut lua_State) {
    push_bytes(state, b"ignore_error_stats_update");
    ffi::lua_pushboolean(state, 1);
    ffi::lua_rawset(state, -3);
}

/// Pushes `{name = <value on top>}` in place of the value on top.
unsafe fn wrap_top(state: *mut lua_State, name: &[u8]) {
    ffi::lua_createtable(state, 0, 1);
    push_bytes(state, name);
    ffi::lua_pushvalue(state, -3);
    ffi::lua_rawset(state, -3);
    ffi::lua_replace(state, -2);
}

/// Converts a command's reply for Lua (`redisProtocolToLuaType`). Under RESP2 a script sees
/// what a RESP2 client would parse; after `redis.setresp(3)` it sees the RESP3 types.
/// Only borrows: Lua may raise from any push here.
unsafe fn push_reply(state: *mut lua_State, reply: &Reply, resp3: bool, depth: usize) {
    if depth > MAX_REPLY_DEPTH || ffi::lua_checkstack(state, 4) == 0 {
        // Command replies nest two levels at most; this only keeps the stack in bounds.
        ffi::lua_pushnil(state);
        return;
    }
    match reply {
        Reply::Status(s) => {
            push_bytes(state, s);
            wrap_top(state, b"ok");
        }
        Reply::Error(e) => {
            // "CODE msg" joined by Lua, so no Rust string is built on this frame.
            let (code, msg) = body_parts(e);
            push_bytes(state, code);
            push_bytes(state, b" ");
            push_bytes(state, msg);
            ffi::lua_concat(state, 3);
            wrap_top(state, b"err");
            mark_command_error(state);
        }
        Reply::Integer(i) => ffi::lua_pushnumber(state, *i as f64),
        Reply::Bulk(b) => push_bytes(state, b),
        Reply::Nil | Reply::NilArray => {
            if resp3 {
                ffi::lua_pushnil(state)
            } else {
                ffi::lua_pushboolean(state, 0)
            }
        }
        Reply::Array(items) => push_array(state, items.len(), items.iter(), resp3, depth),
        Reply::Set(items) if !resp3 => push_array(state, items.len(), items.iter(), resp3, depth),
        Reply::Set(items) => {
            ffi::lua_createtable(state, 0, items.len().try_into().unwrap_or(0));
            for item in items {
                push_reply(state, item, resp3, depth + 1);
                ffi::lua_pushboolean(state, 1);
                ffi::lua_rawset(state, -3);
            }
            wrap_top(state, b"set");
        }
        Reply::Map(pairs) => {
            if resp3 {
                ffi::lua_createtable(state, 0, pairs.len().try_into().unwrap_or(0));
                for (k, v) in pairs {
                    push_reply(state, k, resp3, depth + 1);
                    push_reply(state, v, resp3, depth + 1);
                    ffi::lua_rawset(state, -3);
                }
                wrap_top(state, b"map");
            } else {
                push_array(state, 2 * pairs.len(), pairs.iter().flat_map(|(k, v)| [k, v]), resp3, depth);
            }
        }
        Reply::Double(d) => {
            if resp3 {
                ffi::lua_pushnumber(state, *d);
                wrap_top(state, b"double");
            } else {
                push_g17(state, *d);
            }
        }
        Reply::Bool(b) => {
            if resp3 {
                ffi::lua_pushboolean(state, c_int::from(*b))
            } else {
                ffi::lua_pushnumber(state, if *b { 1.0 } else { 0.0 })
            }
        }
        Reply::Verbatim { format, text } => {
            if resp3 {
                ffi::lua_createtable(state, 0, 2);
                push_bytes(state, b"string");
                push_bytes(state, text);
                ffi::lua_rawset(state, -3);
                push_bytes(state, b"format");
                push_bytes(state, format);
                ffi::lua_rawset(state, -3);
                wrap_top(state, b"verbatim_string");
            } else {
                push_bytes(state, text)
            }
        }
        Reply::BigNumber(n) => {
            push_bytes(state, n);
            if resp3 {
                wrap_top(state, b"big_number");
            }
        }
    }
}

unsafe fn push_array<'r>(
    state: *mut lua_State,
    len: usize,
    items: impl Iterator<Item = &'r Reply>,
    resp3: bool,
    depth: usize,
) {
    ffi::lua_createtable(state, len.try_into().unwrap_or(0), 0);
    for (i, item) in items.enumerate() {
        push_reply(state, item, resp3, depth + 1);
        ffi::lua_rawseti_(state, -2, c_int::try_from(i + 1).unwrap_or(c_int::MAX));
    }
}

/// Pushes `x` in `%.17g`. The text is copied to a stack buffer and its `String` dropped before
/// the push, which may raise.
unsafe fn push_g17(state: *mut lua_State, x: f64) {
    let mut buf = [0u8; 32];
    let len = {
        let text = format_g17(x);
        let len = text.len().min(buf.len());
        buf[..len].copy_from_slice(&text.as_bytes()[..len]);
        len
    };
    push_bytes(state, &buf[..len]);
}

/// Sets the global `name` (raw: the globals refuse writes) to a fresh array of `items`.
///
/// # Safety
/// Inside a protected call with room for three values.
unsafe fn set_global_array(state: *mut lua_State, name: &[u8], items: &[&[u8]]) {
    push_bytes(state, name);
    ffi::lua_createtable(state, items.len().try_into().unwrap_or(0), 0);
    for (i, item) in items.iter().enumerate() {
        push_bytes(state, item);
        ffi::lua_rawseti_(state, -2, c_int::try_from(i + 1).unwrap_or(c_int::MAX));
    }
    ffi::lua_rawset(state, ffi::LUA_GLOBALSINDEX);
}

/// Reads a script's return value as a reply (`luaReplyToRedisReply`):
///
/// - numbers become integers by C truncation (3.99 -> 3, 2^63 and NaN -> i64::MIN);
/// - `true` is `:1` and `false` is nil (under `setresp(3)`, booleans);
/// - a table with a string `err` is an error reply, checked before `ok` (status), then
///   `double`, `big_number`, `verbatim_string`, `map` and `set`; any other table is an array
///   that ends at its first nil;
/// - functions, userdata and the like are nil.
///
/// No Lua function called here raises, so the arrays being filled can live on the frames:
/// `lua_rawget`, `lua_rawgeti`, `lua_next` and `lua_tolstring` on strings do not allocate, and
/// `lua_checkstack` in the Lua that mlua builds grows the stack in protected mode and answers 0
/// when memory is short. Redis writes "reached lua stack limit" at that depth, and so does this.
struct ReplyReader {
    state: *mut lua_State,
    /// Absolute index of the [`PROBE_KEYS`] array.
    probes: c_int,
    resp: u8,
}

impl ReplyReader {
    /// The value at absolute index `idx`.
    unsafe fn read(&self, idx: c_int, depth: usize) -> Reply {
        if depth > MAX_REPLY_DEPTH {
            return Reply::err("ERR reached lua stack limit");
        }
        let state = self.state;
        match ffi::lua_type(state, idx) {
            ffi::LUA_TBOOLEAN => match (self.resp >= 3, ffi::lua_toboolean(state, idx) != 0) {
                (true, b) => Reply::Bool(b),
                (false, true) => Reply::Integer(1),
                (false, false) => Reply::Nil,
            },
            ffi::LUA_TNUMBER => Reply::Integer(lua_number_to_i64(ffi::lua_tonumber(state, idx))),
            ffi::LUA_TSTRING => Reply::Bulk(Bytes::copy_from_slice(string_at(state, idx))),
            ffi::LUA_TTABLE => self.table(idx, depth),
            _ => Reply::Nil,
        }
    }

    /// Pushes field `f` of the table at `t`; returns its type. The caller pops it.
    unsafe fn probe(&self, t: c_int, f: Field) -> c_int {
        ffi::lua_rawgeti_(self.state, self.probes, f as c_int);
        ffi::lua_rawget_(self.state, t);
        ffi::lua_type(self.state, -1)
    }

    /// Field `f` of the table at `t`, copied, if it is a string.
    unsafe fn string_field(&self, t: c_int, f: Field) -> Option<Vec<u8>> {
        let found = (self.probe(t, f) == ffi::LUA_TSTRING).then(|| string_at(self.state, -1).to_vec());
        ffi::lua_pop(self.state, 1);
        found
    }

    unsafe fn table(&self, t: c_int, depth: usize) -> Reply {
        let state = self.state;
        // The table, a probed field or element, and a map's key.
        if ffi::lua_checkstack(state, 3) == 0 {
            return Reply::err("ERR reached lua stack limit");
        }
        if let Some(err) = self.string_field(t, Field::Err) {
            return Reply::Error(Bytes::copy_from_slice(cstr(&err)));
        }
        if let Some(ok) = self.string_field(t, Field::Ok) {
            return Reply::Status(Bytes::copy_from_slice(cstr(&ok)));
        }
        let double = (self.probe(t, Field::Double) == ffi::LUA_TNUMBER).then(|| ffi::lua_tonumber(state, -1));
        ffi::lua_pop(state, 1);
        if let Some(d) = double {
            return Reply::Double(d);
        }
        if let Some(n) = self.string_field(t, Field::BigNumber) {
            return Reply::BigNumber(Bytes::from(n));
        }
        if self.probe(t, Field::VerbatimString) == ffi::LUA_TTABLE {
            let vt = ffi::lua_gettop(state);
            let format = self.string_field(vt, Field::Format);
            let text = self.string_field(vt, Field::String);
            ffi::lua_pop(state, 1);
            if let (Some(format), Some(text)) = (format, text) {
                let mut f = *b"txt";
                for (dst, src) in f.iter_mut().zip(format.iter()) {
                    *dst = *src;
                }
                return Reply::Verbatim { format: f, text: Bytes::from(text) };
            }
        } else {
            ffi::lua_pop(state, 1);
        }
        for (field, is_map) in [(Field::Map, true), (Field::Set, false)] {
            if self.probe(t, field) != ffi::LUA_TTABLE {
                ffi::lua_pop(state, 1);
                continue;
            }
            let inner = ffi::lua_gettop(state);
            let (mut pairs, mut members) = (Vec::new(), Vec::new());
            ffi::lua_pushnil(state);
            while ffi::lua_next(state, inner) != 0 {
                let top = ffi::lua_gettop(state);
                let key = self.read(top - 1, depth + 1);
                if is_map {
                    pairs.push((key, self.read(top, depth + 1)));
                } else {
                    members.push(key);
                }
                ffi::lua_pop(state, 1);
            }
            ffi::lua_pop(state, 1);
            return if is_map { Reply::Map(pairs) } else { Reply::Set(members) };
        }
        let mut items = Vec::new();
        for i in 1.. {
            ffi::lua_rawgeti_(state, t, i);
            if ffi::lua_type(state, -1) == ffi::LUA_TNIL {
                ffi::lua_pop(state, 1);
                break;
            }
            items.push(self.read(ffi::lua_gettop(state), depth + 1));
            ffi::lua_pop(state, 1);
        }
        Reply::Array(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ManualServerClock, ModelConfig, ModelHandle};

    /// A model whose scripts get 2 MB of Lua memory.
    fn small_model() -> ModelHandle {
        let config = ModelConfig { lua_memory_limit: 2 << 20, ..ModelConfig::default() };
        ModelHandle::try_with_config(Arc::new(ManualServerClock::from_millis(1_700_000_000_000)), config)
            .expect("model")
    }

    /// Lua that takes all but a few hundred bytes of the memory left, and keeps it: a list of
    /// small, distinct strings (equal strings would be one interned object).
    const HOG: &str = "local hog, i = nil, 0 \
        pcall(function() while true do i = i + 1 hog = {hog, string.rep('x', 100) .. i} end end) ";

    fn eval(model: &ModelHandle, body: &str) -> Reply {
        model.call(&[b"EVAL", body.as_bytes(), b"1", b"z"])
    }

    fn error_text(reply: &Reply) -> String {
        match reply {
            Reply::Error(e) => String::from_utf8_lossy(e).into_owned(),
            other => panic!("expected an error, got {:.200}", format!("{other:?}")),
        }
    }

    #[test]
    fn running_out_of_memory_while_a_command_reply_is_pushed_is_an_error_and_nothing_more() {
        let model = small_model();
        for chunk in 0..50 {
            let mut zadd: Vec<Vec<u8>> = vec![b"ZADD".to_vec(), b"z".to_vec()];
            for i in chunk * 100..(chunk + 1) * 100 {
                zadd.push(i.to_string().into_bytes());
                zadd.push(format!("member-{i}").into_bytes());
            }
            let args: Vec<&[u8]> = zadd.iter().map(Vec::as_slice).collect();
            assert_eq!(model.call(&args), Reply::Integer(100));
        }
        let reply = eval(&model, &format!("{HOG} return redis.call('zrange', KEYS[1], 0, -1)"));
        assert!(error_text(&reply).contains("not enough memory"), "{reply:?}");
        // The keyspace came back from the script, and the next call pushes replies as before.
        let reply = eval(&model, "return redis.call('zrange', KEYS[1], 0, 1)");
        assert_eq!(reply, Reply::Array(vec![Reply::bulk(b"member-0"), Reply::bulk(b"member-1")]));
        assert_eq!(model.call(&[b"ZCARD", b"z"]), Reply::Integer(5000));
    }

    #[test]
    fn running_out_of_memory_while_a_script_reply_is_read_ends_it_where_the_stack_could_not_grow() {
        let model = small_model();
        let deep = "local deep = {0} local cur = deep \
            for i = 1, 500 do local n = {i} cur[2] = n cur = n end ";
        // (levels, the innermost element) of `{0, {1, {2, ...}}}`.
        let walk = |reply: &Reply| {
            let (mut depth, mut cur) = (0, reply);
            while let Reply::Array(items) = cur {
                depth += 1;
                match items.get(1) {
                    Some(next) => cur = next,
                    None => break,
                }
            }
            (depth, cur.clone())
        };
        // Reading 500 levels takes three stack slots per level. Where the hog leaves no memory
        // to grow the stack, the reply says so at that depth, as Redis's does; the call itself
        // neither fails nor takes the model down.
        let reply = eval(&model, &format!("{deep} {HOG} return deep"));
        let (depth, end) = walk(&reply);
        assert!(depth > 1 && depth < 501, "{depth}");
        assert_eq!(end, Reply::err("ERR reached lua stack limit"));
        // With memory to spare the same table reads to the end, and other replies are unharmed.
        let reply = eval(&model, "return {1, {2, {3}, 'x'}, {ok = 'fine'}}");
        let inner = Reply::Array(vec![Reply::Integer(2), Reply::Array(vec![Reply::Integer(3)]), Reply::bulk(b"x")]);
        assert_eq!(reply, Reply::Array(vec![Reply::Integer(1), inner, Reply::Status(Bytes::from_static(b"fine"))]));
        assert_eq!(walk(&eval(&model, &format!("{deep} return deep"))).0, 501);
    }

    #[test]
    fn error_texts_keep_codes_like_lua_push_error() {
        assert_eq!(lua_error_text(b"-WRONGTYPE Operation"), b"WRONGTYPE Operation");
        assert_eq!(lua_error_text(b"-boom"), b"ERR boom");
        assert_eq!(lua_error_text(b"-"), b"ERR ");
        assert_eq!(lua_error_text(b"Unknown Redis command"), b"ERR Unknown Redis command");
        assert_eq!(lua_error_text(b"-X Y\r\n"), b"X Y");
    }

    #[test]
    fn error_replies_split_like_the_dashed_text() {
        for body in [&b"WRONGTYPE Operation"[..], b"boom", b"", b"X Y\r\n", b"ERR a b"] {
            let (code, msg) = body_parts(body);
            assert_eq!([code, b" ", msg].concat(), lua_error_text(&[b"-", body].concat()));
        }
    }
}
