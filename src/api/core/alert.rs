//! DLQ alert hooks: a callback per DLQ that fires when the DLQ's size reaches a threshold,
//! and again when it falls back under.
//!
//! Hooks are checked after every write that changed a DLQ's size, outside the state lock's
//! write section (the callbacks run with no lock held), so a callback may use the store.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::engine::record::QueueId;
use crate::engine::state::State;

/// An alert about a DLQ's size crossing its threshold, passed to the callback registered
/// with [`Dlq::on_threshold`](crate::Dlq::on_threshold) (or
/// [`RunningPool::on_dlq_alert`](crate::pool::RunningPool::on_dlq_alert)). The callback runs on
/// the thread whose write crossed the threshold, with no lock held.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use deadletter::{Config, Failure, Store};
/// use deadletter::dlq::DlqAlert;
/// use deadletter::queue::FailureReport;
///
/// # let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(&dir, Config::fast())?;
/// let orders = store.queue("orders")?;
/// let alerts: Arc<Mutex<Vec<DlqAlert>>> = Arc::default();
/// let sink = Arc::clone(&alerts);
/// orders.dlq().on_threshold(2, move |alert| sink.lock().unwrap().push(alert.clone()))?;
///
/// orders.enqueue_batch(&["a", "b", "c"])?;
/// let broken = Failure::permanent("Broken", "cannot be processed");
/// let mut ids = Vec::new();
/// for msg in orders.lease(3)? {
///     orders.dead_letter(&msg, &FailureReport::new(&broken))?;
///     ids.push(msg.id());
/// }
/// // Up at the second entry (once, not again at the third), down when it falls under two.
/// orders.dlq().delete(ids[0])?;
/// orders.dlq().delete(ids[1])?;
/// let seen = alerts.lock().unwrap();
/// assert_eq!(seen.len(), 2);
/// assert_eq!((seen[0].dlq.as_str(), seen[0].size, seen[0].above), ("orders-dlq", 2, true));
/// assert_eq!((seen[1].size, seen[1].above), (1, false));
/// # Ok::<(), deadletter::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DlqAlert {
    /// The DLQ's name.
    pub dlq: String,
    /// Its size now.
    pub size: u64,
    /// The threshold.
    pub threshold: u64,
    /// True when the size rose to the threshold or above; false when it fell back under.
    pub above: bool,
}

impl DlqAlert {
    /// An alert about DLQ `dlq` at `size` against `threshold`; `above` says which way it
    /// crossed.
    pub fn new(dlq: impl Into<String>, size: u64, threshold: u64, above: bool) -> Self {
        DlqAlert {
            dlq: dlq.into(),
            size,
            threshold,
            above,
        }
    }
}

/// An alert callback.
pub(crate) type AlertFn = Arc<dyn Fn(&DlqAlert) + Send + Sync>;

struct Hook {
    queue: QueueId,
    threshold: u64,
    above: bool,
    callback: AlertFn,
}

/// The registered hooks of a store.
#[derive(Default)]
pub(crate) struct Alerts {
    hooks: Mutex<Vec<Hook>>,
}

impl Alerts {
    /// Registers a hook on the DLQ of `queue`.
    pub(crate) fn add(&self, queue: QueueId, threshold: u64, callback: AlertFn) {
        self.hooks.lock().push(Hook {
            queue,
            threshold,
            above: false,
            callback,
        });
    }

    /// Fires the hooks whose DLQ crossed its threshold since the last check. `state` locks
    /// the index (taken only when a hook exists); `dlq_name` names the DLQ of a queue.
    pub(crate) fn check<'s>(
        &self,
        state: impl FnOnce() -> parking_lot::MutexGuard<'s, State>,
        dlq_name: impl Fn(&str) -> String,
    ) {
        let mut fired = Vec::new();
        {
            let mut hooks = self.hooks.lock();
            if hooks.is_empty() {
                return;
            }
            let st = state();
            for hook in hooks.iter_mut() {
                let queue = st.queues.get(hook.queue as usize);
                let size = queue.map_or(0, |q| q.dlq_order.len() as u64);
                let above = size >= hook.threshold;
                if above != hook.above {
                    hook.above = above;
                    let name = queue.map(|q| dlq_name(&q.name)).unwrap_or_default();
                    let alert = DlqAlert::new(name, size, hook.threshold, above);
                    fired.push((Arc::clone(&hook.callback), alert));
                }
            }
        }
        for (callback, alert) in fired {
            callback(&alert);
        }
    }
}
