//! A DLQ handle: browse, count, analyse, replay, delete and purge dead-letter entries.
//!
//! Browsing ([`Dlq::list`], [`Dlq::peek`], [`Dlq::get`], [`Dlq::stats`], [`Dlq::analyze`])
//! changes nothing, not even a counter. Every change is one log record per entry, so an entry
//! is in the DLQ or back in a queue, never both. Stats come from counters kept as records are
//! applied: their cost does not grow with the DLQ.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::api::alert::DlqAlert;
use crate::api::store::Store;
use crate::api::types::{DeadLetter, EntryStatus, MessageId, OriginalMetadata};
use crate::engine::op_entry;
use crate::engine::record::{self, Decoded, ImportedEntry, Op, Put, PutCause, PutMeta, QueueId};
use crate::engine::state::{DeadInfo, DeadStatus, Msg, State};
use crate::error::{Error, Result};

/// Which entries an operation applies to. Empty fields match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filter {
    /// Error kind, exactly.
    pub error_kind: Option<String>,
    /// A substring of the error message.
    pub message_contains: Option<String>,
    /// Dead-lettered at or after this time (ms).
    pub since_ms: Option<u64>,
    /// Dead-lettered before this time (ms).
    pub until_ms: Option<u64>,
    /// At least this many deliveries.
    pub min_attempts: Option<u32>,
    /// At most this many deliveries.
    pub max_attempts: Option<u32>,
    /// Worker name, exactly.
    pub worker: Option<String>,
    /// Tags that must all be present with these values.
    pub tags: BTreeMap<String, String>,
    /// Attributes that must all be present with these values.
    pub attributes: BTreeMap<String, String>,
    /// Only pending entries (true) or only reprocessed ones (false).
    pub pending: Option<bool>,
}

impl Filter {
    /// Matches every entry.
    pub fn all() -> Self {
        Self::default()
    }
    /// Matches one error kind.
    pub fn error_kind(kind: impl Into<String>) -> Self {
        Filter {
            error_kind: Some(kind.into()),
            ..Self::default()
        }
    }
    /// Also requires a substring of the error message.
    pub fn message_contains(mut self, s: impl Into<String>) -> Self {
        self.message_contains = Some(s.into());
        self
    }
    /// Also requires dead-lettering in `[since, until)`.
    pub fn between(mut self, since_ms: Option<u64>, until_ms: Option<u64>) -> Self {
        self.since_ms = since_ms;
        self.until_ms = until_ms;
        self
    }
    /// Also requires a number of deliveries in `[min, max]`.
    pub fn attempts(mut self, min: Option<u32>, max: Option<u32>) -> Self {
        self.min_attempts = min;
        self.max_attempts = max;
        self
    }
    /// Also requires a tag.
    pub fn tag(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.tags.insert(key.into(), value.into());
        self
    }
    /// Also requires an attribute.
    pub fn attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.attributes.insert(key.into(), value.into());
        self
    }
    /// Only pending entries.
    pub fn pending_only(mut self) -> Self {
        self.pending = Some(true);
        self
    }

    fn needs_envelope(&self) -> bool {
        self.message_contains.is_some() || !self.tags.is_empty() || !self.attributes.is_empty()
    }

    /// The checks answered by the index alone.
    fn matches_index(&self, st: &State, m: &Msg, d: &DeadInfo) -> bool {
        if let Some(kind) = &self.error_kind {
            if st.strings.get(kind) != Some(d.kind) {
                return false;
            }
        }
        if let Some(worker) = &self.worker {
            if st.strings.get(worker) != Some(d.worker) || d.worker == 0 {
                return false;
            }
        }
        if self.since_ms.is_some_and(|t| d.dead_at < t)
            || self.until_ms.is_some_and(|t| d.dead_at >= t)
        {
            return false;
        }
        if self.min_attempts.is_some_and(|n| m.attempts < n)
            || self.max_attempts.is_some_and(|n| m.attempts > n)
        {
            return false;
        }
        if let Some(p) = self.pending {
            if p != (d.status == DeadStatus::Pending) {
                return false;
            }
        }
        true
    }

    /// The checks that need the envelope.
    fn matches_envelope(&self, e: &DeadLetter) -> bool {
        if let Some(s) = &self.message_contains {
            if !e.failure.error_message.contains(s.as_str()) {
                return false;
            }
        }
        self.tags.iter().all(|(k, v)| e.dlq.tags.get(k) == Some(v))
            && self
                .attributes
                .iter()
                .all(|(k, v)| e.metadata.attributes.get(k) == Some(v))
    }
}

