//! The generated commands: one arm per command shape, each a fixed head and a tail of tokens
//! drawn from the pools, grouped by family.
//!
//! A sequence mostly uses one family (strings, hashes, lists, sets or sorted sets), with some
//! key commands and some of everything else mixed in: with three keys shared by every command,
//! a sequence drawn from all arms alike leaves few keys of any one collection type to work on.
//! One sequence in six draws from everything, for the collisions between types.

use proptest::prelude::*;
use proptest::strategy::Union;

use super::pools::*;

fn any_token() -> Vec<&'static str> {
    let mut all = Vec::new();
    for pool in [KEYS, FIELDS, MEMBERS, VALUES, INTS, SCORES, RANGES, SET_OPTS, ZADD_OPTS, ZRANGE_OPTS, COUNTS] {
        all.extend_from_slice(pool);
    }
    all
}

fn pick(pool: &[&'static str]) -> BoxedStrategy<String> {
    prop::sample::select(pool.to_vec()).prop_map(str::to_string).boxed()
}

fn lit(s: &'static str) -> BoxedStrategy<String> {
    Just(s.to_string()).boxed()
}

/// A command: fixed leading slots, then 0..=`max_tail` tokens from `tail`.
fn arm(slots: Vec<BoxedStrategy<String>>, tail: &[&'static str], max_tail: usize) -> BoxedStrategy<Vec<String>> {
    let tail = if tail.is_empty() {
        Just(Vec::new()).boxed()
    } else {
        prop::collection::vec(pick(tail), 0..=max_tail).boxed()
    };
    (slots, tail)
        .prop_map(|(mut head, tail)| {
            head.extend(tail);
            head
        })
        .boxed()
}

type Arm = BoxedStrategy<Vec<String>>;

fn k() -> BoxedStrategy<String> {
    pick(KEYS)
}
fn f() -> BoxedStrategy<String> {
    pick(FIELDS)
}
fn m() -> BoxedStrategy<String> {
    pick(MEMBERS)
}
fn v() -> BoxedStrategy<String> {
    pick(VALUES)
}
fn i() -> BoxedStrategy<String> {
    pick(INTS)
}
fn s() -> BoxedStrategy<String> {
    pick(SCORES)
}
fn r() -> BoxedStrategy<String> {
    pick(RANGES)
}
fn x() -> BoxedStrategy<String> {
    pick(INDEXES)
}
fn e() -> BoxedStrategy<String> {
    pick(LIST_ELEMS)
}
fn w() -> BoxedStrategy<String> {
    pick(WEIGHTS)
}
fn g() -> BoxedStrategy<String> {
    pick(GOOD_SCORES)
}
fn l() -> BoxedStrategy<String> {
    pick(LEX_BOUNDS)
}

/// Sequences of commands, each sequence mostly of one family (see the module docs). A focused
/// sequence starts by filling each key with a value of its family's type, then runs up to 24
/// commands, some of which fill keys again, so that the family's commands find something to
/// work on.
pub fn sequences() -> impl Strategy<Value = Vec<Vec<String>>> {
    let (keys, noise) = (keys(), noise());
    let all: Vec<Arm> =
        [strings(), hashes(), lists(), sets(), zsets(), keys.clone(), noise.clone()].into_iter().flatten().collect();
    let everything = Union::new(all).boxed();
    let focused = |fill: fn(BoxedStrategy<String>) -> Arm, family: Vec<Arm>| {
        let mix = Union::new_weighted(vec![
            (4, fill(k())),
            (12, Union::new(family).boxed()),
            (3, Union::new(keys.clone()).boxed()),
            (1, Union::new(noise.clone()).boxed()),
            (1, everything.clone()),
        ]);
        let prefix = KEYS.iter().map(|key| fill(lit(key))).collect::<Vec<_>>();
        (prefix, prop::collection::vec(mix, 1..25))
            .prop_map(|(mut commands, rest)| {
                commands.extend(rest);
                commands
            })
            .boxed()
    };
    Union::new(vec![
        focused(|key| arm(vec![lit("SET"), key, v()], &[], 0), strings()),
        focused(|key| arm(vec![lit("HSET"), key, f(), v(), f(), v()], &[], 0), hashes()),
        focused(|key| arm(vec![pick(&["RPUSH", "LPUSH"]), key, e(), e()], LIST_ELEMS, 3), lists()),
        focused(|key| arm(vec![lit("SADD"), key, pick(SET_MEMBERS), pick(SET_MEMBERS)], SET_MEMBERS, 6), sets()),
        focused(|key| arm(vec![lit("ZADD"), key, g(), m(), g(), m(), g(), m()], &[], 0), zsets()),
        prop::collection::vec(everything.clone(), 1..25).boxed(),
    ])
}

/// Strings.
fn strings() -> Vec<Arm> {
    let kv: Vec<&'static str> = KEYS.iter().chain(VALUES).copied().collect();
    vec![
        arm(vec![lit("GET"), k()], &[], 0),
        arm(vec![lit("SET"), k(), v()], SET_OPTS, 4),
        arm(vec![lit("SET"), k(), v()], &[], 0),
        arm(vec![lit("SETNX"), k(), v()], &[], 0),
        arm(vec![lit("MGET"), k()], KEYS, 2),
        arm(vec![lit("MSET"), k(), v()], &kv, 3),
        arm(vec![lit("SETEX"), k(), pick(EXPIRE_SECONDS), v()], &[], 0),
        arm(vec![lit("PSETEX"), k(), pick(EXPIRE_MILLIS), v()], &[], 0),
        arm(vec![lit("GETSET"), k(), v()], &[], 0),
        arm(vec![lit("GETDEL"), k()], &[], 0),
        arm(vec![lit("GETEX"), k()], GETEX_OPTS, 3),
        arm(vec![lit("INCR"), k()], &[], 0),
        arm(vec![lit("DECR"), k()], &[], 0),
        arm(vec![lit("INCRBY"), k(), i()], &[], 0),
        arm(vec![lit("DECRBY"), k(), i()], &[], 0),
        arm(vec![lit("INCRBYFLOAT"), k(), v()], &[], 0),
        arm(vec![lit("STRLEN"), k()], &[], 0),
        arm(vec![lit("APPEND"), k(), v()], &[], 0),
        arm(vec![pick(&["GETRANGE", "SUBSTR"]), k(), x(), x()], &[], 0),
        arm(vec![lit("SETRANGE"), k(), pick(OFFSETS), v()], &[], 0),
        arm(vec![lit("MSETNX"), k(), v()], &kv, 3),
        arm(vec![lit("LCS"), k(), k()], LCS_OPTS, 4),
    ]
}

/// Keys, expiry and the server commands that take no key type.
fn keys() -> Vec<Arm> {
    let any = any_token();
    vec![
        arm(vec![lit("DEL"), k()], KEYS, 2),
        arm(vec![lit("UNLINK"), k()], KEYS, 1),
        arm(vec![lit("EXISTS"), k()], KEYS, 3),
        arm(vec![lit("TYPE"), k()], &[], 0),
        arm(vec![lit("EXPIRE"), k(), pick(EXPIRE_SECONDS)], EXPIRE_OPTS, 2),
        arm(vec![lit("PEXPIRE"), k(), pick(EXPIRE_MILLIS)], EXPIRE_OPTS, 1),
        arm(vec![lit("EXPIREAT"), k(), pick(&["1", "4102444800", "abc", "-5"])], EXPIRE_OPTS, 1),
        arm(vec![lit("PEXPIREAT"), k(), pick(&["1", "4102444800000"])], EXPIRE_OPTS, 1),
        arm(vec![lit("TTL"), k()], &[], 0),
        arm(vec![lit("PTTL"), k()], &[], 0),
        arm(vec![lit("PERSIST"), k()], &[], 0),
        arm(vec![lit("RENAME"), k(), k()], &[], 0),
        arm(vec![lit("RENAMENX"), k(), k()], &[], 0),
        arm(vec![lit("PING")], &any, 2),
        arm(vec![lit("ECHO"), v()], &any, 1),
        arm(vec![lit("SELECT"), pick(&["0", "abc", "-1", "99999999999"])], &[], 0),
        arm(vec![lit("DBSIZE")], &any, 1),
        arm(vec![lit("MEMORY"), pick(&["USAGE", "usage", "foo"]), k()], MEMORY_OPTS, 2),
        arm(vec![lit("FLUSHDB")], FLUSH_OPTS, 2),
        arm(vec![pick(&["EXPIRETIME", "PEXPIRETIME"]), k()], &[], 0),
        arm(vec![lit("TOUCH"), k()], KEYS, 2),
        arm(vec![lit("COPY"), k(), k()], COPY_OPTS, 3),
        arm(vec![lit("OBJECT"), pick(OBJECT_SUBCOMMANDS), k()], KEYS, 1),
        arm(vec![lit("OBJECT"), pick(OBJECT_SUBCOMMANDS)], &[], 0),
        arm(vec![lit("SCAN"), pick(CURSORS)], SCAN_OPTS, 4),
        arm(vec![lit("RANDOMKEY")], &any, 1),
    ]
}

/// Hashes.
fn hashes() -> Vec<Arm> {
    let fv: Vec<&'static str> = FIELDS.iter().chain(VALUES).copied().collect();
    vec![
        arm(vec![lit("HSET"), k(), f(), v()], &fv, 3),
        arm(vec![lit("HMSET"), k(), f(), v()], &fv, 2),
        arm(vec![lit("HSETNX"), k(), f(), v()], &[], 0),
        arm(vec![lit("HGET"), k(), f()], &[], 0),
        arm(vec![lit("HMGET"), k(), f()], FIELDS, 2),
        arm(vec![lit("HGETALL"), k()], &[], 0),
        arm(vec![lit("HDEL"), k(), f()], FIELDS, 2),
        arm(vec![lit("HEXISTS"), k(), f()], &[], 0),
        arm(vec![lit("HLEN"), k()], &[], 0),
        arm(vec![lit("HKEYS"), k()], &[], 0),
        arm(vec![lit("HVALS"), k()], &[], 0),
        arm(vec![lit("HINCRBY"), k(), f(), i()], &[], 0),
        arm(vec![lit("HINCRBYFLOAT"), k(), f(), v()], &[], 0),
        arm(vec![lit("HSTRLEN"), k(), f()], &[], 0),
        arm(vec![lit("HSCAN"), k(), pick(CURSORS)], SCAN_OPTS, 4),
        arm(vec![lit("HRANDFIELD"), k()], &random_tail("WITHVALUES"), 2),
        arm(vec![lit("HRANDFIELD"), k(), pick(RANDOM_COUNTS), lit("WITHVALUES")], &[], 0),
        // Well-formed commands, so that hashes are built and read rather than refused.
        arm(vec![lit("HSET"), k(), f(), v(), f(), v()], &[], 0),
        arm(vec![lit("HSCAN"), k(), lit("0")], &["MATCH", "f*", "COUNT", "1"], 2),
    ]
}

/// Lists, with a small pool of elements as well so searches find something.
fn lists() -> Vec<Arm> {
    vec![
        arm(vec![lit("LPUSH"), k(), v()], VALUES, 3),
        arm(vec![lit("RPUSH"), k(), v()], VALUES, 3),
        arm(vec![pick(&["LPUSHX", "RPUSHX"]), k(), v()], VALUES, 1),
        arm(vec![pick(&["LPOP", "RPOP"]), k()], COUNTS, 2),
        arm(vec![lit("LLEN"), k()], &[], 0),
        arm(vec![lit("LRANGE"), k(), x(), x()], &[], 0),
        arm(vec![lit("LTRIM"), k(), x(), x()], &[], 0),
        arm(vec![lit("LINDEX"), k(), x()], &[], 0),
        arm(vec![pick(&["RPUSH", "LPUSH"]), k(), e()], LIST_ELEMS, 5),
        arm(vec![lit("LINSERT"), k(), pick(LINSERT_WHERE), e(), e()], &[], 0),
        arm(vec![lit("LSET"), k(), x(), e()], &[], 0),
        arm(vec![lit("LREM"), k(), x(), e()], &[], 0),
        arm(vec![lit("LPOS"), k(), e()], LPOS_OPTS, 4),
        arm(vec![lit("LMOVE"), k(), k(), pick(LIST_ENDS), pick(LIST_ENDS)], &[], 0),
        arm(vec![lit("RPOPLPUSH"), k(), k()], &[], 0),
        arm(vec![lit("LMPOP"), pick(NUMKEYS), k()], &mpop(LIST_ENDS), 4),
        arm(vec![lit("LMPOP"), lit("2"), k(), k(), pick(LIST_ENDS)], MPOP_OPTS, 2),
        // Well-formed commands, so that lists are searched and moved rather than refused.
        arm(vec![lit("LMPOP"), lit("1"), k(), pick(&["LEFT", "RIGHT"])], &["COUNT", "2"], 2),
        arm(vec![lit("LPOS"), k(), e()], &["RANK", "-1", "COUNT", "0", "MAXLEN", "2"], 2),
        arm(vec![lit("LSET"), k(), pick(&["0", "-1", "1"]), e()], &[], 0),
        arm(vec![lit("LRANGE"), k(), lit("0"), lit("-1")], &[], 0),
        arm(vec![lit("BLMPOP"), pick(TIMEOUTS), pick(NUMKEYS), k()], &mpop(LIST_ENDS), 4),
        arm(vec![lit("BLMPOP"), pick(TIMEOUTS), lit("1"), k(), pick(&["LEFT", "RIGHT"])], &["COUNT", "2"], 2),
    ]
}

/// Sets, some big enough for SPOP to rebuild one (a count close to its size).
fn sets() -> Vec<Arm> {
    vec![
        arm(vec![lit("SADD"), k(), pick(SET_MEMBERS)], SET_MEMBERS, 4),
        arm(vec![lit("SREM"), k(), pick(SET_MEMBERS)], SET_MEMBERS, 2),
        arm(vec![lit("SCARD"), k()], &[], 0),
        arm(vec![lit("SISMEMBER"), k(), pick(SET_MEMBERS)], &[], 0),
        arm(vec![lit("SMEMBERS"), k()], &[], 0),
        arm(vec![lit("SMISMEMBER"), k(), pick(SET_MEMBERS)], SET_MEMBERS, 3),
        arm(vec![pick(&["SINTER", "SUNION", "SDIFF"]), k()], KEYS, 2),
        arm(vec![pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]), k(), k()], KEYS, 2),
        arm(vec![lit("SINTERCARD"), pick(NUMKEYS), k()], &keys_and(INTERCARD_OPTS), 3),
        arm(vec![lit("SMOVE"), k(), k(), pick(SET_MEMBERS)], &[], 0),
        arm(vec![lit("SSCAN"), k(), pick(CURSORS)], SCAN_OPTS, 4),
        arm(
            vec![lit("SADD"), k(), pick(SET_MEMBERS), pick(SET_MEMBERS), pick(SET_MEMBERS), pick(SET_MEMBERS)],
            SET_MEMBERS,
            6,
        ),
        arm(vec![pick(&["SRANDMEMBER", "SPOP"]), k()], RANDOM_COUNTS, 2),
        // Well-formed commands, so that sets are combined rather than refused.
        arm(vec![lit("SINTERCARD"), lit("2"), k(), k()], &["LIMIT", "1"], 2),
        arm(vec![pick(&["SINTER", "SUNION", "SDIFF"]), k(), k()], &[], 0),
    ]
}

