//! The `redis-model` binary as a process, as `cargo xtask test` starts it in place of
//! `redis-server`: it says where it listens, answers over TCP, and refuses an option it cannot
//! honour by name, with status 2, before listening.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

/// Kills the server when the test ends, however it ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_binary_listens_where_it_says_and_answers_resp() {
    let child = Command::new(env!("CARGO_BIN_EXE_redis-model"))
        .args(["--port", "0", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("redis-model starts");
    let mut server = Killed(child);
    let mut first = String::new();
    BufReader::new(server.0.stdout.take().expect("stdout")).read_line(&mut first).expect("a first line");
    let addr = first.trim().strip_prefix("redis-model listening on ").unwrap_or_else(|| panic!("said {first:?}"));

    let mut conn = TcpStream::connect(addr).expect("it accepts a connection where it said it listens");
    conn.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n").expect("write");
    let want = b"+OK\r\n$1\r\nv\r\n";
    let mut got = vec![0; want.len()];
    conn.read_exact(&mut got).expect("two replies");
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want));
}

#[test]
fn an_option_it_cannot_honour_is_refused_by_name_before_listening() {
    let out = Command::new(env!("CARGO_BIN_EXE_redis-model"))
        .args(["--port", "0", "--appendonly", "yes"])
        .output()
        .expect("redis-model runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--appendonly") && stderr.contains("no persistence"), "{stderr}");
    assert!(out.stdout.is_empty(), "it listened: {}", String::from_utf8_lossy(&out.stdout));
}
