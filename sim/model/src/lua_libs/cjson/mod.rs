//! `cjson`: Lua CJSON 2.1.0 as Redis 7.0 builds it.
//!
//! Encoding prints numbers with `%.14g` (`encode_number_precision`), escapes `"` `\` `/`, control
//! characters and DEL, encodes a table whose keys are all positive integers as an array (nil
//! holes as `null`) unless it is *excessively sparse* (largest index above 2x the item count and
//! above 10: an error, by default), any other table as an object in `next` order, and refuses
//! NaN and infinities, functions and nesting past 1000 (`encode_max_depth`). Decoding reads
//! numbers with `strtod` (so `0x10`, `inf` and `nan` too, as `decode_invalid_numbers` allows),
//! `null` as `cjson.null` (a NULL light userdata) and stops past 1000 levels. Errors are CJSON's
//! texts ("Expected comma or array end but found T_END at character 5").
//!
//! The settings live with the module, as in C, so one script's `cjson.encode_max_depth(5)` holds
//! for the next until SCRIPT FLUSH; `cjson.new()` makes a module with settings of its own.

use std::sync::{Arc, Mutex, PoisonError};

use mlua::{LightUserData, Lua, MultiValue, Table, Value};

use super::{error, out_of_memory, Args};

mod decode;
mod encode;

/// Lua CJSON's settings (`json_config_t`), C `int`s.
#[derive(Debug, Clone, Copy)]
struct Settings {
    sparse_convert: i32,
    sparse_ratio: i32,
    sparse_safe: i32,
    encode_max_depth: i32,
    decode_max_depth: i32,
    /// 0 refuse, 1 print ("nan", "inf"), 2 as `null`.
    encode_invalid_numbers: i32,
    encode_number_precision: i32,
    encode_keep_buffer: i32,
    decode_invalid_numbers: i32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            sparse_convert: 0,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: 0,
            encode_number_precision: 14,
            encode_keep_buffer: 1,
            decode_invalid_numbers: 1,
        }
    }
}

/// The settings of the `cjson` module scripts see, shared with the engine so SCRIPT FLUSH can
/// restore the defaults.
#[derive(Debug, Clone, Default)]
pub(crate) struct CjsonConfig(Arc<Mutex<Settings>>);

