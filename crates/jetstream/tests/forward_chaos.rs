//! The forwarder through chaos: 100,000 messages of two local queues forwarded by a
//! forwarder process to the test's own NATS server, while the server is killed (SIGKILL)
//! and restarted and the forwarder process is killed (SIGKILL) and started again, seven
//! times in all, once both at the same time, each when one more tenth of the messages is
//! in the stream. Afterwards the edge stream holds every message exactly once, in order
//! per queue, and the local queues are empty.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use deadletter::queue::QueueOptions;
use deadletter::{Config, Store};
use deadletter_jetstream::{ForwardOptions, Forwarder};
use futures_util::StreamExt;

mod common;

const CHILD_ENV: &str = "DEADLETTER_FORWARD_CHILD";
const QUEUES: [&str; 2] = ["readings", "events"];
const PER_QUEUE: usize = 50_000;
const NAMESPACE: &str = "fleet";
const ORIGIN: &str = "device-7";

/// Queue options of the forwarded queues: restarts with messages in flight never use up
/// their attempts (see the forwarder's documentation).
fn store_config() -> Config {
    Config::default().queue_defaults(QueueOptions::default().max_attempts(1_000_000))
}

/// The child: forwards until both queues are empty, then exits.
#[test]
fn child_forwarder_process() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (url, dir) = spec.split_once('|').expect("url|dir");
    let store = Store::open(dir, store_config()).expect("the child opens the store");
    let options = ForwardOptions::new(url, NAMESPACE, ORIGIN)
        .queue(QUEUES[0])
        .queue(QUEUES[1])
        .backoff(Duration::from_millis(50), Duration::from_millis(400))
        .request_timeout(Duration::from_secs(2));
    let mut forwarder = Forwarder::new(&store, options).expect("forwarder");
    forwarder
        .run_until_drained(&AtomicBool::new(false))
        .expect("forwarding ends only when drained");
}

/// A forwarder process, killed when dropped (so a failed assertion leaves none behind).
struct ChildProcess(Child);

impl Drop for ChildProcess {
    fn drop(&mut self) {
        kill(&mut self.0);
    }
}