/// A page of a listing: entries after a cursor (the last id of the previous page).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// Start after this entry (`None`: from the oldest).
    pub after: Option<MessageId>,
    /// At most this many entries.
    pub limit: usize,
}

impl Page {
    /// The first `limit` entries.
    pub fn first(limit: usize) -> Self {
        Page { after: None, limit }
    }
    /// `limit` entries after `id`.
    pub fn after(id: MessageId, limit: usize) -> Self {
        Page {
            after: Some(id),
            limit,
        }
    }
}

/// Counts of a DLQ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DlqStats {
    /// The DLQ's name.
    pub name: String,
    /// Entries in the DLQ.
    pub total: u64,
    /// Entries not dealt with yet.
    pub pending: u64,
    /// Entries marked reprocessed and still kept.
    pub reprocessed: u64,
    /// Reprocessing that succeeded (replayed then acked, or marked ok).
    pub reprocessed_ok: u64,
    /// Reprocessing that failed (replayed then dead-lettered again, or marked failed).
    pub reprocessed_failed: u64,
    /// Entries replayed to a queue.
    pub replayed: u64,
    /// Entries deleted or purged.
    pub deleted: u64,
    /// Entries removed by retention.
    pub expired: u64,
    /// Age of the oldest entry.
    pub oldest_age_ms: Option<u64>,
    /// Age of the newest entry.
    pub newest_age_ms: Option<u64>,
    /// Entries per error kind.
    pub by_error_kind: BTreeMap<String, u64>,
    /// Entries per worker (`""` when unknown).
    pub by_worker: BTreeMap<String, u64>,
}

/// A group of at least three failures of the same kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailurePattern {
    /// The error kind.
    pub error_kind: String,
    /// Entries in the group.
    pub count: u64,
    /// Earliest dead-lettering.
    pub first_ms: u64,
    /// Latest dead-lettering.
    pub last_ms: u64,
    /// Workers involved.
    pub workers: BTreeSet<String>,
    /// The most frequent error messages with their counts (up to 3).
    pub common_messages: Vec<(String, u64)>,
    /// The most frequent context and attribute values `key=value` with counts (up to 5).
    pub common_context: Vec<(String, u64)>,
}

/// What [`Dlq::analyze`] finds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// Entries analysed.
    pub total: u64,
    /// Entries per error kind.
    pub by_error_kind: BTreeMap<String, u64>,
    /// Entries per worker.
    pub by_worker: BTreeMap<String, u64>,
    /// Entries per hour of day (UTC) of dead-lettering.
    pub by_hour_of_day: [u64; 24],
    /// Mean deliveries per entry.
    pub average_attempts: f64,
    /// Earliest and latest dead-lettering.
    pub time_range: Option<(u64, u64)>,
    /// Groups of at least 3 entries by error kind, largest first.
    pub patterns: Vec<FailurePattern>,
}

/// How to replay.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayOptions {
    /// Target queue (`None`: the queue the entry failed in).
    pub target: Option<String>,
    /// Start counting attempts from zero again.
    pub reset_attempts: bool,
    /// Replay entries already marked reprocessed too.
    pub force: bool,
    /// Replay at most this many entries.
    pub limit: Option<usize>,
    /// Visible after this delay.
    pub delay: Duration,
    /// Report what would be replayed without changing anything.
    pub dry_run: bool,
}

