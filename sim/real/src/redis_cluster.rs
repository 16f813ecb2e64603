//! A private Redis Cluster on free loopback ports: `redis-server --cluster-enabled yes`
//! processes (or `valkey-server`'s, [`RedisCluster::start_with`]) joined by
//! `redis-cli --cluster create`, which speaks to Valkey as to Redis, with or without replicas. Killed when
//! dropped (also when a test panics).
//!
//! Settings chosen for tests and the real lane: a node is judged failed after
//! [`NODE_TIMEOUT_MS`] (Redis's default is 15 s), a replica may always be promoted
//! (`cluster-replica-validity-factor 0`), and the slots of healthy primaries keep serving
//! while one primary is down (`cluster-require-full-coverage no`), so a failover stops only
//! the keys of the primary that died.

use std::ffi::OsStr;
use std::io;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::process::{free_port, RealServer, ServerProcess};

/// How long the other nodes wait before judging a silent node failed (ms).
pub const NODE_TIMEOUT_MS: u64 = 1_000;

/// One node of the cluster.
#[derive(Debug)]
pub struct Node {
    /// The process (restartable on the same port).
    pub process: ServerProcess,
    dir: std::path::PathBuf,
}

/// See the module docs.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<Node>,
    /// Which server every node runs.
    kind: RealServer,
    _dir: tempfile::TempDir,
}

/// A node as `CLUSTER NODES` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// The node's id.
    pub id: String,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Serving slots (a primary) or copying one (a replica).
    pub primary: bool,
    /// Marked failed by the cluster.
    pub failed: bool,
    /// The slot ranges it serves, inclusive.
    pub slots: Vec<(u16, u16)>,
}

fn node_args(dir: &Path, port: u16) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    for a in [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        &format!("nodes-{port}.conf"),
        "--cluster-node-timeout",
        &NODE_TIMEOUT_MS.to_string(),
        "--cluster-replica-validity-factor",
        "0",
        "--cluster-require-full-coverage",
        "no",
        "--dir",
    ] {
        args.push(a.into());
    }
    args.push(dir.as_os_str().to_owned());
    args
}

fn start_node(kind: RealServer, dir: &Path, port: u16) -> io::Result<ServerProcess> {
    let args = node_args(dir, port);
    let extra: Vec<&OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    kind.start(port, &extra)
}

impl RedisCluster {
    /// Starts `primaries` primaries with `replicas` replicas each and joins them; returns
    /// once every node reports `cluster_state:ok` and knows every other.
    ///
    /// A free port can be taken by another process between the moment it is found and the
    /// moment a node binds it (or its cluster bus port, 10000 above, can be in use), and then
    /// the join fails. The whole start is tried again on fresh ports, up to three times, so one
    /// such race does not cost a run (or a whole lane of runs).
    pub fn start(primaries: usize, replicas: usize) -> io::Result<Self> {
        Self::start_with(RealServer::Redis, primaries, replicas)
    }

