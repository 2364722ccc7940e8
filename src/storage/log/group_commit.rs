//! Group commit's concurrency on its own: how far the log is durable, and the protocol by
//! which callers that need durability share one fsync, with the leader's gathering (below).
//! Kept apart from the I/O so that a model checker can run it: built with `--cfg loom`, its
//! locks, condition variables and atomics come from [loom](https://docs.rs/loom), and the
//! tests at the bottom explore every interleaving of a few threads (`docs/RELIABILITY.md`,
//! "Concurrency under loom").
//!
//! **Gathering.** Left to itself, group commit splits a steady set of writers into two
//! cohorts that alternate: the writers released by one fsync append again while the next
//! one, started at once by a waiter, is already under way, so each fsync covers about half
//! of them (four threads enqueueing one at a time went only twice as fast as one). So a
//! thread that becomes the leader first waits for the cohort of the previous fsync, the
//! number of waiters it covered, to be back: until as many writers wait for an fsync, or a
//! quarter of the previous fsync's duration has passed (at most [`MAX_GATHER`]). A lone
//! writer (a cohort of one) never waits, and a cohort that does not come back in time
//! shrinks the next wait's aim to the writers that did. The caller says whether to gather
//! at all (a simulated disk, whose runs depend on their seed alone, never waits).
//!
//! Invariants:
//! - at most one caller runs a sync at a time (the leader, while `busy` is set);
//! - a caller returns `Ok` only once the durable position is at or past its target, and
//!   the durable position only grows;
//! - a waiter counts in `SyncState::waiting` from after its append until it returns, so
//!   every waiter the leader counts is covered by the fsync it leads;
//! - a caller that does not lead waits only while a leader runs, and every leader wakes the
//!   waiters when it is done, whether its sync succeeded or failed; the leader's gathering
//!   wait is bounded, so no writer waits for a writer that never comes;
//! - once the log is poisoned, a caller whose target is not durable returns
//!   `Error::Poisoned` instead of leading another sync.
//!
//! Under loom, time does not pass by itself: a gathering wait ends when the cohort is back
//! or when the model's clock says the deadline passed (`GroupCommit::expire_gathers`,
//! called by a thread of the model, at any point loom chooses).

