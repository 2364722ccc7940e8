//! The queue layer under real crashes: a child process (this test binary, re-executed) runs
//! a mixed workload on a store under `Durability::Always` (enqueue single and batch, lease,
//! ack, retry, dead-letter, an occasional compaction) and prints what each call did only
//! after the call returned. The parent kills it with SIGKILL at random moments, reopens the
//! store after each kill and checks:
//!
//! - no acknowledged enqueue is lost: every printed `ENQ` that was not acked is in its queue
//!   or in its DLQ, with its payload byte for byte;
//! - acked messages are gone, dead-lettered ones stay in the DLQ;
//! - nothing is invented: every message in the store was enqueued (its payload names the
//!   enqueue and is checked byte for byte), and the only unannounced ones come from the
//!   enqueue the kill interrupted;
//! - every message is in exactly one place, and the queue and DLQ counters agree with it;
//! - delivery counts never go backwards from one reopen to the next, and are at least the
//!   highest delivery number a lease printed.
//!
//! The next child carries on with the same store. `DEADLETTER_SEED` fixes the random seed
//! (printed at the start); `DEADLETTER_CRASH_KILLS` sets the number of kills (default 100).

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use common::crash::{self, ChildSpec};
use deadletter::clock::{Clock, SystemClock};
use deadletter::queue::{FailureOutcome, FailureReport, QueueOptions};
use deadletter::sim::SimRng as Rng;
use deadletter::sim::{Place, StoreHooks};
use deadletter::store::Durability;
use deadletter::{Config, Error, Failure, Message, Store};

const QUEUE: &str = "jobs";
const MAX_ATTEMPTS: u32 = 3;
const DEFAULT_KILLS: usize = 100;

fn config() -> Config {
    common::config()
        .durability(Durability::Always)
        .segment_size(68 << 10)
        .max_message_size(1024)
        .preallocate(false)
}

fn queue_options() -> QueueOptions {
    QueueOptions::default()
        .max_attempts(MAX_ATTEMPTS)
        .visibility_timeout(Duration::from_millis(200))
}

/// The payload of enqueue `n` of child `round`: a text header naming it, then bytes derived
/// from it. Any payload found in the store can be checked against the one its header names.
fn payload(round: u64, n: u64, len: usize) -> Vec<u8> {
    let mut p = format!("r{round}-n{n}-l{len}:").into_bytes();
    p.extend((0..len).map(|i| ((round * 131 + n * 31 + i as u64 * 7) % 251) as u8));
    p
}

/// The (round, n) a payload names, if it is exactly the payload they name.
fn parse_payload(p: &[u8]) -> Option<(u64, u64)> {
    let colon = p.iter().position(|&b| b == b':')?;
    let head = std::str::from_utf8(&p[..colon]).ok()?;
    let mut parts = head.split('-');
    let round = parts.next()?.strip_prefix('r')?.parse().ok()?;
    let n = parts.next()?.strip_prefix('n')?.parse().ok()?;
    let len = parts.next()?.strip_prefix('l')?.parse().ok()?;
    (payload(round, n, len) == p).then_some((round, n))
}

// ---------------------------------------------------------------------------------------
// The child
// ---------------------------------------------------------------------------------------

/// The child: runs the workload until it is killed. Every call is announced (`B ...`) and
/// its outcome printed after it returned; the parent treats the last announced call without
/// an outcome as interrupted (it may or may not have happened).
#[test]
fn child_queue_workload() {
    let Some(params) = crash::child("child_queue_workload") else {
        return;
    };
    let round: u64 = params.get("round");
    let mut rng = Rng::new(params.get("seed"));
    let store = Store::open(params.path("dir"), config()).expect("child opens the store");
    let queue = store.queue_with(QUEUE, queue_options()).expect("queue");
    crash::say("READY");
    let mut held: Vec<Message> = Vec::new();
    let mut n = 0u64;
    let refused = |e: &Error| matches!(e, Error::InvalidState { .. } | Error::NotFound(_));
    for _ in 0..1_000_000 {
        let pick = rng.below(100);
        if pick < 24 {
            let k = if rng.below(4) == 0 {
                1 + rng.below(6)
            } else {
                1
            };
            let payloads: Vec<Vec<u8>> = (0..k)
                .map(|i| payload(round, n + i, rng.below(600) as usize))
                .collect();
            crash::say(format_args!("B ENQ {n} {k}"));
            let ids = if k == 1 {
                vec![queue.enqueue(&payloads[0]).expect("enqueue")]
            } else {
                queue.enqueue_batch(&payloads).expect("enqueue_batch")
            };
            for (i, id) in ids.iter().enumerate() {
                crash::say(format_args!("ENQ {id} {}", n + i as u64));
            }
            crash::say("E");
            n += k;
        } else if pick < 52 {
            let max = 1 + rng.below(4) as usize;
            let vis = Duration::from_millis(5 + rng.below(300));
            crash::say("B LEASE");
            let got = queue.lease_for(max, vis).expect("lease");
            for m in &got {
                crash::say(format_args!("LEASE {} {}", m.id(), m.attempt()));
            }
            crash::say("E");
            held.extend(got);
            if held.len() > 8 {
                held.drain(..held.len() - 8);
            }
        } else if pick < 99 {
            if held.is_empty() {
                continue;
            }
            let m = held.remove(rng.below(held.len() as u64) as usize);
            let id = m.id();
            if pick < 74 {
                crash::say(format_args!("B ACK {id}"));
                match queue.ack(&m) {
                    Ok(()) => crash::say(format_args!("ACK {id}")),
                    Err(e) if refused(&e) => crash::say(format_args!("X {id}")),
                    Err(e) => panic!("ack: {e}"),
                }
            } else if pick < 93 {
                let failure = Failure::transient("Timeout", format!("attempt {}", m.attempt()));
                let report = FailureReport::new(&failure).worker("child");
                let at = SystemClock.now_ms() + rng.below(30);
                crash::say(format_args!("B RETRY {id}"));
                match queue.retry(&m, &report, at) {
                    Ok(FailureOutcome::Retried { .. }) => crash::say(format_args!("RETRY {id}")),
                    Ok(FailureOutcome::DeadLettered) => crash::say(format_args!("DLQ {id}")),
                    Err(e) if refused(&e) => crash::say(format_args!("X {id}")),
                    Err(e) => panic!("retry: {e}"),
                }
            } else {
                let failure = Failure::permanent("Invalid", "cannot be processed");
                crash::say(format_args!("B DL {id}"));
                match queue.dead_letter(&m, &FailureReport::new(&failure)) {
                    Ok(()) => crash::say(format_args!("DLQ {id}")),
                    Err(e) if refused(&e) => crash::say(format_args!("X {id}")),
                    Err(e) => panic!("dead_letter: {e}"),
                }
            }
        } else {
            crash::say("B COMPACT");
            store.compact_now().expect("compact");
            crash::say("E");
        }
    }
}

