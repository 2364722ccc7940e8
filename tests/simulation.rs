//! Deterministic simulation: random workloads driven by one `u64` seed against the simulated
//! disk (`deadletter::sim::SimDisk`) behind a fault injector (`FaultyFs`), with a manual
//! clock, power cuts, injected I/O errors, bit rot, foreign files and a second opener, all at
//! random points. An in-memory model tracks, for every message, the places it may be in
//! (an operation that failed may or may not have happened: both are allowed) and checks the
//! store after every reopen (and now and then while it runs):
//! - no message whose enqueue returned `Ok` (durability `Always`) is lost, unless it was
//!   acked, deleted, purged or expired (or an operation that would do so failed);
//! - nothing is delivered or listed that was never enqueued; payloads are byte-identical;
//! - a message is in its queue or in its DLQ, never both, never neither;
//! - damage to synced data (a flipped bit in a sealed segment) is reported as
//!   `Error::Corruption` and never returned as data, in both recovery modes;
//! - opening twice (with or without a power cut between) gives the same state;
//! - an error while opening (a fault injected during recovery) is survivable: a later clean
//!   open works and is consistent;
//! - reads that fail at random (EIO from `read_at`, `map`, `len`) for a window of steps while
//!   the workload goes on (every seed has at least one window) surface as typed I/O errors,
//!   never as a panic or wrong bytes, and once they stop the running store reads every
//!   message and fits the model without a reopen;
//! - a disk filled to the brim (every seed, once: a `SimDisk` with a size) is recovered by
//!   compaction alone once consumers have acked: compaction on the full disk returns `Ok`,
//!   frees every sealed segment when nothing is live, and writes resume once a segment's
//!   worth is free; a log poisoned meanwhile reopens on the full disk.
//!
//! `loss_bounds` checks the weaker durability policies (`Never`, `Interval`) at the log level:
//! a power cut loses only records acknowledged after the last sync, as a prefix.
//!
//! Run one seed: `DEADLETTER_SIM_SEED=1234 cargo test --release --features sim --test simulation -- --nocapture`.
//! Run more: `DEADLETTER_SIM_SEEDS=10000 DEADLETTER_SIM_START=0 cargo test --release --features sim --test simulation`
//! (`DEADLETTER_SIM_THREADS=N` runs the seeds on N threads; the loss bounds take the same
//! seed range, per policy).

mod common;
#[path = "simulation/loss_bounds.rs"]
mod loss_bounds;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::T0;
use deadletter::clock::ManualClock;
use deadletter::queue::{EnqueueOptions, FailureOutcome, FailureReport, MessageId, QueueOptions};
use deadletter::recovery::RecoveryMode;
use deadletter::sim::inspect::{census, Entry, Where};
use deadletter::sim::Vfs;
use deadletter::sim::{Fault, FaultyFs, OpKinds, SimDisk, SimRng};
use deadletter::store::{CompactionOptions, Durability};
use deadletter::{Config, Error, Failure, Filter, Message, Queue, ReplayOptions, Store};

const ROOT: &str = "/sim";
const DIR: &str = "/sim/store";
const RETENTION_MS: u64 = 2 * 3600 * 1000;
const VISIBILITY_MS: u64 = 30_000;
/// Queues: name and whether expired messages go to the DLQ.
const QUEUES: [(&str, bool); 3] = [("a", true), ("b", false), ("c", true)];
/// The store's segment size.
const SEGMENT_SIZE: u64 = 80 << 10;
/// Rounds of draining and compaction on a full disk.
const FULL_DISK_ROUNDS: usize = 10;
/// Default number of seeds (CI, debug build).
const DEFAULT_SEEDS: u64 = 300;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Loc {
    Main(usize),
    Dlq(usize),
    Gone,
}

#[derive(Debug, Clone)]
struct MsgModel {
    /// Payload versions (a corrected replay adds one).
    payloads: Vec<Vec<u8>>,
    /// Places it may be in, with the payload version it has there.
    poss: BTreeSet<(Loc, usize)>,
    /// Absolute TTL deadline, if it had one.
    ttl_at: Option<u64>,
    /// A lease of it may have been lost (so the store may dead-letter it on its own).
    ever_leased: bool,
    /// The earliest time it may have entered a DLQ (for retention).
    dead_from: Option<u64>,
}

struct Held {
    msg: Message,
    q: usize,
    deadline: u64,
    /// False once the lease may have expired or an operation on it failed.
    sure: bool,
}

struct Live {
    store: Store,
    queues: Vec<Queue>,
    held: Vec<Held>,
}

struct Sim {
    seed: u64,
    rng: SimRng,
    disk: SimDisk,
    fs: FaultyFs,
    clock: ManualClock,
    now_max: u64,
    relocate_below: f64,
    model: BTreeMap<MessageId, MsgModel>,
    /// Messages gone for good, with the payloads they had (quarantine may bring one back).
    gone: BTreeMap<MessageId, Vec<Vec<u8>>>,
    /// Enqueues that failed: (queue, payload, ttl deadline); they may exist.
    maybe_new: Vec<(usize, Vec<u8>, Option<u64>)>,
    live: Option<Live>,
    /// Faults were injected since the last clean open: I/O errors are expected.
    faulty: bool,
    /// A crash point is armed: the first injected fault is followed by a power cut.
    crash_armed: bool,
    /// Steps left in the current window of read errors (0: reads work).
    read_window: u64,
    /// The disk's size while it is being filled to the brim (`None`: unlimited); kept
    /// across the reopens that happen meanwhile.
    capacity: Option<u64>,
    trace: Vec<String>,
    stats: RunStats,
}

#[derive(Debug, Default, Clone, Copy)]
struct RunStats {
    ops: u64,
    reopens: u64,
    power_cuts: u64,
    faults: u64,
    bitrot: u64,
    bitrot_detected: u64,
    failed_opens: u64,
    /// Windows of steps during which reads failed at random.
    read_windows: u64,
    /// Reads that failed in them.
    read_errors: u64,
    /// Disks filled to the brim that compaction then had to recover.
    full_disks: u64,
    /// Of those, how many the consumers and compaction emptied (every message gone).
    full_disk_emptied: u64,
    /// Segments those compactions deleted.
    full_disk_segments_freed: u64,
    /// Of those disks, how many took writes again right after the compaction.
    full_disk_writes_resumed: u64,
    /// Reopens on a full disk (the log was poisoned, by a batch cut short: see bug 2).
    full_disk_reopens: u64,
}

fn dir() -> PathBuf {
    PathBuf::from(DIR)
}

fn is_fault_error(e: &Error) -> bool {
    matches!(
        e,
        Error::Io { .. } | Error::DiskFull { .. } | Error::Poisoned
    )
}

