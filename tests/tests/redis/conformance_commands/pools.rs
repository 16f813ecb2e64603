//! The pools the generated commands draw their arguments from: values chosen to sit on the
//! edges of Redis's parsers (`-0`, `0x10`, `1e400`, ` 1`, `01`, `(1`, `inf`, 2^63 ...).

pub const KEYS: &[&str] = &["a", "b", "c"];
pub const FIELDS: &[&str] = &["f", "g", "h"];
pub const LONG_MEMBER: &str = "mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm";
pub const MEMBERS: &[&str] = &["m", "n", "o", "", LONG_MEMBER];
pub const VALUES: &[&str] = &[
    "1",
    "0",
    "-1",
    "10",
    "1.5",
    "-0",
    "0.1",
    "0.2",
    "-0.3",
    "1e3",
    "3.0000000000000004",
    "1e300",
    "1e-5",
    "inf",
    "-inf",
    "+inf",
    "nan",
    "abc",
    "",
    " 1",
    "1 ",
    "01",
    "+1",
    "1.",
    ".5",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "0x10",
    "0x1p3",
    "1e400",
    "1e-400",
    "123456789.123456789",
    "2.5e-3",
    "0.000000000000000025",
    "99999999999999999999",
    "-1.5e-7",
    "v",
    // Past a listpack's 64 bytes (a hash converts) and an embstr's 44 (a string is raw).
    LONG_MEMBER,
];
pub const INTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "100",
    "1000",
    "100000",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775",
    "9223372036854",
    "abc",
    "1.5",
    "01",
    "",
];
pub const SCORES: &[&str] = &[
    "1",
    "0",
    "-1",
    "2.5",
    "-0",
    "-0.0",
    "0.1",
    "1e17",
    "123456789012345678",
    "3.14159",
    "inf",
    "-inf",
    "+inf",
    "nan",
    "1e400",
    "1e-400",
    "0x10",
    "abc",
    "(1",
    " 1",
    "1e300",
    "-2.5",
];
pub const RANGES: &[&str] = &[
    "-inf", "+inf", "inf", "(1", "1", "2.5", "(2.5", "0", "-1", "(-1", "abc", "(", "", "1e400", " 1", "((1", "nan",
    "(0", "-", "+", "[m", "(n",
];
pub const INDEXES: &[&str] = &["0", "1", "-1", "-2", "2", "5", "-100", "100", "abc", "9223372036854775807"];
// Relative deadlines stay at seconds or more (PX 5000, EX 100): shorter ones could pass between
// the two servers' executions and make the comparison race (the keyspace is read after every
// command). Deadlines in the past are exact.
pub const SET_OPTS: &[&str] = &[
    "NX",
    "XX",
    "GET",
    "KEEPTTL",
    "EX",
    "PX",
    "EXAT",
    "PXAT",
    "nx",
    "ex",
    "get",
    "100000",
    "5000",
    "0",
    "-1",
    "4102444800",
    "4102444800000",
    "abc",
    "9223372036854775",
    "foo",
];
pub const EXPIRE_SECONDS: &[&str] = &[
    "0",
    "-1",
    "100",
    "100000",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775",
    "9223372036854",
    "abc",
    "1.5",
    "",
];
pub const EXPIRE_MILLIS: &[&str] =
    &["0", "-1", "100000", "9223372036854775807", "-9223372036854775808", "9223372036854775", "abc", ""];
pub const EXPIRE_OPTS: &[&str] = &["NX", "XX", "GT", "LT", "nx", "gt", "foo"];
pub const ZADD_OPTS: &[&str] = &["NX", "XX", "GT", "LT", "CH", "INCR", "ch", "incr"];
pub const ZRANGE_OPTS: &[&str] =
    &["WITHSCORES", "LIMIT", "BYSCORE", "BYLEX", "REV", "withscores", "limit", "0", "1", "2", "-1", "abc", "foo"];
