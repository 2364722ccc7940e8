//! Who moves guarded replays forward: the store itself.
//!
//! A replay needs a release at two kinds of moments: when its current wave was handled
//! (an ack, a retry or a dead-lettering of its last waiting message: a write), and when its
//! rate limit lets the next entry go (a time on the store's clock). The first is caught on
//! the write path: the state machine marks the write's effects, and the store, once the
//! write is done, releases what is due ([`Store::drive_guarded_replays`]) on the writing
//! thread, so the next wave is in the queue before the ack that completed a wave returns
//! (a worker pool never finds the queue empty between waves). The second is the job of
//! one background thread per store (`deadletter-guard`), started when a replay starts or a
//! store with an active one opens: it sleeps until the next release is due, reading the
//! store's clock at most every [`POLL`] (so a [`crate::ManualClock`] moved by a test is
//! noticed), and wakes at once when a write makes something due.
//!
//! Invariants:
//! - one drive at a time per store. A writer whose write made a release due waits for a
//!   running drive and then drives itself (so its ack returns with the next wave out); the
//!   background thread, and a drive's own writes, leave the work to the running drive,
//!   which goes round again, so nothing due is missed;
//! - a release never exceeds its wave's room nor the rate limit: the `k`-th release of a
//!   wave since its rate anchor (its first release, or the first after a resume) happens
//!   no earlier than `anchor + k * 1000 / rate` ms, and an anchor comes at least
//!   `1000 / rate` ms after the release (or resume) before it;
//! - nothing here decides what a release means: the records do, in the state machine;
//! - a release that moves entries is followed, in its batch, by an audit record: a replay
//!   of those entries by the actor who started the guarded replay.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Weak;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;

use crate::api::store::{Store, StoreInner};
use crate::engine::envelope::MessageId;
use crate::engine::record::{GuardEvent, GuardRelease, Op};
use crate::engine::state::{
    AuditAction, AuditEntry, DeadStatus, Guard, GuardStatus, IdSet, Place, State,
};
use crate::engine::{op_entry, Batch};
use crate::error::{Error, Result};

/// The longest the background thread waits before it reads the store's clock again while
/// a release is due later.
pub(crate) const POLL: Duration = Duration::from_millis(10);
/// At most this many entries in one release record.
const MAX_RELEASE: u64 = 1000;
/// At most this many selected entries looked at past the ones released, per release (the
/// rest of a long run of skipped entries waits for the next round, so the lock is held
/// briefly).
const MAX_SKIP: u64 = 10_000;

/// What the replays wait for after a drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// No replay is running.
    Idle,
    /// Running replays wait for outcomes of released messages only.
    Outcomes,
    /// A release is due at this time on the store's clock.
    At(u64),
}

/// The store's drive lock and its background thread.
#[derive(Default)]
pub(crate) struct GuardDriver {
    /// Held by the drive running now.
    driving: Mutex<()>,
    /// Set when a drive was asked while one ran.
    again: AtomicBool,
    /// The thread, and the channel that wakes it (dropping the sender stops it).
    thread: Mutex<Option<(crossbeam_channel::Sender<()>, JoinHandle<()>)>>,
}

impl Drop for GuardDriver {
    fn drop(&mut self) {
        if let Some((wake, handle)) = self.thread.get_mut().take() {
            drop(wake);
            // The last handle may be dropped by the driver thread itself.
            if handle.thread().id() != std::thread::current().id() {
                let _ = handle.join();
            }
        }
    }
}

impl GuardDriver {
    /// Wakes the background thread, starting it first if need be.
    pub(crate) fn wake(&self, store: &Store) {
        let mut thread = self.thread.lock();
        if thread.is_none() {
            match spawn(store.downgrade_inner()) {
                Ok(t) => *thread = Some(t),
                // Without a thread, writes still drive replays; only rate-limited
                // releases wait for the next write.
                Err(_) => return,
            }
        }
        if let Some((wake, _)) = thread.as_ref() {
            let _ = wake.try_send(());
        }
    }
}

fn spawn(inner: Weak<StoreInner>) -> Result<(crossbeam_channel::Sender<()>, JoinHandle<()>)> {
    let (wake, woken) = crossbeam_channel::bounded::<()>(1);
    let handle = std::thread::Builder::new()
        .name("deadletter-guard".into())
        .spawn(move || loop {
            let Some(store) = Store::from_weak(&inner) else {
                return;
            };
            let wait = match store.drive(false) {
                Ok(Next::At(t)) => {
                    let ms = t.saturating_sub(store.now());
                    Duration::from_millis(ms).min(POLL)
                }
                Ok(Next::Outcomes) | Ok(Next::Idle) => Duration::from_secs(1),
                // A full disk, say: tried again shortly; writers see the error themselves.
                Err(_) => Duration::from_millis(100),
            };
            drop(store);
            match woken.recv_timeout(wait) {
                Ok(()) | Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
            }
        })
        .map_err(|e| Error::io("spawn guarded replay thread", "", e))?;
    Ok((wake, handle))
}

impl Store {
    /// Releases what the store's guarded replays may release now: the next entries of a
    /// wave, as far as the wave's room and the rate limit allow. The store does this by
    /// itself (after each write that completes a wave, and on its own thread for
    /// rate-limited releases); calling it is only useful to act on a
    /// [`crate::ManualClock`] that was just moved, without waiting for that thread. When it
    /// returns, everything due at the clock's time when it was called has been released
    /// (it waits for a drive that runs on another thread).
    pub fn drive_guarded_replays(&self) -> Result<()> {
        self.drive(true).map(|_| ())
    }