fn is_logical_error(e: &Error) -> bool {
    matches!(
        e,
        Error::NotFound(_) | Error::InvalidState { .. } | Error::AlreadyReprocessed(_)
    )
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let mut rng = SimRng::new(seed);
        let disk = SimDisk::new();
        disk.create_dir_all(Path::new(ROOT)).unwrap();
        disk.sync_dir(Path::new("/")).unwrap();
        let fs = FaultyFs::new(Arc::new(disk.clone()), rng.next_u64());
        let relocate_below = *rng.pick(&[0.0, 0.5, 0.9, 1.0]).unwrap();
        Sim {
            seed,
            rng,
            disk,
            fs,
            clock: ManualClock::new(T0),
            now_max: T0,
            relocate_below,
            model: BTreeMap::new(),
            gone: BTreeMap::new(),
            maybe_new: Vec::new(),
            live: None,
            faulty: false,
            crash_armed: false,
            read_window: 0,
            capacity: None,
            trace: Vec::new(),
            stats: RunStats::default(),
        }
    }

    fn now(&self) -> u64 {
        use deadletter::clock::Clock;
        self.clock.now_ms()
    }

    fn note(&mut self, s: impl Into<String>) {
        self.trace.push(s.into());
        if self.trace.len() > 60 && std::env::var_os("DEADLETTER_SIM_TRACE_ALL").is_none() {
            self.trace.remove(0);
        }
    }

    fn fail(&self, what: impl std::fmt::Display) -> ! {
        panic!(
            "seed {} failed: {what}\nlast events:\n  {}\nfiles (durable): {:?}\nreplay: DEADLETTER_SIM_SEED={} cargo test --release --features sim --test simulation -- --nocapture (DEADLETTER_SIM_TRACE_ALL=1 for every event)",
            self.seed,
            self.trace.join("\n  "),
            self.disk.durable_list(&dir()),
            self.seed
        );
    }

    fn config(&self, recovery: RecoveryMode, fs: Arc<dyn Vfs>) -> Config {
        Config::default()
            .durability(Durability::Always)
            .segment_size(SEGMENT_SIZE)
            .max_message_size(8 << 10)
            .retention(Some(Duration::from_millis(RETENTION_MS)))
            .max_history(3)
            .recovery(recovery)
            .queue_defaults(
                QueueOptions::default()
                    .max_attempts(3)
                    .visibility_timeout(Duration::from_millis(VISIBILITY_MS))
                    .expired_to_dlq(true),
            )
            .compaction(
                CompactionOptions::default()
                    .interval(None)
                    .relocate_below(self.relocate_below)
                    .batch(16)
                    .max_forward_jump(Duration::from_secs(3600)),
            )
            .vfs(fs)
            .clock(self.clock.clone())
    }

    fn open_store(&self, recovery: RecoveryMode, fs: Arc<dyn Vfs>) -> Result<Live, Error> {
        let store = Store::open(dir(), self.config(recovery, fs))?;
        let mut queues = Vec::new();
        for (name, to_dlq) in QUEUES {
            queues.push(store.queue_with(
                name,
                store.config().queue_defaults.clone().expired_to_dlq(to_dlq),
            )?);
        }
        Ok(Live {
            store,
            queues,
            held: Vec::new(),
        })
    }

    // ---- the model -------------------------------------------------------------------

    /// Every place a message may be in now, including what the store may have done on its
    /// own (TTL expiry, dead-lettering after a lost lease, DLQ retention).
    fn allowed(&self, m: &MsgModel) -> BTreeSet<(Loc, usize)> {
        let mut out = m.poss.clone();
        let mut frontier: Vec<_> = out.iter().copied().collect();
        let ttl_due = m.ttl_at.is_some_and(|t| t <= self.now_max);
        while let Some((loc, v)) = frontier.pop() {
            let mut next = Vec::new();
            match loc {
                Loc::Main(q) => {
                    if m.ever_leased || (ttl_due && QUEUES[q].1) {
                        next.push(Loc::Dlq(q));
                    }
                    if ttl_due && !QUEUES[q].1 {
                        next.push(Loc::Gone);
                    }
                }
                Loc::Dlq(_) => {
                    if m.dead_from
                        .is_some_and(|t| t + RETENTION_MS <= self.now_max)
                    {
                        next.push(Loc::Gone);
                    }
                }
                Loc::Gone => {}
            }
            for l in next {
                if out.insert((l, v)) {
                    frontier.push((l, v));
                }
            }
        }
        out
    }

    fn loc_of(e: &Entry) -> Loc {
        let q = QUEUES
            .iter()
            .position(|(n, _)| *n == e.queue)
            .expect("a known queue");
        match e.place {
            Where::Ready | Where::Leased => Loc::Main(q),
            Where::Dead => Loc::Dlq(q),
        }
    }

    fn set_dead_from(m: &mut MsgModel, t: u64) {
        m.dead_from = Some(m.dead_from.map_or(t, |d| d.min(t)));
    }

    /// Adds places a failed operation may have moved `id` to.
    fn maybe(&mut self, id: MessageId, f: impl Fn(Loc, usize) -> Option<(Loc, usize)>) {
        let now = self.now();
        let Some(base) = self.model.get(&id).map(|m| self.allowed(m)) else {
            return;
        };
        if let Some(m) = self.model.get_mut(&id) {
            let extra: Vec<_> = base.iter().filter_map(|&(l, v)| f(l, v)).collect();
            for (l, v) in extra {
                if matches!(l, Loc::Dlq(_)) {
                    Self::set_dead_from(m, now);
                }
                m.poss.insert((l, v));
            }
        }
    }

    /// Sets the place of `id` after an operation that succeeded.
    fn definite(&mut self, id: MessageId, f: impl Fn(Loc, usize) -> Option<(Loc, usize)>) {
        let now = self.now();
        let Some(m) = self.model.get(&id) else {
            self.fail(format!(
                "the store acted on message {id}, which the model does not know"
            ));
        };
        let allowed = self.allowed(m);
        let next: BTreeSet<_> = allowed.iter().filter_map(|&(l, v)| f(l, v)).collect();
        if next.is_empty() {
            self.fail(format!(
                "an operation on {id} succeeded although none of its possible places {allowed:?} allows it"
            ));
        }
        let m = self.model.get_mut(&id).unwrap();
        if next.iter().any(|(l, _)| matches!(l, Loc::Dlq(_))) {
            Self::set_dead_from(m, now);
        }
        m.poss = next;
    }

    /// Checks a store's census against the model; with `collapse`, the model then takes
    /// the census as the truth (after a reopen, everything in it is durable).
    fn check_census(&mut self, c: &BTreeMap<MessageId, Entry>, collapse: bool, lossy: bool) {
        if lossy {
            // Quarantine skips damaged records, so a message may show an earlier state (or
            // come back): only check that every byte returned is a payload it really had.
            for (&id, e) in c {
                let known = self
                    .model
                    .get(&id)
                    .map(|m| m.payloads.contains(&e.payload))
                    .or_else(|| self.gone.get(&id).map(|p| p.contains(&e.payload)))
                    .unwrap_or(false)
                    || self.maybe_new.iter().any(|(_, p, _)| *p == e.payload);
                if !known {
                    self.fail(format!(
                        "quarantine returned {} bytes for {id} that it never had",
                        e.payload.len()
                    ));
                }
            }
            return;
        }
        for (&id, e) in c {
            if e.place == Where::Leased && collapse {
                self.fail(format!("message {id} is leased right after open"));
            }
            let loc = Self::loc_of(e);
            if let Some(m) = self.model.get(&id) {
                let allowed = self.allowed(m);
                let ok = allowed
                    .iter()
                    .any(|&(l, v)| l == loc && m.payloads[v] == e.payload);
                if !ok {
                    let actual_payload_known = m.payloads.contains(&e.payload);
                    self.fail(format!(
                        "message {id} is at {loc:?} (payload known: {actual_payload_known}, {} bytes), model allows {allowed:?}",
                        e.payload.len()
                    ));
                }
            } else if self.gone.contains_key(&id) {
                self.fail(format!("message {id} came back after it was gone for good"));
            } else {
                let q = match loc {
                    Loc::Main(q) | Loc::Dlq(q) => q,
                    Loc::Gone => unreachable!(),
                };
                let Some(i) = self
                    .maybe_new
                    .iter()
                    .position(|(mq, p, _)| *mq == q && *p == e.payload)
                else {
                    self.fail(format!(
                        "message {id} at {loc:?} ({} bytes) was never enqueued",
                        e.payload.len()
                    ));
                };
                if collapse {
                    let (_, payload, ttl_at) = self.maybe_new.remove(i);
                    self.model.insert(
                        id,
                        MsgModel {
                            payloads: vec![payload],
                            poss: [(loc, 0)].into(),
                            ttl_at,
                            ever_leased: e.attempts > 0,
                            dead_from: e.dead_at_ms.or(ttl_at),
                        },
                    );
                }
            }
        }
        let ids: Vec<MessageId> = self.model.keys().copied().collect();
        for id in ids {
            if c.contains_key(&id) {
                continue;
            }
            let allowed = self.allowed(&self.model[&id]);
            if !lossy && !allowed.iter().any(|(l, _)| *l == Loc::Gone) {
                self.fail(format!(
                    "message {id} is lost: the model allows only {allowed:?}"
                ));
            }
        }
        if !collapse {
            return;
        }
        for id in self.model.keys().copied().collect::<Vec<_>>() {
            match c.get(&id) {
                None => {
                    let m = self.model.remove(&id).unwrap();
                    self.gone.insert(id, m.payloads);
                }
                Some(e) => {
                    let loc = Self::loc_of(e);
                    let m = self.model.get_mut(&id).unwrap();
                    let v = m
                        .payloads
                        .iter()
                        .position(|p| *p == e.payload)
                        .expect("checked above");
                    m.poss = [(loc, v)].into();
                    m.ever_leased |= e.attempts > 0;
                    if let Some(at) = e.dead_at_ms {
                        Self::set_dead_from(m, at);
                    }
                }
            }
        }
        self.maybe_new.clear();
    }

    // ---- opening, power cuts, damage ---------------------------------------------------

    fn live(&mut self) -> &mut Live {
        self.live.as_mut().expect("open")
    }

    /// Closes the store (cleanly, or by a power cut), then reopens it, with the checks.
    fn reopen(&mut self, cut: bool) {
        self.stats.reopens += 1;
        let live = self.live.take();
        if cut {
            self.stats.power_cuts += 1;
            let s = self.rng.next_u64();
            self.note(format!("power cut {s}"));
            self.disk.power_cut(s);
        } else {
            self.note("close");
        }
        drop(live);
        self.fs.clear();
        self.fs.set_disk_full(false);
        self.end_read_window();
        self.disk.set_capacity(self.capacity);
        self.crash_armed = false;
        // A foreign file: ignored by the store.
        if self.rng.chance(0.03) {
            let name = *self
                .rng
                .pick(&[
                    "notes.txt",
                    "00000000000000000001.seg.bak",
                    "core",
                    ".hidden",
                ])
                .unwrap();
            let n = self.rng.index(300);
            let bytes = self.rng.bytes(n);
            self.note(format!("foreign file {name}"));
            self.disk.write_durable(&dir().join(name), &bytes);
        }
        // Bit rot in a sealed segment.
        let mut flipped = None;
        if self.rng.chance(0.06) {
            flipped = self.flip_sealed_bit();
        }
        // A fault while opening.
        if self.rng.chance(0.15) {
            self.open_with_fault(flipped.is_some());
        }
        let live = match self.open_store(RecoveryMode::Strict, Arc::new(self.fs.clone())) {
            Ok(l) => l,
            Err(Error::Corruption { .. }) if flipped.is_some() => {
                self.stats.bitrot_detected += 1;
                self.note("bit rot detected at open");
                self.check_quarantine_open();
                let (path, bit) = flipped.take().unwrap();
                self.disk.flip_durable_bit(&path, bit);
                match self.open_store(RecoveryMode::Strict, Arc::new(self.fs.clone())) {
                    Ok(l) => l,
                    Err(e) => self.fail(format!("open after repairing the flipped bit: {e}")),
                }
            }
            Err(e) => self.fail(format!("clean open failed: {e} (flipped: {flipped:?})")),
        };
        self.live = Some(live);
        // A disk that is still full makes writes fail with `DiskFull`.
        self.faulty = self.capacity.is_some();
        let c = match census(&self.live().store) {
            Ok(c) => c,
            Err(e) => self.fail(format!("census after open: {e}")),
        };
        self.check_census(&c, true, false);
        if let Some((path, bit)) = flipped {
            // The flip was in bytes no record uses (a sealed segment's zero tail): undo it.
            self.disk.flip_durable_bit(&path, bit);
        }
        // Opening twice gives the same state (with or without a power cut between).
        if self.rng.chance(0.2) {
            let cut = self.rng.chance(0.5);
            self.live = None;
            if cut {
                let s = self.rng.next_u64();
                self.disk.power_cut(s);
            }
            self.note(format!("open again (cut: {cut})"));
            let live = match self.open_store(RecoveryMode::Strict, Arc::new(self.fs.clone())) {
                Ok(l) => l,
                Err(e) => self.fail(format!("second open failed: {e}")),
            };
            let again = match census(&live.store) {
                Ok(c) => c,
                Err(e) => self.fail(format!("census after the second open: {e}")),
            };
            if again != c {
                let diff: Vec<_> = c
                    .iter()
                    .filter(|(id, e)| again.get(id) != Some(e))
                    .map(|(id, _)| *id)
                    .chain(again.keys().filter(|id| !c.contains_key(id)).copied())
                    .take(5)
                    .collect();
                self.fail(format!(
                    "opening twice gave different states (ids {diff:?})"
                ));
            }
            self.live = Some(live);
        }
    }

    /// Opens with a fault injected during recovery; whatever happens, a later clean open
    /// must work (checked by the caller).
    fn open_with_fault(&mut self, damaged: bool) {
        let n = self.rng.below(40);
        let kinds = *self
            .rng
            .pick(&[
                OpKinds::ALL,
                OpKinds::MUTATING,
                OpKinds::WRITE,
                OpKinds::SYNC,
                OpKinds::OPEN.or(OpKinds::MAP).or(OpKinds::READ),
                OpKinds::LIST.or(OpKinds::REMOVE).or(OpKinds::CREATE),
            ])
            .unwrap();
        let fault = *self
            .rng
            .pick(&[
                Fault::Eio,
                Fault::Enospc,
                Fault::ShortWrite,
                Fault::FailedSync,
            ])
            .unwrap();
        let from = self.rng.chance(0.5);
        if from {
            self.fs.fail_from(n, kinds, fault);
        } else {
            self.fs.fail_nth(n, kinds, fault);
        }
        let full = self.rng.chance(0.1);
        self.fs.set_disk_full(full);
        self.note(format!(
            "open with fault {fault:?} at {} op {n} of {} (disk full: {full})",
            if from { "every" } else { "one" },
            kinds.name()
        ));
        let r = self.open_store(RecoveryMode::Strict, Arc::new(self.fs.clone()));
        self.fs.clear();
        self.fs.set_disk_full(false);
        match r {
            Ok(live) => {
                // The fault did not matter (or hit nothing); the store must be consistent.
                let c = census(&live.store);
                drop(live);
                if let Err(e) = c {
                    if !is_fault_error(&e) {
                        self.fail(format!("census after an open with a fault: {e}"));
                    }
                }
            }
            Err(e) if is_fault_error(&e) || (damaged && e.is_corruption()) => {
                self.stats.failed_opens += 1;
                self.note(format!("open failed: {e}"));
            }
            Err(e) => self.fail(format!("a fault during open gave a non-I/O error: {e}")),
        }
        if self.rng.chance(0.5) {
            let s = self.rng.next_u64();
            self.note("power cut after the failed open");
            self.disk.power_cut(s);
        }
    }

    fn flip_sealed_bit(&mut self) -> Option<(PathBuf, u64)> {
        let mut segs: Vec<String> = self
            .disk
            .durable_list(&dir())
            .into_iter()
            .filter(|n| deadletter::sim::parse_segment_name(n).is_some())
            .collect();
        segs.sort();
        segs.pop()?; // the last one is active
        let name = self.rng.pick(&segs)?.clone();
        let path = dir().join(&name);
        let len = self.disk.durable_bytes(&path)?.len() as u64;
        let bit = self.rng.below(len * 8);
        self.disk.flip_durable_bit(&path, bit);
        self.stats.bitrot += 1;
        self.note(format!("bit rot: {name} bit {bit}"));
        Some((path, bit))
    }

    /// Opens a copy of the damaged disk in quarantine mode: it may lose messages but must
    /// return nothing that was never written.
    fn check_quarantine_open(&mut self) {
        let fork = self.disk.fork();
        match self.open_store(RecoveryMode::Quarantine, Arc::new(fork)) {
            Ok(live) => match census(&live.store) {
                Ok(c) => self.check_census(&c, false, true),
                Err(e) if e.is_corruption() => {}
                Err(e) => self.fail(format!("census under quarantine: {e}")),
            },
            Err(e) if e.is_corruption() => {}
            Err(e) => self.fail(format!(
                "quarantine open failed with a non-corruption error: {e}"
            )),
        }
    }

    // ---- operations --------------------------------------------------------------------

    fn payload(&mut self) -> Vec<u8> {
        let n = match self.rng.below(20) {
            0 => self.rng.range(2000, 8 << 10),
            1..=5 => self.rng.range(200, 2000),
            _ => self.rng.range(1, 200),
        } as usize;
        let mut p = self.rng.bytes(n);
        // Distinct payloads make every check sharper.
        let tag = self.rng.next_u64().to_le_bytes();
        for (i, b) in tag.iter().enumerate() {
            if i < p.len() {
                p[i] = *b;
            }
        }
        p
    }

    /// Handles an operation's error: logical errors change nothing; I/O errors are allowed
    /// only while faults are injected.
    fn on_error(&mut self, what: &str, e: &Error) {
        self.note(format!("{what} -> error {e}"));
        if is_fault_error(e) {
            if !self.faulty && self.fs.injected() == 0 {
                self.fail(format!(
                    "{what} failed with an I/O error and no fault was injected: {e}"
                ));
            }
            self.faulty = true;
            return;
        }
        if !is_logical_error(e) {
            self.fail(format!("{what} failed unexpectedly: {e}"));
        }
    }

    /// A random enqueue; true when it was refused for want of space.
    fn enqueue(&mut self) -> bool {
        let q = self.rng.index(QUEUES.len());
        let big = self.rng.chance(0.03);
        let count = if big {
            self.rng.range(8, 30)
        } else if self.rng.chance(0.3) {
            self.rng.range(2, 8)
        } else {
            1
        } as usize;
        let payloads: Vec<Vec<u8>> = (0..count)
            .map(|_| {
                if big {
                    let n = self.rng.range(4000, 8 << 10) as usize;
                    self.rng.bytes(n)
                } else {
                    self.payload()
                }
            })
            .collect();
        let mut options = EnqueueOptions::new();
        if count == 1 && self.rng.chance(0.2) {
            options = options.delay(Duration::from_millis(self.rng.below(120_000)));
        }
        let mut ttl_at = None;
        if self.rng.chance(0.15) {
            let ttl = self.rng.range(1, 3_600_000);
            options = options.ttl(Duration::from_millis(ttl));
            ttl_at = Some(self.now() + ttl);
        }
        let queue = self.live().queues[q].clone();
        let r = if count == 1 && options != EnqueueOptions::new() {
            queue
                .enqueue_with(&payloads[0], &options)
                .map(|id| vec![id])
        } else if count == 1 {
            queue.enqueue(&payloads[0]).map(|id| vec![id])
        } else {
            queue.enqueue_batch(&payloads)
        };
        let what = format!("enqueue {count} to {}", QUEUES[q].0);
        match r {
            Ok(ids) => {
                self.note(format!("{what} -> {ids:?}"));
                if count > 1 && ttl_at.is_some() {
                    ttl_at = None; // batches take no options
                }
                for (id, p) in ids.into_iter().zip(payloads) {
                    if self.model.contains_key(&id) || self.gone.contains_key(&id) {
                        self.fail(format!("enqueue returned id {id}, which was used before"));
                    }
                    self.model.insert(
                        id,
                        MsgModel {
                            payloads: vec![p],
                            poss: [(Loc::Main(q), 0)].into(),
                            ttl_at,
                            ever_leased: false,
                            dead_from: ttl_at,
                        },
                    );
                }
            }
            Err(e) => {
                self.on_error(&what, &e);
                if is_fault_error(&e) {
                    let ttl = if count > 1 { None } else { ttl_at };
                    for p in payloads {
                        self.maybe_new.push((q, p, ttl));
                    }
                }
                return matches!(e, Error::DiskFull { .. });
            }
        }
        false
    }

    fn lease(&mut self) {
        let q = self.rng.index(QUEUES.len());
        let max = self.rng.range(1, 6) as usize;
        self.lease_from(q, max);
    }

    /// Leases up to `max` messages from queue `q`; returns how many it got.
    fn lease_from(&mut self, q: usize, max: usize) -> usize {
        let queue = self.live().queues[q].clone();
        let now = self.now();
        let what = format!("lease {max} from {}", QUEUES[q].0);
        match queue.lease(max) {
            Ok(msgs) => {
                self.note(format!(
                    "{what} -> {:?}",
                    msgs.iter().map(|m| m.id()).collect::<Vec<_>>()
                ));
                let got = msgs.len();
                for msg in msgs {
                    let id = msg.id();
                    if self.held_index(id).is_some() {
                        // Delivered again while we hold it: only if our lease may be over.
                        let i = self.held_index(id).unwrap();
                        if self.live().held[i].sure {
                            self.fail(format!("message {id} was delivered twice at once"));
                        }
                        self.live().held.remove(i);
                    }
                    if !self.model.contains_key(&id) {
                        let known = self
                            .maybe_new
                            .iter()
                            .any(|(mq, p, _)| *mq == q && p.as_slice() == msg.payload());
                        if !known {
                            self.fail(format!("lease delivered {id}, which was never enqueued"));
                        }
                        continue; // a failed enqueue that happened after all
                    }
                    let payload = msg.payload().to_vec();
                    self.definite(id, |l, v| (l == Loc::Main(q)).then_some((l, v)));
                    let m = self.model.get_mut(&id).unwrap();
                    let Some(v) = m.payloads.iter().position(|p| *p == payload) else {
                        self.fail(format!("lease of {id} returned a payload never enqueued"));
                    };
                    if !m.poss.contains(&(Loc::Main(q), v)) {
                        self.fail(format!("lease of {id} returned an outdated payload"));
                    }
                    m.poss = [(Loc::Main(q), v)].into();
                    m.ever_leased = true;
                    Self::set_dead_from(m, now);
                    self.live().held.push(Held {
                        msg,
                        q,
                        deadline: now + VISIBILITY_MS,
                        sure: true,
                    });
                }
                got
            }
            Err(e) => {
                self.on_error(&what, &e);
                for m in self.model.values_mut() {
                    if m.poss.iter().any(|(l, _)| *l == Loc::Main(q)) {
                        m.ever_leased = true;
                        Self::set_dead_from(m, now);
                    }
                }
                0
            }
        }
    }

    fn held_index(&mut self, id: MessageId) -> Option<usize> {
        self.live().held.iter().position(|h| h.msg.id() == id)
    }

    fn finish_lease(&mut self) {
        if self.live().held.is_empty() {
            return;
        }
        let n = self.live().held.len();
        let i = self.rng.index(n);
        let kind = self.rng.below(10);
        self.finish_held(i, kind);
    }

    /// Ends the lease of held message `i`: an ack (`kind` 0 to 3), a retry (4 to 6), a
    /// dead-lettering (7, 8) or a release (9).
    fn finish_held(&mut self, i: usize, kind: u64) {
        let h = self.live().held.remove(i);
        let id = h.msg.id();
        let q = h.q;
        let queue = self.live().queues[q].clone();
        let now = self.now();
        let (what, r): (String, Result<Option<Loc>, Error>) = match kind {
            0..=3 => ("ack".into(), queue.ack(&h.msg).map(|_| Some(Loc::Gone))),
            4..=6 => {
                let permanent = self.rng.chance(0.3);
                let f = if permanent {
                    Failure::permanent("Bad", "permanent failure")
                } else {
                    Failure::transient("Flaky", "transient failure")
                };
                let at = now + self.rng.below(60_000);
                let r = queue.retry(&h.msg, &FailureReport::new(&f), at);
                if permanent && matches!(r, Ok(FailureOutcome::Retried { .. })) {
                    self.fail(format!("a permanent failure of {id} was retried"));
                }
                (
                    format!("retry (permanent: {permanent})"),
                    r.map(|o| match o {
                        FailureOutcome::Retried { .. } => Some(Loc::Main(q)),
                        FailureOutcome::DeadLettered => Some(Loc::Dlq(q)),
                    }),
                )
            }
            7..=8 => {
                let f = Failure::permanent("Poison", "dead-lettered by the test");
                (
                    "dead_letter".into(),
                    queue
                        .dead_letter(&h.msg, &FailureReport::new(&f))
                        .map(|_| Some(Loc::Dlq(q))),
                )
            }
            _ => {
                let delay = Duration::from_millis(self.rng.below(10_000));
                (
                    "release".into(),
                    queue.release(&h.msg, delay).map(|_| Some(Loc::Main(q))),
                )
            }
        };
        let what = format!("{what} {id}");
        match r {
            Ok(Some(to)) => {
                self.note(format!("{what} -> {to:?}"));
                self.definite(id, |l, v| (l == Loc::Main(q)).then_some((to, v)));
            }
            Ok(None) => {}
            Err(e) => {
                if is_logical_error(&e) && h.sure {
                    self.fail(format!("{what}: the store refused a lease it granted: {e}"));
                }
                self.on_error(&what, &e);
                if is_fault_error(&e) {
                    let targets: Vec<Loc> = match kind {
                        0..=3 => vec![Loc::Gone],
                        4..=6 => vec![Loc::Main(q), Loc::Dlq(q)],
                        7..=8 => vec![Loc::Dlq(q)],
                        _ => vec![],
                    };
                    for t in targets {
                        self.maybe(id, |l, v| (l == Loc::Main(q)).then_some((t, v)));
                    }
                }
            }
        }
    }

    /// DLQ entries of queue `q` per the live store (`None`: an injected read error).
    fn dlq_ids(&mut self, q: usize) -> Option<Vec<MessageId>> {
        let dlq = self.live().queues[q].dlq();
        match dlq.ids(&Filter::all(), None) {
            Ok(ids) => Some(ids),
            Err(e) if is_fault_error(&e) && self.fs.read_errors_on() => {
                self.note(format!("listing the DLQ -> error {e}"));
                None
            }
            Err(e) => self.fail(format!("listing the DLQ: {e}")),
        }
    }

    fn dlq_op(&mut self) {
        let q = self.rng.index(QUEUES.len());
        let Some(ids) = self.dlq_ids(q) else { return };
        for id in &ids {
            if !self.model.contains_key(id) && !self.maybe_new.iter().any(|(mq, ..)| *mq == q) {
                self.fail(format!("the DLQ lists {id}, which was never enqueued"));
            }
        }
        let dlq = self.live().queues[q].dlq();
        let pick = self.rng.pick(&ids).copied();
        let target = if self.rng.chance(0.3) {
            self.rng.index(QUEUES.len())
        } else {
            q
        };
        let mut options = if target == q {
            ReplayOptions::to_origin()
        } else {
            ReplayOptions::to_queue(QUEUES[target].0)
        };
        if self.rng.chance(0.5) {
            options = options.reset_attempts();
        }
        if self.rng.chance(0.2) {
            options = options.force();
        }
        match self.rng.below(7) {
            0 | 1 => {
                let limit = self.rng.range(1, 5) as usize;
                let candidates: Vec<_> = ids.iter().copied().take(limit).collect();
                let what = format!(
                    "replay {limit} from {}-dlq to {}",
                    QUEUES[q].0, QUEUES[target].0
                );
                match dlq.replay(&Filter::all(), &options.clone().limit(limit)) {
                    Ok(report) => {
                        self.note(format!("{what} -> {:?}", report.replayed));
                        for id in report.replayed {
                            if !self.model.contains_key(&id) {
                                continue; // a maybe-enqueue, dead-lettered live
                            }
                            self.definite(id, |l, v| {
                                (l == Loc::Dlq(q)).then_some((Loc::Main(target), v))
                            });
                        }
                    }
                    Err(e) => {
                        self.on_error(&what, &e);
                        if is_fault_error(&e) {
                            for id in candidates {
                                self.maybe(id, |l, v| {
                                    (l == Loc::Dlq(q)).then_some((Loc::Main(target), v))
                                });
                            }
                        }
                    }
                }
            }
            2 => {
                let Some(id) = pick else { return };
                let corrected = self.payload();
                let what = format!("replay {id} corrected to {}", QUEUES[target].0);
                let r = dlq.replay_corrected(id, &corrected, &options);
                let known = self.model.contains_key(&id);
                let v = if known {
                    let m = self.model.get_mut(&id).unwrap();
                    m.payloads.push(corrected);
                    m.payloads.len() - 1
                } else {
                    0
                };
                match r {
                    Ok(()) => {
                        self.note(format!("{what} -> ok"));
                        if known {
                            self.definite(id, |l, _| {
                                (l == Loc::Dlq(q)).then_some((Loc::Main(target), v))
                            });
                            self.model.get_mut(&id).unwrap().ttl_at = None;
                        }
                    }
                    Err(e) => {
                        self.on_error(&what, &e);
                        if is_fault_error(&e) && known {
                            self.maybe(id, |l, _| {
                                (l == Loc::Dlq(q)).then_some((Loc::Main(target), v))
                            });
                        }
                    }
                }
            }
            3 => {
                let Some(id) = pick else { return };
                let what = format!("delete {id}");
                match dlq.delete(id) {
                    Ok(()) => {
                        self.note(format!("{what} -> ok"));
                        if self.model.contains_key(&id) {
                            self.definite(id, |l, v| (l == Loc::Dlq(q)).then_some((Loc::Gone, v)));
                        }
                    }
                    Err(e) => {
                        self.on_error(&what, &e);
                        if is_fault_error(&e) {
                            self.maybe(id, |l, v| (l == Loc::Dlq(q)).then_some((Loc::Gone, v)));
                        }
                    }
                }
            }
            4 => {
                let Some(id) = pick else { return };
                let success = self.rng.chance(0.5);
                let what = format!("mark_reprocessed {id} {success}");
                match dlq.mark_reprocessed(id, success) {
                    Ok(()) => self.note(format!("{what} -> ok")),
                    Err(e) => self.on_error(&what, &e),
                }
            }
            5 => {
                let older = Duration::from_millis(self.rng.below(3_600_000));
                let include_pending = self.rng.chance(0.5);
                self.purge(q, ids, older, include_pending);
            }
            _ => {
                let Some(id) = pick else { return };
                let what = format!("replay_one {id} to {}", QUEUES[target].0);
                match dlq.replay_one(id, &options) {
                    Ok(()) => {
                        self.note(format!("{what} -> ok"));
                        if self.model.contains_key(&id) {
                            self.definite(id, |l, v| {
                                (l == Loc::Dlq(q)).then_some((Loc::Main(target), v))
                            });
                        }
                    }
                    Err(e) => {
                        self.on_error(&what, &e);
                        if is_fault_error(&e) {
                            self.maybe(id, |l, v| {
                                (l == Loc::Dlq(q)).then_some((Loc::Main(target), v))
                            });
                        }
                    }
                }
            }
        }
    }

    /// Purges DLQ `q` (whose entries were `ids` just before) of entries older than `older`.
    fn purge(&mut self, q: usize, ids: Vec<MessageId>, older: Duration, include_pending: bool) {
        let dlq = self.live().queues[q].dlq();
        let what = format!(
            "purge {}-dlq older than {older:?} (pending: {include_pending})",
            QUEUES[q].0
        );
        let r = dlq.purge(older, include_pending);
        let after = self.dlq_ids(q);
        let removed: Vec<MessageId> = ids
            .iter()
            .copied()
            .filter(|id| after.as_ref().is_some_and(|a| !a.contains(id)))
            .collect();
        match r {
            Ok(n) if after.is_none() => {
                // Purged, but which ones is unknown: each may be gone.
                self.note(format!("{what} -> {n} (not listed after)"));
                for id in ids {
                    self.maybe(id, |l, v| (l == Loc::Dlq(q)).then_some((Loc::Gone, v)));
                }
            }
            Ok(n) => {
                self.note(format!("{what} -> {n}"));
                if n as usize != removed.len() {
                    self.fail(format!("purge said {n} but removed {removed:?}"));
                }
                for id in removed {
                    if self.model.contains_key(&id) {
                        self.definite(id, |l, v| (l == Loc::Dlq(q)).then_some((Loc::Gone, v)));
                    }
                }
            }
            Err(e) => {
                self.on_error(&what, &e);
                if is_fault_error(&e) {
                    for id in ids {
                        self.maybe(id, |l, v| (l == Loc::Dlq(q)).then_some((Loc::Gone, v)));
                    }
                }
            }
        }
    }

    fn compact(&mut self) {
        let store = self.live().store.clone();
        match store.compact_now() {
            Ok(r) => self.note(format!(
                "compact -> expired {}+{}, retention {}, relocated {}, deleted {} segments",
                r.expired_to_dlq,
                r.expired_dropped,
                r.retention_removed,
                r.records_relocated,
                r.segments_deleted
            )),
            Err(e) => self.on_error("compact", &e),
        }
    }

    fn clock_jump(&mut self) {
        let now = self.now();
        let to = match self.rng.below(20) {
            0 => now.saturating_sub(self.rng.below(600_000)),
            1..=3 => now + self.rng.below(3 * 3_600_000),
            4..=8 => now + self.rng.below(300_000),
            _ => now + self.rng.below(2_000),
        };
        self.set_clock(to);
    }

    /// Sets the clock to `to`, with what that means for the model and held leases.
    fn set_clock(&mut self, to: u64) {
        let now = self.now();
        self.clock.set(to);
        self.now_max = self.now_max.max(to);
        self.note(format!("clock {:+}", to as i64 - now as i64));
        if to < now {
            for m in self.model.values_mut() {
                if m.dead_from.is_some() {
                    Self::set_dead_from(m, to);
                }
            }
        }
        if let Some(live) = self.live.as_mut() {
            for h in &mut live.held {
                if h.deadline <= to {
                    h.sure = false;
                }
            }
        }
    }

    fn arm_fault(&mut self) {
        match self.rng.below(5) {
            4 if self.read_window == 0 => self.start_read_window(),
            0 => {
                // A crash at a random step of what follows.
                let n = self.rng.below(60);
                self.fs.fail_from(n, OpKinds::MUTATING, Fault::Eio);
                self.crash_armed = true;
                self.note(format!("crash point armed at mutating op {n}"));
            }
            1 => {
                let full = !self.fs.is_disk_full();
                self.fs.set_disk_full(full);
                self.note(format!("disk full: {full}"));
            }
            _ => {
                let n = self.rng.below(30);
                let kinds = *self
                    .rng
                    .pick(&[
                        OpKinds::MUTATING,
                        OpKinds::WRITE,
                        OpKinds::SYNC,
                        OpKinds::CREATE,
                        OpKinds::RENAME.or(OpKinds::REMOVE).or(OpKinds::SYNC_DIR),
                        OpKinds::SET_LEN,
                    ])
                    .unwrap();
                let fault = *self
                    .rng
                    .pick(&[
                        Fault::Eio,
                        Fault::Enospc,
                        Fault::ShortWrite,
                        Fault::FailedSync,
                    ])
                    .unwrap();
                self.fs.fail_nth(n, kinds, fault);
                self.note(format!("fault {fault:?} armed at {} op {n}", kinds.name()));
            }
        }
        self.stats.faults += 1;
    }

    /// Checks the running store against the model (no collapse: the running store may hold
    /// changes that are not durable, all of which the model allows).
    fn live_check(&mut self) {
        let store = self.live().store.clone();
        match census(&store) {
            Ok(c) => self.check_census(&c, false, false),
            Err(e) if is_fault_error(&e) && (self.faulty || self.fs.read_errors_on()) => {}
            Err(e) => self.fail(format!("census of the running store: {e}")),
        }
    }

    /// Reads start failing at random (EIO from `read_at`, `map`, `len`) for some steps,
    /// while the workload goes on: every operation may fail with an I/O error (handled as
    /// an operation that may or may not have happened), nothing may panic or return bytes
    /// a message never had.
    fn start_read_window(&mut self) {
        let p = *self.rng.pick(&[0.02, 0.1, 0.3, 1.0]).unwrap();
        self.read_window = self.rng.range(3, 30);
        self.fs.set_read_errors(Some(p));
        self.faulty = true;
        self.stats.read_windows += 1;
        self.note(format!(
            "reads fail with probability {p} for {} steps",
            self.read_window
        ));
    }

    /// Reads work again. Without a reopen, the running store must then read every message
    /// and fit the model: a read error leaves nothing behind.
    fn close_read_window(&mut self) {
        let errors = self.fs.read_errors();
        self.end_read_window();
        self.note(format!("reads work again ({errors} read errors so far)"));
        let store = self.live().store.clone();
        match census(&store) {
            Ok(c) => self.check_census(&c, false, false),
            Err(e) => self.fail(format!("census once reads work again (no reopen): {e}")),
        }
    }

    fn end_read_window(&mut self) {
        self.read_window = 0;
        self.fs.set_read_errors(None);
    }

    /// The disk fills to the brim: it gets a size, what its files hold plus less than two
    /// segments. Producers enqueue until it is full, consumers drain every queue and DLQ
    /// (with what room the store keeps for them), and compaction must then free the space
    /// on its own, its checkpoint going over the reserve kept for it: it returns `Ok`, it
    /// deletes every sealed segment when nothing is live any more, and once the disk has
    /// room for a segment again, writes resume. A log poisoned meanwhile (a batch larger
    /// than the room left, cut short: bug 2) is reopened, cleanly or after a power cut, on
    /// the full disk. Nothing acknowledged is lost on the way (the model's checks, at every
    /// reopen and live).
    fn fill_the_disk(&mut self) {
        // Faults stop; the store's periodic compaction has run with room to spare.
        self.fs.clear();
        self.fs.set_disk_full(false);
        self.end_read_window();
        self.crash_armed = false;
        self.compact();
        if self.live().store.storage_stats().poisoned {
            return;
        }
        let slack = self.rng.below(2 * SEGMENT_SIZE);
        let capacity = self.disk.used_bytes() + slack;
        self.capacity = Some(capacity);
        self.disk.set_capacity(self.capacity);
        self.faulty = true;
        self.stats.full_disks += 1;
        self.note(format!("the disk is {capacity} bytes: {slack} free"));
        for _ in 0..1000 {
            if self.enqueue() {
                break;
            }
        }
        // Consumers drain everything due (a delay is at most two minutes), as far as the
        // room the store keeps for them lets them; compaction frees what they made dead,
        // which lets them go on. A few rounds.
        let later = self.now() + 130_000;
        self.set_clock(later);
        let mut empty = false;
        for round in 0..FULL_DISK_ROUNDS {
            if round > 0 {
                // Leases whose ack found no room run out, and those messages are due again.
                let later = self.now() + VISIBILITY_MS + 1_000;
                self.set_clock(later);
            }
            self.drain();
            let reopened = self.live().store.storage_stats().poisoned;
            if reopened {
                let cut = self.rng.chance(0.5);
                self.note(format!("poisoned on the full disk: reopen (cut: {cut})"));
                self.stats.full_disk_reopens += 1;
                self.reopen(cut);
            }
            let store = self.live().store.clone();
            let before = store.storage_stats().segments.len();
            let report = match store.compact_now() {
                Ok(r) => r,
                // Compaction's own batches never poison the log (each fits in a segment);
                // expiry's could, in principle: it then refuses, and the next round reopens.
                Err(Error::Poisoned) if store.storage_stats().poisoned => {
                    self.note("compaction on a poisoned log refused");
                    continue;
                }
                Err(e) => self.fail(format!(
                    "compaction on a full disk (round {round}, {before} segments): {e}"
                )),
            };
            self.note(format!(
                "compact on the full disk ({before} segments) -> {report:?}"
            ));
            self.stats.full_disk_segments_freed += report.segments_deleted as u64;
            let after = store.storage_stats().segments.len();
            empty = match census(&store) {
                Ok(c) => c.is_empty(),
                Err(e) => self.fail(format!("census after compaction on a full disk: {e}")),
            };
            // On a full disk the checkpoint goes into both slots, so reclaim is held back by
            // neither. (A run that found room, after a reopen or a run that freed enough,
            // writes one slot and reclaims below the older one, as usual.)
            if empty && report.full_disk && after != 1 {
                self.fail(format!(
                    "nothing is live, yet compaction on the full disk left {after} segments"
                ));
            }
            if empty || (report.segments_deleted == 0 && !reopened) {
                break;
            }
        }
        self.stats.full_disk_emptied += u64::from(empty);
        if capacity.saturating_sub(self.disk.used_bytes()) >= SEGMENT_SIZE {
            let q = self.rng.index(QUEUES.len());
            let payload = self.payload();
            let queue = self.live().queues[q].clone();
            match queue.enqueue(&payload) {
                Ok(id) => {
                    self.note(format!("enqueue after the full disk -> {id}"));
                    self.model.insert(
                        id,
                        MsgModel {
                            payloads: vec![payload],
                            poss: [(Loc::Main(q), 0)].into(),
                            ttl_at: None,
                            ever_leased: false,
                            dead_from: None,
                        },
                    );
                    self.stats.full_disk_writes_resumed += 1;
                }
                Err(e) => self.fail(format!(
                    "the disk has room for a segment again, yet an enqueue failed: {e}"
                )),
            }
        }
        self.capacity = None;
        self.disk.set_capacity(None);
        self.note("the disk is unlimited again");
    }

    /// Purges every DLQ, then acks every message due in every queue, oldest first (the
    /// order that makes whole segments dead soonest), as far as it goes.
    fn drain(&mut self) {
        for q in 0..QUEUES.len() {
            if let Some(ids) = self.dlq_ids(q) {
                self.purge(q, ids, Duration::ZERO, true);
            }
        }
        loop {
            let leased: usize = (0..QUEUES.len()).map(|q| self.lease_from(q, 10)).sum();
            if self.live().held.is_empty() {
                break;
            }
            self.live().held.sort_by_key(|h| h.msg.id());
            while !self.live().held.is_empty() {
                self.finish_held(0, 0);
            }
            if leased == 0 {
                break;
            }
        }
    }

    fn second_opener(&mut self) {
        match self.open_store(RecoveryMode::Strict, Arc::new(self.fs.clone())) {
            Err(Error::Locked { .. }) => {}
            Err(e) if is_fault_error(&e) && self.faulty => {}
            Ok(_) => self.fail("a second open of a locked store succeeded"),
            Err(e) => self.fail(format!("a second open failed with {e}, not Locked")),
        }
    }

    fn step(&mut self) {
        self.stats.ops += 1;
        let before = self.fs.injected() - self.fs.read_errors();
        match self.rng.below(100) {
            0..=24 => {
                self.enqueue();
            }
            25..=42 => self.lease(),
            43..=62 => self.finish_lease(),
            63..=72 => self.dlq_op(),
            73..=76 => self.compact(),
            77..=86 => self.clock_jump(),
            87..=89 => self.arm_fault(),
            90..=91 => self.reopen(true),
            92 => self.reopen(false),
            93..=96 => self.live_check(),
            97 => self.second_opener(),
            _ => {
                if self.rng.chance(0.2) {
                    self.fs.clear();
                    self.fs.set_disk_full(false);
                }
            }
        }
        if self.live.is_none() {
            return;
        }
        // Read errors are not the crash point's fault: the process goes on after them.
        let fired = self.fs.injected() - self.fs.read_errors() > before;
        if fired && self.crash_armed {
            // The process "died" at the injected fault: cut the power now.
            self.reopen(true);
        } else if self.live().store.storage_stats().poisoned {
            // A poisoned log refuses writes until reopened.
            let cut = self.rng.chance(0.5);
            self.reopen(cut);
        } else if self.read_window > 0 {
            self.read_window -= 1;
            if self.read_window == 0 {
                self.close_read_window();
            }
        }
    }

    fn run(&mut self, steps: u64) {
        self.live = match self.open_store(RecoveryMode::Strict, Arc::new(self.fs.clone())) {
            Ok(l) => Some(l),
            Err(e) => self.fail(format!("first open: {e}")),
        };
        // Every seed has at least one window of read errors and one full disk.
        let read_window_at = self.rng.below(steps);
        let full_disk_at = self.rng.below(steps);
        for i in 0..steps {
            if i == read_window_at && self.read_window == 0 {
                self.start_read_window();
            }
            if i == full_disk_at && self.live.is_some() {
                self.fill_the_disk();
            }
            self.step();
        }
        // A final power cut and a full check.
        self.reopen(true);
        self.live_check();
    }
}