#[cfg(loom)]
use loom::sync::{
    atomic::{AtomicBool, AtomicU64, Ordering},
    Condvar, Mutex, MutexGuard,
};
#[cfg(not(loom))]
use parking_lot::{Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The longest a leader waits for the previous fsync's cohort to be back.
pub const MAX_GATHER: Duration = Duration::from_micros(500);

/// Group commit's bookkeeping, under `GroupCommit::state`.
#[derive(Debug, Default)]
struct SyncState {
    /// True while one thread leads an fsync (or gathers for one); the others wait on
    /// `GroupCommit::done`.
    busy: bool,
    /// The log positions that the threads in [`GroupCommit::sync_to`] wait for, one per
    /// thread.
    waiting: Vec<u64>,
    /// True while the leader gathers: an arriving waiter wakes it (`GroupCommit::arrived`).
    gathering: bool,
    /// How many waiters the previous fsync covered.
    last_cohort: usize,
    /// How long the previous fsync took.
    last_fsync: Duration,
}

impl SyncState {
    /// Waiters not covered by what is durable now.
    fn uncovered(&self, synced: u64) -> usize {
        self.waiting.iter().filter(|&&t| t > synced).count()
    }

    /// Forgets one waiter for `target`.
    fn leave(&mut self, target: u64) {
        if let Some(i) = self.waiting.iter().position(|&t| t == target) {
            self.waiting.swap_remove(i);
        }
    }
}

/// The durable position, the leader's flag and the gathering (see the module docs).
pub(super) struct GroupCommit {
    /// Log position up to which bytes are durable.
    synced: AtomicU64,
    state: Mutex<SyncState>,
    /// Signalled when a leader is done.
    done: Condvar,
    /// Signalled when a waiter arrives while the leader gathers.
    arrived: Condvar,
    /// The model's clock: once set, every gathering wait's deadline has passed.
    #[cfg(loom)]
    expired: AtomicBool,
}

impl GroupCommit {
    /// Everything below `synced` is durable already.
    pub(super) fn new(synced: u64) -> GroupCommit {
        GroupCommit {
            synced: AtomicU64::new(synced),
            state: Mutex::new(SyncState::default()),
            done: Condvar::new(),
            arrived: Condvar::new(),
            #[cfg(loom)]
            expired: AtomicBool::new(false),
        }
    }

    /// Log position up to which bytes are durable.
    pub(super) fn synced(&self) -> u64 {
        self.synced.load(Ordering::Acquire)
    }

    /// Records that everything below `to` is durable (never moves the position back).
    pub(super) fn advance(&self, to: u64) {
        self.synced.fetch_max(to, Ordering::AcqRel);
    }

    /// Returns once everything below `target` is durable: leads a sync (`sync_once`, which
    /// makes durable everything appended so far and calls [`GroupCommit::advance`]), after
    /// gathering when `may_gather`, or waits for the one under way, and again if that one
    /// did not reach `target`. `poisoned` says whether the log refuses writes (then
    /// `Error::Poisoned`).
    pub(super) fn sync_to(
        &self,
        target: u64,
        may_gather: bool,
        poisoned: impl Fn() -> bool,
        mut sync_once: impl FnMut() -> Result<()>,
    ) -> Result<()> {
        if self.synced() >= target {
            return Ok(());
        }
        let mut s = lock(&self.state);
        s.waiting.push(target);
        if s.gathering {
            self.arrived.notify_one();
        }
        let result = loop {
            if poisoned() {
                break Err(Error::Poisoned);
            }
            if self.synced() >= target {
                break Ok(());
            }
            if s.busy {
                s = wait(&self.done, s);
                continue;
            }
            s.busy = true;
            if may_gather {
                s = self.gather(s);
            }
            let cohort = s.uncovered(self.synced());
            drop(s);
            let started = Instant::now();
            let result = sync_once().map(|()| started.elapsed());
            s = lock(&self.state);
            s.busy = false;
            if let Ok(took) = result {
                s.last_fsync = took;
                s.last_cohort = cohort;
            }
            self.done.notify_all();
            if let Err(e) = result {
                break Err(e);
            }
        };
        s.leave(target);
        result
    }

    /// The leader's wait for the previous fsync's cohort (see the module docs).
    fn gather<'a>(&self, mut s: MutexGuard<'a, SyncState>) -> MutexGuard<'a, SyncState> {
        if s.last_cohort <= 1 {
            return s;
        }
        let give_up = Instant::now() + (s.last_fsync / 4).min(MAX_GATHER);
        s.gathering = true;
        while s.uncovered(self.synced()) < s.last_cohort {
            let (guard, timed_out) = self.wait_arrival(s, give_up);
            s = guard;
            if timed_out {
                break;
            }
        }
        s.gathering = false;
        s
    }

    /// Waits for an arrival until `deadline`; true when the deadline passed.
    #[cfg(not(loom))]
    fn wait_arrival<'a>(
        &self,
        mut s: MutexGuard<'a, SyncState>,
        deadline: Instant,
    ) -> (MutexGuard<'a, SyncState>, bool) {
        let timed_out = self.arrived.wait_until(&mut s, deadline).timed_out();
        (s, timed_out)
    }

    /// The model's version: the deadline has passed once the model's clock says so (loom
    /// does not time waits out).
    #[cfg(loom)]
    fn wait_arrival<'a>(
        &self,
        s: MutexGuard<'a, SyncState>,
        _deadline: Instant,
    ) -> (MutexGuard<'a, SyncState>, bool) {
        if self.expired.load(Ordering::Acquire) {
            return (s, true);
        }
        let s = wait(&self.arrived, s);
        let timed_out = self.expired.load(Ordering::Acquire);
        (s, timed_out)
    }

    /// The model's clock moves past every gathering deadline (under the lock, so that a
    /// leader about to wait cannot miss it).
    #[cfg(loom)]
    pub(super) fn expire_gathers(&self) {
        let _s = lock(&self.state);
        self.expired.store(true, Ordering::Release);
        self.arrived.notify_all();
    }

    /// Sets the size of the previous fsync's cohort, as if a sync had covered that many
    /// waiters (for the models: the next leader then gathers).
    #[cfg(all(test, loom))]
    fn prime_cohort(&self, cohort: usize) {
        lock(&self.state).last_cohort = cohort;
    }
}

