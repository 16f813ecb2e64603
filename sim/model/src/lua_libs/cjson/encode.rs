//! `cjson.encode`: `json_append_data` over a value, with an explicit stack of open tables.

use mlua::{Lua, Table, Value};

use super::super::super::num::format_g;
use super::super::{c_int, error, MAX_C_STACK};
use super::Settings;

/// `char2escape`.
fn escape(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            0x08 => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            _ => out.push(c),
        }
    }
    out.push(b'"');
}

fn serialise_error(lua: &Lua, type_name: &str, reason: &str) -> mlua::Error {
    error(lua, format!("Cannot serialise {type_name}: {reason}"))
}

/// `json_append_number`.
fn number(lua: &Lua, out: &mut Vec<u8>, n: f64, s: &Settings) -> mlua::Result<()> {
    if !n.is_finite() {
        match s.encode_invalid_numbers {
            0 => return Err(serialise_error(lua, "number", "must not be NaN or Inf")),
            1 if n.is_nan() => {
                out.extend_from_slice(b"nan");
                return Ok(());
            }
            1 => {}
            _ => {
                out.extend_from_slice(b"null");
                return Ok(());
            }
        }
    }
    out.extend_from_slice(format_g(n, s.encode_number_precision.clamp(1, 14) as usize).as_bytes());
    Ok(())
}

fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

/// `lua_array_length`: the largest index if every key is a positive integer (as C's `int`),
/// -1 for an object; an excessively sparse array is an error unless converting is on.
fn array_length(lua: &Lua, t: &Table, s: &Settings) -> mlua::Result<i32> {
    let (mut max, mut items) = (0i32, 0i32);
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        match as_number(&k) {
            Some(k) if k != 0.0 && k.floor() == k && k >= 1.0 => {
                if k > f64::from(max) {
                    max = c_int(k);
                }
                items = items.wrapping_add(1);
            }
            _ => return Ok(-1),
        }
    }
    if s.sparse_ratio > 0 && max > items.wrapping_mul(s.sparse_ratio) && max > s.sparse_safe {
        if s.sparse_convert == 0 {
            return Err(serialise_error(lua, "table", "excessively sparse array"));
        }
        return Ok(-1);
    }
    Ok(max)
}

/// A table being encoded.
enum Frame {
    Array { table: Table, next: i64, len: i64 },
    Object { pairs: Vec<(Value, Value)>, next: usize },
}

impl Frame {
    /// Stack slots C holds for this level while encoding inside it: the element, or key and value.
    fn slots(&self) -> usize {
        match self {
            Frame::Array { .. } => 1,
            Frame::Object { .. } => 2,
        }
    }
}

/// `json_append_data` over the whole value, with an explicit stack of open tables.
pub(super) fn encode(lua: &Lua, value: Value, s: &Settings) -> mlua::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut pending = Some(value);
    loop {
        if let Some(v) = pending.take() {
            match v {
                Value::String(text) => escape(&mut out, &text.as_bytes()),
                Value::Integer(_) | Value::Number(_) => number(lua, &mut out, as_number(&v).unwrap_or(0.0), s)?,
                Value::Boolean(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
                Value::Nil => out.extend_from_slice(b"null"),
                Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
                Value::Table(table) => {
                    let depth = stack.len() + 1;
                    // The argument, then what each enclosing level holds; C asks for 3 more.
                    let used = 1 + stack.iter().map(Frame::slots).sum::<usize>();
                    if depth > s.encode_max_depth.max(0) as usize || used + 3 > MAX_C_STACK {
                        return Err(error(lua, format!("Cannot serialise, excessive nesting ({depth})")));
                    }
                    let len = array_length(lua, &table, s)?;
                    if len > 0 {
                        out.push(b'[');
                        stack.push(Frame::Array { table, next: 1, len: i64::from(len) });
                    } else {
                        out.push(b'{');
                        let pairs = table.pairs::<Value, Value>().collect::<mlua::Result<Vec<_>>>()?;
                        stack.push(Frame::Object { pairs, next: 0 });
                    }
                }
                other => return Err(serialise_error(lua, super::super::type_name(&other), "type not supported")),
            }
        }
        match stack.last_mut() {
            None => return Ok(out),
            Some(Frame::Array { table, next, len }) => {
                if *next > *len {
                    out.push(b']');
                    stack.pop();
                    continue;
                }
                if *next > 1 {
                    out.push(b',');
                }
                pending = Some(table.raw_get(*next)?);
                *next += 1;
            }
            Some(Frame::Object { pairs, next }) => {
                let Some((k, v)) = pairs.get(*next).cloned() else {
                    out.push(b'}');
                    stack.pop();
                    continue;
                };
                if *next > 0 {
                    out.push(b',');
                }
                *next += 1;
                match &k {
                    Value::Integer(_) | Value::Number(_) => {
                        out.push(b'"');
                        number(lua, &mut out, as_number(&k).unwrap_or(0.0), s)?;
                        out.extend_from_slice(b"\":");
                    }
                    Value::String(text) => {
                        escape(&mut out, &text.as_bytes());
                        out.push(b':');
                    }
                    other => {
                        return Err(serialise_error(
                            lua,
                            super::super::type_name(other),
                            "table key must be a number or string",
                        ))
                    }
                }
                pending = Some(v);
            }
        }
        // Far beyond any reply Redis could send (and its 512 MB bulk limit): refuse rather
        // than exhaust the host (a sparse array allowed by `encode_sparse_array(_, 0)`).
        if out.len() > 1 << 30 {
            return Err(super::super::raise(b"not enough memory".to_vec()));
        }
    }
}
