//! [`JetStreamDlq`]: a queue's DLQ on JetStream, implementing `deadletter::DeadLetterQueue`.
//!
//! The entries of queue `q` are the messages on `{ns}.dlq.{q}.*` in the namespace's DLQ
//! stream (limits retention, one message per subject, `max_age` = the retention): an entry
//! is read where it is, so browsing changes nothing. Listings read the stream in order
//! through a short-lived consumer that acknowledges nothing; a get reads the last message
//! of the entry's subject.
//!
//! Changes:
//! - **replay**: the attempt history of the next generation is written, the message is
//!   published to the target queue (deduplication id `rp-{id}-{generation}`), then the
//!   entry is deleted. A crash between the last two leaves the entry; the replayed
//!   message's first delivery deletes it (see `queue`), and a second replay within the
//!   duplicate window publishes nothing new.
//! - **mark reprocessed**: the entry is rewritten with its new status, on the condition
//!   that it is still the entry that was read (`Nats-Expected-Last-Subject-Sequence`).
//! - **delete, purge**: the entries' messages are deleted.
//!
//! Counters that are not entries (replayed, deleted, reprocessed) are counted events;
//! entries removed by the stream's `max_age` are what the events leave unexplained.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::message::PublishMessage;
use async_nats::HeaderMap;
use bytes::Bytes;
use deadletter::dlq::{Analysis, Cursor, DeadLetter, DlqAlert, DlqStats, EntryStatus};
use deadletter::queue::MessageId;
use deadletter::replay::ReplayReport;
use deadletter::{DeadLetterQueue, Error, Filter, Page, ReplayOptions, Result};

use crate::client::{backend, now_ms};
use crate::counts::{count_entries, event_counts};
use crate::moves::message_headers;
use crate::names::Event;
use crate::namespace::JetStream;
use crate::scan::scan_stream;
use crate::wire::{self, headers, HistoryV1};

/// The DLQ of one JetStream queue. Cheap to clone.
#[derive(Clone)]
pub struct JetStreamDlq {
    js: JetStream,
    queue: Arc<str>,
}

impl std::fmt::Debug for JetStreamDlq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JetStreamDlq")
            .field("name", &self.js.dlq_name(&self.queue))
            .finish()
    }
}

impl JetStreamDlq {
    pub(crate) fn new(js: JetStream, queue: Arc<str>) -> Self {
        JetStreamDlq { js, queue }
    }

    fn run<F: std::future::Future>(&self, f: F) -> F::Output {
        self.js.inner.conn.run(f)
    }

    /// Calls `visit` with each entry (and its sequence) in stream order from sequence
    /// `from`, until it returns false.
    async fn scan(
        &self,
        from: u64,
        mut visit: impl FnMut(u64, DeadLetter) -> Result<bool>,
    ) -> Result<()> {
        let names = &self.js.inner.names;
        let stream = self.js.stream(&names.dlq_stream()).await?;
        let timeout = self.js.inner.options.request_timeout;
        scan_stream(
            &stream,
            names.dlq_filter(&self.queue),
            from,
            timeout,
            "browse a DLQ",
            |sequence, m| {
                visit(
                    sequence,
                    wire::decode_entry(&m.payload, m.subject.as_str())?,
                )
            },
        )
        .await
    }

