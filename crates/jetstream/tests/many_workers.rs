//! Many processes on one queue: three worker processes (each a pool of two threads) share
//! one JetStream queue; one of them is killed with SIGKILL in the middle. Nothing
//! acknowledged is lost (every enqueued message ends acknowledged or in the DLQ), every
//! DLQ entry keeps its history, and no message is dead-lettered twice.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadletter::pool::Retry;
use deadletter::queue::QueueOptions;
use deadletter::{DeadLetterQueue, Delivery, Failure, Filter, MessageQueue, Page, WorkerPool};
use deadletter_jetstream::{JetStream, JetStreamMessage, JetStreamOptions};

mod common;

const CHILD_ENV: &str = "DEADLETTER_JS_WORKER_NAMESPACE";
const MESSAGES: usize = 400;
const MAX_ATTEMPTS: u32 = 5;
const LEASE: Duration = Duration::from_secs(2);

fn queue_options() -> QueueOptions {
    QueueOptions::default()
        .max_attempts(MAX_ATTEMPTS)
        .visibility_timeout(LEASE)
}

fn payload(i: usize) -> String {
    match i {
        i if i % 40 == 7 => format!("poison-{i}"),
        i if i % 10 == 3 => format!("flaky-{i}"),
        i => format!("job-{i}"),
    }
}

/// The child: a pool of two workers on the shared queue until it is idle. The handler
/// prints `DONE <id>` before it returns success (the ack follows).
#[test]
fn child_worker_process() {
    let Ok(namespace) = std::env::var(CHILD_ENV) else {
        return;
    };
    let js = JetStream::connect_with(&common::server_url(), JetStreamOptions::new(namespace))
        .expect("child connects");
    let queue = js.queue_with("jobs", queue_options()).expect("queue");
    let pool = WorkerPool::new(&queue)
        .workers(2)
        .retry(
            Retry::fixed(Duration::from_millis(20))
                .no_jitter()
                .max_attempts(MAX_ATTEMPTS),
        )
        .lease(LEASE)
        .name(format!("worker-{}", std::process::id()))
        .start(|m: &JetStreamMessage| {
            std::thread::sleep(Duration::from_millis(3));
            let text = m.text().unwrap_or_default();
            if text.starts_with("poison") {
                return Err(Failure::permanent("Poison", "cannot be processed"));
            }
            if text.starts_with("flaky") && m.attempt() == 1 {
                return Err(Failure::transient("Flaky", "first attempt fails"));
            }
            let mut out = std::io::stdout().lock();
            writeln!(out, "DONE {}", m.id()).expect("stdout");
            out.flush().expect("stdout");
            Ok(())
        })
        .expect("pool");
    pool.run_until_idle().expect("drain");
    pool.shutdown(Duration::from_secs(10)).expect("shutdown");
}

fn spawn_child(namespace: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_worker_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, namespace)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn a worker process")
}

#[test]
fn three_worker_processes_one_killed_lose_nothing_and_dead_letter_once() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let js = common::fresh_namespace(&common::server_url());
    let namespace = js.namespace().to_string();
    let queue = js.queue_with("jobs", queue_options()).unwrap();
    let payloads: Vec<String> = (0..MESSAGES).map(payload).collect();
    let ids = queue.enqueue_batch(&payloads).unwrap();
    let poison: BTreeSet<u64> = (0..MESSAGES)
        .filter(|&i| payloads[i].starts_with("poison"))
        .map(|i| ids[i])
        .collect();

    // (child index, message id) of every DONE line.
    let done = Arc::new(Mutex::new(Vec::<(usize, u64)>::new()));
    let mut children = Vec::new();
    let mut readers = Vec::new();
    for c in 0..3 {
        let mut child = spawn_child(&namespace);
        let stdout = child.stdout.take().unwrap();
        let done = Arc::clone(&done);
        readers.push(std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // The test harness's own "test child_worker_process ... " has no newline
                // of its own: the first DONE line follows it.
                if let Some(at) = line.find("DONE ") {
                    let id = line[at + 5..].trim().parse().unwrap();
                    done.lock().unwrap().push((c, id));
                }
            }
        }));
        children.push(child);
    }

    // Kill the first worker process in the middle of its work: once it has handled 20
    // messages and the three together a third of them (its two workers are then almost
    // always inside a handler).
    let give_up = Instant::now() + Duration::from_secs(120);
    loop {
        let (mine, all) = {
            let d = done.lock().unwrap();
            (d.iter().filter(|(c, _)| *c == 0).count(), d.len())
        };
        if mine >= 20 && all >= MESSAGES / 3 {
            break;
        }
        assert!(Instant::now() < give_up, "the workers made no progress");
        std::thread::sleep(Duration::from_millis(1));
    }
    children[0].kill().unwrap();
    children[0].wait().unwrap();
    for child in &mut children[1..] {
        let status = child.wait().unwrap();
        assert!(status.success(), "a surviving worker failed: {status}");
    }
    for r in readers {
        r.join().unwrap();
    }

    // Every message ended acknowledged or in the DLQ: the work-queue stream is empty.
    let stats = queue.stats().unwrap();
    assert_eq!(
        (stats.counts.ready, stats.counts.in_flight),
        (0, 0),
        "{stats:?}"
    );
    assert_eq!(stats.counts.enqueued, MESSAGES as u64);
    // The DLQ holds exactly the poison messages, once each, with their history.
    let dlq = queue.dlq();
    let entries = dlq.list(&Filter::all(), Page::first(10_000)).unwrap();
    let dead: Vec<u64> = entries.iter().map(|e| e.id()).collect();
    let dead_set: BTreeSet<u64> = dead.iter().copied().collect();
    assert_eq!(dead.len(), dead_set.len(), "an entry is listed twice");
    assert_eq!(dead_set, poison);
    assert_eq!(dlq.len().unwrap(), poison.len() as u64);
    assert_eq!(
        stats.counts.dead_lettered,
        poison.len() as u64,
        "a message was dead-lettered twice"
    );
    for e in &entries {
        assert_eq!(e.failure.error_kind, "Poison");
        assert!(!e.failure.attempts.is_empty(), "no history: {e:?}");
        assert!(e.payload.starts_with(b"poison-"));
        assert!(e
            .dlq
            .worker
            .as_deref()
            .is_some_and(|w| w.starts_with("worker-")));
    }
    assert_eq!(stats.counts.acked, (MESSAGES - poison.len()) as u64);
    // Every other message was handled (at least once: the killed process may have handled
    // some whose acknowledgement it never sent).
    let handled: BTreeSet<u64> = done.lock().unwrap().iter().map(|(_, id)| *id).collect();
    let expected: BTreeSet<u64> = ids
        .iter()
        .copied()
        .filter(|id| !poison.contains(id))
        .collect();
    assert_eq!(handled, expected);
    js.delete_namespace().unwrap();
}