/// Sorted sets, some with equal scores for the BYLEX commands.
fn zsets() -> Vec<Arm> {
    let sm: Vec<&'static str> = SCORES.iter().chain(MEMBERS).chain(ZADD_OPTS).copied().collect();
    vec![
        arm(vec![lit("ZADD"), k(), s(), m()], SCORES.iter().chain(MEMBERS).copied().collect::<Vec<_>>().as_slice(), 4),
        arm(vec![lit("ZADD"), k(), pick(ZADD_OPTS), s(), m()], &sm, 3),
        arm(vec![lit("ZINCRBY"), k(), s(), m()], &[], 0),
        arm(vec![lit("ZREM"), k(), m()], MEMBERS, 2),
        arm(vec![lit("ZCARD"), k()], &[], 0),
        arm(vec![lit("ZCOUNT"), k(), r(), r()], &[], 0),
        arm(vec![lit("ZSCORE"), k(), m()], &[], 0),
        arm(vec![lit("ZRANGE"), k(), x(), x()], ZRANGE_OPTS, 4),
        arm(vec![lit("ZRANGE"), k(), r(), r(), pick(&["BYSCORE", "BYLEX"])], ZRANGE_OPTS, 3),
        arm(vec![lit("ZRANGEBYSCORE"), k(), r(), r()], ZRANGE_OPTS, 3),
        arm(vec![lit("ZREVRANGEBYSCORE"), k(), r(), r()], ZRANGE_OPTS, 3),
        arm(vec![lit("ZREMRANGEBYSCORE"), k(), r(), r()], &[], 0),
        arm(vec![lit("ZREVRANGE"), k(), x(), x()], ZRANGE_OPTS, 2),
        arm(vec![lit("ZRANK"), k(), m()], &[], 0),
        arm(vec![lit("ZREVRANK"), k(), m()], &[], 0),
        arm(vec![lit("ZREMRANGEBYRANK"), k(), x(), x()], &[], 0),
        arm(vec![lit("ZADD"), k(), lit("0"), m(), lit("0"), m(), lit("0"), m()], &[], 0),
        arm(vec![lit("ZMSCORE"), k(), m()], MEMBERS, 3),
        arm(vec![lit("ZLEXCOUNT"), k(), r(), r()], &[], 0),
        arm(vec![lit("ZREMRANGEBYLEX"), k(), r(), r()], &[], 0),
        arm(vec![pick(&["ZRANGEBYLEX", "ZREVRANGEBYLEX"]), k(), r(), r()], ZRANGE_OPTS, 3),
        arm(vec![lit("ZRANGESTORE"), k(), k(), x(), x()], ZRANGE_OPTS, 3),
        arm(vec![lit("ZRANGESTORE"), k(), k(), r(), r(), pick(&["BYSCORE", "BYLEX"])], ZRANGE_OPTS, 3),
        arm(vec![pick(&["ZPOPMIN", "ZPOPMAX"]), k()], COUNTS, 2),
        arm(vec![lit("ZMPOP"), pick(NUMKEYS), k()], &mpop(ZSET_ENDS), 4),
        arm(vec![lit("ZMPOP"), lit("2"), k(), k(), pick(ZSET_ENDS)], MPOP_OPTS, 2),
        arm(vec![pick(&["ZUNION", "ZINTER", "ZDIFF"]), pick(NUMKEYS), k()], &keys_and(ALGEBRA_OPTS), 5),
        arm(
            vec![pick(&["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"]), k(), pick(NUMKEYS), k()],
            &keys_and(ALGEBRA_OPTS),
            5,
        ),
        arm(
            vec![pick(&["ZUNION", "ZINTER", "ZUNIONSTORE"]), lit("2"), k(), k(), lit("WEIGHTS"), w(), w()],
            AGGREGATES,
            3,
        ),
        arm(vec![lit("ZINTERCARD"), pick(NUMKEYS), k()], &keys_and(INTERCARD_OPTS), 3),
        arm(vec![lit("ZSCAN"), k(), pick(CURSORS)], SCAN_OPTS, 4),
        arm(vec![lit("ZRANDMEMBER"), k()], &random_tail("WITHSCORES"), 2),
        arm(vec![lit("ZRANDMEMBER"), k(), pick(RANDOM_COUNTS), lit("WITHSCORES")], &[], 0),
        // Well-formed commands, so that sorted sets are built and read rather than refused.
        arm(vec![lit("ZADD"), k(), g(), m(), g(), m()], &[], 0),
        arm(vec![lit("ZADD"), k(), g(), m(), g(), m(), g(), m()], &[], 0),
        arm(vec![lit("ZRANGE"), k(), lit("0"), lit("-1")], &["WITHSCORES", "REV"], 1),
        arm(vec![pick(&["ZUNION", "ZINTER", "ZDIFF"]), lit("2"), k(), k()], &["WITHSCORES"], 1),
        arm(
            vec![pick(&["ZUNION", "ZINTER"]), lit("3"), k(), k(), k(), lit("AGGREGATE"), pick(&["SUM", "MIN", "MAX"])],
            &["WITHSCORES"],
            1,
        ),
        arm(vec![pick(&["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"]), k(), lit("2"), k(), k()], &[], 0),
        arm(vec![lit("ZINTERCARD"), lit("2"), k(), k()], &["LIMIT", "1"], 2),
        arm(vec![lit("ZMPOP"), lit("1"), k(), pick(&["MIN", "MAX"])], &["COUNT", "2"], 2),
        arm(vec![lit("ZRANGESTORE"), k(), k(), lit("0"), lit("-1")], &[], 0),
        arm(vec![lit("ZRANGESTORE"), k(), k(), lit("-inf"), lit("+inf"), lit("BYSCORE")], &["LIMIT", "1", "2"], 3),
        arm(vec![pick(&["ZPOPMIN", "ZPOPMAX"]), k(), pick(&["1", "2"])], &[], 0),
        arm(vec![pick(&["ZRANGEBYLEX", "ZREVRANGEBYLEX", "ZLEXCOUNT", "ZREMRANGEBYLEX"]), k(), l(), l()], &[], 0),
        arm(vec![lit("ZSCAN"), k(), lit("0")], &["MATCH", "m*", "COUNT", "1"], 2),
        arm(vec![lit("BZMPOP"), pick(TIMEOUTS), pick(NUMKEYS), k()], &mpop(ZSET_ENDS), 4),
        arm(vec![lit("BZMPOP"), pick(TIMEOUTS), lit("1"), k(), pick(&["MIN", "MAX"])], &["COUNT", "2"], 2),
    ]
}

/// Any command name with any tokens: arity and syntax errors.
fn noise() -> Vec<Arm> {
    let any = any_token();
    vec![arm(vec![pick(NAMES)], &any, 5), arm(vec![pick(NEW_NAMES)], &any, 5)]
}

/// The keys, then `pool`: the tail of a command that takes several keys and then options.
fn keys_and(pool: &[&'static str]) -> Vec<&'static str> {
    KEYS.iter().chain(pool).copied().collect()
}

/// The tail of LMPOP or ZMPOP: more keys, the end, COUNT.
fn mpop(ends: &[&'static str]) -> Vec<&'static str> {
    KEYS.iter().chain(ends).chain(MPOP_OPTS).copied().collect()
}

/// The tail of HRANDFIELD or ZRANDMEMBER: counts and the option.
fn random_tail(option: &'static str) -> Vec<&'static str> {
    RANDOM_COUNTS.iter().copied().chain([option, "withvalues", "foo"]).collect()
}