#[cfg(not(loom))]
fn lock(m: &Mutex<SyncState>) -> MutexGuard<'_, SyncState> {
    m.lock()
}

#[cfg(not(loom))]
fn wait<'a>(c: &Condvar, mut guard: MutexGuard<'a, SyncState>) -> MutexGuard<'a, SyncState> {
    c.wait(&mut guard);
    guard
}

#[cfg(loom)]
fn lock(m: &Mutex<SyncState>) -> MutexGuard<'_, SyncState> {
    // No code under this lock panics, so it is never poisoned; take it either way.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(loom)]
fn wait<'a>(c: &Condvar, guard: MutexGuard<'a, SyncState>) -> MutexGuard<'a, SyncState> {
    c.wait(guard).unwrap_or_else(|e| e.into_inner())
}

/// Every interleaving of a few callers, explored by loom (`RUSTFLAGS="--cfg loom" cargo
/// test -p deadletter --lib --release group_commit`). The sync is a model: the appended
/// end sits behind a lock, as the writer's does; a sync reads it, "makes it durable" (a
/// separate counter, standing for the disk) and advances the durable position.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::GroupCommit;
    use crate::error::Error;
    use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
    use loom::sync::{Arc, Mutex};

    /// The log's side of the model.
    struct Model {
        commit: GroupCommit,
        /// The writer's appended end.
        appended: Mutex<u64>,
        /// What the disk holds durably.
        disk: AtomicU64,
        /// Syncs running now, and run in all.
        running: AtomicUsize,
        syncs: AtomicUsize,
        poisoned: AtomicBool,
        /// The sync that fails (1-based), if any.
        fail_at: Option<usize>,
    }

    impl Model {
        fn new(fail_at: Option<usize>) -> Model {
            Model {
                commit: GroupCommit::new(0),
                appended: Mutex::new(0),
                disk: AtomicU64::new(0),
                running: AtomicUsize::new(0),
                syncs: AtomicUsize::new(0),
                poisoned: AtomicBool::new(false),
                fail_at,
            }
        }

        /// One caller: appends a record, then waits for it to be durable.
        fn append_and_sync(&self) -> crate::error::Result<u64> {
            let target = {
                let mut end = self.appended.lock().unwrap();
                *end += 1;
                *end
            };
            self.commit.sync_to(
                target,
                true,
                || self.poisoned.load(SeqCst),
                || {
                    assert_eq!(self.running.fetch_add(1, SeqCst), 0, "two syncs at once");
                    let n = self.syncs.fetch_add(1, SeqCst) + 1;
                    let end = *self.appended.lock().unwrap();
                    let result = if self.fail_at == Some(n) {
                        self.poisoned.store(true, SeqCst);
                        Err(Error::Poisoned)
                    } else {
                        self.disk.fetch_max(end, SeqCst);
                        self.commit.advance(end);
                        Ok(())
                    };
                    self.running.fetch_sub(1, SeqCst);
                    result
                },
            )?;
            Ok(target)
        }
    }

    /// Runs `model` under every interleaving loom reaches with at most `preemptions`
    /// preemptions (bounded so that the run takes seconds; docs/RELIABILITY.md has the
    /// figures), and returns how many executions it explored.
    fn check(preemptions: usize, model: impl Fn() + Sync + Send + 'static) -> usize {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let runs = std::sync::Arc::new(AtomicUsize::new(0));
        let counted = std::sync::Arc::clone(&runs);
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(preemptions);
        b.check(move || {
            counted.fetch_add(1, Ordering::Relaxed);
            model();
        });
        let n = runs.load(Ordering::Relaxed);
        eprintln!("loom explored {n} executions");
        n
    }

    /// The model's clock: a thread that moves time past every gathering deadline at the
    /// point loom chooses (before, during or after any gathering).
    fn clock(m: &Arc<Model>) -> loom::thread::JoinHandle<()> {
        let m = Arc::clone(m);
        loom::thread::spawn(move || m.commit.expire_gathers())
    }

    /// Three callers (two threads and the main one) and the clock: each returns only once
    /// its record is on the disk, syncs never overlap, and no caller waits forever (loom
    /// reports a deadlock if every thread is blocked). A leader gathers whenever the sync
    /// before covered two waiters.
    #[test]
    fn every_caller_returns_once_its_record_is_durable_and_syncs_never_overlap() {
        let runs = check(2, || {
            let m = Arc::new(Model::new(None));
            let timer = clock(&m);
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let m = Arc::clone(&m);
                    loom::thread::spawn(move || {
                        let target = m.append_and_sync().unwrap();
                        assert!(m.disk.load(SeqCst) >= target, "returned before durable");
                    })
                })
                .collect();
            let target = m.append_and_sync().unwrap();
            assert!(m.disk.load(SeqCst) >= target, "returned before durable");
            for t in threads {
                t.join().unwrap();
            }
            timer.join().unwrap();
            assert_eq!(m.commit.synced(), 3);
            assert!(m.syncs.load(SeqCst) <= 3);
        });
        assert!(runs > 100, "only {runs} interleavings");
    }

    /// The previous sync covered two waiters, so the first leader gathers: it waits for the
    /// other caller or for its deadline (the clock), never for longer, and whichever ends
    /// the wait, both callers end durable, with one or two syncs.
    #[test]
    fn a_gathering_leader_waits_for_the_cohort_or_its_deadline_and_no_longer() {
        let both_in_one = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = std::sync::Arc::clone(&both_in_one);
        let runs = check(3, move || {
            let m = Arc::new(Model::new(None));
            m.commit.prime_cohort(2);
            let timer = clock(&m);
            let other = {
                let m = Arc::clone(&m);
                loom::thread::spawn(move || {
                    let target = m.append_and_sync().unwrap();
                    assert!(m.disk.load(SeqCst) >= target, "returned before durable");
                })
            };
            let target = m.append_and_sync().unwrap();
            assert!(m.disk.load(SeqCst) >= target, "returned before durable");
            other.join().unwrap();
            timer.join().unwrap();
            assert_eq!(m.commit.synced(), 2);
            let syncs = m.syncs.load(SeqCst);
            assert!((1..=2).contains(&syncs), "{syncs} syncs");
            if syncs == 1 {
                seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        assert!(runs > 10, "only {runs} interleavings");
        let gathered = both_in_one.load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            gathered > 0,
            "no execution covered both callers with one sync"
        );
    }

    /// The first sync fails: every caller returns (no one waits for a sync nobody runs),
    /// each with `Error::Poisoned` (none of their records was made durable), and no caller
    /// leads another sync after the failure.
    #[test]
    fn a_failed_sync_wakes_every_waiter_and_none_claims_durability() {
        let runs = check(2, || {
            let m = Arc::new(Model::new(Some(1)));
            m.commit.prime_cohort(2);
            let timer = clock(&m);
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let m = Arc::clone(&m);
                    loom::thread::spawn(move || {
                        let r = m.append_and_sync();
                        assert!(matches!(r, Err(Error::Poisoned)), "{r:?}");
                    })
                })
                .collect();
            let r = m.append_and_sync();
            assert!(matches!(r, Err(Error::Poisoned)), "{r:?}");
            for t in threads {
                t.join().unwrap();
            }
            timer.join().unwrap();
            assert_eq!(m.syncs.load(SeqCst), 1, "no sync after the failure");
            assert_eq!(m.disk.load(SeqCst), 0);
        });
        assert!(runs > 100, "only {runs} interleavings");
    }
}