fn run_seed(seed: u64) -> RunStats {
    let mut sim = Sim::new(seed);
    let steps = 60 + SimRng::new(seed ^ 0xABCD).below(240);
    sim.run(steps);
    sim.stats.read_errors = sim.fs.read_errors();
    sim.stats
}

#[test]
fn simulation() {
    let seeds: Vec<u64> = match common::env_option("DEADLETTER_SIM_SEED") {
        Some(s) => vec![s],
        None => {
            let n = common::env_number("DEADLETTER_SIM_SEEDS", DEFAULT_SEEDS);
            let start = common::env_number("DEADLETTER_SIM_START", 0);
            (start..start + n).collect()
        }
    };
    // Seeds are independent (each has its own disk and clock): CI runs them on every core
    // (`DEADLETTER_SIM_THREADS`); the test run, whose other tests share the cores, on one.
    let threads = common::env_number("DEADLETTER_SIM_THREADS", 1usize).max(1);
    let started = Instant::now();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<(u64, Option<RunStats>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&seed) = seeds.get(i) else {
                            break done;
                        };
                        done.push((seed, std::panic::catch_unwind(|| run_seed(seed)).ok()));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a simulation worker"))
            .collect()
    });
    results.sort_unstable_by_key(|&(seed, _)| seed);
    let mut total = RunStats::default();
    let mut failed = Vec::new();
    for (seed, outcome) in results {
        match outcome {
            Some(s) => {
                total.ops += s.ops;
                total.reopens += s.reopens;
                total.power_cuts += s.power_cuts;
                total.faults += s.faults;
                total.bitrot += s.bitrot;
                total.bitrot_detected += s.bitrot_detected;
                total.failed_opens += s.failed_opens;
                total.read_windows += s.read_windows;
                total.read_errors += s.read_errors;
                total.full_disks += s.full_disks;
                total.full_disk_emptied += s.full_disk_emptied;
                total.full_disk_segments_freed += s.full_disk_segments_freed;
                total.full_disk_writes_resumed += s.full_disk_writes_resumed;
                total.full_disk_reopens += s.full_disk_reopens;
            }
            None => {
                eprintln!(
                    "FAILED seed {seed}: replay with DEADLETTER_SIM_SEED={seed} cargo test --release --features sim --test simulation -- --nocapture"
                );
                failed.push(seed);
            }
        }
    }
    println!(
        "simulation: {} seeds in {:.1?} on {threads} threads: {total:?}",
        seeds.len(),
        started.elapsed()
    );
    assert!(failed.is_empty(), "failing seeds: {failed:?}");
}

