//! SPOP, SRANDMEMBER, HRANDFIELD, ZRANDMEMBER and RANDOMKEY: Redis picks with a generator seeded at
//! startup, the model with its own, so the picks themselves cannot be compared. Where Redis
//! leaves nothing to chance (errors, empty and missing collections, a count that takes the
//! whole collection, a collection of one) the replies must be identical (a hash table's order
//! aside); otherwise each server's reply must be a valid one for the collection as it was
//! before the command: the right number of picks, each a member (with its value or score),
//! distinct unless the count asked for repeats. After SPOP has popped different members on
//! the two servers, the model's remaining set must be the rest of the members, and then both
//! servers are given Redis's set so the sequence can go on.

use super::compare::{bulk_elements, sort_groups};
use crate::conformance_support::{show, Pair, RespConn};

/// The collection under a random command's key, read from Redis before the command runs.
pub struct Before {
    /// Members with their value or score, each group as raw bulk strings.
    groups: Vec<Vec<u8>>,
    /// The members alone.
    members: Vec<Vec<u8>>,
    encoding: Vec<u8>,
}

fn is_random(cmd: &[String]) -> bool {
    ["spop", "srandmember", "hrandfield", "zrandmember"].iter().any(|c| cmd[0].eq_ignore_ascii_case(c))
}