    /// The entries matching `filter` with their sequences, oldest first.
    async fn matching(
        &self,
        filter: &Filter,
        from: u64,
        limit: usize,
    ) -> Result<Vec<(u64, DeadLetter)>> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        self.scan(from, |seq, e| {
            if filter.matches(&e) {
                out.push((seq, e));
            }
            Ok(out.len() < limit)
        })
        .await?;
        Ok(out)
    }

    /// The `limit` matching entries nearest `bound` on one side of it (before it, or after
    /// it; without a bound, the oldest), in the browse order every backend shares (by
    /// dead-lettering time, then id: [`Cursor`]'s). The stream holds entries in arrival
    /// order, which may differ, so the whole DLQ is read (as `stats` and a filtered `ids`
    /// read it), keeping at most `limit` entries in memory.
    async fn list_by_cursor(
        &self,
        filter: &Filter,
        bound: Option<Cursor>,
        before: bool,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        let mut kept: BTreeMap<Cursor, DeadLetter> = BTreeMap::new();
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.scan(1, |_, e| {
            let at = Cursor::of(&e);
            let side = match bound {
                None => true,
                Some(b) if before => at < b,
                Some(b) => at > b,
            };
            if side && filter.matches(&e) {
                kept.insert(at, e);
                if kept.len() > limit {
                    // Drop the one farthest from the bound.
                    if before {
                        kept.pop_first();
                    } else {
                        kept.pop_last();
                    }
                }
            }
            Ok(true)
        })
        .await?;
        Ok(kept.into_values().collect())
    }

    async fn found(&self, id: MessageId) -> Result<crate::moves::Found> {
        self.js
            .find_entry(&self.queue, id)
            .await?
            .ok_or(Error::NotFound(id))
    }

    /// Replays one entry: history, publish, delete, count. `payload` replaces the
    /// entry's payload (a corrected replay).
    async fn replay_entry(
        &self,
        found: crate::moves::Found,
        options: &ReplayOptions,
        payload: Option<&[u8]>,
    ) -> Result<()> {
        let e = &found.entry;
        let id = e.id();
        let generation = e.generation + 1;
        let target = match &options.target {
            Some(t) => t.clone(),
            None => self.queue.to_string(),
        };
        let target_info = self
            .js
            .open_queue(&target, &self.js.inner.options.queue_defaults, false)
            .await?;
        let mut history = HistoryV1::new(generation);
        let replaced = match payload {
            Some(_) => Some(e.payload.clone()),
            None => e.replaced_payload.clone(),
        };
        history.replaced_payload = replaced.map(|p| data_encoding::BASE64.encode(&p));
        let attempts_base = if options.reset_attempts {
            0
        } else {
            history.attempts = e.failure.attempts.clone();
            history.dropped = e.failure.attempts_dropped;
            history.first_received_at_ms = e.metadata.first_received_at_ms;
            e.metadata.delivery_count
        };
        if history != HistoryV1::new(generation) {
            self.js.write_history(id, &history).await?;
        }
        let expires = None;
        let mut h =
            message_headers(&e.metadata.attributes, expires)?.unwrap_or_else(HeaderMap::new);
        h.insert(headers::ID, id.to_string().as_str());
        h.insert(headers::GENERATION, generation.to_string().as_str());
        h.insert(headers::ATTEMPTS_BASE, attempts_base.to_string().as_str());
        h.insert(
            headers::ENQUEUED_AT,
            e.metadata.enqueued_at_ms.to_string().as_str(),
        );
        h.insert(headers::REPLAYED_FROM, &*self.queue);
        if !options.delay.is_zero() {
            let at = now_ms() + options.delay.as_millis() as u64;
            h.insert(headers::NOT_BEFORE, at.to_string().as_str());
        }
        let body = payload.unwrap_or(&e.payload);
        let message = PublishMessage::build()
            .headers(h)
            .payload(Bytes::copy_from_slice(body))
            .message_id(format!("rp-{id}-{generation}"));
        self.js
            .publish_retrying(&target_info.subject, message)
            .await
            .map_err(|e| backend("replay", e))?;
        self.js.delete_entry_at(found.sequence).await?;
        let dlq = self.js.dlq_name(&self.queue);
        deadletter::trace::events::replayed(&dlq, &target, id, &e.metadata.attributes);
        self.js
            .count_event(
                &self.queue,
                Event::Replayed,
                Some(format!("ev-rp-{id}-{generation}")),
            )
            .await
    }

    fn check_replayable(e: &DeadLetter, options: &ReplayOptions) -> Result<()> {
        if matches!(e.status, EntryStatus::Reprocessed { .. }) && !options.force {
            return Err(Error::AlreadyReprocessed(e.id()));
        }
        Ok(())
    }

    pub(crate) async fn replay_ids_async(
        &self,
        ids: &[MessageId],
        options: &ReplayOptions,
    ) -> Result<ReplayReport> {
        let mut report = ReplayReport::new(options.dry_run);
        for &id in ids {
            let found = match self.found(id).await {
                Ok(f) => f,
                Err(e) => {
                    report.failed.push((id, e.to_string()));
                    continue;
                }
            };
            if let Err(e) = Self::check_replayable(&found.entry, options) {
                report.failed.push((id, e.to_string()));
                continue;
            }
            if !options.dry_run {
                self.replay_entry(found, options, None).await?;
            }
            report.replayed.push(id);
        }
        if !options.dry_run && !report.replayed.is_empty() {
            self.js.check_alerts(&self.queue).await?;
        }
        Ok(report)
    }

    async fn delete_all(&self, entries: &[(u64, MessageId)]) -> Result<u64> {
        for &(seq, id) in entries {
            self.js.delete_entry_at(seq).await?;
            self.js
                .count_event(
                    &self.queue,
                    Event::Deleted,
                    Some(format!("ev-del-{id}-{seq}")),
                )
                .await?;
        }
        if !entries.is_empty() {
            self.js.check_alerts(&self.queue).await?;
        }
        Ok(entries.len() as u64)
    }
}