/// A crash at every file operation of a compaction (expiry, relocation, checkpoint, segment
/// deletion), each followed by power cuts with several seeds: the reopened store holds
/// exactly what it held before the compaction (nothing here is due to expire).
#[test]
fn crash_at_every_io_step_of_a_compaction() {
    let disk = SimDisk::new();
    disk.create_dir_all(Path::new(ROOT)).unwrap();
    disk.sync_dir(Path::new("/")).unwrap();
    let config = |fs: &FaultyFs| {
        Config::default()
            .segment_size(80 << 10)
            .max_message_size(8 << 10)
            .compaction(
                CompactionOptions::default()
                    .interval(None)
                    .relocate_below(0.9)
                    .batch(8),
            )
            .vfs(Arc::new(fs.clone()))
            .clock(ManualClock::new(T0))
    };
    {
        let fs = FaultyFs::new(Arc::new(disk.clone()), 0);
        let store = Store::open(DIR, config(&fs)).unwrap();
        let q = store.queue("q").unwrap();
        let mut rng = SimRng::new(99);
        for round in 0..6 {
            let batch: Vec<Vec<u8>> = (0..12).map(|_| rng.bytes(3000)).collect();
            q.enqueue_batch(&batch).unwrap();
            for m in q.lease(12).unwrap() {
                match rng.below(6) {
                    0 => q.release(&m, Duration::ZERO).unwrap(),
                    1 => {
                        let f = Failure::permanent("Bad", "bad");
                        q.dead_letter(&m, &FailureReport::new(&f)).unwrap()
                    }
                    _ => q.ack(&m).unwrap(),
                }
            }
            if round == 2 {
                store.compact_now().unwrap();
            }
        }
    }
    let before = {
        let fs = FaultyFs::new(Arc::new(disk.fork()), 0);
        census(&Store::open(DIR, config(&fs)).unwrap()).unwrap()
    };
    // How many mutating operations one compaction does here.
    let total = {
        let fs = FaultyFs::new(Arc::new(disk.fork()), 0);
        let store = Store::open(DIR, config(&fs)).unwrap();
        let start = fs.ops();
        let r = store.compact_now().unwrap();
        assert!(r.records_relocated > 0 && r.segments_deleted > 0, "{r:?}");
        fs.ops() - start
    };
    let mut crashes = 0;
    // `total` counts every operation; going a few past it also covers the runs where the
    // crash point lies after the compaction's last mutating operation.
    for n in 0..total + 3 {
        for cut in 0..3u64 {
            let d = disk.fork();
            let fs = FaultyFs::new(Arc::new(d.clone()), n);
            {
                let store = Store::open(DIR, config(&fs)).unwrap();
                fs.fail_from(n, OpKinds::MUTATING, Fault::Eio);
                if store.compact_now().is_err() {
                    crashes += 1;
                }
            }
            d.power_cut(n * 31 + cut);
            fs.clear();
            let store = Store::open(DIR, config(&fs))
                .unwrap_or_else(|e| panic!("crash at op {n}, cut {cut}: open failed: {e}"));
            let after = census(&store).unwrap();
            assert_eq!(after, before, "crash at op {n}, cut {cut}: state changed");
        }
    }
    assert!(
        crashes > 0 && crashes < 3 * (total + 3),
        "{crashes} of {total}"
    );
}

