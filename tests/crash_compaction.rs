//! Crash test for compaction: a child process (this test binary, re-executed) works a store
//! under `Durability::Always` (enqueue, lease, ack, retry, dead-letter, release, DLQ import
//! and delete) on one thread while another runs compactions back to back, and prints every
//! state change after the call returned (and what it is about to do before). The parent
//! kills it with SIGKILL at seeded random moments, and also runs it once per compaction
//! failpoint (`DEADLETTER_FAILPOINT`: the child aborts at that step). After each death it
//! checks, on copies of the directory, that no live message is lost or duplicated, that
//! payloads are byte-identical, that DLQ entries keep their envelopes (kind, message,
//! history, original payload), and that a second compaction and reopen still agree. The
//! next child goes on with the same store.
//!
//! `DEADLETTER_SEED` fixes the seed (printed at the start); `DEADLETTER_CRASH_COMPACTION_KILLS`
//! sets the number of SIGKILL runs (default 8).

mod common;

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::crash::{self, ChildSpec};
use deadletter::dlq::DeadLetter;
use deadletter::queue::{FailureOutcome, FailureReport, QueueOptions};
use deadletter::sim::SimRng as Rng;
use deadletter::store::{CompactionOptions, Durability};
use deadletter::{Config, Failure, Filter, Page, Store};

/// Payload numbers of one child start at `run * SEQ_STRIDE`.
const SEQ_STRIDE: u64 = 1 << 32;
const FAILPOINTS: [&str; 5] = [
    "copy-written",
    "checkpoint-temp-written",
    "checkpoint-renamed",
    "checkpoint-written",
    "segment-deleted",
];

fn config() -> Config {
    common::config()
        .durability(Durability::Always)
        .segment_size(128 << 10)
        .max_message_size(4 << 10)
        .retention(None)
        .compaction(CompactionOptions::default().interval(None).batch(64))
}

fn queue_options() -> QueueOptions {
    QueueOptions::default().max_attempts(1_000_000)
}

/// The payload of message number `seq`: `m<seq>:` then 1 to 1,500 bytes of any value.
fn payload(seq: u64) -> Vec<u8> {
    let mut rng = Rng::new(seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xbeef);
    let len = 1 + rng.below(1500) as usize;
    let mut p = format!("m{seq}:").into_bytes();
    p.extend((0..len).map(|_| rng.next_u64() as u8));
    p
}

fn seq_of(payload: &[u8]) -> u64 {
    let colon = payload.iter().position(|&b| b == b':').expect("seq prefix");
    std::str::from_utf8(&payload[1..colon])
        .expect("ascii seq")
        .parse()
        .expect("seq")
}

/// The failure a message is dead-lettered with.
fn failure_of(seq: u64) -> (String, String) {
    (
        format!("Kind{}", seq % 3),
        format!("failed at message {seq}"),
    )
}

// ---- The child ----------------------------------------------------------------------------