/// The DLQ's operations as futures: what both the blocking handle (each run to
/// completion on the connection's runtime) and the async one
/// ([`crate::AsyncJetStreamDlq`]) call.
impl JetStreamDlq {
    pub(crate) async fn len_async(&self) -> Result<u64> {
        count_entries(&self.js, &self.queue).await
    }

    pub(crate) async fn list_async(&self, filter: &Filter, page: Page) -> Result<Vec<DeadLetter>> {
        let (bound, before) = match (page.before_cursor, page.after_cursor, page.after) {
            (Some(c), ..) => (Some(c), true),
            (None, Some(c), _) => (Some(c), false),
            (None, None, Some(id)) => (Some(Cursor::of(&self.found(id).await?.entry)), false),
            (None, None, None) => (None, false),
        };
        self.list_by_cursor(filter, bound, before, page.limit).await
    }

    pub(crate) async fn get_async(&self, id: MessageId) -> Result<DeadLetter> {
        Ok(self.found(id).await?.entry)
    }

    pub(crate) async fn ids_async(
        &self,
        filter: &Filter,
        limit: Option<usize>,
    ) -> Result<Vec<MessageId>> {
        let found = self
            .matching(filter, 1, limit.unwrap_or(usize::MAX))
            .await?;
        Ok(found.into_iter().map(|(_, e)| e.id()).collect())
    }

    pub(crate) async fn stats_async(&self) -> Result<DlqStats> {
        let now = now_ms();
        let mut s = DlqStats::new(self.js.dlq_name(&self.queue));
        let mut oldest: Option<u64> = None;
        let mut newest: Option<u64> = None;
        self.scan(1, |_, e| {
            s.total += 1;
            match e.status {
                EntryStatus::Pending => s.pending += 1,
                EntryStatus::Reprocessed { .. } => s.reprocessed += 1,
            }
            *s.by_error_kind.entry(e.failure.error_kind).or_default() += 1;
            *s.by_worker
                .entry(e.dlq.worker.unwrap_or_default())
                .or_default() += 1;
            let at = e.dlq.dead_lettered_at_ms;
            oldest = Some(oldest.map_or(at, |o| o.min(at)));
            newest = Some(newest.map_or(at, |n| n.max(at)));
            Ok(true)
        })
        .await?;
        s.oldest_age_ms = oldest.map(|t| now.saturating_sub(t));
        s.newest_age_ms = newest.map(|t| now.saturating_sub(t));
        let events = event_counts(&self.js, &self.queue).await?;
        let count = |e: Event| events.get(&e).copied().unwrap_or(0);
        s.replayed = count(Event::Replayed);
        s.deleted = count(Event::Deleted);
        s.reprocessed_ok = count(Event::ReprocessedOk);
        s.reprocessed_failed = count(Event::ReprocessedFailed);
        // What came in and is neither here, replayed nor deleted was removed by the
        // stream's retention (max_age).
        s.expired = count(Event::DeadLettered).saturating_sub(s.total + s.replayed + s.deleted);
        Ok(s)
    }

    pub(crate) async fn analyze_async(&self, filter: &Filter) -> Result<Analysis> {
        let found = self.matching(filter, 1, usize::MAX).await?;
        Ok(Analysis::of(found.iter().map(|(_, e)| e)))
    }

    pub(crate) async fn replay_async(
        &self,
        filter: &Filter,
        options: &ReplayOptions,
    ) -> Result<ReplayReport> {
        let ids = self.ids_async(filter, options.limit).await?;
        self.replay_ids_async(&ids, options).await
    }

    pub(crate) async fn replay_one_async(
        &self,
        id: MessageId,
        payload: Option<&[u8]>,
        options: &ReplayOptions,
    ) -> Result<()> {
        let found = self.found(id).await?;
        Self::check_replayable(&found.entry, options)?;
        if options.dry_run {
            return Ok(());
        }
        self.replay_entry(found, options, payload).await?;
        self.js.check_alerts(&self.queue).await
    }