/// Named regression tests, one per bug the simulation found (hand-written minimal scenarios,
/// independent of the random harness).
mod regressions {
    use super::*;
    use deadletter::sim::FaultPlan;
    use deadletter::sim::{Log, LogOptions};

    fn sim_fs() -> (SimDisk, FaultyFs) {
        let disk = SimDisk::new();
        disk.create_dir_all(Path::new(ROOT)).unwrap();
        disk.sync_dir(Path::new("/")).unwrap();
        let fs = FaultyFs::new(Arc::new(disk.clone()), 7);
        (disk, fs)
    }

    fn small_config(fs: &FaultyFs) -> Config {
        common::config_at(&ManualClock::new(T0))
            .segment_size(80 << 10)
            .max_message_size(8 << 10)
            .vfs(Arc::new(fs.clone()))
    }

    /// Bug 1: `Segment::view` remapped a snapshot view (`is_live() == false`) only when it
    /// was shorter than the data; a preallocated segment's snapshot is full length from
    /// the start, so every record written after the map read back as zeros and was
    /// reported as corruption. Fixed by remembering the data end each view covers.
    #[test]
    fn snapshot_views_are_taken_again_after_writes() {
        let disk = SimDisk::new();
        let opts = LogOptions {
            segment_size: 4096,
            max_record_size: 1000,
            ..LogOptions::default()
        };
        let (log, _) = Log::open_with(Arc::new(disk), "/store", opts).unwrap();
        let mut written = Vec::new();
        for i in 0..40u8 {
            let body = vec![i + 1; 50 + i as usize];
            let pos = log.append(&body).unwrap();
            assert_eq!(&*log.read(pos).unwrap(), &body[..], "record {i}");
            written.push((pos, body));
        }
        let all: Vec<(u64, Vec<u8>)> = log
            .iter_from(0)
            .unwrap()
            .map(|r| r.map(|(p, b)| (p, b.to_vec())).unwrap())
            .collect();
        assert_eq!(all, written);
    }

