//! A three-node JetStream cluster of the test's own (`LocalServer::cluster`: loopback, a
//! temporary directory per node), with what the cluster tests need of it: a connection
//! once the cluster can create replicated streams, and a stream's leader and replicas
//! read from the stream's info (its `cluster` part), so a test can kill the leader.

use std::time::{Duration, Instant};

use async_nats::jetstream::stream::ClusterInfo;
use deadletter_jetstream::local_server::LocalServer;
use deadletter_jetstream::{JetStream, JetStreamOptions};

/// The nodes of the cluster, in the order `LocalServer::cluster` names them (`node-<i>`).
pub struct OwnCluster {
    pub nodes: Vec<LocalServer>,
    /// A runtime for the test's own client, which reads stream infos.
    runtime: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

impl OwnCluster {
    /// Starts `n` nodes and waits until each accepts connections.
    pub fn start(n: usize) -> OwnCluster {
        let dir = tempfile::tempdir().unwrap();
        let nodes = LocalServer::cluster(dir.path(), n).expect("start the cluster's nodes");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        OwnCluster {
            nodes,
            runtime,
            _dir: dir,
        }
    }

    /// The URL of a running node (the first). A client learns the others from it (the
    /// servers' INFO lists the cluster's client URLs) and fails over to them.
    pub fn url(&self) -> String {
        self.nodes
            .iter()
            .find(|n| n.is_running())
            .expect("a running node")
            .url()
    }

    /// Connects with `options` once the cluster has elected its meta leader (before that,
    /// creating the namespace's replicated streams fails): retried for up to 60 s.
    pub fn connect(&self, options: JetStreamOptions) -> JetStream {
        let give_up = Instant::now() + Duration::from_secs(60);
        loop {
            match JetStream::connect_with(&self.url(), options.clone()) {
                Ok(js) => return js,
                Err(e) => {
                    assert!(Instant::now() < give_up, "the cluster never served: {e}");
                    std::thread::sleep(Duration::from_millis(250));
                }
            }
        }
    }

    /// The index of the node named `name` (`node-<i>`).
    pub fn index_of(&self, name: &str) -> usize {
        name.strip_prefix("node-")
            .and_then(|i| i.parse().ok())
            .filter(|i: &usize| *i < self.nodes.len())
            .unwrap_or_else(|| panic!("not a node of the cluster: {name:?}"))
    }

    /// The cluster part of stream `stream`'s info, asked of a running node; `None` when no
    /// node answered (an election under way).
    pub fn stream_cluster(&self, stream: &str) -> Option<ClusterInfo> {
        let urls: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| n.is_running())
            .map(LocalServer::url)
            .collect();
        self.runtime.block_on(async {
            for url in urls {
                let connect = async_nats::ConnectOptions::new()
                    .connection_timeout(Duration::from_secs(2))
                    .ignore_discovered_servers()
                    .connect(url.as_str());
                let Ok(Ok(client)) = tokio::time::timeout(Duration::from_secs(3), connect).await
                else {
                    continue;
                };
                let js = async_nats::jetstream::new(client);
                let info = tokio::time::timeout(Duration::from_secs(3), async {
                    Some(js.get_stream(stream).await.ok()?.cached_info().clone())
                })
                .await;
                if let Ok(Some(info)) = info {
                    return info.cluster;
                }
            }
            None
        })
    }

    /// The index of stream `stream`'s leader, waiting up to 60 s for one.
    pub fn leader_of(&self, stream: &str) -> usize {
        let give_up = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(leader) = self.stream_cluster(stream).and_then(|c| c.leader) {
                return self.index_of(&leader);
            }
            assert!(Instant::now() < give_up, "{stream} has no leader");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits up to 60 s until stream `stream` has a leader and every other replica is
    /// current and online (a restarted node caught up), so the next kill takes one node
    /// of a whole group, never the quorum.
    pub fn wait_until_current(&self, stream: &str) {
        let give_up = Instant::now() + Duration::from_secs(60);
        loop {
            let whole = self.stream_cluster(stream).is_some_and(|c| {
                c.leader.is_some()
                    && c.replicas.len() + 1 == self.nodes.len()
                    && c.replicas.iter().all(|p| p.current && !p.offline)
            });
            if whole {
                return;
            }
            assert!(
                Instant::now() < give_up,
                "{stream}'s replicas never caught up: {:?}",
                self.stream_cluster(stream)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