    pub(crate) async fn mark_reprocessed_async(&self, id: MessageId, success: bool) -> Result<()> {
        let found = self.found(id).await?;
        let mut entry = found.entry;
        entry.status = EntryStatus::Reprocessed {
            success,
            at_ms: now_ms(),
        };
        if !self
            .js
            .put_entry(&self.queue, &entry, found.sequence, None)
            .await?
        {
            return Err(Error::InvalidState {
                id,
                expected: "unchanged since it was read (another process changed it)",
            });
        }
        let event = if success {
            Event::ReprocessedOk
        } else {
            Event::ReprocessedFailed
        };
        self.js
            .count_event(
                &self.queue,
                event,
                Some(format!("ev-mark-{id}-{}", found.sequence)),
            )
            .await
    }

    pub(crate) async fn delete_async(&self, id: MessageId) -> Result<()> {
        let found = self.found(id).await?;
        self.delete_all(&[(found.sequence, id)]).await.map(|_| ())
    }

    pub(crate) async fn delete_matching_async(&self, filter: &Filter) -> Result<u64> {
        let found = self.matching(filter, 1, usize::MAX).await?;
        let entries: Vec<(u64, MessageId)> = found.iter().map(|(seq, e)| (*seq, e.id())).collect();
        self.delete_all(&entries).await
    }

    pub(crate) async fn purge_async(
        &self,
        older_than: Duration,
        include_pending: bool,
    ) -> Result<u64> {
        let cutoff = now_ms().saturating_sub(older_than.as_millis() as u64);
        let mut entries = Vec::new();
        self.scan(1, |seq, e| {
            let old = e.dlq.dead_lettered_at_ms < cutoff;
            if old && (include_pending || e.status != EntryStatus::Pending) {
                entries.push((seq, e.id()));
            }
            Ok(true)
        })
        .await?;
        self.delete_all(&entries).await
    }
}

/// The blocking handle: each operation's future run to completion on the connection's
/// runtime.
impl DeadLetterQueue for JetStreamDlq {
    fn name(&self) -> String {
        self.js.dlq_name(&self.queue)
    }
    fn queue_name(&self) -> &str {
        &self.queue
    }
    fn len(&self) -> Result<u64> {
        self.run(self.len_async())
    }
    fn list(&self, filter: &Filter, page: Page) -> Result<Vec<DeadLetter>> {
        self.run(self.list_async(filter, page))
    }
    fn get(&self, id: MessageId) -> Result<DeadLetter> {
        self.run(self.get_async(id))
    }
    fn ids(&self, filter: &Filter, limit: Option<usize>) -> Result<Vec<MessageId>> {
        self.run(self.ids_async(filter, limit))
    }
    fn stats(&self) -> Result<DlqStats> {
        self.run(self.stats_async())
    }
    fn analyze(&self, filter: &Filter) -> Result<Analysis> {
        self.run(self.analyze_async(filter))
    }
    fn replay(&self, filter: &Filter, options: &ReplayOptions) -> Result<ReplayReport> {
        self.run(self.replay_async(filter, options))
    }
    fn replay_ids(&self, ids: &[MessageId], options: &ReplayOptions) -> Result<ReplayReport> {
        self.run(self.replay_ids_async(ids, options))
    }
    fn replay_one(&self, id: MessageId, options: &ReplayOptions) -> Result<()> {
        self.run(self.replay_one_async(id, None, options))
    }
    fn replay_corrected(
        &self,
        id: MessageId,
        payload: impl AsRef<[u8]>,
        options: &ReplayOptions,
    ) -> Result<()> {
        self.run(self.replay_one_async(id, Some(payload.as_ref()), options))
    }
    fn mark_reprocessed(&self, id: MessageId, success: bool) -> Result<()> {
        self.run(self.mark_reprocessed_async(id, success))
    }
    fn delete(&self, id: MessageId) -> Result<()> {
        self.run(self.delete_async(id))
    }
    fn delete_matching(&self, filter: &Filter) -> Result<u64> {
        self.run(self.delete_matching_async(filter))
    }
    fn purge(&self, older_than: Duration, include_pending: bool) -> Result<u64> {
        self.run(self.purge_async(older_than, include_pending))
    }
    fn on_threshold(
        &self,
        threshold: u64,
        callback: impl Fn(&DlqAlert) + Send + Sync + 'static,
    ) -> Result<()> {
        self.js
            .add_alert(&self.queue, threshold, Arc::new(callback))
    }
}
