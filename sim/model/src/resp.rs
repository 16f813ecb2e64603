//! RESP2: reading client requests with hard bounds, and writing replies.
//!
//! Requests are read the way Redis 7.0's `processInputBuffer` reads them, including its error
//! texts, because clients (and the conformance suite) see those texts. Every length a client
//! sends is checked before it is trusted, and none is used to preallocate: a client that
//! announces `$999999999999` gets an error, and one that announces 500 MB and sends 10 bytes
//! costs 10 bytes.
//!
//! Replies are built as [`Reply`] values with Redis 7's RESP3 types (double, map, set, ...), and
//! written down-converted to RESP2 exactly as Redis does for a RESP2 client. Keeping the RESP3
//! types lets Lua scripts that call `redis.setresp(3)` see what Redis would give them.

use bytes::{Buf, Bytes, BytesMut};

use super::num::format_g17;

/// Redis's `proto-max-bulk-len` default: 512 MB.
pub const MAX_BULK_LEN: usize = 512 * 1024 * 1024;
/// Most arguments in one request. Redis 7 allows up to `INT_MAX` once authenticated; the model
/// keeps the older 1024*1024 bound so a single header cannot promise a huge argument vector.
pub const MAX_MULTIBULK_LEN: i64 = 1024 * 1024;
/// Longest inline command or length header without a newline (`PROTO_INLINE_MAX_SIZE`).
pub const MAX_INLINE_LEN: usize = 64 * 1024;

/// A reply, typed as Redis 7 types it internally (RESP3), written as RESP2 on the wire.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK`: a simple string.
    Status(Bytes),
    /// `-ERR ...`: the text after the dash, error code included.
    Error(Bytes),
    /// `:42`.
    Integer(i64),
    /// `$3\r\nfoo`.
    Bulk(Bytes),
    /// The null bulk string `$-1` (RESP3 null).
    Nil,
    /// The null array `*-1` (RESP3 null).
    NilArray,
    /// `*N`, elements of any type (errors included, as Lua scripts can produce).
    Array(Vec<Reply>),
    /// RESP3 double; RESP2 clients get a bulk string in `%.17g`.
    Double(f64),
    /// RESP3 map; RESP2 clients get a flat array of keys and values.
    Map(Vec<(Reply, Reply)>),
    /// RESP3 set; RESP2 clients get an array.
    Set(Vec<Reply>),
    /// RESP3 boolean; RESP2 clients get `:1` or `:0`.
    Bool(bool),
    /// RESP3 verbatim string; RESP2 clients get a bulk string of the text.
    Verbatim { format: [u8; 3], text: Bytes },
    /// RESP3 big number; RESP2 clients get a bulk string.
    BigNumber(Bytes),
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Status(Bytes::from_static(b"OK"))
    }

    /// An error reply from a static text such as `"ERR syntax error"`.
    pub fn err(text: &'static str) -> Reply {
        Reply::Error(Bytes::from_static(text.as_bytes()))
    }

    /// An error reply from a formatted text.
    pub fn error(text: String) -> Reply {
        Reply::Error(Bytes::from(text))
    }

    /// A bulk string copied from bytes.
    pub fn bulk(bytes: &[u8]) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(bytes))
    }

    /// True for error replies.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Appends the RESP2 encoding of this reply to `out`.
    pub fn write_resp2(&self, out: &mut Vec<u8>) {
        match self {
            Reply::Status(s) => {
                out.push(b'+');
                push_line_safe(out, s);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Error(s) => {
                out.push(b'-');
                push_line_safe(out, s);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Integer(i) => {
                out.push(b':');
                push_int(out, *i);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Bulk(b) | Reply::BigNumber(b) | Reply::Verbatim { text: b, .. } => push_bulk(out, b),
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) | Reply::Set(items) => {
                push_header(out, b'*', items.len());
                for item in items {
                    item.write_resp2(out);
                }
            }
            Reply::Map(pairs) => {
                push_header(out, b'*', pairs.len() * 2);
                for (k, v) in pairs {
                    k.write_resp2(out);
                    v.write_resp2(out);
                }
            }
            Reply::Double(d) => push_bulk(out, format_g17(*d).as_bytes()),
            Reply::Bool(b) => out.extend_from_slice(if *b { b":1\r\n" } else { b":0\r\n" }),
        }
    }

    /// The RESP2 encoding as a fresh buffer.
    pub fn to_resp2(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_resp2(&mut out);
        out
    }
}

/// Status and error texts cannot carry CR or LF; Redis maps both to spaces.
fn push_line_safe(out: &mut Vec<u8>, s: &[u8]) {
    out.extend(s.iter().map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }));
}

fn push_int(out: &mut Vec<u8>, i: i64) {
    let mut buf = itoa_buf(i);
    out.append(&mut buf);
}

