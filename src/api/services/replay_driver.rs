//! The guarded-replay driver: what moves a store's guarded replays forward.
//!
//! A replay needs a release at two kinds of moments: when its current wave was handled
//! (an ack, a retry or a dead-lettering of its last waiting message: a write), and when its
//! rate limit lets the next entry go (a time on the store's clock). The first is caught on
//! the write path: the driver registers itself with the store (`ReplayHook`), the state
//! machine marks a write's effects, and once the write is done the driver releases what is
//! due (`guarded::release_due`) on the writing thread, so the next wave is in the queue
//! before the ack that completed a wave returns (a worker pool never finds the queue empty
//! between waves). The second is the job of the driver's thread (`deadletter-guard`),
//! started when a replay first needs it: it sleeps until the next release is due, reading
//! the store's clock at most every [`POLL`] (so a [`crate::clock::ManualClock`] moved by a
//! test is noticed), and wakes at once when a write makes something due. Starting the
//! driver on a store whose log left a replay running resumes it.
//!
//! A store opened with [`Config::guarded_replay_driver`](crate::Config::guarded_replay_driver)
//! on (the default) runs one for as long as a handle on it lives; otherwise a program
//! starts it itself ([`GuardedReplayDriver::start`]) and holds the guard.
//!
//! Invariants:
//! - one driver per store, and one drive at a time. A writer whose write made a release
//!   due waits for a running drive and then drives itself (so its ack returns with the next
//!   wave out); the thread, and a drive's own writes, leave the work to the running drive,
//!   which goes round again, so nothing due is missed;
//! - dropping the guard unregisters the driver and stops its thread (waiting for a drive
//!   under way) before it lets go of the store, so the thread never outlives the engine.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;

use crate::api::core::actor::Actor;
use crate::api::core::store::{ReplayHook, Store};
use crate::api::guarded::release::{release_due, Next};
use crate::api::services::thread::ServiceThread;
use crate::error::{Error, Result};

/// The longest the thread waits before it reads the store's clock again while a release
/// is due later.
pub(crate) const POLL: Duration = Duration::from_millis(10);

/// A running guarded-replay driver (a guard): releases each wave of the store's guarded
/// replays once the one before was handled, and rate-limited entries when their time
/// comes, until the guard is dropped. It keeps the store open meanwhile.
pub struct GuardedReplayDriver {
    driver: Arc<Driver>,
    store: Store,
}

impl std::fmt::Debug for GuardedReplayDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedReplayDriver")
            .field("dir", &self.store.dir())
            .finish_non_exhaustive()
    }
}

/// The driver's drive lock and its thread, shared with the store's write path.
struct Driver {
    /// Itself, for its thread (which holds it weakly).
    me: Weak<Driver>,
    /// Held by the drive running now.
    driving: Mutex<()>,
    /// Set when a drive was asked while one ran.
    again: AtomicBool,
    thread: Mutex<Thread>,
}

/// The driver's thread, started at its first need.
#[derive(Default)]
enum Thread {
    #[default]
    NotStarted,
    Running(ServiceThread),
    /// The guard was dropped: no thread starts any more.
    Stopped,
}

impl GuardedReplayDriver {
    /// Starts driving `store`'s guarded replays, resuming those its log left running.
    /// [`Error::ReadOnly`] on a snapshot; [`Error::InvalidConfig`] if a driver already
    /// drives this store (one opened with [`crate::Config::guarded_replay_driver`] on runs
    /// its own).
    pub fn start(store: &Store) -> Result<GuardedReplayDriver> {
        store.writable()?;
        let driver = Arc::new_cyclic(|me| Driver {
            me: me.clone(),
            driving: Mutex::new(()),
            again: AtomicBool::new(false),
            thread: Mutex::new(Thread::NotStarted),
        });
        if !store.attach_replay_hook(Arc::clone(&driver) as Arc<dyn ReplayHook>) {
            return Err(Error::InvalidConfig(
                "a guarded-replay driver already drives this store".into(),
            ));
        }
        let store = store.without_services();
        let running = store
            .engine()
            .lock()
            .guards
            .all
            .values()
            .any(|g| g.status.is_active());
        if running {
            // A guarded replay resumes where the log left it.
            driver.due(&store);
        }
        Ok(GuardedReplayDriver { driver, store })
    }
}

impl Drop for GuardedReplayDriver {
    fn drop(&mut self) {
        let hook = Arc::clone(&self.driver) as Arc<dyn ReplayHook>;
        self.store.detach_replay_hook(&hook);
        let thread = std::mem::replace(&mut *self.driver.thread.lock(), Thread::Stopped);
        // Joined outside the lock: the thread's own writes take it to wake the thread.
        drop(thread);
    }
}

impl ReplayHook for Driver {
    fn due(&self, store: &Store) {
        // An error (a full disk) reaches the writers themselves; the thread tries again.
        let _ = self.drive(store, !DRIVING.with(Cell::get));
        self.wake(store);
    }

    fn drive_now(&self, store: &Store) -> Result<()> {
        // Inside a drive (a callback on the driving thread), the running drive goes round.
        self.drive(store, !DRIVING.with(Cell::get)).map(|_| ())
    }
}

impl Driver {
    /// One drive: waits for one that runs on another thread if `wait`, otherwise leaves
    /// the work to that one (which goes round again).
    fn drive(&self, store: &Store, wait: bool) -> Result<Next> {
        let running = if wait {
            Some(self.driving.lock())
        } else {
            self.driving.try_lock()
        };
        let Some(_running) = running else {
            self.again.store(true, Ordering::Release);
            return Ok(Next::Outcomes);
        };
        let _driving = DrivingHere::enter();
        loop {
            self.again.store(false, Ordering::Release);
            let (released, next) = release_due(store)?;
            if !released && !self.again.load(Ordering::Acquire) {
                return Ok(next);
            }
        }
    }

    /// Wakes the thread, starting it first if need be (unless the guard was dropped).
    fn wake(&self, store: &Store) {
        let mut thread = self.thread.lock();
        match &*thread {
            Thread::Running(t) => t.wake(),
            Thread::Stopped => {}
            // A new thread drives at once. Without one, writes still drive replays; only
            // rate-limited releases wait for the next write.
            Thread::NotStarted => {
                if let Ok(t) = self.spawn(store) {
                    *thread = Thread::Running(t);
                }
            }
        }
    }

    /// The thread: a drive, then a wait until the next release is due (read again at
    /// least every [`POLL`]), a write wakes it, or the guard stops it.
    fn spawn(&self, store: &Store) -> Result<ServiceThread> {
        let (me, weak) = (self.me.clone(), store.downgrade());
        ServiceThread::spawn(
            "deadletter-guard",
            "spawn guarded replay thread",
            Duration::ZERO,
            move || {
                let driver = me.upgrade()?;
                let store = weak.upgrade(&Actor::store())?;
                Some(match driver.drive(&store, false) {
                    Ok(Next::At(t)) => {
                        Duration::from_millis(t.saturating_sub(store.now())).min(POLL)
                    }
                    Ok(Next::Outcomes | Next::Idle) => Duration::from_secs(1),
                    // A full disk, say: tried again shortly; writers see the error themselves.
                    Err(_) => Duration::from_millis(100),
                })
            },
        )
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
