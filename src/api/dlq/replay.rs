//! Replaying DLQ entries back to a queue: one, several, by filter, or one with a corrected
//! payload. Each replay is one record, so an entry is in the DLQ or back in a queue, never
//! both.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::{Dlq, EntryRef, Filter};
use crate::api::core::store::{queue_name, Store};
use crate::api::core::types::MessageId;
use crate::api::trace::spans;
use crate::engine::op_entry;
use crate::engine::record::{Decoded, Op, Put, PutCause, PutMeta, QueueId};
use crate::engine::state::{AuditAction, DeadStatus, State};
use crate::engine::wire;
use crate::error::{Error, Result};

/// How to replay DLQ entries ([`Dlq::replay`], [`Dlq::replay_one`], [`Dlq::replay_ids`],
/// [`Dlq::replay_corrected`]): to the queue each failed in or to another one, keeping or
/// resetting the attempt count, at most so many, after a delay, or only as a report.
///
/// ```
/// use std::time::Duration;
/// use deadletter::{Config, Failure, Filter, ReplayOptions, Store};
/// use deadletter::queue::FailureReport;
///
/// # let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(&dir, Config::fast())?;
/// let orders = store.queue("orders")?;
/// orders.enqueue_batch(&["ORD-1", "ORD-2", "ORD-3", "ORD;4"])?;
/// let bug = Failure::permanent("ParseError", "the parser had a bug");
/// for msg in orders.lease(4)? {
///     orders.dead_letter(&msg, &FailureReport::new(&bug))?;
/// }
/// let dlq = orders.dlq();
/// let all = Filter::all();
///
/// // What would a replay do? Nothing changes.
/// let plan = dlq.replay(&all, &ReplayOptions::to_origin().dry_run())?;
/// assert_eq!((plan.replayed.len(), dlq.len()), (4, 4));
///
/// // One entry whose payload was wrong goes back corrected.
/// let bad = dlq.list(&Filter::all(), deadletter::Page::first(10))?
///     .into_iter()
///     .find(|e| e.payload == b"ORD;4")
///     .unwrap();
/// dlq.replay_corrected(bad.id(), b"ORD-4", &ReplayOptions::to_origin().reset_attempts())?;
///
/// // Two more to the queue they failed in, with fresh attempts, visible in a minute
/// // (the limit keeps a fix from being flooded), the rest to a queue of their own.
/// let first = ReplayOptions::to_origin().reset_attempts().limit(2).delay(Duration::from_secs(60));
/// assert_eq!(dlq.replay(&all, &first)?.replayed.len(), 2);
/// dlq.replay(&all, &ReplayOptions::to_queue("orders-manual"))?;
/// assert!(dlq.is_empty());
/// assert_eq!(orders.len(), 3);
/// assert_eq!(store.existing_queue("orders-manual")?.len(), 1);
/// # Ok::<(), deadletter::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
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
    setters! {
        /// Resets the attempt count.
        reset_attempts() => reset_attempts = true;
        /// Replays entries already reprocessed too.
        force() => force = true;
        /// At most `n` entries.
        limit(n: usize) => limit = Some(n);
        /// Only report.
        dry_run() => dry_run = true;
        /// Visible only after `delay`.
        delay(delay: Duration) => delay = delay;
    }

    /// The target queue's id, the queue declared if new (`None`: each entry's own queue).
    pub(crate) fn declare_target(&self, store: &Store) -> Result<Option<QueueId>> {
        self.target.as_deref().map(|t| store.declare(t)).transpose()
    }

    /// The attempt count entry `r` is replayed with.
    fn attempts_of(&self, r: &EntryRef) -> u32 {
        if self.reset_attempts {
            0
        } else {
            r.msg.attempts
        }
    }
}

/// What a replay did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ReplayReport {
    /// Entries replayed (or, for a dry run, that would be).
    pub replayed: Vec<MessageId>,
    /// Entries refused, with the reason.
    pub failed: Vec<(MessageId, String)>,
    /// True for a dry run.
    pub dry_run: bool,
}

impl ReplayReport {
    /// An empty report: a backend adds what it replayed or refused.
    pub fn new(dry_run: bool) -> Self {
        ReplayReport {
            dry_run,
            ..ReplayReport::default()
        }
    }
}