/// The child: works the store in the directory it is given until it is killed (or a
/// failpoint aborts it). Lines: `W <op> ...` before a call, then after it returned:
/// `E id seq` (enqueued), `A id..` (acked), `T id` (retried), `D id` (dead-lettered),
/// `I new orig` (imported into q2's DLQ), `X id` (deleted from the DLQ), `B` and
/// `C relocated deleted` (a compaction run begins, ends).
#[test]
fn crash_compaction_child() {
    let Some(params) = crash::child("crash_compaction_child") else {
        return;
    };
    let seed: u64 = params.get("seed");
    let mut seq: u64 = params.get("seq");
    let store = Store::open(params.path("dir"), config()).expect("child opens the store");
    let q = store.queue_with("q", queue_options()).unwrap();
    let q2 = store.queue_with("q2", queue_options()).unwrap();
    let compactor = store.clone();
    std::thread::spawn(move || {
        let mut rng = Rng::new(seed ^ 0xc0ffee);
        loop {
            crash::say("B");
            let r = compactor.compact_now().expect("compaction");
            crash::say(format_args!(
                "C {} {}",
                r.records_relocated, r.segments_deleted
            ));
            std::thread::sleep(Duration::from_millis(rng.below(15)));
        }
    });
    crash::say("READY");
    let mut rng = Rng::new(seed);
    let mut dead: Vec<u64> = Vec::new();
    loop {
        // Enqueue a batch.
        let n = 5 + rng.below(30);
        crash::say(format_args!("W E {seq} {n}"));
        let payloads: Vec<Vec<u8>> = (seq..seq + n).map(payload).collect();
        let ids = q.enqueue_batch(&payloads).unwrap();
        for (i, id) in ids.iter().enumerate() {
            crash::say(format_args!("E {id} {}", seq + i as u64));
        }
        seq += n;
        // Lease some and decide their fate one by one.
        let leased = q.lease(rng.below(80) as usize + 1).unwrap();
        let mut acks = Vec::new();
        for m in leased {
            let id = m.id();
            match rng.below(20) {
                0..=10 => acks.push(m),
                11..=12 => {
                    let (kind, message) = failure_of(seq_of(m.payload()));
                    let f = Failure::permanent(kind, message).with_context("seq", "x");
                    crash::say(format_args!("W D {id}"));
                    q.dead_letter(&m, &FailureReport::new(&f).worker("child"))
                        .unwrap();
                    crash::say(format_args!("D {id}"));
                    dead.push(id);
                }
                13..=15 => {
                    let f = Failure::transient("Flaky", "try again");
                    crash::say(format_args!("W T {id}"));
                    let outcome = q.retry(&m, &FailureReport::new(&f), 0).unwrap();
                    assert!(matches!(outcome, FailureOutcome::Retried { .. }));
                    crash::say(format_args!("T {id}"));
                }
                _ => {
                    // Released: still in the queue, nothing to report.
                    q.release(&m, Duration::ZERO).unwrap();
                }
            }
        }
        if !acks.is_empty() {
            let list: Vec<String> = acks.iter().map(|m| m.id().to_string()).collect();
            crash::say(format_args!("W A {}", list.join(" ")));
            q.ack_all(&acks).unwrap();
            crash::say(format_args!("A {}", list.join(" ")));
        }
        // Sometimes import a DLQ entry into q2's DLQ, or delete one.
        if !dead.is_empty() && rng.below(8) == 0 {
            let orig = dead[rng.below(dead.len() as u64) as usize];
            if let Ok(entry) = q.dlq().get(orig) {
                crash::say(format_args!("W I {orig}"));
                let new = q2.dlq().import(&entry).unwrap();
                crash::say(format_args!("I {new} {orig}"));
            }
        }
        while dead.len() > 30 && rng.below(2) == 0 {
            let id = dead.swap_remove(rng.below(dead.len() as u64) as usize);
            crash::say(format_args!("W X {id}"));
            q.dlq().delete(id).unwrap();
            crash::say(format_args!("X {id}"));
        }
    }
}

// ---- The model ----------------------------------------------------------------------------

/// What the parent knows of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Known {
    /// In queue `q`.
    Ready,
    /// Acked: gone.
    Acked,
    /// In `q`'s DLQ.
    Dead,
    /// Deleted from the DLQ: gone.
    Deleted,
    /// An entry imported into `q2`'s DLQ from this entry of `q`'s DLQ.
    Imported { orig: u64 },
}

#[derive(Debug, Clone)]
struct Message {
    seq: u64,
    state: Known,
    /// Retries acknowledged, and retries that may have happened (an unanswered one).
    retries: (usize, usize),
}

/// A call that was started but not answered when the child died.
#[derive(Debug, Clone)]
enum Pending {
    Enqueue { first: u64, count: u64 },
    Ack(Vec<u64>),
    DeadLetter(u64),
    Retry(u64),
    Import(u64),
    Delete(u64),
}

#[derive(Debug, Default)]
struct Model {
    msgs: BTreeMap<u64, Message>,
    pending: Option<Pending>,
    relocated: u64,
    deleted_segments: u64,
    compactions: u64,
    /// True between a `B` line and its `C` line: the child died during a compaction.
    in_compaction: bool,
}