    /// Bug 2 (seed 8): a batch larger than a segment whose second roll failed (ENOSPC
    /// creating the segment) had its first part written and fsynced by the roll, but the
    /// store never applied the failed batch, so the next enqueue reused its ids: after a
    /// reopen two `Put`s shared an id and the counters disagreed with the messages. The log
    /// now poisons itself when a roll fails after part of a batch was appended.
    #[test]
    fn a_batch_whose_roll_fails_midway_does_not_leave_reused_ids() {
        let (disk, fs) = sim_fs();
        let store = Store::open(DIR, small_config(&fs)).unwrap();
        let q = store.queue("q").unwrap();
        let first = q.enqueue(b"first").unwrap();
        fs.set_disk_full(true);
        let batch: Vec<Vec<u8>> = (0..25u8).map(|i| vec![i; 7000]).collect();
        match q.enqueue_batch(&batch) {
            Err(Error::DiskFull { .. }) => {}
            other => panic!("expected DiskFull, got {other:?}"),
        }
        fs.set_disk_full(false);
        // No id of the failed batch is handed out again in this process.
        assert!(matches!(q.enqueue(b"after"), Err(Error::Poisoned)));
        // Nor does compaction take the batch's written part into a checkpoint (bug 9): the
        // live index never applied it.
        assert!(matches!(store.compact_now(), Err(Error::Poisoned)));
        assert!(!disk
            .durable_list(Path::new(DIR))
            .iter()
            .any(|f| f.starts_with("checkpoint-")));
        drop(q);
        drop(store);
        disk.power_cut(1);
        let store = Store::open(DIR, small_config(&fs)).unwrap();
        let c = census(&store).expect("a consistent index");
        assert_eq!(c[&first].payload, b"first");
        for (id, e) in &c {
            if *id != first {
                assert!(
                    batch.contains(&e.payload),
                    "only a prefix of the batch may be there"
                );
            }
        }
        store.queue("q").unwrap().enqueue(b"later").unwrap();
    }