    /// As [`RedisCluster::start`], every node running `kind`'s server.
    pub fn start_with(kind: RealServer, primaries: usize, replicas: usize) -> io::Result<Self> {
        let mut last = None;
        for _ in 0..3 {
            match Self::try_start(kind, primaries, replicas) {
                Ok(cluster) => return Ok(cluster),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(e),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no attempt to start a cluster")))
    }

    fn try_start(kind: RealServer, primaries: usize, replicas: usize) -> io::Result<Self> {
        let dir = tempfile::Builder::new().prefix("redis-cluster-").tempdir()?;
        let total = primaries * (1 + replicas);
        let mut nodes = Vec::with_capacity(total);
        for _ in 0..total {
            let node_dir = dir.path().join(format!("n{}", nodes.len()));
            std::fs::create_dir_all(&node_dir)?;
            let mut last = io::Error::other("no port");
            let mut started = None;
            for _ in 0..5 {
                match start_node(kind, &node_dir, free_port()?) {
                    Ok(p) => {
                        started = Some(p);
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(e),
                    Err(e) => last = e,
                }
            }
            let process = started.ok_or(last)?;
            nodes.push(Node { process, dir: node_dir });
        }
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for n in &nodes {
            create.arg(format!("127.0.0.1:{}", n.process.port()));
        }
        create.args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"]);
        let out = create.stdin(Stdio::null()).output().map_err(|e| {
            io::Error::new(e.kind(), format!("cannot run redis-cli (install Debian's `redis-tools`): {e}"))
        })?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "redis-cli --cluster create failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        let cluster = RedisCluster { nodes, kind, _dir: dir };
        cluster.wait_until(Duration::from_secs(30), |c| c.settled(primaries, total))?;
        Ok(cluster)
    }

    /// Whether every live node says `cluster_state:ok` and sees `primaries` primaries serving
    /// all 16384 slots among `total` nodes.
    fn settled(&self, primaries: usize, total: usize) -> bool {
        self.nodes.iter().filter(|n| n.process.is_running()).all(|n| {
            let ok = query::<String>(n.process.port(), &["CLUSTER", "INFO"]).is_ok_and(|info| {
                info.contains("cluster_state:ok") && info.contains(&format!("cluster_known_nodes:{total}"))
            });
            ok && nodes_of(n.process.port()).is_ok_and(|all| {
                let serving: Vec<&NodeInfo> = all.iter().filter(|i| i.primary && !i.slots.is_empty()).collect();
                serving.len() == primaries && serving.iter().map(|i| slot_count(&i.slots)).sum::<u32>() == 16_384
            })
        })
    }

    /// Polls `done` every 50 ms until it holds or `within` passes.
    pub fn wait_until(&self, within: Duration, done: impl Fn(&Self) -> bool) -> io::Result<()> {
        let tries = (within.as_millis() / 50).max(1);
        for _ in 0..tries {
            if done(self) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(io::Error::other(format!("the cluster did not settle within {within:?}: {:?}", self.describe())))
    }

    /// `redis://127.0.0.1:PORT/` of every node (dead ones too: a client tries them in turn).
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.process.url()).collect()
    }

    /// Every node's port, in start order.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.process.port()).collect()
    }

    /// The cluster as a live node sees it.
    pub fn describe(&self) -> Vec<NodeInfo> {
        self.nodes
            .iter()
            .filter(|n| n.process.is_running())
            .find_map(|n| nodes_of(n.process.port()).ok())
            .unwrap_or_default()
    }

    /// Ports of the primaries that serve slots and are not marked failed.
    pub fn primaries(&self) -> Vec<u16> {
        let mut ports: Vec<u16> = self
            .describe()
            .into_iter()
            .filter(|i| i.primary && !i.failed && !i.slots.is_empty())
            .map(|i| i.port)
            .collect();
        ports.sort_unstable();
        ports
    }

    /// The port of the primary serving `slot`.
    pub fn primary_of(&self, slot: u16) -> Option<u16> {
        self.describe()
            .into_iter()
            .find(|i| i.primary && !i.failed && i.slots.iter().any(|&(a, b)| (a..=b).contains(&slot)))
            .map(|i| i.port)
    }

    /// The node on `port`.
    pub fn node_mut(&mut self, port: u16) -> Option<&mut Node> {
        self.nodes.iter_mut().find(|n| n.process.port() == port)
    }

    /// Kills the node on `port` (SIGKILL).
    pub fn kill(&mut self, port: u16) {
        if let Some(n) = self.node_mut(port) {
            n.process.kill();
        }
    }

    /// Starts a killed node again on its port with its cluster config (it rejoins, as a
    /// replica of whoever took over its slots).
    pub fn restart(&mut self, port: u16) -> io::Result<()> {
        let kind = self.kind;
        let Some(n) = self.node_mut(port) else { return Err(io::Error::other(format!("no node on port {port}"))) };
        n.process.kill();
        n.process = start_node(kind, &n.dir.clone(), port)?;
        Ok(())
    }

    /// SIGSTOP / SIGCONT of the node on `port`.
    pub fn pause(&self, port: u16, paused: bool) -> io::Result<()> {
        let n = self
            .nodes
            .iter()
            .find(|n| n.process.port() == port)
            .ok_or_else(|| io::Error::other(format!("no node on port {port}")))?;
        if paused {
            n.process.pause()
        } else {
            n.process.resume()
        }
    }

    /// Moves `slot` with its keys from the primary on `from` to the one on `to`, the way
    /// `redis-cli --cluster reshard` does: IMPORTING on the target, MIGRATING on the source,
    /// MIGRATE of the keys in batches, then SETSLOT NODE everywhere. While it runs, clients
    /// asking the source for a key already moved get ASK; afterwards, MOVED. `between` runs
    /// after each batch of keys (a test sends traffic there).
    pub fn migrate_slot(&self, slot: u16, from: u16, to: u16, mut between: impl FnMut()) -> io::Result<u64> {
        let all = self.describe();
        let id = |port: u16| {
            all.iter()
                .find(|i| i.port == port)
                .map(|i| i.id.clone())
                .ok_or_else(|| io::Error::other(format!("no node {port}")))
        };
        let (from_id, to_id) = (id(from)?, id(to)?);
        let s = slot.to_string();
        query::<()>(to, &["CLUSTER", "SETSLOT", &s, "IMPORTING", &from_id])?;
        query::<()>(from, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &to_id])?;
        let mut moved = 0u64;
        loop {
            let keys: Vec<String> = query(from, &["CLUSTER", "GETKEYSINSLOT", &s, "5"])?;
            if keys.is_empty() {
                break;
            }
            let mut migrate: Vec<String> =
                ["MIGRATE", "127.0.0.1", &to.to_string(), "", "0", "5000", "KEYS"].map(String::from).to_vec();
            migrate.extend(keys.iter().cloned());
            let args: Vec<&str> = migrate.iter().map(String::as_str).collect();
            query::<redis::Value>(from, &args)?;
            moved += keys.len() as u64;
            between();
        }
        // Every node learns the new owner (replicas and other primaries would also learn it by
        // gossip, later): the destination first, then the source, as Redis's documentation of
        // resharding prescribes. The other way round there is a moment when the source already
        // answers MOVED to the destination while the destination, still importing, answers
        // MOVED back, and a client bouncing between the two may run out of redirections.
        let others = self.ports().into_iter().filter(|&p| p != to && p != from);
        for port in [to, from].into_iter().chain(others) {
            if self.nodes.iter().any(|n| n.process.port() == port && n.process.is_running()) {
                let _ = query::<()>(port, &["CLUSTER", "SETSLOT", &s, "NODE", &to_id]);
            }
        }
        Ok(moved)
    }
}