impl Model {
    fn apply(&mut self, line: &str) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| -> u64 { words[i].parse().unwrap() };
        match words[0] {
            "READY" => {}
            "W" => {
                self.pending = Some(match words[1] {
                    "E" => Pending::Enqueue {
                        first: num(2),
                        count: num(3),
                    },
                    "A" => Pending::Ack((2..words.len()).map(num).collect()),
                    "D" => Pending::DeadLetter(num(2)),
                    "T" => Pending::Retry(num(2)),
                    "I" => Pending::Import(num(2)),
                    "X" => Pending::Delete(num(2)),
                    other => panic!("unknown pending op {other}"),
                })
            }
            "E" => {
                let (id, seq) = (num(1), num(2));
                let old = self.msgs.insert(
                    id,
                    Message {
                        seq,
                        state: Known::Ready,
                        retries: (0, 0),
                    },
                );
                assert!(old.is_none(), "id {id} enqueued twice");
                if let Some(Pending::Enqueue { first, count }) = self.pending {
                    if seq + 1 == first + count {
                        self.pending = None;
                    }
                }
            }
            "A" => {
                for i in 1..words.len() {
                    self.set(num(i), Known::Ready, Known::Acked);
                }
                self.pending = None;
            }
            "D" => {
                self.set(num(1), Known::Ready, Known::Dead);
                self.pending = None;
            }
            "T" => {
                let m = self.msgs.get_mut(&num(1)).unwrap();
                m.retries.0 += 1;
                m.retries.1 += 1;
                self.pending = None;
            }
            "I" => {
                let (new, orig) = (num(1), num(2));
                let seq = self.msgs[&orig].seq;
                let retries = self.msgs[&orig].retries;
                self.msgs.insert(
                    new,
                    Message {
                        seq,
                        state: Known::Imported { orig },
                        retries,
                    },
                );
                self.pending = None;
            }
            "X" => {
                self.set(num(1), Known::Dead, Known::Deleted);
                self.pending = None;
            }
            "B" => self.in_compaction = true,
            "C" => {
                self.in_compaction = false;
                self.compactions += 1;
                self.relocated += num(1);
                self.deleted_segments += num(2);
            }
            other => panic!("unknown line {other}"),
        }
    }

    fn set(&mut self, id: u64, from: Known, to: Known) {
        let m = self
            .msgs
            .get_mut(&id)
            .unwrap_or_else(|| panic!("unknown id {id}"));
        assert_eq!(m.state, from, "id {id}");
        m.state = to;
    }
}

// ---- Verification -------------------------------------------------------------------------

/// What a reopened store holds: queue `q` by id (payload), and both DLQs by id.
#[derive(Debug, PartialEq)]
struct Observed {
    ready: BTreeMap<u64, Vec<u8>>,
    dead: BTreeMap<u64, DeadLetter>,
    imported: BTreeMap<u64, DeadLetter>,
}

fn all_entries(dlq: &deadletter::Dlq) -> BTreeMap<u64, DeadLetter> {
    let mut out = BTreeMap::new();
    let mut page = Page::first(500);
    loop {
        let entries = dlq.list(&Filter::all(), page).unwrap();
        let Some(last) = entries.last() else {
            return out;
        };
        page = Page::after(last.id(), 500);
        for e in entries {
            let id = e.id();
            assert!(out.insert(id, e).is_none(), "DLQ entry {id} listed twice");
        }
    }
}

/// Opens a copy of `dir` (after one more compaction and reopen when `compact`) and reads
/// everything it holds. Leasing is destructive, which is why this works on a copy.
fn observe(dir: &Path, scratch: &Path, compact: bool) -> Observed {
    let _ = std::fs::remove_dir_all(scratch);
    common::copy_dir(dir, scratch);
    if compact {
        let store = Store::open(scratch, config()).expect("reopen for compaction");
        store.compact_now().expect("second compaction");
        store.close().unwrap();
    }
    let store = Store::open(scratch, config()).expect("reopen");
    let q = store.queue_with("q", queue_options()).unwrap();
    let q2 = store.queue_with("q2", queue_options()).unwrap();
    let dead = all_entries(&q.dlq());
    let imported = all_entries(&q2.dlq());
    let dlq_len = q.dlq().len();
    assert_eq!(dlq_len, dead.len() as u64);
    let mut ready = BTreeMap::new();
    loop {
        // Suspects (in flight at the kill) come one at a time; ack each to get the next.
        let batch = q.lease(1000).unwrap();
        if batch.is_empty() {
            break;
        }
        for m in &batch {
            let dup = ready.insert(m.id(), m.payload().to_vec());
            assert!(dup.is_none(), "message {} delivered twice", m.id());
        }
        q.ack_all(&batch).unwrap();
    }
    assert_eq!(
        q.dlq().len(),
        dlq_len,
        "draining the queue dead-lettered nothing"
    );
    assert_eq!(q2.stats().counts.ready, 0);
    drop((q, q2));
    store.close().unwrap();
    Observed {
        ready,
        dead,
        imported,
    }
}

