//! How the suite compares the two servers: replies byte for byte, except where Redis's answer
//! depends on something no model can share (the instant each server ran, the order of a hash
//! table seeded at random, how far one call of a scan gets through a big table), and then the
//! whole keyspace after every command.

use crate::conformance_support::{show, Pair, RespConn, V};

/// Replaces what legitimately differs between two servers running at slightly different
/// instants: positive TTLs, and memory estimates (the model's are documented estimates).
pub fn normalize(cmd: &[String], reply: Vec<u8>) -> Vec<u8> {
    let name = cmd.first().map(|c| c.to_ascii_lowercase()).unwrap_or_default();
    let is_int = reply.first() == Some(&b':');
    match name.as_str() {
        "ttl" | "pttl" if is_int && reply.get(1).is_some_and(|c| (b'1'..=b'9').contains(c)) => {
            b":<positive>\r\n".to_vec()
        }
        "memory" if is_int => b":<bytes>\r\n".to_vec(),
        _ => reply,
    }
}

/// Integer replies that count time and may differ by the moment each server ran: a deadline
/// set relative to "now" (EXPIRETIME, PEXPIRETIME) and an idle time in whole seconds of Redis's
/// LRU clock (OBJECT IDLETIME). Equal within `tolerance`.
pub fn time_tolerance(cmd: &[String]) -> Option<i64> {
    let name = cmd.first().map(|c| c.to_ascii_lowercase()).unwrap_or_default();
    match name.as_str() {
        "expiretime" => Some(2),
        "pexpiretime" => Some(2000),
        "object" if cmd.get(1).is_some_and(|s| s.eq_ignore_ascii_case("idletime")) => Some(1),
        _ => None,
    }
}

/// Both integer replies, within `tolerance` of each other (and on the same side of 0).
pub fn integers_close(r: &[u8], m: &[u8], tolerance: i64) -> bool {
    let int = |b: &[u8]| std::str::from_utf8(b.strip_prefix(b":")?).ok()?.trim_end().parse::<i64>().ok();
    match (int(r), int(m)) {
        (Some(a), Some(b)) => a == b || (a >= 0 && b >= 0 && (a - b).abs() <= tolerance),
        _ => r == m,
    }
}

/// Splits a flat RESP array of bulk strings into its elements' raw encodings.
pub fn bulk_elements(reply: &[u8]) -> Option<Vec<Vec<u8>>> {
    let text = reply.strip_prefix(b"*")?;
    let line_end = text.iter().position(|&c| c == b'\r')?;
    let n: usize = std::str::from_utf8(&text[..line_end]).ok()?.parse().ok()?;
    let mut rest = &text[line_end + 2..];
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let body = rest.strip_prefix(b"$")?;
        let le = body.iter().position(|&c| c == b'\r')?;
        let len: usize = std::str::from_utf8(&body[..le]).ok()?.parse().ok()?;
        let total = 1 + le + 2 + len + 2;
        out.push(rest.get(..total)?.to_vec());
        rest = &rest[total..];
    }
    Some(out)
}

/// A RESP array of the given raw elements.
fn array(elements: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", elements.len()).into_bytes();
    for e in elements {
        out.extend_from_slice(e);
    }
    out
}

/// HGETALL (HKEYS, HVALS, SMEMBERS) of a hash (set) Redis has converted to a hashtable lists
/// fields in an order that depends on a hash seed picked at startup, so the suite compares those
/// as sets of field/value pairs (of single elements). (The model keeps insertion order, which is
/// what small hashes, the listpack encoding, show, and lists an intset in numeric order.)
pub fn sort_groups(reply: Vec<u8>, group: usize) -> Vec<u8> {
    let Some(elements) = bulk_elements(&reply) else { return reply };
    let mut pairs: Vec<Vec<u8>> = elements.chunks(group).map(|c| c.concat()).collect();
    pairs.sort();
    let mut out = format!("*{}\r\n", elements.len()).into_bytes();
    for p in pairs {
        out.extend_from_slice(&p);
    }
    out
}