fn spawn_child(url: &str, dir: &std::path::Path) -> ChildProcess {
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_forwarder_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, format!("{url}|{}", dir.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the forwarder process");
    ChildProcess(child)
}

fn still_running(child: &mut ChildProcess) -> bool {
    child.0.try_wait().expect("child status").is_none()
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn forwards_100k_messages_once_in_order_through_server_restarts_and_forwarder_kills() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let started = Instant::now();
    let mut server = common::OwnServer::start();
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();

    // The edge store, filled while offline.
    let mut enqueued: HashMap<&str, Vec<u64>> = HashMap::new();
    {
        let store = Store::open(dir.path(), store_config()).unwrap();
        for name in QUEUES {
            let q = store.queue(name).unwrap();
            let mut ids = Vec::with_capacity(PER_QUEUE);
            for chunk in 0..PER_QUEUE / 1000 {
                let payloads: Vec<String> = (0..1000)
                    .map(|i| format!("{name}-{}", chunk * 1000 + i))
                    .collect();
                ids.extend(q.enqueue_batch(&payloads).unwrap());
            }
            enqueued.insert(name, ids);
        }
        store.close().unwrap();
    }
    let filled = started.elapsed();

    // Chaos while it forwards: step k waits until the stream holds (k + 1) tenths of the
    // messages (so the steps are spread over the forwarding whatever the machine's
    // speed), then breaks something. The forwarder must still be at work when each step
    // begins, or the step tests nothing.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut child = spawn_child(&url, dir.path());
    let mut steps_while_running = 0;
    let total = (PER_QUEUE * QUEUES.len()) as u64;
    for step in 0..7u64 {
        let give_up = Instant::now() + Duration::from_secs(60);
        while stored(&runtime, &url) < (step + 1) * total / 10 && still_running(&mut child) {
            assert!(Instant::now() < give_up, "no progress before step {step}");
            std::thread::sleep(Duration::from_millis(100));
        }
        steps_while_running += usize::from(still_running(&mut child));
        match step % 3 {
            0 => {
                server.kill();
                std::thread::sleep(Duration::from_millis(400));
                server.restart();
            }
            1 => {
                kill(&mut child.0);
                child = spawn_child(&url, dir.path());
            }
            _ => {
                // Both down; the forwarder comes back first and waits for the server.
                server.kill();
                kill(&mut child.0);
                child = spawn_child(&url, dir.path());
                std::thread::sleep(Duration::from_millis(400));
                server.restart();
            }
        }
    }
    let chaos = started.elapsed();
    let give_up = Instant::now() + Duration::from_secs(150);
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < give_up, "the forwarder did not finish");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "the last forwarder failed: {status}");
    let forwarded = started.elapsed();

    // The stream: every message exactly once, in order per queue.
    let received = read_edge_stream(&url);
    let mut by_queue: HashMap<String, Vec<u64>> = HashMap::new();
    for (queue, id) in received {
        by_queue.entry(queue).or_default().push(id);
    }
    for name in QUEUES {
        let got = by_queue.remove(name).unwrap_or_default();
        assert_eq!(got.len(), PER_QUEUE, "messages of {name} in the stream");
        assert!(
            got == enqueued[name],
            "{name}: the stream holds each message once, in enqueue order"
        );
    }
    assert!(by_queue.is_empty(), "nothing else in the stream");

    // Locally: nothing left, nothing dead-lettered.
    let store = Store::open(dir.path(), store_config()).unwrap();
    for name in QUEUES {
        let stats = store.queue(name).unwrap().stats();
        assert_eq!(
            (stats.counts.ready, stats.counts.in_flight, stats.dlq_size),
            (0, 0, 0)
        );
    }
    eprintln!(
        "filled in {filled:?}; chaos until {chaos:?} ({steps_while_running} of 7 steps while \
         forwarding); forwarded by {forwarded:?}; verified by {:?}",
        started.elapsed()
    );
    assert!(
        steps_while_running == 7,
        "the forwarder finished before the chaos did (only {steps_while_running} steps hit it)"
    );
}

/// Messages in the edge stream now (0 while the server or the stream is not there).
fn stored(runtime: &tokio::runtime::Runtime, url: &str) -> u64 {
    runtime.block_on(async {
        let connect = async_nats::ConnectOptions::new()
            .connection_timeout(Duration::from_millis(500))
            .connect(url);
        let Ok(Ok(client)) = tokio::time::timeout(Duration::from_secs(1), connect).await else {
            return 0;
        };
        let js = jetstream::new(client);
        let info = async {
            let mut stream = js.get_stream(format!("{NAMESPACE}-edge")).await.ok()?;
            Some(stream.info().await.ok()?.state.messages)
        };
        tokio::time::timeout(Duration::from_secs(1), info)
            .await
            .ok()
            .flatten()
            .unwrap_or(0)
    })
}

/// Every message of the edge stream, in stream order: (queue, local id).
fn read_edge_stream(url: &str) -> Vec<(String, u64)> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = async_nats::connect(url).await.unwrap();
        let js = jetstream::new(client);
        let mut stream = js.get_stream(format!("{NAMESPACE}-edge")).await.unwrap();
        let total = stream.info().await.unwrap().state.messages as usize;
        let consumer = stream
            .create_consumer(jetstream::consumer::pull::OrderedConfig::default())
            .await
            .unwrap();
        let mut messages = consumer.messages().await.unwrap();
        let mut out = Vec::with_capacity(total);
        while out.len() < total {
            let m = messages.next().await.unwrap().unwrap();
            let h = m.headers.as_ref().expect("headers");
            let queue = h.get("Deadletter-Queue").unwrap().as_str().to_string();
            let id = h.get("Deadletter-Id").unwrap().as_str().parse().unwrap();
            assert_eq!(h.get("Deadletter-Origin").unwrap().as_str(), ORIGIN);
            out.push((queue, id));
        }
        out
    })
}
