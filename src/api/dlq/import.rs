//! Importing exported entries at batch speed, once: [`Importer`].
//!
//! An importer learns the identities ([`DeadLetter::identity`]) of the entries a DLQ holds
//! the first time a batch imports into it (one pass over that DLQ), and adds those it
//! imports. A batch skips the entries their target DLQ already holds and writes the others
//! in one commit: one record per entry, one write and one fsync for the batch.
//! Re-importing an export, or importing it again after an interrupted import, therefore
//! adds nothing twice; importing it into another DLQ (`--queue`) does copy it there.
//!
//! The identities are computed from what the log keeps for every entry (the original id an
//! imported entry carries in its record, the enqueue and dead-letter times, the payload),
//! so knowing them needs no change to the on-disk format. What it does not cover: an entry
//! imported, then replayed out of the DLQ (or deleted), is no longer held, and importing
//! the export again brings it back.

use std::collections::{HashMap, HashSet};

use crate::api::core::store::Store;
use crate::api::core::types::{DeadLetter, MessageId};
use crate::api::dlq::Dlq;
use crate::engine::record::{
    Decoded, ImportedEntry as ImportedRecord, Put, PutCause, PutMeta, QueueId,
};
use crate::engine::state::AuditAction;
use crate::engine::{wire, Batch};
use crate::error::{Error, Result};

use super::{Filter, Page};

/// Imports exported entries into a store, in batches, skipping those it already holds
/// (see the module documentation). Made by [`Store::importer`].
///
/// ```
/// use deadletter::{Config, Failure, Filter, Page, Store};
/// use deadletter::queue::FailureReport;
///
/// # let base = tempfile::tempdir().unwrap();
/// let source = Store::open(base.path().join("a"), Config::fast())?;
/// let orders = source.queue("orders")?;
/// orders.enqueue_batch(&["ORD-1", "ORD-2"])?;
/// for msg in orders.lease(2)? {
///     orders.dead_letter(&msg, &FailureReport::new(&Failure::permanent("Bad", "no")))?;
/// }
/// let export = orders.dlq().list(&Filter::all(), Page::first(10))?;
///
/// let target = Store::open(base.path().join("b"), Config::fast())?;
/// let report = target.importer(None)?.import_batch(&export)?;
/// assert_eq!((report.imported.len(), report.skipped.len()), (2, 0));
/// // The same export again: nothing is added.
/// let again = target.importer(None)?.import_batch(&export)?;
/// assert_eq!((again.imported.len(), again.skipped.len()), (0, 2));
/// assert_eq!(target.dlq("orders-dlq")?.len(), 2);
/// # Ok::<(), deadletter::Error>(())
/// ```
pub struct Importer {
    store: Store,
    queue: Option<String>,
    /// Target DLQs by the name entries give (a queue or DLQ name), with the identities of
    /// the entries each holds.
    targets: HashMap<String, (Dlq, HashSet<u128>)>,
}

impl std::fmt::Debug for Importer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Importer")
            .field("queue", &self.queue)
            .field("targets", &self.targets.len())
            .finish_non_exhaustive()
    }
}

/// What [`Importer::import_batch`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct ImportReport {
    /// Entries imported.
    pub imported: Vec<ImportedEntry>,
    /// Ids (in the export) of entries skipped: the store already held them.
    pub skipped: Vec<MessageId>,
}

/// One entry imported.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct ImportedEntry {
    /// Its id in the export (in the store it came from).
    pub original_id: MessageId,
    /// Its new id in this store.
    pub id: MessageId,
    /// The DLQ it went to.
    pub dlq: String,
}

/// Entries read per page while collecting identities.
const PAGE: usize = 1024;

impl Store {
    /// An importer into `queue`'s DLQ (a queue or DLQ name, the queue created if missing
    /// at the first import), or, without one, into the DLQ of the queue each entry failed
    /// in. The first batch into a DLQ reads its entries once, to learn what it holds.
    pub fn importer(&self, queue: Option<&str>) -> Result<Importer> {
        Ok(Importer {
            store: self.clone(),
            queue: queue.map(str::to_string),
            targets: HashMap::new(),
        })
    }
}