/// An element as `string2ll` reads it: the members an intset can hold.
pub fn is_redis_int(raw_bulk: &[u8]) -> bool {
    let Some(body) = raw_bulk.iter().position(|&c| c == b'\n').map(|i| &raw_bulk[i + 1..raw_bulk.len() - 2]) else {
        return false;
    };
    std::str::from_utf8(body).ok().and_then(|t| t.parse::<i64>().ok()).is_some_and(|v| v.to_string().as_bytes() == body)
}

fn encoding(conn: &mut RespConn, key: &str) -> Vec<u8> {
    conn.call(&[b"OBJECT", b"ENCODING", key.as_bytes()]).expect("OBJECT ENCODING")
}

/// Whether a reply listing a hash's or set's members comes in an order Redis does not fix (its
/// hash table's): then both replies are compared sorted, in groups of `group` elements.
fn unordered_group(pair: &mut Pair, cmd: &[String], reply: &[u8]) -> Option<usize> {
    let name = cmd[0].to_ascii_lowercase();
    if !reply.starts_with(b"*") {
        return None;
    }
    match name.as_str() {
        "hgetall" | "hkeys" | "hvals" | "smembers" if cmd.len() == 2 => {
            let big = encoding(&mut pair.redis, &cmd[1]) == b"$9\r\nhashtable\r\n";
            big.then_some(if name == "hgetall" { 2 } else { 1 })
        }
        // A union or difference is built afresh: an intset (numeric order) if every member is
        // an integer, else a hash table.
        "sunion" | "sdiff" => {
            let all_ints = bulk_elements(reply).is_some_and(|e| e.iter().all(|b| is_redis_int(b)));
            (!all_ints).then_some(1)
        }
        // An intersection lists the smallest input (the first of equals) in its own order.
        "sinter" => {
            let mut smallest: Option<(i64, Vec<u8>)> = None;
            for key in &cmd[1..] {
                let card = pair.redis.call(&[b"SCARD", key.as_bytes()]).expect("SCARD");
                let card: i64 = std::str::from_utf8(&card[1..card.len() - 2]).ok()?.parse().ok()?;
                if smallest.as_ref().is_none_or(|(c, _)| card < *c) {
                    smallest = Some((card, encoding(&mut pair.redis, key)));
                }
            }
            smallest.is_some_and(|(_, enc)| enc != b"$6\r\nintset\r\n").then_some(1)
        }
        _ => None,
    }
}

/// `[cursor, [elements...]]`.
fn scan_parts(reply: &[u8]) -> Option<(Vec<u8>, Vec<Vec<u8>>)> {
    let rest = reply.strip_prefix(b"*2\r\n$")?;
    let le = rest.iter().position(|&c| c == b'\r')?;
    let len: usize = std::str::from_utf8(&rest[..le]).ok()?.parse().ok()?;
    let cursor = rest.get(le + 2..le + 2 + len)?.to_vec();
    let elements = bulk_elements(&rest[le + 2 + len + 2..])?;
    Some((cursor, elements))
}