fn itoa_buf(i: i64) -> Vec<u8> {
    i.to_string().into_bytes()
}

fn push_header(out: &mut Vec<u8>, kind: u8, len: usize) {
    out.push(kind);
    out.extend_from_slice(len.to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn push_bulk(out: &mut Vec<u8>, b: &[u8]) {
    push_header(out, b'$', b.len());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// A request the connection should act on.
#[derive(Debug, PartialEq)]
pub enum Request {
    /// A command and its arguments (`args[0]` is the command name).
    Command(Vec<Bytes>),
    /// A request with no arguments (`*0`, `*-1`, an empty inline line): Redis ignores it.
    Empty,
}

/// A malformed request. Redis answers `-ERR Protocol error: <text>` and closes the connection.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtocolError(pub String);

impl ProtocolError {
    /// The error reply Redis sends before closing.
    pub fn reply(&self) -> Reply {
        Reply::error(format!("ERR Protocol error: {}", self.0))
    }
}

/// Incremental request reader. It keeps the arguments parsed so far, so a request arriving a
/// few bytes at a time is never rescanned from its start.
#[derive(Debug, Default)]
pub struct RequestParser {
    /// Arguments of the multibulk request being read.
    args: Vec<Bytes>,
    /// Arguments still to read; 0 when between requests.
    remaining: usize,
    /// Length of the bulk string being read, once its `$` header is in.
    bulk_len: Option<usize>,
}

impl RequestParser {
    /// A parser between requests.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next complete request off the front of `buf`, `Ok(None)` if more bytes are
    /// needed.
    pub fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Request>, ProtocolError> {
        if self.remaining == 0 {
            if buf.is_empty() {
                return Ok(None);
            }
            if buf[0] != b'*' {
                return parse_inline(buf);
            }
            let Some(cr) = memchr(b'\r', buf) else {
                if buf.len() > MAX_INLINE_LEN {
                    return Err(ProtocolError("too big mbulk count string".into()));
                }
                return Ok(None);
            };
            // The "\r\n" must be fully in before the header counts as read.
            if cr + 2 > buf.len() {
                return Ok(None);
            }
            let count = crate::num::parse_i64(&buf[1..cr]);
            let count = match count {
                Some(n) if n <= MAX_MULTIBULK_LEN => n,
                _ => return Err(ProtocolError("invalid multibulk length".into())),
            };
            buf.advance(cr + 2);
            if count <= 0 {
                return Ok(Some(Request::Empty));
            }
            self.remaining = count as usize;
            // Never trust the count for the allocation: grow as arguments actually arrive.
            self.args = Vec::with_capacity(self.remaining.min(16));
        }
        while self.remaining > 0 {
            let len = match self.bulk_len {
                Some(len) => len,
                None => {
                    if buf.is_empty() {
                        return Ok(None);
                    }
                    let Some(cr) = memchr(b'\r', buf) else {
                        if buf.len() > MAX_INLINE_LEN {
                            return Err(ProtocolError("too big bulk count string".into()));
                        }
                        return Ok(None);
                    };
                    if cr + 2 > buf.len() {
                        return Ok(None);
                    }
                    if buf[0] != b'$' {
                        return Err(ProtocolError(format!("expected '$', got '{}'", char::from(buf[0]))));
                    }
                    let len = match crate::num::parse_i64(&buf[1..cr]) {
                        Some(n) if n >= 0 && (n as u64) <= MAX_BULK_LEN as u64 => n as usize,
                        _ => return Err(ProtocolError("invalid bulk length".into())),
                    };
                    buf.advance(cr + 2);
                    self.bulk_len = Some(len);
                    len
                }
            };
            if buf.len() < len + 2 {
                return Ok(None);
            }
            let arg = buf.split_to(len).freeze();
            // Redis does not check that the two bytes after a bulk string are "\r\n".
            buf.advance(2);
            self.args.push(arg);
            self.bulk_len = None;
            self.remaining -= 1;
        }
        Ok(Some(Request::Command(std::mem::take(&mut self.args))))
    }
}

fn memchr(needle: u8, haystack: &[u8]) -> Option<usize> {
    haystack.iter().position(|&b| b == needle)
}

fn parse_inline(buf: &mut BytesMut) -> Result<Option<Request>, ProtocolError> {
    let Some(lf) = memchr(b'\n', buf) else {
        if buf.len() > MAX_INLINE_LEN {
            return Err(ProtocolError("too big inline request".into()));
        }
        return Ok(None);
    };
    let line = buf.split_to(lf + 1);
    let mut line = &line[..lf];
    if line.last() == Some(&b'\r') {
        line = &line[..line.len() - 1];
    }
    match split_args(line) {
        None => Err(ProtocolError("unbalanced quotes in request".into())),
        Some(args) if args.is_empty() => Ok(Some(Request::Empty)),
        Some(args) => Ok(Some(Request::Command(args.into_iter().map(Bytes::from).collect()))),
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn hex_value(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Redis's `sdssplitargs`: blanks separate arguments, "double quotes" take C escapes and
/// `\xHH`, 'single quotes' take `\'`. A closing quote must be followed by a blank or the end.
/// The line is a C string: a NUL byte ends it.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let line = match memchr(0, line) {
        Some(nul) => &line[..nul],
        None => line,
    };
    let at = |i: usize| -> u8 { line.get(i).copied().unwrap_or(0) };
    let mut args = Vec::new();
    let mut p = 0;
    loop {
        while at(p) != 0 && is_space(at(p)) {
            p += 1;
        }
        if at(p) == 0 {
            return Some(args);
        }
        let mut current = Vec::new();
        let (mut in_double, mut in_single, mut done) = (false, false, false);
        while !done {
            let c = at(p);
            if in_double {
                if c == b'\\' && at(p + 1) == b'x' {
                    if let (Some(h), Some(l)) = (hex_value(at(p + 2)), hex_value(at(p + 3))) {
                        current.push(h * 16 + l);
                        p += 3;
                    } else {
                        // "\x" without two hex digits is an ordinary escape of 'x'.
                        p += 1;
                        current.push(b'x');
                    }
                } else if c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    current.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    current.push(c);
                }
            } else if in_single {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    current.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    current.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    other => current.push(other),
                }
            }
            if at(p) != 0 {
                p += 1;
            }
        }
        args.push(current);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8]) -> (Vec<Request>, Option<ProtocolError>) {
        let mut buf = BytesMut::from(input);
        let mut parser = RequestParser::new();
        let mut out = Vec::new();
        loop {
            match parser.next(&mut buf) {
                Ok(Some(r)) => out.push(r),
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    fn cmd(args: &[&str]) -> Request {
        Request::Command(args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect())
    }

    #[test]
    fn multibulk_and_inline_requests_parse() {
        let (reqs, err) = parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\nset a \"b c\"\n*0\r\n");
        assert_eq!(err, None);
        assert_eq!(reqs, vec![cmd(&["GET", "k"]), cmd(&["PING"]), cmd(&["set", "a", "b c"]), Request::Empty]);
    }

    #[test]
    fn byte_at_a_time_arrival_gives_the_same_request() {
        let input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n";
        let mut parser = RequestParser::new();
        let mut buf = BytesMut::new();
        let mut got = None;
        for &b in input.iter() {
            buf.extend_from_slice(&[b]);
            if let Some(r) = parser.next(&mut buf).expect("valid") {
                got = Some(r);
            }
        }
        assert_eq!(got, Some(cmd(&["SET", "k", "hello"])));
    }

    #[test]
    fn hostile_lengths_are_refused_without_allocation() {
        let (_, err) = parse_all(b"*1\r\n$999999999999\r\n");
        assert_eq!(err, Some(ProtocolError("invalid bulk length".into())));
        let (_, err) = parse_all(b"*1\r\n$-5\r\n");
        assert_eq!(err, Some(ProtocolError("invalid bulk length".into())));
        let (_, err) = parse_all(b"*99999999999\r\n");
        assert_eq!(err, Some(ProtocolError("invalid multibulk length".into())));
        let (_, err) = parse_all(b"*1\r\n*1\r\n*1\r\n");
        assert_eq!(err, Some(ProtocolError("expected '$', got '*'".into())));
        let (reqs, err) = parse_all(b"*2\r\n$536870912\r\nabc");
        assert!(reqs.is_empty() && err.is_none(), "a promised 512 MB bulk just waits");
        let (_, err) = parse_all(&vec![b'a'; MAX_INLINE_LEN + 1]);
        assert_eq!(err, Some(ProtocolError("too big inline request".into())));
    }

    #[test]
    fn inline_quotes_follow_sdssplitargs() {
        assert_eq!(
            split_args(b"a \"b\\x41\\n\" 'c\\'d'"),
            Some(vec![b"a".to_vec(), b"bA\n".to_vec(), b"c'd".to_vec()])
        );
        assert_eq!(split_args(b"\"unterminated"), None);
        assert_eq!(split_args(b"\"a\"b"), None);
        assert_eq!(split_args(b"   "), Some(vec![]));
    }

    #[test]
    fn replies_encode_as_resp2() {
        let r = Reply::Array(vec![
            Reply::Double(1.5),
            Reply::Map(vec![(Reply::bulk(b"k"), Reply::Integer(-1))]),
            Reply::Bool(false),
            Reply::Nil,
            Reply::error("ERR a\r\nb".into()),
        ]);
        assert_eq!(r.to_resp2(), b"*5\r\n$3\r\n1.5\r\n*2\r\n$1\r\nk\r\n:-1\r\n:0\r\n$-1\r\n-ERR a  b\r\n".to_vec());
    }
}