fn check_entry(id: u64, entry: &DeadLetter, m: &Message, dlq_name: &str) {
    let (kind, message) = failure_of(m.seq);
    assert_eq!(entry.payload, payload(m.seq), "entry {id}: payload");
    assert_eq!(entry.failure.error_kind, kind, "entry {id}");
    assert_eq!(entry.failure.error_message, message, "entry {id}");
    assert_eq!(
        entry.failure.context.get("seq").map(String::as_str),
        Some("x")
    );
    assert_eq!(entry.dlq.worker.as_deref(), Some("child"), "entry {id}");
    assert_eq!(entry.dlq_name, dlq_name);
    // The final failure plus each retry before it, all kept in the envelope.
    let (lo, hi) = m.retries;
    let n = entry.failure.attempts.len();
    assert!(
        (lo + 1..=hi + 1).contains(&n),
        "entry {id}: {n} attempts, expected {}..={}",
        lo + 1,
        hi + 1
    );
    assert_eq!(entry.failure.attempts.last().unwrap().error_kind, kind);
    for a in &entry.failure.attempts[..n - 1] {
        assert_eq!(a.error_kind, "Flaky", "entry {id}: history");
    }
}

/// Checks what the store holds against the model, resolving the one call the child may
/// have been in the middle of, and updates the model to the state found.
fn verify(model: &mut Model, seen: &Observed) {
    let pending = model.pending.take();
    // Resolve the unanswered call from what the store holds.
    match &pending {
        Some(Pending::Enqueue { first, count }) => {
            let range = *first..*first + *count;
            for (&id, p) in &seen.ready {
                if let std::collections::btree_map::Entry::Vacant(slot) = model.msgs.entry(id) {
                    let seq = seq_of(p);
                    assert!(
                        range.contains(&seq),
                        "message {id} (seq {seq}) was never enqueued"
                    );
                    slot.insert(Message {
                        seq,
                        state: Known::Ready,
                        retries: (0, 0),
                    });
                }
            }
        }
        Some(Pending::Ack(ids)) => {
            for id in ids {
                if !seen.ready.contains_key(id) {
                    model.set(*id, Known::Ready, Known::Acked);
                }
            }
        }
        Some(Pending::DeadLetter(id)) if seen.dead.contains_key(id) => {
            model.set(*id, Known::Ready, Known::Dead);
        }
        Some(Pending::Retry(id)) => {
            // It happened or not; the envelope of a later dead-lettering tells.
            model.msgs.get_mut(id).unwrap().retries.1 += 1;
        }
        Some(Pending::Import(orig)) => {
            for (&id, e) in &seen.imported {
                if !model.msgs.contains_key(&id) {
                    let m = &model.msgs[orig];
                    assert_eq!(seq_of(&e.payload), m.seq, "imported entry {id}");
                    let retries = m.retries;
                    model.msgs.insert(
                        id,
                        Message {
                            seq: m.seq,
                            state: Known::Imported { orig: *orig },
                            retries,
                        },
                    );
                }
            }
        }
        Some(Pending::Delete(id)) if !seen.dead.contains_key(id) => {
            model.set(*id, Known::Dead, Known::Deleted);
        }
        Some(Pending::DeadLetter(_)) | Some(Pending::Delete(_)) | None => {}
    }
    // Now every message must be exactly where the model says, and nothing else anywhere.
    for (id, p) in &seen.ready {
        let m = model
            .msgs
            .get(id)
            .unwrap_or_else(|| panic!("unknown message {id} in q"));
        assert_eq!(m.state, Known::Ready, "message {id} found in the queue");
        assert!(p == &payload(m.seq), "message {id}: payload differs");
        assert!(
            !seen.dead.contains_key(id),
            "message {id} in the queue and its DLQ"
        );
    }
    for (id, e) in &seen.dead {
        let m = model
            .msgs
            .get(id)
            .unwrap_or_else(|| panic!("unknown entry {id} in q-dlq"));
        assert_eq!(m.state, Known::Dead, "entry {id} found in the DLQ");
        check_entry(*id, e, m, "q-dlq");
    }
    for (id, e) in &seen.imported {
        let m = model
            .msgs
            .get(id)
            .unwrap_or_else(|| panic!("unknown entry {id} in q2-dlq"));
        assert!(matches!(m.state, Known::Imported { .. }), "entry {id}");
        check_entry(*id, e, m, "q2-dlq");
    }
    for (id, m) in &model.msgs {
        let found = match m.state {
            Known::Ready => seen.ready.contains_key(id),
            Known::Dead => seen.dead.contains_key(id),
            Known::Imported { .. } => seen.imported.contains_key(id),
            Known::Acked | Known::Deleted => continue,
        };
        assert!(found, "message {id} ({:?}) lost", m.state);
    }
}

