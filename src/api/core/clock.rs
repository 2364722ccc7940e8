//! Time as the store sees it: milliseconds since the Unix epoch, from an injectable clock.
//!
//! Every time the store records (enqueued-at, visible-at, lease deadlines, failure times) comes
//! from one [`Clock`], so tests can move time by hand with [`ManualClock`] instead of sleeping.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of wall-clock time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now_ms(&self) -> u64;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

/// A clock that moves only when told to; clones share the same time. Give one to a store
/// ([`Config::clock`](crate::Config::clock)) to test delays, backoffs, leases, time to live
/// and retention without sleeping.
///
/// ```
/// use std::time::Duration;
/// use deadletter::{Config, Store};
/// use deadletter::clock::{Clock, ManualClock};
/// use deadletter::queue::EnqueueOptions;
///
/// # let dir = tempfile::tempdir().unwrap();
/// let clock = ManualClock::new(1_700_000_000_000); // ms since the Unix epoch
/// let store = Store::open(&dir, Config::fast().clock(clock.clone()))?;
/// let reminders = store.queue("reminders")?;
/// let in_an_hour = EnqueueOptions::new().delay(Duration::from_secs(3600));
/// reminders.enqueue_with(b"call back", &in_an_hour)?;
///
/// assert!(reminders.lease(1)?.is_empty());
/// clock.advance(3_600_000); // an hour passes at once
/// assert_eq!(reminders.lease(1)?[0].payload(), b"call back");
/// assert_eq!(clock.now_ms(), 1_700_003_600_000);
/// # Ok::<(), deadletter::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading `start_ms`.
    pub fn new(start_ms: u64) -> Self {
        ManualClock {
            now: Arc::new(AtomicU64::new(start_ms)),
        }
    }

    /// Moves the clock forward by `ms`.
    pub fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the clock to `ms` (backwards too, to test clock jumps).
    pub fn set(&self, ms: u64) {
        self.now.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}
