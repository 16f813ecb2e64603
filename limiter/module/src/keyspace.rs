//! Reading and writing a limiter's keys from inside Redis, as the scripts' commands read and
//! write them, each write replicated by its effect with an absolute expiry: a replica or an
//! AOF replayed later holds the same value and expires it when the primary does, whatever the
//! command decided and whenever it is replayed.

use std::time::Duration;

use redis_module::{Context, KeyType, RedisError, RedisString, RedisValue};

use crate::clock;

/// Whether a key of another type is an error (`GET`: WRONGTYPE) or no value (`MGET`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum OtherTypes {
    Refused,
    Absent,
}

/// What string `key` holds, read by `read`: None when there is none.
pub(crate) fn read_string<T>(
    ctx: &Context,
    key: &RedisString,
    others: OtherTypes,
    read: impl FnOnce(&[u8]) -> T,
) -> Result<Option<T>, RedisError> {
    // Read-only: a decision that writes nothing leaves the key exactly as it was (a key
    // opened for writing would have its value unshared to read it in place).
    let k = ctx.open_key(key);
    match k.key_type() {
        KeyType::Empty => Ok(None),
        KeyType::String => Ok(k.read()?.map(read)),
        _ if others == OtherTypes::Absent => Ok(None),
        _ => Err(RedisError::WrongType),
    }
}

/// The type of `key`.
pub(crate) fn key_type(ctx: &Context, key: &RedisString) -> KeyType {
    ctx.open_key(key).key_type()
}

/// `SET key value PX ttl_ms`, replicated as `SET key value PXAT instant`: an absolute instant,
/// as Redis itself propagates a relative expiry.
pub(crate) fn set_with_ttl(ctx: &Context, key: &RedisString, value: &str, ttl_ms: u64) -> Result<(), RedisError> {
    let k = ctx.open_key_writable(key);
    k.write(value)?;
    k.set_expire(Duration::from_millis(ttl_ms))?;
    let at = expires_at(ttl_ms);
    ctx.replicate("SET", &[key.as_slice(), value.as_bytes(), b"PXAT", at.as_bytes()][..]);
    Ok(())
}

/// A new value for the string `key`, keeping its expiry (what `INCRBY` does), replicated as
/// `SET key value KEEPTTL`.
pub(crate) fn set_keeping_ttl(ctx: &Context, key: &RedisString, value: &str) -> Result<(), RedisError> {
    let k = ctx.open_key_writable(key);
    // In place: setting a string value would drop the key's expiry.
    k.as_string_dma()?.write(value.as_bytes())?;
    ctx.replicate("SET", &[key.as_slice(), value.as_bytes(), b"KEEPTTL"][..]);
    Ok(())
}

/// `PEXPIRE key ttl_ms`, replicated as `PEXPIREAT key instant`.
pub(crate) fn expire(ctx: &Context, key: &RedisString, ttl_ms: u64) -> Result<(), RedisError> {
    ctx.open_key_writable(key).set_expire(Duration::from_millis(ttl_ms))?;
    let at = expires_at(ttl_ms);
    ctx.replicate("PEXPIREAT", &[key.as_slice(), at.as_bytes()][..]);
    Ok(())
}

/// Runs the write `command` with `args` through Redis and replicates it as it is when it
/// changed anything (a reply above 0: members added or removed).
pub(crate) fn call_write(ctx: &Context, command: &str, args: &[&[u8]]) -> Result<(), RedisError> {
    if let RedisValue::Integer(n) = ctx.call(command, args)? {
        if n > 0 {
            ctx.replicate(command, args);
        }
    }
    Ok(())
}

/// The instant, in ms on Redis's clock, `ttl_ms` from now.
fn expires_at(ttl_ms: u64) -> String {
    (clock::now_us() / 1_000 + ttl_ms).to_string()
}

/// `stem:index`: a window's key (the scripts' `KEYS[1] .. ':' .. index`), in the stem's hash tag.
pub(crate) fn window_key(ctx: &Context, stem: &RedisString, index: i128) -> RedisString {
    let mut name = stem.as_slice().to_vec();
    name.push(b':');
    name.extend_from_slice(index.to_string().as_bytes());
    ctx.create_string(name)
}