pub const GETEX_OPTS: &[&str] = &[
    "EX",
    "PX",
    "EXAT",
    "PXAT",
    "PERSIST",
    "persist",
    "100000",
    "5000",
    "3600",
    "4102444800",
    "0",
    "-1",
    "abc",
    "NX",
    "KEEPTTL",
];
pub const COUNTS: &[&str] = &["0", "1", "2", "5", "-1", "abc", "", "9223372036854775807"];
// Integers (an intset while all members are) and other strings (a hash table).
pub const SET_MEMBERS: &[&str] = &["1", "2", "10", "-3", "0", "01", "a", "b", "", "9223372036854775808", "1.5"];
pub const MEMORY_OPTS: &[&str] = &["SAMPLES", "5", "0", "-1", "abc", "foo"];
pub const FLUSH_OPTS: &[&str] = &["ASYNC", "SYNC", "x"];
pub const NAMES: &[&str] = &[
    "GET",
    "SET",
    "SETNX",
    "MGET",
    "MSET",
    "INCR",
    "DECR",
    "INCRBY",
    "DECRBY",
    "INCRBYFLOAT",
    "STRLEN",
    "DEL",
    "UNLINK",
    "EXISTS",
    "TYPE",
    "EXPIRE",
    "PEXPIRE",
    "EXPIREAT",
    "PEXPIREAT",
    "TTL",
    "PTTL",
    "PERSIST",
    "RENAME",
    "RENAMENX",
    "HSET",
    "HMSET",
    "HSETNX",
    "HGET",
    "HMGET",
    "HGETALL",
    "HDEL",
    "HEXISTS",
    "HLEN",
    "HINCRBY",
    "HINCRBYFLOAT",
    "ZADD",
    "ZINCRBY",
    "ZREM",
    "ZCARD",
    "ZCOUNT",
    "ZSCORE",
    "ZRANGE",
    "ZRANGEBYSCORE",
    "ZREVRANGEBYSCORE",
    "ZREMRANGEBYSCORE",
    "PING",
    "ECHO",
    "DBSIZE",
    "SCRIPT",
    "EVAL",
    "EVALSHA",
    "MEMORY",
    "GETSET",
    "SETEX",
    "PSETEX",
    "GETDEL",
    "GETEX",
    "HKEYS",
    "HVALS",
    "ZREVRANGE",
    "ZRANK",
    "ZREVRANK",
    "ZREMRANGEBYRANK",
    "LPUSH",
    "RPUSH",
    "LPOP",
    "RPOP",
    "LLEN",
    "LRANGE",
    "LTRIM",
    "LINDEX",
    "SADD",
    "SREM",
    "SCARD",
    "SISMEMBER",
    "SMEMBERS",
    "get",
    "zAdd",
    "foo",
    "GETX",
    "CLIENT",
];

// The commands added with the string, key, list, set and sorted-set families. Offsets stay
// below what would make either server allocate hundreds of megabytes; `536870912` is just past
// the 512 MB limit.
pub const OFFSETS: &[&str] = &["0", "1", "3", "10", "-1", "abc", "536870912", "9223372036854775807", ""];
pub const LCS_OPTS: &[&str] = &["LEN", "IDX", "MINMATCHLEN", "WITHMATCHLEN", "idx", "0", "1", "2", "-1", "abc", "foo"];
// No database but 0 and invalid ones: the model has one database (COPY ... DB 1 is refused).
pub const COPY_OPTS: &[&str] = &["REPLACE", "replace", "DB", "0", "-1", "16", "abc", "99999999999", "foo"];
pub const OBJECT_SUBCOMMANDS: &[&str] =
    &["ENCODING", "REFCOUNT", "IDLETIME", "FREQ", "encoding", "refcount", "HELP", "help", "foo"];
// Cursors that are 0 or invalid: a scan of a big collection from any other cursor is a
// different walk on each server.
pub const CURSORS: &[&str] = &["0", "0", "0", "", "-0", "+0", "abc", " 1", "1 ", "18446744073709551616"];
pub const SCAN_OPTS: &[&str] = &[
    "MATCH", "COUNT", "TYPE", "match", "count", "*", "a*", "?", "[ab]", "f*", "1*", "m", "1", "2", "10", "0", "-1",
    "abc", "string", "hash", "zset", "list", "set", "none", "STRING", "foo",
];
pub const LINSERT_WHERE: &[&str] = &["BEFORE", "AFTER", "after", "middle"];
pub const LPOS_OPTS: &[&str] =
    &["RANK", "COUNT", "MAXLEN", "rank", "0", "1", "2", "-1", "-2", "abc", "-9223372036854775808", "foo"];
