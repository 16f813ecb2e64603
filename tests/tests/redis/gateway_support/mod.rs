//! Support for the end-to-end tests of the example gateway: the gateway as a real process
//! (built once with cargo), its stderr as a stream of lines to wait on, and a small HTTP/1.1
//! client that can connect from any loopback address (so a test can be a trusted proxy or
//! an untrusted client).

// Waiting on real processes takes real time.
#![allow(clippy::disallowed_methods)]
// Each test binary that includes this module uses a part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a test waits for a line it expects before failing (generous: the machine is
/// shared; this bounds a hang, it does not measure anything).
pub const PATIENCE: Duration = Duration::from_secs(60);

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ sits in the workspace").to_owned()
}

pub use redis_tests::gateway_binary;

/// A running gateway process, killed when dropped.
pub struct Gateway {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    lines: Receiver<String>,
    /// Every stderr line seen so far.
    pub seen: Vec<String>,
}

impl Gateway {
    /// Starts a gateway on `config` against `redis_url`, listening on a free port, and waits
    /// until it says it listens. Fails the test (with its stderr) if it exits instead.
    pub fn start(config: &Path, redis_url: &str) -> Gateway {
        Self::start_with(config, redis_url, &[])
    }

    /// As [`Gateway::start`], with `extra` command-line arguments.
    pub fn start_with(config: &Path, redis_url: &str, extra: &[&str]) -> Gateway {
        Self::try_start(config, redis_url, extra)
            .unwrap_or_else(|lines| panic!("the gateway did not start:\n{}", lines.join("\n")))
    }

    /// As [`Gateway::start_with`]; Err with its stderr when the gateway exits before listening.
    /// The gateway keys its partition keys with the tests' [`PK_SECRET`].
    pub fn try_start(config: &Path, redis_url: &str, extra: &[&str]) -> Result<Gateway, Vec<String>> {
        let secret = pk_secret_file().to_string_lossy().into_owned();
        let mut args = vec!["--pk-secret-file", secret.as_str()];
        args.extend_from_slice(extra);
        Self::try_start_exactly(config, redis_url, &args)
    }

    /// As [`Gateway::try_start`], with only `extra` besides the config, the Redis URL and the
    /// listening address (no partition-key secret unless `extra` gives one).
    pub fn try_start_exactly(config: &Path, redis_url: &str, extra: &[&str]) -> Result<Gateway, Vec<String>> {
        let mut child = Command::new(gateway_binary())
            .args(["--config"])
            .arg(config)
            .args(["--redis-url", redis_url, "--listen", "127.0.0.1:0", "--reload-interval", "50ms"])
            .args(["--redis-timeout", "200ms"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the gateway starts");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut gateway = Gateway { child, addr: "127.0.0.1:0".parse().expect("address"), lines, seen: Vec::new() };
        match gateway.wait_for("gateway listening on http://") {
            Some(line) => {
                let addr = line.split("http://").nth(1).and_then(|rest| rest.split(' ').next()).expect("an address");
                gateway.addr = addr.parse().expect("a socket address");
                Ok(gateway)
            }
            None => Err(gateway.seen.clone()),
        }
    }

    /// Waits for a stderr line containing `text`; None if the process ended first (or after
    /// [`PATIENCE`]).
    pub fn wait_for(&mut self, text: &str) -> Option<String> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(text) {
                        return Some(line);
                    }
                }
                Err(_) => return None,
            }
        }
    }

    /// Reads the stderr lines that arrive until none has for `quiet` (or [`PATIENCE`] passed);
    /// false if the process ended.
    pub fn wait_for_quiet(&mut self, quiet: Duration) -> bool {
        let deadline = Instant::now() + PATIENCE;
        while Instant::now() < deadline {
            match self.lines.recv_timeout(quiet) {
                Ok(line) => self.seen.push(line),
                Err(mpsc::RecvTimeoutError::Timeout) => return true,
                Err(mpsc::RecvTimeoutError::Disconnected) => return false,
            }
        }
        true
    }

    /// A GET of `path` with `headers`, from 127.0.0.1.
    pub async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        request(self.addr, "127.0.0.1", "GET", path, headers).await
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A gateway whose start is expected to fail: its exit code and stderr.
pub fn start_failure(config: &Path, redis_url: &str) -> (Option<i32>, Vec<String>) {
    let mut child = Command::new(gateway_binary())
        .arg("--config")
        .arg(config)
        .args(["--redis-url", redis_url, "--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the gateway starts");
    let mut text = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
    }
    let code = child.wait().ok().and_then(|s| s.code());
    (code, text.lines().map(str::to_owned).collect())
}

/// An HTTP response: status, headers (names lower-case, in order) and body.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status line (`HTTP/1.1 200 OK`).
    pub status_line: String,
    /// The status code.
    pub status: u16,
    /// The header fields.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
}

impl Reply {
    /// The value of header `name`, if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request from local address `from` (any 127.0.0.0/8 address) with
/// `Connection: close`, the whole response read back.
pub async fn request(to: SocketAddr, from: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
    request_with_body(to, from, method, path, headers, "").await
}

/// As [`request`], with `body`.
pub async fn request_with_body(
    to: SocketAddr,
    from: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket.bind(format!("{from}:0").parse().expect("a local address")).expect("bind");
    let mut stream = socket.connect(to).await.expect("the gateway accepts");
    let mut text =
        format!("{method} {path} HTTP/1.1\r\nhost: {to}\r\nconnection: close\r\ncontent-length: {}\r\n", body.len());
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(body);
    stream.write_all(text.as_bytes()).await.expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("read");
    parse(&String::from_utf8_lossy(&raw))
}

fn parse(raw: &str) -> Reply {
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("").to_owned();
    let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Reply { status_line, status, headers, body: body.to_owned() }
}

/// The partition-key secret the test gateways share.
pub const PK_SECRET: &str = "test-deployment-partition-secret";

/// A file holding [`PK_SECRET`] (written once per test binary).
pub fn pk_secret_file() -> &'static Path {
    static FILE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &FILE
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let path = dir.path().join("pk-secret");
            std::fs::write(&path, format!("{PK_SECRET}\n")).expect("write the secret");
            (dir, path)
        })
        .1
}

/// The `pk` parameter the RateLimit fields carry for `identity` under [`PK_SECRET`].
pub fn pk(identity: &str) -> String {
    pk_with(PK_SECRET, identity)
}

/// The `pk` parameter for `identity` under `secret`: the first 8 bytes of its HMAC-SHA-256, as
/// a structured-field Byte Sequence.
pub fn pk_with(secret: &str, identity: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    let tag = ring::hmac::sign(&key, identity.as_bytes());
    format!(":{}:", base64::engine::general_purpose::STANDARD.encode(&tag.as_ref()[..8]))
}

/// A rules file in a fresh temporary directory.
pub struct ConfigFile {
    _dir: tempfile::TempDir,
    /// Its path.
    pub path: PathBuf,
}

impl ConfigFile {
    /// Writes `text` to a new file.
    pub fn new(text: &str) -> ConfigFile {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("rules.toml");
        std::fs::write(&path, text).expect("write the rules");
        ConfigFile { _dir: dir, path }
    }

    /// Replaces the file's contents (written whole, then renamed, so no reader sees half).
    pub fn write(&self, text: &str) {
        let tmp = self.path.with_extension("tmp");
        std::fs::write(&tmp, text).expect("write the rules");
        std::fs::rename(&tmp, &self.path).expect("replace the rules");
    }
}
