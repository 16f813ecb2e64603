//! The snapshot pipelined after every script call: a script that reads every key (type,
//! value, PTTL) and PERSISTs it, and its reply read back as one [`KeyState`] per key.

use std::collections::BTreeMap;

use crate::conformance_support::{show, V};

/// Reads every key and PERSISTs it, pipelined right after each script call (see the suite docs).
/// Reads every key and PERSISTs it, pipelined right after each script call (see module docs).
pub const SNAPSHOT: &str = r#"
local out = {}
for _, k in ipairs(redis.call('KEYS', '*')) do
  local t = redis.call('TYPE', k)['ok']
  local v = {}
  if t == 'string' then
    v = {redis.call('GET', k)}
  elseif t == 'hash' then
    v = redis.call('HGETALL', k)
  elseif t == 'zset' then
    v = {redis.call('ZCARD', k), redis.call('ZRANGE', k, 0, 2, 'WITHSCORES'),
         redis.call('ZRANGE', k, -3, -1, 'WITHSCORES')}
  end
  out[#out + 1] = {k, t, redis.call('PTTL', k), v}
  redis.call('PERSIST', k)
end
return out
"#;

pub fn describe(state: Option<&KeyState>) -> String {
    match state {
        None => "(no such key)".to_string(),
        Some(k) => format!("{} ({}), PTTL {}: {}", show(&k.key), show(&k.kind), k.pttl, k.value.render()),
    }
}

/// One key as the snapshot saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyState {
    pub key: Vec<u8>,
    pub kind: Vec<u8>,
    pub pttl: i64,
    pub value: V,
}

pub fn parse_snapshot(v: &V) -> Result<BTreeMap<Vec<u8>, KeyState>, String> {
    let V::Array(Some(entries)) = v else { return Err(format!("snapshot is not an array: {v:?}")) };
    let mut out = BTreeMap::new();
    for e in entries {
        let V::Array(Some(parts)) = e else { return Err(format!("snapshot entry: {e:?}")) };
        let [V::Bulk(Some(key)), V::Bulk(Some(kind)), V::Int(pttl), value] = &parts[..] else {
            return Err(format!("snapshot entry: {e:?}"));
        };
        let mut value = value.clone();
        if kind == b"hash" {
            // Field order is the encoding's business; compare the set of pairs.
            if let V::Array(Some(items)) = &value {
                let mut pairs: Vec<Vec<V>> = items.chunks(2).map(|c| c.to_vec()).collect();
                pairs.sort();
                value = V::Array(Some(pairs.concat()));
            }
        }
        out.insert(key.clone(), KeyState { key: key.clone(), kind: kind.clone(), pttl: *pttl, value });
    }
    Ok(out)
}