pub const LIST_ENDS: &[&str] = &["LEFT", "RIGHT", "left", "right", "UP"];
pub const ZSET_ENDS: &[&str] = &["MIN", "MAX", "min", "max", "UP"];
pub const NUMKEYS: &[&str] = &["1", "2", "3", "1", "2", "0", "-1", "abc", "9223372036854775807"];
pub const MPOP_OPTS: &[&str] = &["COUNT", "count", "1", "2", "10", "0", "-1", "abc", "foo"];
pub const ALGEBRA_OPTS: &[&str] = &[
    "WEIGHTS",
    "AGGREGATE",
    "SUM",
    "MIN",
    "MAX",
    "WITHSCORES",
    "LIMIT",
    "weights",
    "aggregate",
    "1",
    "2",
    "0",
    "-1",
    "1.5",
    "-0",
    "inf",
    "-inf",
    "nan",
    "abc",
    "foo",
];
pub const INTERCARD_OPTS: &[&str] = &["LIMIT", "limit", "0", "1", "2", "-1", "abc", "foo"];
pub const LIST_ELEMS: &[&str] = &["a", "b", "c", "1", "a", ""];
pub const WEIGHTS: &[&str] = &["1", "2", "-1", "0", "1.5", "inf", "-inf", "nan", "abc"];
pub const AGGREGATES: &[&str] = &["AGGREGATE", "SUM", "MIN", "MAX", "WITHSCORES", "aggregate", "max"];
// The any-command arm for the commands added later (the scans are left out: a scan of a big
// collection from a cursor that is not 0 differs between servers).
pub const NEW_NAMES: &[&str] = &[
    "APPEND",
    "GETRANGE",
    "SUBSTR",
    "SETRANGE",
    "MSETNX",
    "LCS",
    "EXPIRETIME",
    "PEXPIRETIME",
    "TOUCH",
    "COPY",
    "OBJECT",
    "HSTRLEN",
    "LINSERT",
    "LSET",
    "LREM",
    "LPOS",
    "LMOVE",
    "RPOPLPUSH",
    "LMPOP",
    "SMISMEMBER",
    "SMOVE",
    "SINTER",
    "SINTERSTORE",
    "SINTERCARD",
    "SUNION",
    "SUNIONSTORE",
    "SDIFF",
    "SDIFFSTORE",
    "ZMSCORE",
    "ZLEXCOUNT",
    "ZREMRANGEBYLEX",
    "ZRANGEBYLEX",
    "ZREVRANGEBYLEX",
    "ZRANGESTORE",
    "ZPOPMIN",
    "ZPOPMAX",
    "ZMPOP",
    "ZUNIONSTORE",
    "ZINTERSTORE",
    "ZDIFFSTORE",
    "ZUNION",
    "ZINTER",
    "ZINTERCARD",
    "ZDIFF",
    "SRANDMEMBER",
    "SPOP",
    "HRANDFIELD",
    "ZRANDMEMBER",
    "RANDOMKEY",
];
// No large negative count: it asks for that many picks, and Redis would build the reply.
// 2^62 is past what HRANDFIELD and ZRANDMEMBER take WITH... (and a whole collection without).
pub const RANDOM_COUNTS: &[&str] =
    &["0", "1", "2", "3", "5", "6", "8", "100", "-1", "-2", "-5", "abc", "-9223372036854775808", "4611686018427387904"];
// Scores ZADD takes, and lex bounds ZRANGEBYLEX takes, for the well-formed commands.
pub const GOOD_SCORES: &[&str] = &["1", "0", "-1", "2.5", "-0", "1e17", "inf", "-inf", "3.14159", "-2.5", "0"];
pub const LEX_BOUNDS: &[&str] = &["-", "+", "[m", "(m", "[n", "(o", "[", "(", "[mm"];
// BLMPOP and BZMPOP: short waits, or timeouts Redis refuses. Never 0 or a value that rounds up
// to 0 ms ("-0.001" does): with nothing to pop Redis would wait for ever.
pub const TIMEOUTS: &[&str] = &["0.01", "0.005", "-1", "-0.002", "abc", "inf", "1e300", "", " 1"];