impl ReplayOptions {
    /// Back to the original queue, keeping the attempt count.
    pub fn to_origin() -> Self {
        Self::default()
    }
    /// To another queue.
    pub fn to_queue(name: impl Into<String>) -> Self {
        ReplayOptions {
            target: Some(name.into()),
            ..Self::default()
        }
    }
    /// Resets the attempt count.
    pub fn reset_attempts(mut self) -> Self {
        self.reset_attempts = true;
        self
    }
    /// Replays entries already reprocessed too.
    pub fn force(mut self) -> Self {
        self.force = true;
        self
    }
    /// At most `n` entries.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }
    /// Only report.
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }
}

/// What a replay did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayReport {
    /// Entries replayed (or, for a dry run, that would be).
    pub replayed: Vec<MessageId>,
    /// Entries refused, with the reason.
    pub failed: Vec<(MessageId, String)>,
    /// True for a dry run.
    pub dry_run: bool,
}

/// A handle on the DLQ of one queue.
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
}

impl Dlq {
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

    /// Counts, from counters kept incrementally: the cost does not grow with the DLQ.
    pub fn stats(&self) -> DlqStats {
        let now = self.store.now();
        let st = self.store.engine().lock();
        let qs = &st.queues[self.queue as usize];
        let d = &qs.dlq;
        let names = |m: &crate::engine::state::IdMap<u32, u64>| {
            m.iter()
                .map(|(k, v)| (st.strings.name(*k).to_string(), *v))
                .collect::<BTreeMap<_, _>>()
        };
        DlqStats {
            name: self.name(),
            total: qs.dlq_order.len() as u64,
            pending: d.pending,
            reprocessed: d.reprocessed_kept,
            reprocessed_ok: d.reprocessed_ok,
            reprocessed_failed: d.reprocessed_failed,
            replayed: d.replayed,
            deleted: d.deleted,
            expired: d.expired,
            oldest_age_ms: qs.dlq_order.first().map(|(t, _)| now.saturating_sub(*t)),
            newest_age_ms: qs.dlq_order.last().map(|(t, _)| now.saturating_sub(*t)),
            by_error_kind: names(&d.by_kind),
            by_worker: names(&d.by_worker),
        }
    }

    /// Entries matching `filter`, oldest first, one page at a time. No side effects.
    pub fn list(&self, filter: &Filter, page: Page) -> Result<Vec<DeadLetter>> {
        let mut out = Vec::new();
        self.scan(filter, page.after, |entry| {
            out.push(entry);
            out.len() < page.limit
        })?;
        Ok(out)
    }

    /// The oldest `n` entries.
    pub fn peek(&self, n: usize) -> Result<Vec<DeadLetter>> {
        self.list(&Filter::all(), Page::first(n))
    }

    /// One entry by id.
    pub fn get(&self, id: MessageId) -> Result<DeadLetter> {
        let r = {
            let st = self.store.engine().lock();
            self.entry_ref(&st, id)?
        };
        self.load(r)
    }

    /// Ids of the entries matching `filter` (up to `limit`), oldest first.
    pub fn ids(&self, filter: &Filter, limit: Option<usize>) -> Result<Vec<MessageId>> {
        let limit = limit.unwrap_or(usize::MAX);
        let mut ids = Vec::new();
        if limit == 0 {
            return Ok(ids);
        }
        if !filter.needs_envelope() {
            let st = self.store.engine().lock();
            for &(_, id) in &st.queues[self.queue as usize].dlq_order {
                if let Some(r) = self.index_match(&st, filter, id) {
                    ids.push(r.id);
                    if ids.len() >= limit {
                        break;
                    }
                }
            }
            return Ok(ids);
        }
        self.scan(filter, None, |e| {
            ids.push(e.id());
            ids.len() < limit
        })?;
        Ok(ids)
    }

