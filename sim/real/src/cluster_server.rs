//! The Redis of a `--backend redis-cluster` run: a private Redis Cluster of three primaries
//! with one replica each ([`super::redis_cluster`]), and the faults that need its processes.
//!
//! - a Redis crash is every node dying (SAVE first when it keeps its data) and coming back on
//!   its port with its cluster configuration; a pause is every node stopped (SIGSTOP);
//! - a script flush is `SCRIPT FLUSH` on every node;
//! - a failover kills every primary at its start (so it cuts off every key of the run, as the
//!   model lane's one Redis failing over does, and the judge's windows mean the same on both
//!   lanes), and at its end has each primary's replica take over at once (`CLUSTER FAILOVER
//!   TAKEOVER`: no wait for failure detection, so the gap is the schedule's), then starts the
//!   killed nodes again, which rejoin as the new primaries' replicas. What a replica had not
//!   yet received is lost, as it would be: real asynchronous replication, not a model of it.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{anyhow, Context};

use super::process::save;
use super::redis_cluster::{connect, nodes_of, query, RedisCluster};
use super::server::ServerControl;
use results::RedisCost;

/// Primaries, and replicas per primary, of every cluster run.
pub const PRIMARIES: usize = 3;
/// See [`PRIMARIES`].
pub const REPLICAS: usize = 1;

/// See the module docs.
pub(crate) struct ClusterServer {
    cluster: RedisCluster,
    /// The primaries killed by a failover in progress, each with the replica taking over.
    failing: Vec<(u16, u16)>,
    paused: u32,
    /// Counters of nodes that died, summed.
    spent: RedisCost,
}

impl ClusterServer {
    pub(crate) fn start() -> anyhow::Result<ClusterServer> {
        let cluster = RedisCluster::start(PRIMARIES, REPLICAS).context("starting a Redis Cluster")?;
        Ok(ClusterServer { cluster, failing: Vec::new(), paused: 0, spent: RedisCost::default() })
    }

    fn running(&self) -> Vec<u16> {
        self.cluster.ports().into_iter().filter(|p| query::<String>(*p, &["PING"]).is_ok()).collect()
    }
}

/// Redis Cluster's key slot of a hash tag (CRC16 XMODEM mod 16384).
pub fn slot_of_tag(tag: &str) -> u16 {
    let mut crc: u16 = 0;
    for &b in tag.as_bytes() {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc % 16_384
}

impl ServerControl for ClusterServer {
    fn upstreams(&self) -> Vec<SocketAddr> {
        self.cluster.ports().into_iter().map(|p| SocketAddr::from(([127, 0, 0, 1], p))).collect()
    }

    fn cluster_nodes(&self) -> Option<Vec<u16>> {
        Some(self.cluster.ports())
    }

    fn pause(&mut self) -> anyhow::Result<()> {
        self.paused += 1;
        if self.paused == 1 {
            for port in self.cluster.ports() {
                self.cluster.pause(port, true).ok();
            }
        }
        Ok(())
    }

    fn resume(&mut self) -> anyhow::Result<()> {
        if self.paused == 0 {
            return Ok(());
        }
        self.paused -= 1;
        if self.paused == 0 {
            for port in self.cluster.ports() {
                self.cluster.pause(port, false).ok();
            }
        }
        Ok(())
    }

    fn freeze(&mut self) -> anyhow::Result<()> {
        if self.paused == 0 {
            for port in self.running() {
                query::<()>(port, &["CLIENT", "PAUSE", "60000", "WRITE"]).ok();
            }
        }
        Ok(())
    }

    fn crash(&mut self, keep_data: bool) -> anyhow::Result<()> {
        for port in self.running() {
            if keep_data && self.paused == 0 {
                connect(port)
                    .and_then(|mut c| save(&mut c).map_err(std::io::Error::other))
                    .with_context(|| format!("SAVE on node {port} before a crash"))?;
            }
            self.cluster.kill(port);
        }
        Ok(())
    }

    fn restart(&mut self, keep_data: bool) -> anyhow::Result<()> {
        // Each node restarts with its cluster configuration (and, when `keep_data`, the
        // snapshot it saved as it died).
        for port in self.cluster.ports() {
            if query::<String>(port, &["PING"]).is_ok() {
                continue;
            }
            self.cluster.restart(port)?;
        }
        if !keep_data {
            for port in self.cluster.ports() {
                // A snapshot from an earlier SAVE must not bring back what this crash lost.
                query::<()>(port, &["FLUSHALL"]).ok();
            }
        }
        Ok(())
    }

    fn flush_scripts(&mut self) -> anyhow::Result<()> {
        for port in self.running() {
            query::<()>(port, &["SCRIPT", "FLUSH"]).ok();
        }
        Ok(())
    }

    fn fail_over(&mut self, start: bool) -> anyhow::Result<bool> {
        if start {
            let mut pairs = Vec::new();
            for victim in self.cluster.primaries() {
                let nodes = nodes_of(victim)?;
                let victim_id = nodes.iter().find(|n| n.port == victim).map(|n| n.id.clone()).unwrap_or_default();
                let lines: Vec<String> = query(victim, &["CLUSTER", "REPLICAS", &victim_id])?;
                let replica = lines
                    .iter()
                    .filter_map(|l| l.split_whitespace().nth(1)?.split('@').next()?.rsplit(':').next()?.parse().ok())
                    .next()
                    .ok_or_else(|| anyhow!("the primary on {victim} has no replica to promote"))?;
                pairs.push((victim, replica));
            }
            for &(victim, _) in &pairs {
                self.cluster.kill(victim);
            }
            self.failing = pairs;
        } else if !self.failing.is_empty() {
            let pairs = std::mem::take(&mut self.failing);
            for &(_, replica) in &pairs {
                query::<()>(replica, &["CLUSTER", "FAILOVER", "TAKEOVER"])
                    .with_context(|| format!("CLUSTER FAILOVER TAKEOVER on {replica}"))?;
            }
            // The killed primaries come back as the new primaries' replicas.
            for &(victim, _) in &pairs {
                self.cluster.restart(victim)?;
            }
            let promoted: Vec<u16> = pairs.iter().map(|&(_, r)| r).collect();
            self.cluster
                .wait_until(Duration::from_secs(10), |c| promoted.iter().all(|p| c.primaries().contains(p)))
                .context("waiting for the promoted replicas to serve")?;
        }
        Ok(true)
    }

    fn cost(&mut self) -> RedisCost {
        if self.paused > 0 {
            self.paused = 1;
            let _ = self.resume();
        }
        let mut total = self.spent.clone();
        for port in self.running() {
            let info: String = query(port, &["INFO", "stats"]).unwrap_or_default();
            let field = |name: &str| {
                info.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse::<u64>().ok())
            };
            total.bytes_in += field("total_net_input_bytes").unwrap_or(0);
            total.bytes_out += field("total_net_output_bytes").unwrap_or(0);
            total.commands += field("total_commands_processed").unwrap_or(0);
            if self.cluster.primaries().contains(&port) {
                total.keys += query::<u64>(port, &["DBSIZE"]).unwrap_or(0);
            }
        }
        total
    }
}
