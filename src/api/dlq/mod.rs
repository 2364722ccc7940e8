//! A DLQ handle: browse, count, analyse, replay, delete and purge dead-letter entries.
//!
//! Browsing ([`Dlq::list`], [`Dlq::list_summaries`], [`Dlq::peek`], [`Dlq::get`],
//! [`Dlq::summary`], [`Dlq::stats`], [`Dlq::analyze`])
//! changes nothing, not even a counter. Every change is one log record per entry, so an entry
//! is in the DLQ or back in a queue, never both. Stats come from counters kept as records are
//! applied: their cost does not grow with the DLQ.

//!
//! The handle is split by job: `filter` (what an operation applies to), `browse`
//! (listing and loading envelopes), `summary` (listing without whole envelopes), `stats` (counters and analysis), `replay`,
//! `transform` (a replay with each payload passed through a function), and `change` (import, mark, delete, purge, retention), `import` (batches, once each).

mod as_of;
mod browse;
mod change;
mod filter;
mod fingerprints;
mod import;
mod lazy;
mod replay;
mod stats;
mod summary;
mod timeline;
mod transform;

use std::sync::Arc;

use crate::api::core::alert::DlqAlert;
use crate::api::core::store::Store;
use crate::api::core::types::MessageId;
use crate::engine::fingerprint::Fingerprint;
use crate::engine::record::QueueId;
use crate::engine::state::{DeadInfo, Msg};
use crate::error::{Error, Result};

pub use as_of::{DlqAsOf, PastDlqEntry, PastDlqStats};
pub(crate) use browse::put_part;
pub(crate) use change::retention_passed;
pub(crate) use filter::contains;
pub use filter::{Cursor, EntryPredicate, Filter, Page};
pub use fingerprints::FingerprintStats;
pub use import::{ImportReport, ImportedEntry, Importer};
pub use lazy::LazyDeadLetter;
pub(crate) use replay::stale_correction;
pub use replay::{Correction, ReplayOptions, ReplayReport};
pub use stats::{Analysis, DlqStats, FailurePattern};
pub use summary::DeadLetterSummary;
pub use timeline::{FailureTimeline, HISTORY_HOURS};
pub(crate) use transform::{generation_and_payload, replay_transformed_with};
pub use transform::{PayloadChange, TransformReport};

/// A handle on the DLQ of one queue.
///
/// Browsing ([`Dlq::list`], [`Dlq::get`], [`Dlq::stats`], [`Dlq::analyze`]) changes
/// nothing. Replay moves entries back to a queue, one record each: an entry is in the DLQ
/// or back in a queue, never both.
///
/// ```
/// use deadletter::{Config, Failure, Filter, Page, ReplayOptions, Store};
/// use deadletter::queue::FailureReport;
///
/// # let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(&dir, Config::fast())?;
/// let orders = store.queue("orders")?;
/// for payload in [&b"{}"[..], b"not json", b"{]"] {
///     orders.enqueue(payload)?;
/// }
/// for msg in orders.lease(10)? {
///     let invalid = Failure::permanent("InvalidPayload", "not JSON").with_context("shop", "eu");
///     orders.dead_letter(&msg, &FailureReport::new(&invalid).worker("worker-1"))?;
/// }
///
/// let dlq = orders.dlq();
/// let stats = dlq.stats(); // from counters: no entry is read
/// assert_eq!((stats.name.as_str(), stats.total), ("orders-dlq", 3));
/// assert_eq!(stats.by_error_kind["InvalidPayload"], 3);
/// let first = dlq.list(&Filter::error_kind("InvalidPayload"), Page::first(2))?;
/// assert_eq!(first[0].payload, b"{}"); // the original bytes, with the whole history
/// assert_eq!(first[0].failure.context["shop"], "eu");
/// let patterns = dlq.analyze(&Filter::all())?.patterns;
/// assert_eq!(patterns[0].error_kind, "InvalidPayload");
///
/// // After the fix: replay every entry to the queue it failed in, with fresh attempts.
/// let report = dlq.replay(&Filter::all(), &ReplayOptions::to_origin().reset_attempts())?;
/// assert_eq!(report.replayed.len(), 3);
/// assert!(dlq.is_empty());
/// assert_eq!(orders.len(), 3);
/// # Ok::<(), deadletter::Error>(())
/// ```
#[derive(Clone)]
pub struct Dlq {
    store: Store,
    queue: QueueId,
    queue_name: String,
}

impl std::fmt::Debug for Dlq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dlq").field("name", &self.name()).finish()
    }
}

/// What is needed to load one entry, copied out of the index.
#[derive(Clone, Copy)]
struct EntryRef {
    id: MessageId,
    msg: Msg,
    info: DeadInfo,
    generation: u32,
    fingerprint: Option<Fingerprint>,
}

impl Dlq {
    /// The store it belongs to.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// The id of the queue whose DLQ it is.
    pub(crate) fn queue_id(&self) -> QueueId {
        self.queue
    }

    pub(crate) fn new(store: Store, queue: QueueId, queue_name: String) -> Self {
        Dlq {
            store,
            queue,
            queue_name,
        }
    }

    /// The DLQ's name.
    pub fn name(&self) -> String {
        self.store.dlq_name(&self.queue_name)
    }

    /// The name of the queue it belongs to.
    pub fn queue_name(&self) -> &str {
        &self.queue_name
    }

    /// Entries in the DLQ.
    pub fn len(&self) -> u64 {
        self.store.engine().lock().queues[self.queue as usize]
            .dlq_order
            .len() as u64
    }

    /// True when the DLQ is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `callback` when the DLQ's size reaches `threshold`, and again when it falls
    /// back under. Fires at once if the DLQ is already at or above it.
    pub fn on_threshold(
        &self,
        threshold: u64,
        callback: impl Fn(&DlqAlert) + Send + Sync + 'static,
    ) -> Result<()> {
        self.store
            .add_alert(self.queue, threshold.max(1), Arc::new(callback));
        Ok(())
    }
}

impl Store {
    /// The DLQ named `name` (such as `"orders-dlq"`), or the DLQ of queue `name`.
    pub fn dlq(&self, name: &str) -> Result<Dlq> {
        for queue in self.queue_names() {
            if self.dlq_name(&queue) == name || queue == name {
                let id = self.queue_id(&queue)?;
                return Ok(Dlq::new(self.clone(), id, queue));
            }
        }
        Err(Error::UnknownQueue(name.to_string()))
    }
}