    /// Calls `visit` with each matching entry, oldest first, until it returns false. The
    /// index is read in chunks so writers are not held up while envelopes are loaded.
    fn scan(
        &self,
        filter: &Filter,
        after: Option<MessageId>,
        mut visit: impl FnMut(DeadLetter) -> bool,
    ) -> Result<()> {
        const CHUNK: usize = 256;
        let mut cursor: Option<(u64, MessageId)> = None;
        if let Some(id) = after {
            let st = self.store.engine().lock();
            let info = st.dead.get(&id).ok_or(Error::NotFound(id))?;
            cursor = Some((info.dead_at, id));
        }
        loop {
            let chunk: Vec<EntryRef> = {
                let st = self.store.engine().lock();
                let order = &st.queues[self.queue as usize].dlq_order;
                let range = match cursor {
                    Some(c) => {
                        order.range((std::ops::Bound::Excluded(c), std::ops::Bound::Unbounded))
                    }
                    None => order.range(..),
                };
                let mut chunk = Vec::new();
                for &(at, id) in range {
                    cursor = Some((at, id));
                    if let Some(r) = self.index_match(&st, filter, id) {
                        chunk.push(r);
                        if chunk.len() >= CHUNK {
                            break;
                        }
                    }
                }
                chunk
            };
            if chunk.is_empty() {
                return Ok(());
            }
            for r in chunk {
                let entry = self.load(r)?;
                if filter.matches_envelope(&entry) && !visit(entry) {
                    return Ok(());
                }
            }
        }
    }

    fn index_match(&self, st: &State, filter: &Filter, id: MessageId) -> Option<EntryRef> {
        let r = self.entry_ref(st, id).ok()?;
        filter.matches_index(st, &r.msg, &r.info).then_some(r)
    }

    fn entry_ref(&self, st: &State, id: MessageId) -> Result<EntryRef> {
        let info = *st.dead.get(&id).ok_or(Error::NotFound(id))?;
        let msg = *st.msgs.get(&id).ok_or(Error::NotFound(id))?;
        if msg.queue != self.queue {
            return Err(Error::NotFound(id));
        }
        Ok(EntryRef {
            id,
            msg,
            info,
            generation: st.extras.get(&id).map(|e| e.generation).unwrap_or(0),
        })
    }

    /// Loads a whole envelope from the log.
    fn load(&self, r: EntryRef) -> Result<DeadLetter> {
        let (meta, payload, replaced) = self.load_put(r.msg.payload_pos)?;
        let (failure, dlq, first_received_at) = match meta.cause {
            PutCause::Imported(entry) if r.info.envelope_pos == r.msg.payload_pos => {
                (entry.failure, entry.dlq, entry.first_received_at)
            }
            _ => match self.store.engine().read_op(r.info.envelope_pos)? {
                Op::DeadLetter {
                    failure,
                    dlq,
                    first_received_at,
                    ..
                } => (failure, dlq, first_received_at),
                _ => return Err(self.store.engine().bad_content(r.info.envelope_pos)),
            },
        };
        Ok(DeadLetter {
            payload,
            replaced_payload: replaced,
            metadata: OriginalMetadata {
                id: r.id,
                queue: self.queue_name.clone(),
                enqueued_at_ms: meta.enqueued_at,
                first_received_at_ms: first_received_at,
                delivery_count: r.msg.attempts,
                attributes: meta.attributes,
            },
            failure,
            dlq,
            generation: r.generation,
            status: match r.info.status {
                DeadStatus::Pending => EntryStatus::Pending,
                DeadStatus::Reprocessed(success, at_ms) => {
                    EntryStatus::Reprocessed { success, at_ms }
                }
            },
            dlq_name: self.name(),
        })
    }

    fn load_put(&self, pos: u64) -> Result<(PutMeta, Vec<u8>, Option<Vec<u8>>)> {
        let rec = self.store.engine().read_record(pos)?;
        match record::decode(&rec) {
            Ok(Decoded::Put(put)) => {
                let replaced = match &put.meta.cause {
                    PutCause::CorrectedReplay {
                        previous_payload, ..
                    } => Some(previous_payload.clone()),
                    PutCause::Imported(entry) => entry.replaced_payload.clone(),
                    PutCause::Enqueue => None,
                };
                Ok((put.meta, put.payload.to_vec(), replaced))
            }
            _ => Err(self.store.engine().bad_content(pos)),
        }
    }

