//! The conformance suites' one RESP2 client: it sends commands (one at a time or pipelined) and
//! hands back each reply twice, as the raw bytes a client would receive (what the suites
//! compare) and parsed (what they inspect: a decision, a snapshot of the keyspace).

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::show;

/// A parsed RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum V {
    Status(Vec<u8>),
    Error(Vec<u8>),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<V>>),
}

impl V {
    /// Readable form, for failure messages: `+OK`, `-ERR x`, `3`, `'text'`, `nil`, `[a, b]`.
    pub fn render(&self) -> String {
        match self {
            V::Status(t) => format!("+{}", show(t)),
            V::Error(t) => format!("-{}", show(t)),
            V::Int(n) => n.to_string(),
            V::Bulk(Some(b)) => format!("'{}'", show(b)),
            V::Bulk(None) | V::Array(None) => "nil".to_string(),
            V::Array(Some(items)) => format!("[{}]", items.iter().map(V::render).collect::<Vec<_>>().join(", ")),
        }
    }
}

/// One reply: its raw bytes and its parsed form.
pub type Raw = (Vec<u8>, V);

/// A blocking RESP2 connection.
pub struct RespConn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl RespConn {
    pub fn connect(addr: SocketAddr) -> io::Result<Self> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(20)))?;
        Ok(RespConn { reader: BufReader::new(stream.try_clone()?), writer: stream })
    }

    /// Sends one command and returns its complete reply, as bytes.
    pub fn call(&mut self, args: &[&[u8]]) -> io::Result<Vec<u8>> {
        let owned: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        Ok(self.pipeline(std::slice::from_ref(&owned))?.remove(0).0)
    }

    /// Sends every command in one write, then reads one reply per command.
    pub fn pipeline(&mut self, cmds: &[Vec<Vec<u8>>]) -> io::Result<Vec<Raw>> {
        let mut out = Vec::new();
        for args in cmds {
            out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in args {
                out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                out.extend_from_slice(a);
                out.extend_from_slice(b"\r\n");
            }
        }
        self.writer.write_all(&out)?;
        let mut replies = Vec::with_capacity(cmds.len());
        for _ in cmds {
            let mut raw = Vec::new();
            let value = read_value(&mut self.reader, &mut raw)?;
            replies.push((raw, value));
        }
        Ok(replies)
    }
}

/// Parses one complete reply from its raw bytes.
pub fn parse(mut raw: &[u8]) -> io::Result<V> {
    read_value(&mut raw, &mut Vec::new())
}

/// The raw bytes of a reply, as a server would send it.
pub fn encode(v: &V) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(v, &mut out);
    out
}

fn encode_into(v: &V, out: &mut Vec<u8>) {
    match v {
        V::Status(t) | V::Error(t) => {
            out.push(if matches!(v, V::Status(_)) { b'+' } else { b'-' });
            out.extend_from_slice(t);
        }
        V::Int(n) => out.extend_from_slice(format!(":{n}").as_bytes()),
        V::Bulk(None) => out.extend_from_slice(b"$-1"),
        V::Array(None) => out.extend_from_slice(b"*-1"),
        V::Bulk(Some(b)) => {
            out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
            out.extend_from_slice(b);
        }
        V::Array(Some(items)) => {
            out.extend_from_slice(format!("*{}\r\n", items.len()).as_bytes());
            for item in items {
                encode_into(item, out);
            }
            return;
        }
    }
    out.extend_from_slice(b"\r\n");
}

fn read_value(r: &mut impl BufRead, raw: &mut Vec<u8>) -> io::Result<V> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if line.len() < 3 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"));
    }
    raw.extend_from_slice(&line);
    let body = line[1..line.len() - 2].to_vec();
    let number = || -> io::Result<i64> {
        std::str::from_utf8(&body).ok().and_then(|s| s.parse().ok()).ok_or_else(|| io::Error::other("bad number"))
    };
    Ok(match line[0] {
        b'+' => V::Status(body.clone()),
        b'-' => V::Error(body.clone()),
        b':' => V::Int(number()?),
        b'$' => {
            let n = number()?;
            if n < 0 {
                V::Bulk(None)
            } else {
                let mut data = vec![0u8; n as usize + 2];
                r.read_exact(&mut data)?;
                raw.extend_from_slice(&data);
                data.truncate(n as usize);
                V::Bulk(Some(data))
            }
        }
        b'*' => {
            let n = number()?;
            if n < 0 {
                V::Array(None)
            } else {
                let mut items = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    items.push(read_value(r, raw)?);
                }
                V::Array(Some(items))
            }
        }
        other => return Err(io::Error::other(format!("unexpected reply type byte {other:#x}"))),
    })
}