/// Each element group of the collection (members, field+value, member+score), the members
/// alone, and the encoding.
fn read_groups(conn: &mut RespConn, key: &[u8]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>, Vec<u8>) {
    let kind = conn.call(&[b"TYPE", key]).expect("TYPE");
    let (reply, group) = match &kind[..] {
        b"+set\r\n" => (conn.call(&[b"SMEMBERS", key]), 1),
        b"+hash\r\n" => (conn.call(&[b"HGETALL", key]), 2),
        b"+zset\r\n" => (conn.call(&[b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"]), 2),
        _ => return (Vec::new(), Vec::new(), Vec::new()),
    };
    let elements = bulk_elements(&reply.expect("contents")).unwrap_or_default();
    let encoding = conn.call(&[b"OBJECT", b"ENCODING", key]).expect("OBJECT ENCODING");
    let members = elements.chunks(group).map(|c| c[0].clone()).collect();
    (elements.chunks(group).map(|c| c.concat()).collect(), members, encoding)
}

/// What Redis holds under the key of a random command, or `None` for other commands.
pub fn before(pair: &mut Pair, cmd: &[String]) -> Option<Before> {
    if !is_random(cmd) || cmd.len() < 2 {
        return None;
    }
    let (groups, members, encoding) = read_groups(&mut pair.redis, cmd[1].as_bytes());
    Some(Before { groups, members, encoding })
}

/// The groups a reply lists: a bulk string (no count) or a flat array.
fn reply_groups(reply: &[u8], group: usize) -> Option<Vec<Vec<u8>>> {
    if reply.starts_with(b"$") {
        return Some(vec![reply.to_vec()]);
    }
    Some(bulk_elements(reply)?.chunks(group).map(|c| c.concat()).collect())
}

/// Checks two replies of a random command that differ. `Ok` if both are valid picks from
/// `before`, an error text otherwise.
pub fn check(pair: &mut Pair, cmd: &[String], before: &Before, r: &[u8], m: &[u8]) -> Result<(), String> {
    let name = cmd[0].to_ascii_lowercase();
    let fail = |why: &str| Err(format!("{why}\nredis: {}\nmodel: {}", show(r), show(m)));
    if r.starts_with(b"-") || m.starts_with(b"-") || before.groups.is_empty() {
        return fail("the replies must be identical");
    }
    let count: Option<i64> = cmd.get(2).and_then(|c| c.parse().ok());
    let with = cmd.len() == 4;
    let group = if with { 2 } else { 1 };
    let size = before.groups.len() as i64;
    let deterministic = size == 1 || count.is_some_and(|n| n == 0 || n >= size);
    let (Some(rg), Some(mg)) = (reply_groups(r, group), reply_groups(m, group)) else {
        return fail("unexpected reply shapes");
    };
    if deterministic {
        // Only a hash table's order (and a union's, for SPOP of the whole set) is Redis's own.
        let ordered = before.encoding == b"$8\r\nlistpack\r\n" || before.encoding == b"$6\r\nintset\r\n";
        if ordered || sort_groups(r.to_vec(), group) != sort_groups(m.to_vec(), group) {
            return fail("nothing is random here: the replies must be identical");
        }
    } else {
        let distinct = count.is_some_and(|n| n > 0);
        let wanted = match count {
            None => 1,
            Some(n) if n < 0 => n.unsigned_abs() as usize,
            Some(n) => n.min(size) as usize,
        };
        let valid = if with { &before.groups } else { &before.members };
        for (side, groups) in [("redis", &rg), ("model", &mg)] {
            if groups.len() != wanted {
                return fail(&format!("{side}: {} picks, not {wanted}", groups.len()));
            }
            if let Some(g) = groups.iter().find(|g| !valid.contains(g)) {
                return fail(&format!("{side} picked {}, which the collection does not hold", show(g)));
            }
            let mut unique = groups.clone();
            unique.sort();
            unique.dedup();
            if distinct && unique.len() != groups.len() {
                return fail(&format!("{side} picked a member twice"));
            }
        }
    }
    if name == "spop" && !deterministic {
        resync_after_spop(pair, cmd[1].as_bytes(), before, &mg, count)?;
    }
    Ok(())
}

/// After SPOP took different members: the model must hold the members it did not pop, in the
/// encoding Redis would leave them in (a count close to the size rebuilds the set from the
/// members kept, an intset if they are all integers); then both servers get Redis's set (and
/// deadline) afresh.
fn resync_after_spop(
    pair: &mut Pair,
    key: &[u8],
    before: &Before,
    popped: &[Vec<u8>],
    count: Option<i64>,
) -> Result<(), String> {
    let (mut left, _, encoding) = read_groups(&mut pair.model, key);
    left.sort();
    let mut expected: Vec<Vec<u8>> = before.groups.iter().filter(|g| !popped.contains(g)).cloned().collect();
    expected.sort();
    if left != expected {
        return Err(format!(
            "after SPOP the model holds {} where it should hold the members it did not pop",
            left.iter().map(|g| show(g)).collect::<Vec<_>>().join(" ")
        ));
    }
    let size = before.groups.len() as i64;
    let rebuilt = count.is_some_and(|n| (size - n) * 5 <= n);
    let expected_encoding: &[u8] = match rebuilt {
        false => &before.encoding,
        true if expected.iter().all(|m| super::compare::is_redis_int(m)) => b"$6\r\nintset\r\n",
        true => b"$9\r\nhashtable\r\n",
    };
    if encoding != expected_encoding {
        return Err(format!(
            "after SPOP the model's set is {}, Redis's rule gives {}",
            show(&encoding),
            show(expected_encoding)
        ));
    }
    let (members, _, _) = read_groups(&mut pair.redis, key);
    let deadline = pair.redis.call(&[b"PEXPIRETIME", key]).expect("PEXPIRETIME");
    let deadline = String::from_utf8_lossy(&deadline[1..deadline.len() - 2]).into_owned();
    let bodies: Vec<Vec<u8>> = members
        .iter()
        .map(|g| g[g.iter().position(|&c| c == b'\n').map_or(0, |i| i + 1)..g.len() - 2].to_vec())
        .collect();
    let mut restore: Vec<Vec<Vec<u8>>> = vec![vec![b"DEL".to_vec(), key.to_vec()]];
    if !bodies.is_empty() {
        restore.push([vec![b"SADD".to_vec(), key.to_vec()], bodies].concat());
        if deadline != "-1" {
            restore.push(vec![b"PEXPIREAT".to_vec(), key.to_vec(), deadline.into_bytes()]);
        }
    }
    let (r, m) = pair.pipeline_both(&restore);
    if r.iter().map(|x| &x.0).ne(m.iter().map(|x| &x.0)) {
        return Err("restoring the set after SPOP went differently".to_string());
    }
    Ok(())
}

/// RANDOMKEY's replies, when they differ: each must name a key its server holds.
pub fn check_randomkey(pair: &mut Pair, cmd: &[String], r: &[u8], m: &[u8]) -> Option<Result<(), String>> {
    if cmd.len() != 1 || !cmd[0].eq_ignore_ascii_case("randomkey") {
        return None;
    }
    let name = |reply: &[u8]| {
        let body = reply.strip_prefix(b"$")?;
        let start = body.iter().position(|&c| c == b'\n')? + 1;
        Some(body[start..body.len() - 2].to_vec())
    };
    let exists = |conn: &mut RespConn, key: &[u8]| conn.call(&[b"EXISTS", key]).expect("EXISTS") == b":1\r\n";
    Some(match (name(r), name(m)) {
        (Some(rk), Some(mk)) if exists(&mut pair.redis, &rk) && exists(&mut pair.model, &mk) => Ok(()),
        _ => Err(format!("RANDOMKEY named no key of its server\nredis: {}\nmodel: {}", show(r), show(m))),
    })
}