// ---- The parent ---------------------------------------------------------------------------

enum Death {
    Kill { after: Duration },
    Failpoint(&'static str),
}

/// Runs one child until it dies; feeds its lines to the model.
fn run_child(dir: &Path, scratch: &Path, seed: u64, run: u64, death: &Death, model: &mut Model) {
    let mut spec = ChildSpec::new("crash_compaction_child")
        .param("dir", dir.display())
        .param("seed", seed)
        .param("seq", run * SEQ_STRIDE);
    if let Death::Failpoint(name) = death {
        spec = spec.env("DEADLETTER_FAILPOINT", name);
    }
    let mut child = spec.spawn(scratch);
    let lines = match death {
        Death::Kill { after } => {
            let mut lines = child.wait_for(|l| l == "READY", Duration::from_secs(60));
            std::thread::sleep(*after);
            lines.extend(child.kill());
            lines
        }
        Death::Failpoint(name) => {
            let (status, lines) = child.wait(Duration::from_secs(120));
            assert_eq!(
                status.signal(),
                Some(6),
                "failpoint {name}: the child must abort there, not fail otherwise ({status:?})"
            );
            lines
        }
    };
    assert!(!lines.is_empty(), "the child printed nothing");
    for line in &lines {
        model.apply(line);
    }
}

#[test]
fn sigkill_and_failpoints_during_compaction_lose_and_duplicate_nothing() {
    let seed = common::seed();
    let kills: u64 = common::env_number("DEADLETTER_CRASH_COMPACTION_KILLS", 8);
    println!(
        "crash_compaction: seed {seed} (DEADLETTER_SEED), {kills} kills + {} failpoints",
        FAILPOINTS.len()
    );
    let mut rng = Rng::new(seed);
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("store");
    let mut model = Model::default();
    // Failpoints spread among the kills.
    let mut deaths: Vec<Death> = (0..kills)
        .map(|_| Death::Kill {
            after: Duration::from_millis(100 + rng.below(2400)),
        })
        .collect();
    for (i, fp) in FAILPOINTS.iter().enumerate() {
        let at = ((i as u64 * 2 + 1).min(deaths.len() as u64)) as usize;
        deaths.insert(at, Death::Failpoint(fp));
    }
    let started = Instant::now();
    let mut during = 0u64;
    for (run, death) in deaths.iter().enumerate() {
        let run = run as u64 + 1;
        let before = (model.compactions, model.relocated, model.deleted_segments);
        model.in_compaction = false;
        run_child(&dir, root.path(), rng.next_u64(), run, death, &mut model);
        during += u64::from(model.in_compaction);
        let with_compaction = observe(&dir, &root.path().join("check-a"), true);
        let without = observe(&dir, &root.path().join("check-b"), false);
        assert_eq!(
            with_compaction, without,
            "run {run}: a compaction and reopen changed what the store holds"
        );
        verify(&mut model, &without);
        let live = model
            .msgs
            .values()
            .filter(|m| !matches!(m.state, Known::Acked | Known::Deleted))
            .count();
        let segments = std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name().into_string().unwrap();
                deadletter::sim::parse_segment_name(&name).is_some()
            })
            .count();
        println!(
            "run {run:>2} {:<34} {} compactions {:>3}, relocated {:>5}, segments deleted {:>3}; {} messages known, {live} live, {segments} segments",
            match death {
                Death::Kill { after } => format!("SIGKILL after {after:?}"),
                Death::Failpoint(name) => format!("failpoint {name}"),
            },
            if model.in_compaction { "(in a compaction)" } else { "(between runs)   " },
            model.compactions - before.0,
            model.relocated - before.1,
            model.deleted_segments - before.2,
            model.msgs.len(),
        );
    }
    assert!(model.relocated > 0, "no record was ever relocated");
    assert!(model.deleted_segments > 0, "no segment was ever deleted");
    println!(
        "crash_compaction: {} runs ({during} died inside a compaction) in {:.1?}",
        deaths.len(),
        started.elapsed()
    );
}
