//! Deferred durability: the engine's half of the async API. Inside
//! [`Engine::deferring`], a write settled durably (every operation's write path,
//! [`Engine::wait_durable`]) does not wait for its fsync on the calling thread: the engine
//! notes the log position the write needs durable, and `deferring` hands back a
//! [`DurableWait`], a future the log's commit thread completes once an fsync covers it.
//! Every operation of the blocking API runs unchanged inside it, so the async API is the
//! same code with the wait moved to a future, not a second write path.
//!
//! Invariants:
//! - only the durable wait moves: validation, the append, the index update, the wake-ups
//!   of consumers and the alert hooks happen inside `deferring`, exactly as in a blocking
//!   call;
//! - the wait returned covers every durable write made inside `deferring` on this engine
//!   (the largest position noted: the log is made durable as a prefix);
//! - a write to another engine inside it (an alert callback writing to another store)
//!   waits on its own thread as usual; deferrals nest.

use std::cell::Cell;

use super::Engine;
use crate::storage::log::DurableWait;

thread_local! {
    /// The engine deferring on this thread (its address) and the largest position noted.
    static DEFERRING: Cell<Option<(usize, u64)>> = const { Cell::new(None) };
}

impl Engine {
    /// Runs `f` with this engine's durable waits deferred (see the module docs); returns
    /// its result and the wait for what it wrote (already complete when it wrote nothing
    /// that needs an fsync).
    pub(crate) fn deferring<T>(&self, f: impl FnOnce() -> T) -> (T, DurableWait) {
        let me = self as *const Engine as usize;
        let outer = DEFERRING.with(|d| d.replace(Some((me, 0))));
        // Restores the outer deferral even if `f` panics.
        struct Restore(Option<(usize, u64)>);
        impl Drop for Restore {
            fn drop(&mut self) {
                DEFERRING.with(|d| d.set(self.0));
            }
        }
        let restore = Restore(outer);
        let out = f();
        let noted = DEFERRING.with(|d| d.get()).map_or(0, |(_, target)| target);
        drop(restore);
        let wait = if noted == 0 {
            DurableWait::ready(Ok(()))
        } else {
            self.log().durable_at(noted)
        };
        (out, wait)
    }

    /// True when the caller's durable wait is deferred: the end of the log is noted as the
    /// position to make durable.
    pub(super) fn defer_durable_wait(&self) -> bool {
        let me = self as *const Engine as usize;
        DEFERRING.with(|d| match d.get() {
            Some((engine, target)) if engine == me => {
                d.set(Some((engine, target.max(self.log().end_position()))));
                true
            }
            _ => false,
        })
    }
}