/// The replies of a SCAN, HSCAN, SSCAN or ZSCAN to compare. The model answers every scan in one
/// call; Redis does for a small collection (listpack, intset), in the model's order. For a hash
/// table (and the keyspace) Redis's order is its table's, and one call may stop early with a
/// cursor to go on from: the suite follows Redis's cursor to the end and compares the sets of
/// elements found.
pub fn scan_replies(pair: &mut Pair, cmd: &[String], r: Vec<u8>, m: Vec<u8>) -> (Vec<u8>, Vec<u8>) {
    let name = cmd[0].to_ascii_lowercase();
    if !matches!(name.as_str(), "scan" | "hscan" | "sscan" | "zscan") {
        return (r, m);
    }
    let (Some((mut cursor, mut found)), Some((m_cursor, m_found))) = (scan_parts(&r), scan_parts(&m)) else {
        return (r, m);
    };
    let cursor_at = if name == "scan" { 1 } else { 2 };
    let ordered = name != "scan" && {
        let enc = encoding(&mut pair.redis, &cmd[1]);
        enc == b"$8\r\nlistpack\r\n" || enc == b"$6\r\nintset\r\n"
    };
    if ordered {
        return (r, m);
    }
    let mut calls = 0;
    while cursor != b"0" && calls < 1000 {
        let mut next: Vec<Vec<u8>> = cmd.iter().map(|a| a.as_bytes().to_vec()).collect();
        next[cursor_at] = cursor.clone();
        let argv: Vec<&[u8]> = next.iter().map(|a| &a[..]).collect();
        let reply = pair.redis.call(&argv).expect("redis-server reply");
        let Some((c, more)) = scan_parts(&reply) else { break };
        (cursor, calls) = (c, calls + 1);
        found.extend(more);
    }
    let group = if name == "hscan" || name == "zscan" { 2 } else { 1 };
    let sorted = |elements: &[Vec<u8>]| {
        let mut groups: Vec<Vec<u8>> = elements.chunks(group).map(|c| c.concat()).collect();
        groups.sort();
        groups.dedup();
        array(&groups)
    };
    ([cursor, sorted(&found)].concat(), [m_cursor, sorted(&m_found)].concat())
}

/// Normalized replies for an order Redis does not fix (see [`unordered_group`]).
pub fn unordered_replies(pair: &mut Pair, cmd: &[String], r: Vec<u8>, m: Vec<u8>) -> (Vec<u8>, Vec<u8>) {
    match unordered_group(pair, cmd, &r) {
        Some(group) => (sort_groups(r, group), sort_groups(m, group)),
        None => (r, m),
    }
}

/// BYLEX commands on a sorted set with different scores that Redis keeps as a skiplist: Redis
/// documents the result as unspecified, and it is (the skiplist's search depends on its nodes'
/// random levels), so the suite does not send them. (On a listpack Redis walks the elements in
/// order, which the model copies.)
pub fn unspecified(pair: &mut Pair, cmd: &[String]) -> bool {
    let name = cmd[0].to_ascii_lowercase();
    let lex = matches!(name.as_str(), "zrangebylex" | "zrevrangebylex" | "zlexcount" | "zremrangebylex")
        || (matches!(name.as_str(), "zrange" | "zrangestore") && cmd.iter().any(|a| a.eq_ignore_ascii_case("bylex")));
    if !lex {
        return false;
    }
    let key = if name == "zrangestore" { cmd.get(2) } else { cmd.get(1) };
    let Some(key) = key else { return false };
    if encoding(&mut pair.redis, key) != b"$8\r\nskiplist\r\n" {
        return false;
    }
    let all = pair.redis.call(&[b"ZRANGE", key.as_bytes(), b"0", b"-1", b"WITHSCORES"]).expect("ZRANGE");
    let scores: Vec<Vec<u8>> = bulk_elements(&all).unwrap_or_default().into_iter().skip(1).step_by(2).collect();
    scores.windows(2).any(|w| w[0] != w[1])
}

/// One key as both servers must agree on it: type, encoding, deadline and contents.
#[derive(Debug, PartialEq)]
struct KeyState {
    kind: Vec<u8>,
    encoding: Vec<u8>,
    deadline_ms: i64,
    contents: Vec<u8>,
}

