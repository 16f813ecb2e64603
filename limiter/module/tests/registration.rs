//! The module as Redis loads it: `redis-server --loadmodule` with the shared library cargo
//! built beside this test, and every command declared as Redis Cluster needs it (its flags,
//! and which of its arguments are keys, so a cluster routes it to the keys' node and refuses
//! keys in two slots).

use redis::Value;
use redis_tests::RedisServer;

/// The shared library cargo built for this test (the crate's cdylib, beside the test's
/// executable: see the crate type in Cargo.toml).
fn module() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test knows its executable");
    let deps = exe.parent().expect("the executable is in a folder");
    deps.join(format!("{}redis_ratelimit_module{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX))
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

#[test]
fn every_command_is_a_write_routed_by_its_first_argument() {
    let server = RedisServer::start_real_with_module(&module()).expect("redis-server loads the module");
    let mut c = server.client().expect("connects");
    let names = ["RATELIMIT.FW", "RATELIMIT.SW", "RATELIMIT.SL", "RATELIMIT.TB", "RATELIMIT.GCRA", "RATELIMIT.RULES"];
    for name in names.into_iter().chain(["RATELIMIT.LEASE.GCRA", "RATELIMIT.LEASE.TB", "RATELIMIT.CONCURRENCY"]) {
        let info: Vec<Value> = redis::cmd("COMMAND").arg("INFO").arg(name).query(&mut c).expect("COMMAND INFO");
        let Some(Value::Array(fields)) = info.first() else { panic!("{name} is not registered: {info:?}") };
        assert_eq!(text(&fields[0]), name.to_lowercase());
        let Value::Array(flags) = &fields[2] else { panic!("{name}'s flags: {fields:?}") };
        let flags: Vec<String> = flags.iter().map(text).collect();
        assert!(flags.iter().any(|f| f == "write") && flags.iter().any(|f| f == "denyoom"), "{name}: {flags:?}");
        // First key, last key, step: the one key is the first argument (the rules command's
        // first; Redis asks it for the others).
        assert_eq!(fields[3..6], [Value::Int(1), Value::Int(1), Value::Int(1)], "{name}");
        if name == "RATELIMIT.RULES" {
            assert!(flags.iter().any(|f| f == "movablekeys"), "{name}: {flags:?}");
            continue;
        }
        let keys: Vec<String> = redis::cmd("COMMAND")
            .arg("GETKEYS")
            .arg(name)
            .arg("rl:{user}:k")
            .arg("")
            .arg(5)
            .arg(1_000)
            .arg(1)
            .query(&mut c)
            .expect("COMMAND GETKEYS");
        assert_eq!(keys, ["rl:{user}:k"], "{name}");
    }
}

/// Redis asks the rules command where its keys are: the first argument, then as many after the
/// key count as it says, whatever follows them (a cluster checks they share a slot).
#[test]
fn the_rules_command_names_every_key_of_every_rule() {
    let server = RedisServer::start_real_with_module(&module()).expect("redis-server loads the module");
    let mut c = server.client().expect("connects");
    let getkeys = |c: &mut redis::Connection, args: &[&str]| -> redis::RedisResult<Vec<String>> {
        redis::cmd("COMMAND").arg("GETKEYS").arg("RATELIMIT.RULES").arg(args).query(c)
    };
    // Two rules: a fixed window, and a blockable GCRA (its block the last of its keys).
    let two = [
        "a:{u}:fw",
        "3",
        "a:{u}:gcra",
        "a:{u}:gcra:blk",
        "2",
        "1",
        "fw",
        "0",
        "0",
        "1",
        "4",
        "",
        "5",
        "1000",
        "1",
        "gcra",
        "0",
        "1",
        "2",
        "4",
        "",
        "1000",
        "3",
        "1",
    ];
    assert_eq!(getkeys(&mut c, &two).expect("GETKEYS"), ["a:{u}:fw", "a:{u}:gcra", "a:{u}:gcra:blk"]);
    // A count past the arguments names what there is; a count that is no number, the first.
    assert_eq!(getkeys(&mut c, &["k", "9", "k2"]).expect("GETKEYS"), ["k", "k2"]);
    assert_eq!(getkeys(&mut c, &["k", "x", "k2"]).expect("GETKEYS"), ["k"]);
}