    /// Bug 3 (seed 472): `Log::delete_below` took a segment out of the log before removing
    /// its file; when the removal failed the file stayed on disk, and the next compaction
    /// deleted the segments after it, leaving a hole: the next open failed with
    /// `MissingSegment`. The segment now goes back into the log when its file stays.
    #[test]
    fn a_failed_segment_removal_leaves_the_log_openable() {
        let (disk, fs) = sim_fs();
        let store = Store::open(DIR, small_config(&fs)).unwrap();
        let q = store.queue("q").unwrap();
        let round = |tag: u8| {
            for _ in 0..4 {
                let batch: Vec<Vec<u8>> = (0..8u8).map(|i| vec![tag ^ i; 4000]).collect();
                q.enqueue_batch(&batch).unwrap();
                let leased = q.lease(100).unwrap();
                q.ack_all(&leased).unwrap();
            }
        };
        round(1);
        store.compact_now().unwrap();
        round(2);
        let before = store.storage_stats().segments.len();
        fs.set_plan(FaultPlan {
            kinds: OpKinds::REMOVE,
            trigger: deadletter::sim::Trigger::Nth(0),
            fault: Fault::Eio,
        });
        assert!(
            store.compact_now().is_err(),
            "the injected removal failure surfaces"
        );
        assert_eq!(fs.injected(), 1);
        round(3);
        store.compact_now().unwrap();
        store.compact_now().unwrap();
        assert!(store.storage_stats().segments.len() < before + 4);
        let kept = q.enqueue(b"kept").unwrap();
        drop(q);
        drop(store);
        disk.power_cut(2);
        let store = Store::open(DIR, small_config(&fs)).expect("no hole in the segments");
        let c = census(&store).unwrap();
        assert_eq!(c.keys().copied().collect::<Vec<_>>(), vec![kept]);
    }