// ---------------------------------------------------------------------------------------
// The parent
// ---------------------------------------------------------------------------------------

/// What the parent knows of one message.
#[derive(Debug, Default)]
struct Known {
    /// The enqueue its payload names.
    origin: (u64, u64),
    acked: bool,
    /// Printed as dead-lettered, or found in the DLQ at a reopen (a lease dead-letters a
    /// message that used all its attempts without printing it). No workload call takes a
    /// message out of the DLQ again.
    dead: bool,
    /// Highest delivery number a lease printed.
    max_leased: u32,
    /// Delivery count at the last reopen.
    attempts: u32,
}

/// The call a kill interrupted: it may or may not have taken effect.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pending {
    Enqueue { from: u64, count: u64 },
    Ack(u64),
    Fail(u64),
    Lease,
    Compact,
}

struct Parent {
    known: BTreeMap<u64, Known>,
    checked_reopens: usize,
}

impl Parent {
    /// Applies one child's output; returns the interrupted call, if any.
    fn absorb(&mut self, round: u64, lines: &[String]) -> Option<Pending> {
        let mut pending = None;
        for line in lines {
            let w: Vec<&str> = line.split_whitespace().collect();
            let num = |i: usize| -> u64 { w[i].parse().unwrap() };
            match w.as_slice() {
                ["B", "ENQ", ..] => {
                    pending = Some(Pending::Enqueue {
                        from: num(2),
                        count: num(3),
                    })
                }
                ["B", "ACK", _] => pending = Some(Pending::Ack(num(2))),
                ["B", "RETRY" | "DL", _] => pending = Some(Pending::Fail(num(2))),
                ["B", "LEASE"] => pending = Some(Pending::Lease),
                ["B", "COMPACT"] => pending = Some(Pending::Compact),
                ["E"] | ["X", _] | ["ACK", _] | ["RETRY", _] | ["DLQ", _] => {
                    match w[0] {
                        "ACK" => self.entry(num(1)).acked = true,
                        "DLQ" => self.entry(num(1)).dead = true,
                        _ => {}
                    }
                    pending = None;
                }
                ["ENQ", _, _] => {
                    let k = self.entry(num(1));
                    k.origin = (round, num(2));
                }
                ["LEASE", _, _] => {
                    let attempt = num(2) as u32;
                    let k = self.entry(num(1));
                    k.max_leased = k.max_leased.max(attempt);
                }
                ["READY"] => {}
                _ => panic!("unknown line {line:?}"),
            }
        }
        pending
    }

    fn entry(&mut self, id: u64) -> &mut Known {
        self.known.entry(id).or_default()
    }

