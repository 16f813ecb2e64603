//! Per-connection state and the commands that act on it: CLIENT SETNAME/GETNAME/ID and HELLO.

use bytes::Bytes;

use super::commands::{self, is};
use super::num;
use super::resp::Reply;

/// Per-connection state: the client id and the name set with CLIENT SETNAME or HELLO.
#[derive(Debug, Clone, Default)]
pub struct Session {
    pub(crate) id: u64,
    pub(crate) name: Option<Bytes>,
}

impl Session {
    /// The id CLIENT ID reports.
    pub fn id(&self) -> u64 {
        self.id
    }
}

/// CLIENT SETNAME's rule: printable ASCII without spaces; empty clears the name.
pub(crate) fn set_client_name(session: &mut Session, name: &[u8]) -> Reply {
    if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Reply::err("ERR Client names cannot contain spaces, newlines or special characters.");
    }
    session.name = if name.is_empty() { None } else { Some(Bytes::copy_from_slice(name)) };
    Reply::ok()
}

/// HELLO [protover [AUTH user pass] [SETNAME name]]. The model speaks RESP2 only, so version 3
/// is refused as Redis refuses versions it does not know (clients then stay on RESP2).
pub(crate) fn hello(session: &mut Session, args: &[&[u8]]) -> Reply {
    let mut next = 1;
    if args.len() >= 2 {
        let version = match num::parse_i64(args[1]) {
            Some(v) => v,
            None => return Reply::err("ERR Protocol version is not an integer or out of range"),
        };
        if version != 2 {
            return Reply::err("NOPROTO unsupported protocol version");
        }
        next = 2;
    }
    let mut auth = None;
    let mut name = None;
    let mut j = next;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if is(args[j], "auth") && more >= 2 {
            auth = Some((args[j + 1], args[j + 2]));
            j += 3;
        } else if is(args[j], "setname") && more >= 1 {
            name = Some(args[j + 1]);
            j += 2;
        } else {
            let mut text = b"ERR Syntax error in HELLO option '".to_vec();
            text.extend_from_slice(commands::cstr(args[j]));
            text.push(b'\'');
            return Reply::Error(Bytes::from(text));
        }
    }
    // The model has Redis's default user only: no password, so any password is accepted.
    if let Some((user, _)) = auth {
        if user != b"default" {
            return Reply::err("WRONGPASS invalid username-password pair or user is disabled.");
        }
    }
    if let Some(name) = name {
        let reply = set_client_name(session, name);
        if reply.is_error() {
            return reply;
        }
    }
    let s = |t: &'static str| Reply::Bulk(Bytes::from_static(t.as_bytes()));
    Reply::Map(vec![
        (s("server"), s("redis")),
        (s("version"), s(commands::REDIS_VERSION_STR)),
        (s("proto"), Reply::Integer(2)),
        (s("id"), Reply::Integer(session.id as i64)),
        (s("mode"), s("standalone")),
        (s("role"), s("master")),
        (s("modules"), Reply::Array(Vec::new())),
    ])
}