    /// Failure distributions and the common patterns of the entries matching `filter`.
    pub fn analyze(&self, filter: &Filter) -> Result<Analysis> {
        let mut a = Analysis {
            total: 0,
            by_error_kind: BTreeMap::new(),
            by_worker: BTreeMap::new(),
            by_hour_of_day: [0; 24],
            average_attempts: 0.0,
            time_range: None,
            patterns: Vec::new(),
        };
        let mut attempts_sum = 0u64;
        struct Group {
            count: u64,
            first: u64,
            last: u64,
            workers: BTreeSet<String>,
            messages: HashMap<String, u64>,
            context: HashMap<String, u64>,
        }
        let mut groups: BTreeMap<String, Group> = BTreeMap::new();
        self.scan(filter, None, |e| {
            let at = e.dlq.dead_lettered_at_ms;
            a.total += 1;
            attempts_sum += e.metadata.delivery_count as u64;
            *a.by_error_kind
                .entry(e.failure.error_kind.clone())
                .or_default() += 1;
            let worker = e.dlq.worker.clone().unwrap_or_default();
            *a.by_worker.entry(worker.clone()).or_default() += 1;
            a.by_hour_of_day[((at / 3_600_000) % 24) as usize] += 1;
            a.time_range = Some(match a.time_range {
                None => (at, at),
                Some((lo, hi)) => (lo.min(at), hi.max(at)),
            });
            let g = groups
                .entry(e.failure.error_kind.clone())
                .or_insert_with(|| Group {
                    count: 0,
                    first: at,
                    last: at,
                    workers: BTreeSet::new(),
                    messages: HashMap::new(),
                    context: HashMap::new(),
                });
            g.count += 1;
            g.first = g.first.min(at);
            g.last = g.last.max(at);
            if !worker.is_empty() {
                g.workers.insert(worker);
            }
            *g.messages
                .entry(e.failure.error_message.clone())
                .or_default() += 1;
            for (k, v) in e.failure.context.iter().chain(e.metadata.attributes.iter()) {
                *g.context.entry(format!("{k}={v}")).or_default() += 1;
            }
            true
        })?;
        if a.total > 0 {
            a.average_attempts = attempts_sum as f64 / a.total as f64;
        }
        let top = |m: HashMap<String, u64>, n: usize| {
            let mut v: Vec<(String, u64)> = m.into_iter().collect();
            v.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
            v.truncate(n);
            v
        };
        a.patterns = groups
            .into_iter()
            .filter(|(_, g)| g.count >= 3)
            .map(|(kind, g)| FailurePattern {
                error_kind: kind,
                count: g.count,
                first_ms: g.first,
                last_ms: g.last,
                workers: g.workers,
                common_messages: top(g.messages, 3),
                common_context: top(g.context, 5),
            })
            .collect();
        a.patterns.sort_by(|x, y| {
            y.count
                .cmp(&x.count)
                .then_with(|| x.error_kind.cmp(&y.error_kind))
        });
        Ok(a)
    }

    /// Replays the entries matching `filter` (up to `options.limit`).
    pub fn replay(&self, filter: &Filter, options: &ReplayOptions) -> Result<ReplayReport> {
        let ids = self.ids(filter, options.limit)?;
        self.replay_ids(&ids, options)
    }

    /// Replays one entry.
    pub fn replay_one(&self, id: MessageId, options: &ReplayOptions) -> Result<()> {
        let report = self.replay_ids(&[id], options)?;
        match report.failed.into_iter().next() {
            None => Ok(()),
            Some(_) => Err(self.replay_refusal(id, options)),
        }
    }