    /// Reopens the store and checks it against what the children printed.
    fn check(&mut self, dir: &Path, round: u64, pending: Option<Pending>) {
        let store = Store::open(dir, config()).expect("reopen after a kill");
        let queue = store.queue_with(QUEUE, queue_options()).unwrap();
        let dlq = queue.dlq();
        let found: HashMap<u64, (Place, u32)> = store
            .debug_messages()
            .into_iter()
            .map(|m| {
                assert_eq!(m.queue, QUEUE, "message {} in an unknown queue", m.id);
                (m.id, (m.place, m.attempts))
            })
            .collect();
        // Messages the children announced.
        for (&id, k) in self.known.iter_mut() {
            let here = found.get(&id);
            if k.acked {
                assert!(
                    here.is_none(),
                    "message {id} was acked but is back: {here:?}"
                );
                continue;
            }
            let Some(&(place, attempts)) = here else {
                if pending == Some(Pending::Ack(id)) {
                    // The interrupted ack took effect.
                    k.acked = true;
                    continue;
                }
                panic!(
                    "message {id} (enqueue {:?}) is lost: in neither its queue nor its DLQ",
                    k.origin
                );
            };
            assert_ne!(
                place,
                Place::Leased,
                "message {id} still leased after a reopen"
            );
            if k.dead {
                assert_eq!(
                    place,
                    Place::Dead,
                    "message {id} was dead-lettered but is back in its queue"
                );
            }
            k.dead |= place == Place::Dead;
            assert!(
                attempts >= k.attempts && attempts >= k.max_leased,
                "message {id}: delivery count {attempts} went back (last reopen {}, highest leased {})",
                k.attempts,
                k.max_leased
            );
            k.attempts = attempts;
            let bytes = store.debug_payload(id).unwrap();
            assert_eq!(
                parse_payload(&bytes),
                Some(k.origin),
                "message {id}: payload differs"
            );
            if place == Place::Dead {
                let entry = dlq.get(id).unwrap();
                assert_eq!(entry.payload, bytes, "DLQ entry {id}: payload differs");
                assert_eq!(entry.metadata.delivery_count, attempts);
            }
        }
        // Messages nobody announced: only the interrupted enqueue may have made them.
        for (&id, &(place, attempts)) in &found {
            if self.known.contains_key(&id) {
                continue;
            }
            let bytes = store.debug_payload(id).unwrap();
            let origin = parse_payload(&bytes)
                .unwrap_or_else(|| panic!("message {id} has a payload nobody enqueued"));
            let from_interrupted = match pending {
                Some(Pending::Enqueue { from, count }) => {
                    origin.0 == round && (from..from + count).contains(&origin.1)
                }
                _ => false,
            };
            assert!(
                from_interrupted,
                "message {id} (enqueue {origin:?}) appeared without being announced (interrupted call: {pending:?})"
            );
            assert_eq!(
                (place, attempts),
                (Place::Ready, 0),
                "unannounced message {id}"
            );
            self.known.insert(
                id,
                Known {
                    origin,
                    ..Known::default()
                },
            );
        }
        // One place each, and the counters agree with the places.
        let ready = found.values().filter(|(p, _)| p.is_ready()).count() as u64;
        let dead = found.values().filter(|(p, _)| *p == Place::Dead).count() as u64;
        let stats = queue.stats();
        assert_eq!(
            (stats.counts.ready, stats.counts.in_flight, stats.dlq_size),
            (ready, 0, dead)
        );
        assert_eq!(dlq.stats().total, dead);
        assert_eq!(dlq.len(), dead);
        self.checked_reopens += 1;
        drop((queue, dlq));
        store.close().unwrap();
    }
}

#[test]
fn sigkill_during_a_mixed_workload_loses_and_invents_nothing() {
    let kills: usize = common::env_number("DEADLETTER_CRASH_KILLS", DEFAULT_KILLS);
    let seed = common::seed();
    println!(
        "crash_queue: seed {seed} (DEADLETTER_SEED={seed} replays the kill times), {kills} kills"
    );
    let mut rng = Rng::new(seed);
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("store");
    let mut parent = Parent {
        known: BTreeMap::new(),
        checked_reopens: 0,
    };
    let started = Instant::now();
    let mut interrupted: BTreeMap<&'static str, usize> = BTreeMap::new();
    for round in 0..kills as u64 {
        let mut child = ChildSpec::new("child_queue_workload")
            .param("dir", dir.display())
            .param("round", round)
            .param("seed", rng.next_u64())
            .spawn(root.path());
        let mut lines = child.wait_for(|l| l == "READY", Duration::from_secs(60));
        // Let it work for a random while, then kill it mid-flight.
        std::thread::sleep(Duration::from_millis(1 + rng.below(150)));
        lines.extend(child.kill());
        let pending = parent.absorb(round, &lines);
        *interrupted
            .entry(match pending {
                None => "between calls",
                Some(Pending::Enqueue { .. }) => "enqueue",
                Some(Pending::Ack(_)) => "ack",
                Some(Pending::Fail(_)) => "retry or dead-letter",
                Some(Pending::Lease) => "lease",
                Some(Pending::Compact) => "compaction",
            })
            .or_default() += 1;
        parent.check(&dir, round, pending);
    }
    let acked = parent.known.values().filter(|k| k.acked).count();
    let dead = parent.known.values().filter(|k| k.dead).count();
    println!(
        "crash_queue: {} kills in {:.1?}; {} messages enqueued, {acked} acked, {dead} dead-lettered, {} waiting",
        parent.checked_reopens,
        started.elapsed(),
        parent.known.len(),
        parent.known.len() - acked - dead
    );
    println!("crash_queue: kills landed in: {interrupted:?}");
    assert!(
        acked > 0 && dead > 0,
        "the workload did too little to test anything"
    );
}