impl CjsonConfig {
    /// Back to the defaults (a fresh Lua state in Redis).
    pub(crate) fn reset(&self) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Settings::default();
    }

    fn get(&self) -> Settings {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn update(&self, f: impl FnOnce(&mut Settings)) {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

pub(super) fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

// The module and its configuration functions.

/// `json_arg_init`: at most `n` arguments.
fn at_most(lua: &Lua, args: &Args, n: usize) -> mlua::Result<()> {
    if args.len() > n {
        return Err(super::arg_error(lua, n as i64 + 1, b"found too many arguments"));
    }
    Ok(())
}

fn given(args: &Args, n: usize) -> bool {
    !matches!(args.get(n), None | Some(Value::Nil))
}

/// `json_integer_option`: sets an `int` within `[min, max]` if given; returns the setting.
fn integer_option(lua: &Lua, args: &Args, n: usize, setting: &mut i32, min: i32, max: i32) -> mlua::Result<Value> {
    if given(args, n) {
        let value = args.check_integer(lua, n)? as i32;
        if !(min..=max).contains(&value) {
            // C names argument 1 whichever option it checks.
            return Err(super::arg_error(lua, 1, format!("expected integer between {min} and {max}").as_bytes()));
        }
        *setting = value;
    }
    Ok(Value::Number(f64::from(*setting)))
}

/// `json_enum_option`: a boolean or one of `options` (by index); returns the setting as a
/// boolean when it is 0 or 1, else as its name.
fn enum_option(lua: &Lua, args: &Args, n: usize, setting: &mut i32, options: &[&str]) -> mlua::Result<Value> {
    if given(args, n) {
        if let Some(Value::Boolean(b)) = args.get(n) {
            *setting = i32::from(*b);
        } else {
            let name = args.check_string(lua, n)?;
            let cname = super::super::commands::cstr(&name);
            match options.iter().position(|o| o.as_bytes() == cname) {
                Some(i) => *setting = i as i32,
                None => {
                    let mut msg = b"invalid option '".to_vec();
                    msg.extend_from_slice(cname);
                    msg.push(b'\'');
                    return Err(super::arg_error(lua, n as i64, &msg));
                }
            }
        }
    }
    Ok(match *setting {
        0 | 1 => Value::Boolean(*setting == 1),
        other => Value::String(lua.create_string(options.get(other as usize).copied().unwrap_or(""))?),
    })
}

const ON_OFF: &[&str] = &["off", "on"];

type ConfigFn = fn(&Lua, &Args, &mut Settings) -> mlua::Result<MultiValue>;

const CONFIG_FUNCTIONS: [(&str, ConfigFn); 7] = [
    ("encode_sparse_array", |lua, args, s| {
        at_most(lua, args, 3)?;
        let convert = enum_option(lua, args, 1, &mut s.sparse_convert, ON_OFF)?;
        let ratio = integer_option(lua, args, 2, &mut s.sparse_ratio, 0, i32::MAX)?;
        let safe = integer_option(lua, args, 3, &mut s.sparse_safe, 0, i32::MAX)?;
        Ok(MultiValue::from_iter([convert, ratio, safe]))
    }),
    ("encode_max_depth", |lua, args, s| {
        at_most(lua, args, 1)?;
        Ok(MultiValue::from_iter([integer_option(lua, args, 1, &mut s.encode_max_depth, 1, i32::MAX)?]))
    }),
    ("decode_max_depth", |lua, args, s| {
        at_most(lua, args, 1)?;
        Ok(MultiValue::from_iter([integer_option(lua, args, 1, &mut s.decode_max_depth, 1, i32::MAX)?]))
    }),
    ("encode_number_precision", |lua, args, s| {
        at_most(lua, args, 1)?;
        Ok(MultiValue::from_iter([integer_option(lua, args, 1, &mut s.encode_number_precision, 1, 14)?]))
    }),
    ("encode_keep_buffer", |lua, args, s| {
        at_most(lua, args, 1)?;
        Ok(MultiValue::from_iter([enum_option(lua, args, 1, &mut s.encode_keep_buffer, ON_OFF)?]))
    }),
    ("encode_invalid_numbers", |lua, args, s| {
        at_most(lua, args, 1)?;
        Ok(MultiValue::from_iter([enum_option(lua, args, 1, &mut s.encode_invalid_numbers, &["off", "on", "null"])?]))
    }),
    ("decode_invalid_numbers", |lua, args, s| {
        at_most(lua, args, 1)?;
        Ok(MultiValue::from_iter([enum_option(lua, args, 1, &mut s.decode_invalid_numbers, ON_OFF)?]))
    }),
];

/// A `cjson` module table whose functions share `config`.
pub(super) fn module(lua: &Lua, config: CjsonConfig) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let c = config.clone();
    t.set(
        "encode",
        lua.create_function(move |lua, args: MultiValue| {
            let args = Args::new(args);
            if args.len() != 1 {
                return Err(super::arg_error(lua, 1, b"expected 1 argument"));
            }
            let json = encode::encode(lua, args.get(1).cloned().unwrap_or(Value::Nil), &c.get())?;
            lua.create_string(json).map_err(out_of_memory)
        })?,
    )?;
    let c = config.clone();
    t.set(
        "decode",
        lua.create_function(move |lua, args: MultiValue| {
            let args = Args::new(args);
            if args.len() != 1 {
                return Err(super::arg_error(lua, 1, b"expected 1 argument"));
            }
            let text = args.check_string(lua, 1)?;
            if text.len() >= 2 && (text[0] == 0 || text[1] == 0) {
                return Err(error(lua, "JSON parser does not support UTF-16 or UTF-32"));
            }
            decode::decode(lua, &text, &c.get())
        })?,
    )?;
    for (name, f) in CONFIG_FUNCTIONS {
        let c = config.clone();
        t.set(
            name,
            lua.create_function(move |lua, args: MultiValue| {
                let args = Args::new(args);
                let mut settings = c.get();
                let out = f(lua, &args, &mut settings);
                c.update(|s| *s = settings);
                out
            })?,
        )?;
    }
    t.set("new", lua.create_function(|lua, ()| module(lua, CjsonConfig::default()))?)?;
    t.set("null", null())?;
    t.set("_NAME", "cjson")?;
    t.set("_VERSION", "2.1.0")?;
    Ok(t)
}
