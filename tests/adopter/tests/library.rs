//! The library as a dependency: decisions in process and on a redis-server this test starts.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use redis_ratelimit::Source;

#[tokio::test]
async fn in_process_the_sixth_login_of_a_minute_is_denied_with_an_honest_retry_after() {
    let limiter = adopter::login_limiter(None).expect("a valid limiter");
    for attempt in 1..=5 {
        let d = limiter.check("account:ada").await.expect("decides");
        assert!(d.allowed, "attempt {attempt}: {d:?}");
    }
    let denied = limiter.check("account:ada").await.expect("decides");
    assert!(
        !denied.allowed && denied.retry_after.as_millis() > 0 && denied.retry_after.as_millis() <= 60_000,
        "{denied:?}"
    );
    assert!(limiter.check("account:bob").await.expect("decides").allowed, "keys are limited apart");
}

/// A private redis-server on a free loopback port, stopped when dropped.
struct Server {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_redis() -> Server {
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let dir = tempfile::tempdir().expect("a scratch directory");
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir.path())
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server starts (cargo xtask test installs it)");
    let server = Server { child, port, _dir: dir };
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return server;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("redis-server did not listen on {port}");
}

#[tokio::test]
async fn on_redis_two_instances_share_one_budget_and_fail_closed_when_it_is_gone() {
    let server = start_redis();
    let url = format!("redis://127.0.0.1:{}/", server.port);
    let (a, b) = (adopter::login_limiter(Some(&url)).unwrap(), adopter::login_limiter(Some(&url)).unwrap());
    let mut admitted = 0;
    for i in 0..10 {
        let limiter = if i % 2 == 0 { &a } else { &b };
        let d = limiter.check("account:ada").await.expect("decides");
        assert_eq!(d.source, Source::Store, "{d:?}");
        admitted += usize::from(d.allowed);
    }
    assert_eq!(admitted, 5, "two instances, one budget of 5");

    drop(server);
    let d = a.check("account:grace").await.expect("a decision, not an error");
    assert!(!d.allowed && d.source == Source::FailClosed && d.degraded.is_some(), "{d:?}");
}