impl Dlq {
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
        match self.replayable(&st, id, options) {
            Err(e) => e,
            Ok(_) => Error::InvalidState {
                id,
                expected: "a DLQ entry",
            },
        }
    }

    /// Entry `id`, if `options` may replay it: [`Error::NotFound`] if it is not in this
    /// DLQ, [`Error::AlreadyReprocessed`] if it was marked and `options.force` is not set.
    fn replayable(&self, st: &State, id: MessageId, options: &ReplayOptions) -> Result<EntryRef> {
        let r = self.entry_ref(st, id)?;
        if matches!(r.info.status, DeadStatus::Reprocessed(..)) && !options.force {
            return Err(Error::AlreadyReprocessed(id));
        }
        Ok(r)
    }

    /// Replays the given entries, one record each, in one batch sharing one fsync.
    pub fn replay_ids(&self, ids: &[MessageId], options: &ReplayOptions) -> Result<ReplayReport> {
        let target = options.declare_target(&self.store)?;
        let now = self.store.now();
        let visible_at = now + options.delay.as_millis() as u64;
        // Each replayed entry's target queue and attributes, for its trace event.
        let mut traced = Vec::new();
        let trace = spans::replays_traced() && !options.dry_run;
        let report = self.store.commit_with(|st| {
            let mut report = ReplayReport::new(options.dry_run);
            report.replayed.reserve(ids.len());
            // Sized once, the audit record included: a replay of many entries otherwise
            // spends a third of its time moving this batch (large entries) as it grows.
            let mut batch = Vec::with_capacity(ids.len() + 1);
            for &id in ids {
                let r = match self.replayable(st, id, options) {
                    Ok(r) => r,
                    Err(e) => {
                        report.failed.push((id, e.to_string()));
                        continue;
                    }
                };
                report.replayed.push(id);
                let queue = target.unwrap_or(r.msg.queue());
                if trace {
                    let reader = &mut self.store.engine().reader();
                    let (meta, _, _) = self.load_put(reader, r.msg.payload_pos)?;
                    traced.push((id, queue_name(st, queue), meta.attributes));
                }
                batch.push(op_entry(Op::Replay {
                    id,
                    queue,
                    at: now,
                    visible_at,
                    attempts: options.attempts_of(&r),
                    generation: r.generation + 1,
                })?);
            }
            if options.dry_run || batch.is_empty() {
                return Ok((Vec::new(), report));
            }
            let audit =
                self.store
                    .audit_record(now, AuditAction::Replay, &report.replayed, None)?;
            batch.push(audit);
            Ok((batch, report))
        })?;
        if !traced.is_empty() {
            let dlq = self.name();
            for (id, queue, attributes) in &traced {
                spans::replayed(&dlq, queue, *id, attributes);
            }
        }
        Ok(report)
    }

    /// Replays one entry with a corrected payload (the failed bytes stay in its history as
    /// [`DeadLetter::replaced_payload`](crate::dlq::DeadLetter::replaced_payload) if it
    /// fails again).
    pub fn replay_corrected(
        &self,
        id: MessageId,
        payload: impl AsRef<[u8]>,
        options: &ReplayOptions,
    ) -> Result<()> {
        let payload = payload.as_ref();
        self.store.check_size(payload.len())?;
        let target = options.declare_target(&self.store)?;
        let now = self.store.now();
        let mut traced = None;
        self.store.commit_with(|st| {
            let r = self.replayable(st, id, options)?;
            let (old_meta, old_payload, _) =
                self.load_put(&mut self.store.engine().reader(), r.msg.payload_pos)?;
            let attempts = options.attempts_of(&r);
            let meta = PutMeta {
                id,
                queue: target.unwrap_or(r.msg.queue()),
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
            wire::encode_put(&mut body, &meta, payload)?;
            if spans::replays_traced() {
                traced = Some((queue_name(st, meta.queue), meta.attributes.clone()));
            }
            let audit = self
                .store
                .audit_record(now, AuditAction::Replay, &[id], None)?;
            Ok((vec![(body, Decoded::Put(Put { meta, payload })), audit], ()))
        })?;
        if let Some((queue, attributes)) = &traced {
            spans::replayed(&self.name(), queue, id, attributes);
        }
        Ok(())
    }
}