    /// Called after a write whose effects say a replay has something to release. When it
    /// returns, what the write made due is released, even if another thread was driving
    /// (it waits for that drive, then drives): the next wave is in the queue before the ack
    /// that completed a wave returns. Only a drive's own writes leave the work to the loop
    /// they are in.
    pub(crate) fn guards_due(&self) {
        if self.is_read_only() {
            return;
        }
        // An error (a full disk) reaches the writers themselves; the thread tries again.
        let _ = self.drive(!DRIVING.with(Cell::get));
        self.guard_driver().wake(self);
    }

    /// One drive: waits for one that runs on another thread if `wait`, otherwise leaves
    /// the work to that one (which goes round again).
    fn drive(&self, wait: bool) -> Result<Next> {
        if self.is_read_only() {
            return Ok(Next::Idle);
        }
        let driver = self.guard_driver();
        let running = if wait {
            Some(driver.driving.lock())
        } else {
            driver.driving.try_lock()
        };
        let Some(_running) = running else {
            driver.again.store(true, Ordering::Release);
            return Ok(Next::Outcomes);
        };
        let _driving = DrivingHere::enter();
        loop {
            driver.again.store(false, Ordering::Release);
            let now = self.now();
            let (released, next) = self.commit_with(|st| {
                let (batch, next) = releases(st, now)?;
                let released = !batch.is_empty();
                Ok((batch, (released, next)))
            })?;
            if !released && !driver.again.load(Ordering::Acquire) {
                return Ok(next);
            }
        }
    }
}

thread_local! {
    /// Whether this thread is inside a drive (whose own writes must not wait for it).
    static DRIVING: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread as driving until dropped.
struct DrivingHere;

impl DrivingHere {
    fn enter() -> Self {
        DRIVING.with(|d| d.set(true));
        DrivingHere
    }
}

impl Drop for DrivingHere {
    fn drop(&mut self) {
        DRIVING.with(|d| d.set(false));
    }
}

/// The release records due at `now`, and what the replays wait for after them.
fn releases<'a>(st: &State, now: u64) -> Result<(Batch<'a>, Next)> {
    let mut batch = Vec::new();
    let mut next = Next::Idle;
    let mut wait = |n: Next| {
        next = match (next, n) {
            (Next::At(a), Next::At(b)) => Next::At(a.min(b)),
            (Next::At(a), _) | (_, Next::At(a)) => Next::At(a),
            _ => Next::Outcomes,
        }
    };
    for (&id, g) in &st.guards.all {
        if g.status != GuardStatus::Running {
            continue;
        }
        let room = g.wave_room();
        if room == 0 {
            wait(Next::Outcomes);
            continue;
        }
        let allowed = match (g.plan.rate_per_sec, g.rate_anchor) {
            (None, _) => room,
            // The first release since the wave started or the replay resumed: one
            // interval after the release before it (at once for the very first).
            (Some(rate), None) => {
                let due = g.updated_at + 1000u64.div_ceil(u64::from(rate));
                if g.next > 0 && now < due {
                    wait(Next::At(due));
                    continue;
                }
                1
            }
            (Some(rate), Some((at, before))) => {
                let rate = u64::from(rate);
                let since = g.wave_released - before;
                let total = now.saturating_sub(at).saturating_mul(rate) / 1000 + 1;
                let allowed = total.saturating_sub(since);
                if allowed == 0 {
                    wait(Next::At(at + (since * 1000).div_ceil(rate)));
                    continue;
                }
                allowed
            }
        };
        let n = room.min(allowed).min(MAX_RELEASE);
        if let Some(event) = release(st, g, n) {
            let ids: Vec<MessageId> = match &event {
                GuardEvent::Release { released, .. } => released.iter().map(|r| r.id).collect(),
                _ => Vec::new(),
            };
            batch.push(op_entry(Op::Guard {
                guard: id,
                at: now,
                event,
            })?);
            if !ids.is_empty() {
                // In the audit trail like any replay, as made by who started it (the
                // record follows the change it describes, in the same batch).
                let ids = IdSet::of(&ids);
                let entry = AuditEntry::new(now, g.plan.actor.as_str(), AuditAction::Replay, ids);
                batch.push(op_entry(Op::Audit(entry))?);
            }
        }
        // The state after this release decides what comes next (the caller goes round).
        wait(Next::Outcomes);
    }
    Ok((batch, next))
}

/// The release of up to `n` of `g`'s next selected entries that are still in its DLQ.
fn release(st: &State, g: &Guard, n: u64) -> Option<GuardEvent> {
    let plan = &g.plan;
    let mut released = Vec::new();
    let mut consumed = 0u64;
    let rest = plan.ids.iter().skip(g.next as usize);
    for &id in rest.take((n + MAX_SKIP) as usize) {
        if released.len() as u64 == n {
            break;
        }
        consumed += 1;
        let Some(m) = st.msgs.get(&id) else { continue };
        let Some(info) = st.dead.get(&id) else {
            continue;
        };
        let pending = info.status == DeadStatus::Pending;
        if m.place() != Place::Dead || m.queue() != plan.dlq || !(pending || plan.force) {
            continue;
        }
        released.push(GuardRelease {
            id,
            queue: plan.target.unwrap_or(m.queue()),
            attempts: if plan.reset_attempts { 0 } else { m.attempts },
            generation: st.extras.get(&id).map_or(0, |e| e.generation) + 1,
        });
    }
    (consumed > 0).then_some(GuardEvent::Release {
        consumed: consumed as u32,
        released,
    })
}