impl Importer {
    /// Imports the entries of `entries` the store does not hold yet, in one commit (one
    /// fsync): payload, history and metadata are kept, each gets a new id and is pending.
    /// An entry over the store's maximum message size is [`Error::TooLarge`] and nothing of
    /// the batch is written.
    pub fn import_batch(&mut self, entries: &[DeadLetter]) -> Result<ImportReport> {
        let mut report = ImportReport::default();
        // Entries to write: the entry, its target's key, queue id and DLQ name, identity.
        let mut fresh: Vec<(&DeadLetter, String, QueueId, String, u128)> = Vec::new();
        let mut in_batch = HashSet::new();
        for entry in entries {
            self.store.check_size(entry.payload.len())?;
            let key = self
                .queue
                .as_deref()
                .unwrap_or(&entry.metadata.queue)
                .to_string();
            let (dlq, held) = self.target(&key)?;
            let identity = entry.identity();
            if held.contains(&identity) || !in_batch.insert((dlq.queue, identity)) {
                report.skipped.push(entry.id());
                continue;
            }
            let (queue, name) = (dlq.queue, dlq.name());
            fresh.push((entry, key, queue, name, identity));
        }
        if fresh.is_empty() {
            return Ok(report);
        }
        let at = self.store.now();
        let ids = self.store.commit_with(|st| {
            let mut batch: Batch<'_> = Vec::with_capacity(fresh.len() + 1);
            let mut ids = Vec::with_capacity(fresh.len());
            for (next, (entry, _, queue, _, _)) in (st.next_id..).zip(&fresh) {
                batch.push(imported_put(entry, next, *queue)?);
                ids.push(next);
            }
            batch.push(
                self.store
                    .audit_record(at, AuditAction::Import, &ids, None)?,
            );
            Ok((batch, ids))
        })?;
        for ((entry, key, _, dlq, identity), id) in fresh.into_iter().zip(ids) {
            if let Some((_, held)) = self.targets.get_mut(&key) {
                held.insert(identity);
            }
            report.imported.push(ImportedEntry {
                original_id: entry.id(),
                id,
                dlq,
            });
        }
        Ok(report)
    }

    /// The DLQ named (or of the queue named) `name`, its queue declared if new, and the
    /// identities of the entries it holds (read once).
    fn target(&mut self, name: &str) -> Result<&(Dlq, HashSet<u128>)> {
        if !self.targets.contains_key(name) {
            let dlq = match self.store.dlq(name) {
                Ok(d) => d,
                Err(Error::UnknownQueue(_)) => self.store.queue(name)?.dlq(),
                Err(e) => return Err(e),
            };
            let mut held = HashSet::new();
            let mut page = Page::first(PAGE);
            loop {
                let entries = dlq.list(&Filter::all(), page)?;
                let Some(last) = entries.last() else { break };
                page = Page::after(last.id(), PAGE);
                held.extend(entries.iter().map(DeadLetter::identity));
            }
            self.targets.insert(name.to_string(), (dlq, held));
        }
        self.targets
            .get(name)
            .ok_or_else(|| Error::UnknownQueue(name.to_string()))
    }
}

/// The payload record that imports `entry` as message `id` of DLQ `queue`.
pub(super) fn imported_put(
    entry: &DeadLetter,
    id: MessageId,
    queue: QueueId,
) -> Result<(Vec<u8>, Decoded<'_>)> {
    let meta = PutMeta {
        id,
        queue,
        enqueued_at: entry.metadata.enqueued_at_ms,
        visible_at: 0,
        expires_at: None,
        attributes: entry.metadata.attributes.clone(),
        idempotency_key: None,
        cause: PutCause::Imported(Box::new(record_of(entry))),
    };
    let mut body = Vec::with_capacity(entry.payload.len() + 256);
    wire::encode_put(&mut body, &meta, &entry.payload)?;
    let payload = entry.payload.as_slice();
    Ok((body, Decoded::Put(Put { meta, payload })))
}

/// What an `Imported` record keeps of `entry`. Its original id is the one it had where it
/// was first dead-lettered, through any number of exports and imports.
fn record_of(entry: &DeadLetter) -> ImportedRecord {
    ImportedRecord {
        failure: entry.failure.clone(),
        dlq: entry.dlq.clone(),
        first_received_at: entry.metadata.first_received_at_ms,
        attempts: entry.metadata.delivery_count,
        generation: entry.generation,
        replaced_payload: entry.replaced_payload.clone(),
        original_id: entry.original_id.unwrap_or(entry.metadata.id),
    }
}