    /// Enqueues 4 KB messages until one fails; returns the ids that succeeded.
    fn enqueue_until_error(q: &Queue) -> (Vec<MessageId>, Error) {
        let mut ids = Vec::new();
        for i in 0..1000u32 {
            match q.enqueue(vec![(i % 251) as u8; 4000]) {
                Ok(id) => ids.push(id),
                Err(e) => return (ids, e),
            }
        }
        panic!("no enqueue failed");
    }

    /// Bug 4 (seeds 1307, 1589): the directory sync after a new segment was renamed into
    /// place failed; the roll returned the error without poisoning, appends went on into
    /// the old segment past the new one's base, a later directory sync made the new name
    /// durable, and after a power cut the two overlapped: the store no longer opened
    /// (`MissingSegment`). A roll that fails after the new segment got its name now
    /// poisons the log.
    #[test]
    fn a_roll_whose_directory_sync_fails_poisons_the_log() {
        let (disk, fs) = sim_fs();
        let store = Store::open(DIR, small_config(&fs)).unwrap();
        let q = store.queue("q").unwrap();
        fs.fail_from(0, OpKinds::SYNC_DIR, Fault::Eio);
        let (acked, err) = enqueue_until_error(&q);
        assert!(
            matches!(
                err,
                Error::Io {
                    op: "fsync dir",
                    ..
                }
            ),
            "{err:?}"
        );
        fs.clear();
        assert!(matches!(q.enqueue(b"more"), Err(Error::Poisoned)));
        // Something else syncs the directory later (a checkpoint, say).
        disk.sync_dir(&dir()).unwrap();
        drop(q);
        drop(store);
        disk.power_cut(3);
        let store = Store::open(DIR, small_config(&fs)).expect("segments do not overlap");
        let c = census(&store).unwrap();
        for id in &acked {
            assert!(c.contains_key(id), "acknowledged message {id} lost");
        }
    }

    /// Bug 5 (seed 1307, after bug 4's fix): after that poisoned process closed (no power
    /// cut), the next open listed the new segment, whose name was still not durable, and
    /// used it as the active segment: acknowledged appends went into a file that a power
    /// cut then removed. Recovery now fsyncs the directory before using what it listed.
    #[test]
    fn recovery_makes_the_names_it_uses_durable() {
        let (disk, fs) = sim_fs();
        let store = Store::open(DIR, small_config(&fs)).unwrap();
        let q = store.queue("q").unwrap();
        fs.fail_from(0, OpKinds::SYNC_DIR, Fault::Eio);
        let (mut acked, _) = enqueue_until_error(&q);
        fs.clear();
        drop(q);
        drop(store);
        // A clean restart: the page cache (and the undurable name) is still there.
        let store = Store::open(DIR, small_config(&fs)).unwrap();
        let q = store.queue("q").unwrap();
        acked.push(q.enqueue(b"after the restart").unwrap());
        drop(q);
        drop(store);
        for seed in 0..20 {
            let d = disk.fork();
            d.power_cut(seed);
            let fs = FaultyFs::new(Arc::new(d), 0);
            let store = Store::open(DIR, small_config(&fs)).unwrap();
            let c = census(&store).unwrap();
            for id in &acked {
                assert!(
                    c.contains_key(id),
                    "power cut {seed}: acknowledged {id} lost"
                );
            }
        }
    }

    /// Acknowledged messages lost, or opens refused, over power cuts 0..20 of a store whose
    /// segments rolled (and were compacted away) after it was created, with `sync_dir`
    /// honest or lying.
    fn losses_over_power_cuts(lie: bool) -> (usize, usize) {
        let (disk, fs) = sim_fs();
        let store = Store::open(DIR, small_config(&fs)).unwrap();
        let q = store.queue("q").unwrap();
        disk.set_lying_dir_syncs(lie);
        let mut acked = Vec::new();
        for i in 0..60u32 {
            acked.push(q.enqueue(vec![(i % 251) as u8; 4000]).unwrap());
        }
        // Ack the first half and compact: checkpoints written, dead segments deleted.
        for m in q.lease(30).unwrap() {
            acked.retain(|id| *id != m.id());
            q.ack(&m).unwrap();
        }
        store.compact_now().unwrap();
        for i in 0..20u32 {
            acked.push(q.enqueue(vec![(i % 251) as u8; 4000]).unwrap());
        }
        drop(q);
        drop(store);
        let (mut lost, mut refused) = (0, 0);
        for seed in 0..20 {
            let d = disk.fork();
            d.set_lying_dir_syncs(false);
            d.power_cut(seed);
            let fs = FaultyFs::new(Arc::new(d), 0);
            match Store::open(DIR, small_config(&fs)) {
                Ok(store) => {
                    let c = census(&store).unwrap();
                    lost += acked.iter().filter(|id| !c.contains_key(id)).count();
                }
                Err(_) => refused += 1,
            }
        }
        (lost, refused)
    }

    /// The simulation catches a store that skips its directory syncs: with `sync_dir`
    /// lying, power cuts undo the creations, renames and deletions of segments and
    /// checkpoints, and acknowledged messages are lost (or the open is refused); with it
    /// honest, nothing acknowledged is lost.
    #[test]
    fn a_missing_directory_sync_is_caught() {
        assert_eq!(losses_over_power_cuts(false), (0, 0));
        let (lost, refused) = losses_over_power_cuts(true);
        assert!(lost + refused > 0, "a lying sync_dir went unnoticed");
    }

    /// Bug 6 (seed 1577): under `RecoveryMode::Quarantine` a segment with a damaged header
    /// is skipped whole, and reading a record inside it returned `InvalidPosition` ("no
    /// record starts at...") instead of reporting the damage. It is now `Corruption`.
    #[test]
    fn a_read_inside_a_quarantined_segment_is_corruption() {
        let disk = SimDisk::new();
        let opts = LogOptions {
            segment_size: 4096,
            max_record_size: 1000,
            ..LogOptions::default()
        };
        let (log, _) = Log::open_with(Arc::new(disk.clone()), "/store", opts.clone()).unwrap();
        let positions: Vec<u64> = (0..30u8)
            .map(|i| log.append(&vec![i + 1; 500]).unwrap())
            .collect();
        let segs = log.segments();
        assert!(segs.len() >= 3);
        let middle = segs[1].clone();
        drop(log);
        assert!(disk.flip_durable_bit(&middle.path, 13 * 8));
        let opts = LogOptions {
            recovery: RecoveryMode::Quarantine,
            ..opts
        };
        let (log, report) = Log::open_with(Arc::new(disk), "/store", opts).unwrap();
        assert_eq!(report.quarantined.len(), 1);
        for pos in positions {
            match log.read(pos) {
                Ok(_) => assert!(pos < middle.base || pos >= middle.end),
                Err(Error::Corruption { .. }) => {
                    assert!(pos >= middle.base && pos < middle.end)
                }
                Err(e) => panic!("read of {pos}: {e}"),
            }
        }
    }

    // Bug 7's minimal scenario applies records to the state machine directly: it is a unit
    // test of `State::apply` (src/engine/state/apply.rs).

    /// The seed that found bug 7, as it runs with this harness.
    #[test]
    fn seed_123375() {
        run_seed(123375);
    }

    /// Bug 9 (in the full-disk compaction before it landed): on the full disk, a batch of
    /// relocated copies rolled once, then its second roll failed; the log was poisoned (the
    /// first part was written, unapplied) but compaction took the `DiskFull` for a benign
    /// stop, wrote a checkpoint that had the unapplied copies, and deleted the originals
    /// the live index still read. A poisoned log now gets no checkpoint and no reclaim.
    #[test]
    fn seed_1001455() {
        run_seed(1001455);
    }

    /// Bug 8 (seeds 1, 6, 12 and a dozen more of the first 300, once reads failed during
    /// the workload): a roll whose new segment could not be mapped (a read error) returned
    /// the error without poisoning the log, although the new segment had its name; appends
    /// went on into the old segment past the new one's base, and after a power cut the
    /// store no longer opened ("segment missing from the sequence"). Such a roll now
    /// poisons the log, like one whose directory sync failed (bug 4).
    #[test]
    fn a_roll_whose_new_segment_cannot_be_mapped_poisons_the_log() {
        let (disk, fs) = sim_fs();
        let store = Store::open(DIR, small_config(&fs)).unwrap();
        let q = store.queue("q").unwrap();
        fs.fail_from(0, OpKinds::MAP, Fault::Eio);
        let (acked, err) = enqueue_until_error(&q);
        assert!(matches!(err, Error::Io { op: "mmap", .. }), "{err:?}");
        fs.clear();
        assert!(matches!(q.enqueue(b"more"), Err(Error::Poisoned)));
        drop(q);
        drop(store);
        disk.power_cut(8);
        let store = Store::open(DIR, small_config(&fs)).expect("segments do not overlap");
        let c = census(&store).unwrap();
        for id in &acked {
            assert!(c.contains_key(id), "acknowledged message {id} lost");
        }
    }
}
