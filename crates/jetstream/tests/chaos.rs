//! Chaos: the test's own nats-server (`sync_interval: always`) is killed with SIGKILL at
//! random every 1 to 3 s and restarted after 0.05 to 1.5 s, at least 30 times, while a
//! pool of 4 workers with succeeding, flaky, poison and always-failing handlers runs and
//! an enqueuer keeps enqueueing (with idempotency keys, retrying each until the server
//! acknowledges it). The workload and what is checked at the end (nothing acknowledged
//! lost, each dead letter exactly once, no id given twice, no failing handler past
//! `max_attempts` but for a known and counted gap, the pool never stopped, the stats
//! matching the messages) are `common::workload`'s, shared with `cluster.rs`.
//!
//! `DEADLETTER_CHAOS_KILLS=N` runs N kills (default 30) for a longer soak.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadletter_jetstream::{JetStream, JetStreamOptions};

mod common;

use common::workload::{self, Enqueuer, Rng, Seen};

#[test]
fn a_pool_rides_through_server_kills_losing_and_repeating_nothing() {
    let kills: u32 = std::env::var("DEADLETTER_CHAOS_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let mut rng = Rng::from_clock();
    eprintln!("chaos seed {}, {kills} kills", rng.0);

    let mut server = common::OwnServer::start();
    let options = JetStreamOptions::new(common::unique_namespace("chaos"))
        .request_timeout(Duration::from_secs(2))
        .move_patience(Duration::from_secs(10));
    let js = JetStream::connect_with(&server.url(), options).unwrap();
    let queue = workload::open_queue(&js);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let pool = workload::start_pool(&queue, &seen);
    let enqueuer = Enqueuer::start(&queue);

    let started = Instant::now();
    for _ in 0..kills {
        std::thread::sleep(rng.millis(1_000, 3_000));
        server.kill();
        std::thread::sleep(rng.millis(50, 1_500));
        server.restart();
    }
    eprintln!("{kills} kills in {:?}", started.elapsed());
    let enqueued = enqueuer.stop();
    workload::settle_and_check(pool, &queue, enqueued, &seen);
    js.delete_namespace().unwrap();
}