/// The keyspace the generated commands can reach (the keys in `keys`), read with pipelines:
/// TYPE, PEXPIRETIME and OBJECT ENCODING, then the contents by type. Orders Redis does not fix
/// (a hash table's) are sorted.
fn snapshot(conn: &mut RespConn, keys: &[&str]) -> Vec<Option<KeyState>> {
    let head: Vec<Vec<Vec<u8>>> = keys
        .iter()
        .flat_map(|k| {
            let k = k.as_bytes().to_vec();
            [
                vec![b"TYPE".to_vec(), k.clone()],
                vec![b"PEXPIRETIME".to_vec(), k.clone()],
                vec![b"OBJECT".to_vec(), b"ENCODING".to_vec(), k],
            ]
        })
        .collect();
    let replies = conn.pipeline(&head).expect("snapshot");
    let mut states = Vec::new();
    let mut reads = Vec::new();
    for (key, parts) in keys.iter().zip(replies.chunks(3)) {
        let V::Status(kind) = &parts[0].1 else { panic!("TYPE {key}: {}", parts[0].1.render()) };
        if kind == b"none" {
            states.push(None);
            continue;
        }
        let read: &[&str] = match &kind[..] {
            b"string" => &["GET"],
            b"hash" => &["HGETALL"],
            b"zset" => &["ZRANGE", "0", "-1", "WITHSCORES"],
            b"list" => &["LRANGE", "0", "-1"],
            _ => &["SMEMBERS"],
        };
        let mut args: Vec<Vec<u8>> = read.iter().map(|a| a.as_bytes().to_vec()).collect();
        args.insert(1, key.as_bytes().to_vec());
        reads.push(args);
        let deadline_ms = match &parts[1].1 {
            V::Int(n) => *n,
            other => panic!("PEXPIRETIME {key}: {}", other.render()),
        };
        let encoding = parts[2].0.clone();
        states.push(Some(KeyState { kind: kind.clone(), encoding, deadline_ms, contents: Vec::new() }));
    }
    let contents = conn.pipeline(&reads).expect("snapshot contents");
    let mut contents = contents.into_iter();
    for state in states.iter_mut().flatten() {
        let raw = contents.next().expect("a reply per read").0;
        let unordered = state.encoding == b"$9\r\nhashtable\r\n";
        state.contents = match &state.kind[..] {
            b"hash" if unordered => sort_groups(raw, 2),
            b"set" if unordered => sort_groups(raw, 1),
            _ => raw,
        };
    }
    states
}

/// Redis's clock (TIME), in milliseconds.
fn redis_now_ms(conn: &mut RespConn) -> i64 {
    let reply = conn.pipeline(&[vec![b"TIME".to_vec()]]).expect("TIME").remove(0).1;
    let V::Array(Some(parts)) = reply else { panic!("TIME: {}", reply.render()) };
    let number = |v: &V| match v {
        V::Bulk(Some(b)) => std::str::from_utf8(b).ok().and_then(|t| t.parse::<i64>().ok()).unwrap_or(0),
        _ => 0,
    };
    number(&parts[0]) * 1000 + number(&parts[1]) / 1000
}

/// The keyspaces of both servers agree: the same keys, types, encodings and contents, and
/// deadlines within two seconds (relative deadlines start from each server's own clock). A key
/// due to expire within a second (the any-command arm can give one a deadline in milliseconds)
/// may be gone on one server and not yet on the other, and is not compared.
pub fn keyspaces_agree(pair: &mut Pair, keys: &[&str]) -> Result<(), String> {
    let r = snapshot(&mut pair.redis, keys);
    let m = snapshot(&mut pair.model, keys);
    let now_ms = redis_now_ms(&mut pair.redis);
    let volatile =
        |s: &Option<KeyState>| s.as_ref().is_some_and(|s| s.deadline_ms > 0 && s.deadline_ms < now_ms + 1000);
    for ((key, r), m) in keys.iter().zip(r).zip(m) {
        if volatile(&r) || volatile(&m) {
            continue;
        }
        let same = match (&r, &m) {
            (Some(r), Some(m)) => {
                let deadlines = r.deadline_ms == m.deadline_ms
                    || (r.deadline_ms > 0 && m.deadline_ms > 0 && (r.deadline_ms - m.deadline_ms).abs() <= 2000);
                r.kind == m.kind && r.encoding == m.encoding && r.contents == m.contents && deadlines
            }
            (None, None) => true,
            _ => false,
        };
        if !same {
            let render = |s: &Option<KeyState>| match s {
                None => "(no key)".to_string(),
                Some(s) => {
                    format!("{} {} deadline {} {}", show(&s.kind), show(&s.encoding), s.deadline_ms, show(&s.contents))
                }
            };
            return Err(format!("key {key}:\nredis: {}\nmodel: {}", render(&r), render(&m)));
        }
    }
    Ok(())
}
