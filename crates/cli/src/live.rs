//! A store another process holds, as the commands see it: reads from a read-only snapshot
//! (`Store::open_read_only`), changes asked of the owner through its control socket
//! (`deadletter::control::Client`), which carries them out with its own `Store` calls.
//!
//! [`Live`] is a [`Source`] like a store the command holds itself, so replay, delete,
//! purge and export run the same code on both. Entries are selected on the snapshot and
//! changed by id; an entry that changed in between (replayed, deleted by the owner) is
//! reported as refused or left out, never changed twice.

use std::sync::Arc;
use std::time::Duration;

use deadletter::control::Client;
use deadletter::dlq::{Analysis, DeadLetter, DlqAlert, DlqStats};
use deadletter::metrics::Metrics;
use deadletter::pool::Workers;
use deadletter::queue::MessageId;
use deadletter::replay::{Correction, ReplayReport};
use deadletter::{DeadLetterQueue, Dlq, Error, Filter, Page, ReplayOptions, Store};
use deadletter_dashboard::Source;

use crate::pools;

/// The payload bytes one corrected-batch request carries at most (the control socket's
/// frames are at most 256 MiB).
const REQUEST_BYTES: usize = 64 << 20;

/// A store held by another process: its snapshot and a connection to its owner.
pub struct Live {
    snapshot: Store,
    client: Arc<Client>,
}

impl Live {
    /// A live store from its snapshot and a connection to its owner.
    pub fn new(snapshot: Store, client: Client) -> Live {
        Live {
            snapshot,
            client: Arc::new(client),
        }
    }

    /// The snapshot reads are made on.
    pub fn snapshot(&self) -> &Store {
        &self.snapshot
    }

    /// The connection to the owner.
    pub fn client(&self) -> &Client {
        &self.client
    }
}

impl Source for Live {
    type Dlq = LiveDlq;
    fn describe(&self) -> String {
        format!(
            "{} (held by process {})",
            self.snapshot.dir().display(),
            self.client.owner_pid()
        )
    }
    fn queue_names(&self) -> Result<Vec<String>, Error> {
        Ok(self.snapshot.queue_names())
    }
    fn dlq(&self, name: &str) -> Result<LiveDlq, Error> {
        Ok(LiveDlq {
            snap: self.snapshot.dlq(name)?,
            client: Arc::clone(&self.client),
        })
    }
    /// The snapshot's numbers, with the owner's pools and rates.
    fn metrics(&self) -> Result<Metrics, Error> {
        let metrics = self.snapshot.metrics_snapshot();
        Ok(pools::from_client(&self.client).overlay(metrics))
    }
    fn now_ms(&self) -> u64 {
        self.snapshot.config().clock.now_ms()
    }
    fn workers(&self) -> Option<Result<Workers, Error>> {
        Some(pools::from_client(&self.client).to_result(self.snapshot.dir()))
    }
}

/// A DLQ of a live store: reads on the snapshot, changes by the owner.
#[derive(Clone)]
pub struct LiveDlq {
    snap: Dlq,
    client: Arc<Client>,
}

impl DeadLetterQueue for LiveDlq {
    fn name(&self) -> String {
        self.snap.name()
    }
    fn queue_name(&self) -> &str {
        self.snap.queue_name()
    }
    fn len(&self) -> Result<u64, Error> {
        Ok(self.snap.len())
    }
    fn list(&self, filter: &Filter, page: Page) -> Result<Vec<DeadLetter>, Error> {
        self.snap.list(filter, page)
    }
    fn get(&self, id: MessageId) -> Result<DeadLetter, Error> {
        self.snap.get(id)
    }
    fn ids(&self, filter: &Filter, limit: Option<usize>) -> Result<Vec<MessageId>, Error> {
        self.snap.ids(filter, limit)
    }
    fn stats(&self) -> Result<DlqStats, Error> {
        Ok(self.snap.stats())
    }
    fn analyze(&self, filter: &Filter) -> Result<Analysis, Error> {
        self.snap.analyze(filter)
    }
    fn replay(&self, filter: &Filter, options: &ReplayOptions) -> Result<ReplayReport, Error> {
        let ids = self.snap.ids(filter, options.limit)?;
        self.replay_ids(&ids, options)
    }
    fn replay_ids(
        &self,
        ids: &[MessageId],
        options: &ReplayOptions,
    ) -> Result<ReplayReport, Error> {
        // The command checked the target (`--create`) against the snapshot already.
        self.client.replay(&self.name(), ids, options, true)
    }
    fn replay_one(&self, id: MessageId, options: &ReplayOptions) -> Result<(), Error> {
        let report = self.replay_ids(&[id], options)?;
        match report.failed.into_iter().next() {
            None => Ok(()),
            Some((_, reason)) => Err(Error::Remote {
                kind: "Refused".into(),
                message: reason,
            }),
        }
    }
    fn replay_corrected(
        &self,
        id: MessageId,
        payload: impl AsRef<[u8]>,
        options: &ReplayOptions,
    ) -> Result<(), Error> {
        self.client
            .replay_corrected(&self.name(), id, payload.as_ref(), options)
    }
    fn replay_corrected_batch(
        &self,
        corrections: &[Correction],
        options: &ReplayOptions,
    ) -> Result<ReplayReport, Error> {
        // One request per slice of at most REQUEST_BYTES of payloads, under the socket's
        // frame limit.
        let mut report = ReplayReport::new(options.dry_run);
        let mut start = 0;
        while start < corrections.len() {
            let mut end = start;
            let mut bytes = 0;
            while end < corrections.len()
                && (end == start || bytes + corrections[end].payload.len() <= REQUEST_BYTES)
            {
                bytes += corrections[end].payload.len();
                end += 1;
            }
            let done = self.client.replay_corrected_batch(
                &self.name(),
                &corrections[start..end],
                options,
            )?;
            report.replayed.extend(done.replayed);
            report.failed.extend(done.failed);
            start = end;
        }
        Ok(report)
    }
    fn mark_reprocessed(&self, id: MessageId, success: bool) -> Result<(), Error> {
        let report = self.client.mark_reprocessed(&self.name(), &[id], success)?;
        match report.failed.into_iter().next() {
            None => Ok(()),
            Some(_) => Err(Error::NotFound(id)),
        }
    }
    fn delete(&self, id: MessageId) -> Result<(), Error> {
        if self.client.delete(&self.name(), &[id])?.is_empty() {
            return Err(Error::NotFound(id));
        }
        Ok(())
    }
    fn delete_matching(&self, filter: &Filter) -> Result<u64, Error> {
        let ids = self.snap.ids(filter, None)?;
        Ok(self.client.delete(&self.name(), &ids)?.len() as u64)
    }
    fn purge(&self, older_than: Duration, include_pending: bool) -> Result<u64, Error> {
        self.client.purge(&self.name(), older_than, include_pending)
    }
    fn on_threshold(
        &self,
        _threshold: u64,
        _callback: impl Fn(&DlqAlert) + Send + Sync + 'static,
    ) -> Result<(), Error> {
        Err(Error::InvalidConfig(
            "an alert hook runs in the process that holds the store; register it there".into(),
        ))
    }
}