fn slot_count(ranges: &[(u16, u16)]) -> u32 {
    ranges.iter().map(|&(a, b)| u32::from(b) - u32::from(a) + 1).sum()
}

/// One command to the node on `port`, with short timeouts.
pub fn query<T: redis::FromRedisValue>(port: u16, args: &[&str]) -> io::Result<T> {
    let mut conn = connect(port)?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut conn).map_err(io::Error::other)
}

/// A connection to the node on `port` (500 ms to connect, 5 s per reply).
pub fn connect(port: u16) -> io::Result<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).map_err(io::Error::other)?;
    let conn = client.get_connection_with_timeout(Duration::from_millis(500)).map_err(io::Error::other)?;
    conn.set_read_timeout(Some(Duration::from_secs(5))).map_err(io::Error::other)?;
    Ok(conn)
}

/// `CLUSTER NODES` of the node on `port`, parsed.
pub fn nodes_of(port: u16) -> io::Result<Vec<NodeInfo>> {
    let text: String = query(port, &["CLUSTER", "NODES"])?;
    Ok(text.lines().filter_map(parse_node_line).collect())
}

/// One line of `CLUSTER NODES`: `id ip:port@bus flags primary-id ping pong epoch state slots...`.
fn parse_node_line(line: &str) -> Option<NodeInfo> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 8 {
        return None;
    }
    let port = fields[1].split('@').next()?.rsplit(':').next()?.parse().ok()?;
    let flags = fields[2];
    let slots = fields[8..]
        .iter()
        .filter(|f| !f.starts_with('['))
        .filter_map(|f| match f.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => f.parse().ok().map(|a| (a, a)),
        })
        .collect();
    Some(NodeInfo {
        id: fields[0].to_owned(),
        port,
        primary: flags.contains("master"),
        failed: flags.contains("fail") && !flags.contains("fail?"),
        slots,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_nodes_lines_are_read() {
        let line = "07c3 127.0.0.1:30004@40004 myself,master - 0 1 3 connected 0-5460 6000 [93->-e7d]";
        let n = parse_node_line(line).expect("parsed");
        assert_eq!((n.port, n.primary, n.failed), (30004, true, false));
        assert_eq!(n.slots, vec![(0, 5460), (6000, 6000)]);
        let r = parse_node_line("a 127.0.0.1:1@2 slave,fail 07c3 0 1 3 disconnected").expect("parsed");
        assert!(!r.primary && r.failed && r.slots.is_empty());
    }
}