    fn replay_refusal(&self, id: MessageId, options: &ReplayOptions) -> Error {
        let st = self.store.engine().lock();
        match self.entry_ref(&st, id) {
            Err(e) => e,
            Ok(r) if matches!(r.info.status, DeadStatus::Reprocessed(..)) && !options.force => {
                Error::AlreadyReprocessed(id)
            }
            Ok(_) => Error::InvalidState {
                id,
                expected: "a DLQ entry",
            },
        }
    }

    /// Replays the given entries, one record each, in one batch sharing one fsync.
    pub fn replay_ids(&self, ids: &[MessageId], options: &ReplayOptions) -> Result<ReplayReport> {
        let target = match &options.target {
            Some(name) => Some(self.store.declare(name)?),
            None => None,
        };
        let now = self.store.now();
        let visible_at = now + options.delay.as_millis() as u64;
        let mut report = ReplayReport {
            dry_run: options.dry_run,
            ..ReplayReport::default()
        };
        let mut st = self.store.engine().lock();
        let mut batch = Vec::new();
        for &id in ids {
            let r = match self.entry_ref(&st, id) {
                Ok(r) => r,
                Err(e) => {
                    report.failed.push((id, e.to_string()));
                    continue;
                }
            };
            if matches!(r.info.status, DeadStatus::Reprocessed(..)) && !options.force {
                report
                    .failed
                    .push((id, Error::AlreadyReprocessed(id).to_string()));
                continue;
            }
            report.replayed.push(id);
            batch.push(op_entry(Op::Replay {
                id,
                queue: target.unwrap_or(r.msg.queue),
                at: now,
                visible_at,
                attempts: if options.reset_attempts {
                    0
                } else {
                    r.msg.attempts
                },
                generation: r.generation + 1,
            })?);
        }
        if options.dry_run || batch.is_empty() {
            return Ok(report);
        }
        let effects = self.store.engine().write_locked(&mut st, batch)?;
        drop(st);
        self.store.finish(effects)?;
        Ok(report)
    }

    /// Replays one entry with a corrected payload (the failed bytes stay in its history as
    /// [`DeadLetter::replaced_payload`] if it fails again).
    pub fn replay_corrected(
        &self,
        id: MessageId,
        payload: impl AsRef<[u8]>,
        options: &ReplayOptions,
    ) -> Result<()> {
        let payload = payload.as_ref();
        let max = self.store.config().max_message_size;
        if payload.len() > max {
            return Err(Error::TooLarge {
                size: payload.len(),
                max,
            });
        }
        let target = match &options.target {
            Some(name) => Some(self.store.declare(name)?),
            None => None,
        };
        let now = self.store.now();
        self.store.commit_with(|st| {
            let r = self.entry_ref(st, id)?;
            if matches!(r.info.status, DeadStatus::Reprocessed(..)) && !options.force {
                return Err(Error::AlreadyReprocessed(id));
            }
            let (old_meta, old_payload, _) = self.load_put(r.msg.payload_pos)?;
            let attempts = if options.reset_attempts {
                0
            } else {
                r.msg.attempts
            };
            let meta = PutMeta {
                id,
                queue: target.unwrap_or(r.msg.queue),
                enqueued_at: old_meta.enqueued_at,
                visible_at: now + options.delay.as_millis() as u64,
                expires_at: None,
                attributes: old_meta.attributes,
                idempotency_key: None,
                cause: PutCause::CorrectedReplay {
                    previous_payload: old_payload,
                    attempts,
                    generation: r.generation + 1,
                    from_dlq: self.queue,
                },
            };
            let mut body = Vec::with_capacity(payload.len() + 64);
            record::encode_put(&mut body, &meta, payload)?;
            Ok((vec![(body, Decoded::Put(Put { meta, payload }))], ()))
        })
    }

