//! Connection and server commands that need only the keyspace and counters.

use bytes::Bytes;

use super::super::keyspace::Keyspace;
use super::super::resp::Reply;
use super::{int_arg, is, syntax_error, Ctx, NetCounters};

/// The Redis version the model imitates (and reports in HELLO and INFO).
pub(crate) const REDIS_VERSION: &str = "7.0.15";

pub(super) fn ping(_ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match args.len() {
        1 => Reply::Status(Bytes::from_static(b"PONG")),
        2 => Reply::bulk(args[1]),
        _ => Reply::err("ERR wrong number of arguments for 'ping' command"),
    }
}

pub(super) fn echo(_ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    Reply::bulk(args[1])
}

/// The model has one database. Real Redis has 16; asking for another one gets the error Redis
/// gives for an index past its last database.
pub(super) fn select(_ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    match int_arg(args[1]) {
        Ok(0) => Reply::ok(),
        Ok(id) if i32::try_from(id).is_err() => {
            Reply::err("ERR value is out of range, value must between -2147483648 and 2147483647")
        }
        Ok(_) => Reply::err("ERR DB index is out of range"),
        Err(e) => e,
    }
}

/// `[seconds, microseconds]` from the injected clock, read now (not the command's snapshot):
/// a script calling TIME twice sees time move, by at least a microsecond a command.
pub(super) fn time(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> Reply {
    let micros = ctx.db.command_micros();
    Reply::Array(vec![
        Reply::Bulk(Bytes::from((micros / 1_000_000).to_string())),
        Reply::Bulk(Bytes::from((micros % 1_000_000).to_string())),
    ])
}

/// `COMMAND INFO name...`: for each name, nil when the model has no such command, else the
/// first fields of Redis's answer (name, arity, flags, first key, last key, key step). What a
/// client asks to learn whether a server has a command (the library asks for the module's).
pub(super) fn command_info(_ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let info = |name: &[u8]| match super::lookup(&[name]) {
        super::Lookup::Found(spec) => {
            let (first, last) = if spec.name.starts_with("ratelimit.") { (1, 1) } else { (0, 0) };
            Reply::Array(vec![
                Reply::Bulk(Bytes::from_static(spec.name.as_bytes())),
                Reply::Integer(i64::from(spec.arity)),
                Reply::Array(Vec::new()),
                Reply::Integer(first),
                Reply::Integer(last),
                Reply::Integer(i64::from(first > 0)),
            ])
        }
        _ => Reply::Nil,
    };
    Reply::Array(args[2..].iter().map(|name| info(name)).collect())
}

pub(super) fn dbsize(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> Reply {
    Reply::Integer(ctx.db.keys.len() as i64)
}

fn flush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    // Redis accepts one optional ASYNC or SYNC; the model always flushes synchronously.
    if args.len() > 2 || (args.len() == 2 && !is(args[1], "async") && !is(args[1], "sync")) {
        return syntax_error();
    }
    ctx.db.keys.clear();
    Reply::ok()
}

pub(super) fn flushall(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    flush(ctx, args)
}

pub(super) fn flushdb(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    flush(ctx, args)
}

/// MEMORY USAGE key [SAMPLES n]: the estimate of [`Keyspace::memory_usage`].
pub(super) fn memory_usage(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let mut j = 3;
    while j < args.len() {
        if is(args[j], "samples") && j + 1 < args.len() {
            match int_arg(args[j + 1]) {
                Ok(n) if n < 0 => return syntax_error(),
                Ok(_) => {}
                Err(e) => return e,
            }
            j += 2;
        } else {
            return syntax_error();
        }
    }
    match ctx.db.keys.peek(args[2]) {
        Some(entry) => Reply::Integer(Keyspace::memory_usage(args[2], entry) as i64),
        None => Reply::Nil,
    }
}

const SECTIONS: [&str; 5] = ["server", "clients", "memory", "stats", "keyspace"];

/// INFO [section ...]: the sections a rate limiter's operator looks at, in Redis's format.
/// Unknown sections give an empty reply, as in Redis.
pub(super) fn info(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let wanted: Vec<&str> = if args.len() == 1 {
        SECTIONS.to_vec()
    } else {
        let mut wanted = Vec::new();
        for arg in &args[1..] {
            if is(arg, "all") || is(arg, "everything") || is(arg, "default") {
                wanted = SECTIONS.to_vec();
                break;
            }
            if let Some(s) = SECTIONS.iter().find(|s| is(arg, s)) {
                if !wanted.contains(s) {
                    wanted.push(s);
                }
            }
        }
        // Redis prints sections in its own order, whatever order they were asked in.
        SECTIONS.iter().copied().filter(|s| wanted.contains(s)).collect()
    };
    let db = &ctx.db;
    let net = &db.net;
    let mut text = String::new();
    for section in wanted {
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        match section {
            "server" => {
                text.push_str("# Server\r\n");
                text.push_str(&format!("redis_version:{REDIS_VERSION}\r\n"));
                text.push_str("redis_mode:standalone\r\n");
                text.push_str("executable:redis_model\r\n");
                text.push_str(&format!("server_time_usec:{}\r\n", db.command_micros()));
            }
            "clients" => {
                text.push_str("# Clients\r\n");
                text.push_str(&format!("connected_clients:{}\r\n", NetCounters::get(&net.connected_clients)));
            }
            "memory" => {
                let dataset = db.keys.estimated_bytes();
                text.push_str("# Memory\r\n");
                text.push_str(&format!("used_memory:{}\r\n", dataset + db.lua_memory));
                text.push_str(&format!("used_memory_dataset:{dataset}\r\n"));
                text.push_str(&format!("used_memory_lua:{}\r\n", db.lua_memory));
                text.push_str(&format!("number_of_cached_scripts:{}\r\n", db.scripts_cached));
            }
            "stats" => {
                text.push_str("# Stats\r\n");
                text.push_str(&format!(
                    "total_connections_received:{}\r\n",
                    NetCounters::get(&net.connections_received)
                ));
                text.push_str(&format!("total_commands_processed:{}\r\n", db.total_commands));
                text.push_str(&format!("total_net_input_bytes:{}\r\n", NetCounters::get(&net.bytes_in)));
                text.push_str(&format!("total_net_output_bytes:{}\r\n", NetCounters::get(&net.bytes_out)));
                text.push_str(&format!("rejected_connections:{}\r\n", NetCounters::get(&net.rejected_connections)));
                text.push_str(&format!("expired_keys:{}\r\n", db.keys.expired_keys));
            }
            _ => {
                text.push_str("# Keyspace\r\n");
                if db.keys.len() > 0 {
                    text.push_str(&format!(
                        "db0:keys={},expires={},avg_ttl=0\r\n",
                        db.keys.len(),
                        db.keys.expires_len()
                    ));
                }
            }
        }
    }
    Reply::Verbatim { format: *b"txt", text: Bytes::from(text) }
}