    /// Imports an exported entry into this DLQ (one record): payload, history and metadata
    /// are kept; the entry gets a new id in this store, which is returned. Its status is
    /// pending again.
    pub fn import(&self, entry: &DeadLetter) -> Result<MessageId> {
        let max = self.store.config().max_message_size;
        if entry.payload.len() > max {
            return Err(Error::TooLarge {
                size: entry.payload.len(),
                max,
            });
        }
        self.store.commit_with(|st| {
            let id = st.next_id;
            let meta = PutMeta {
                id,
                queue: self.queue,
                enqueued_at: entry.metadata.enqueued_at_ms,
                visible_at: 0,
                expires_at: None,
                attributes: entry.metadata.attributes.clone(),
                idempotency_key: None,
                cause: PutCause::Imported(Box::new(ImportedEntry {
                    failure: entry.failure.clone(),
                    dlq: entry.dlq.clone(),
                    first_received_at: entry.metadata.first_received_at_ms,
                    attempts: entry.metadata.delivery_count,
                    generation: entry.generation,
                    replaced_payload: entry.replaced_payload.clone(),
                    original_id: entry.metadata.id,
                })),
            };
            let mut body = Vec::with_capacity(entry.payload.len() + 256);
            record::encode_put(&mut body, &meta, &entry.payload)?;
            let payload = entry.payload.as_slice();
            Ok((vec![(body, Decoded::Put(Put { meta, payload }))], id))
        })
    }

    /// Records that an entry was reprocessed outside the queue, with its outcome. The entry
    /// stays in the DLQ (no longer pending) until deleted or purged.
    pub fn mark_reprocessed(&self, id: MessageId, success: bool) -> Result<()> {
        let at = self.store.now();
        self.store.commit_with(|st| {
            self.entry_ref(st, id)?;
            let op = Op::MarkReprocessed { id, success, at };
            Ok((vec![op_entry(op)?], ()))
        })
    }

    /// Deletes one entry for good.
    pub fn delete(&self, id: MessageId) -> Result<()> {
        self.delete_ids(&[id], false).map(|_| ())
    }

    /// Deletes the entries matching `filter`; returns how many.
    pub fn delete_matching(&self, filter: &Filter) -> Result<u64> {
        let ids = self.ids(filter, None)?;
        self.delete_ids(&ids, false)
    }

    fn delete_ids(&self, ids: &[MessageId], expired: bool) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let at = self.store.now();
        self.store.commit_with(|st| {
            for &id in ids {
                self.entry_ref(st, id)?;
            }
            let ids = ids.to_vec();
            let count = ids.len() as u64;
            Ok((vec![op_entry(Op::Delete { at, ids, expired })?], count))
        })
    }

    /// Deletes entries dead-lettered more than `older_than` ago. Pending entries are kept
    /// unless `include_pending`. Returns how many were deleted.
    pub fn purge(&self, older_than: Duration, include_pending: bool) -> Result<u64> {
        let cutoff = self
            .store
            .now()
            .saturating_sub(older_than.as_millis() as u64);
        let ids: Vec<MessageId> = {
            let st = self.store.engine().lock();
            st.queues[self.queue as usize]
                .dlq_order
                .range(..(cutoff, 0))
                .filter(|(_, id)| {
                    include_pending
                        || st
                            .dead
                            .get(id)
                            .is_some_and(|d| d.status != DeadStatus::Pending)
                })
                .map(|&(_, id)| id)
                .collect()
        };
        self.delete_ids(&ids, false)
    }

    /// Removes entries whose retention passed; returns how many. Compaction does this on
    /// its own; this is for tools and tests.
    pub fn expire_retention(&self) -> Result<u64> {
        self.expire_retention_at(self.store.expiry_now())
    }

    pub(crate) fn expire_retention_at(&self, now: u64) -> Result<u64> {
        let ids: Vec<MessageId> = {
            let st = self.store.engine().lock();
            st.queues[self.queue as usize]
                .dlq_order
                .iter()
                .filter(|(_, id)| {
                    st.dead
                        .get(id)
                        .and_then(|d| d.expires_at)
                        .is_some_and(|t| t <= now)
                })
                .map(|&(_, id)| id)
                .collect()
        };
        self.delete_ids(&ids, true)
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
