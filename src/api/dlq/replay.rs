//! Replaying DLQ entries back to a queue: one, several, by filter, with corrected payloads.
//! Each replay is one record, so an entry is in the DLQ or back in a queue, never both; all
//! of them go through one path (`Dlq::replay_steps`), which writes a plain replay record for
//! an entry going back with its own payload and a new payload record (the old payload kept
//! in it) for one going back corrected.

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
    /// What the audit trail records with the replay beyond its action
    /// ([`AuditEntry::detail`](crate::audit::AuditEntry::detail)): the transform its
    /// payloads went through, where a corrected payload came from. Not part of the serde
    /// form, so the control protocol's replays keep their encoding: the request that
    /// carries it (`ReplayCorrectedBatch`) does so beside the options.
    #[serde(skip)]
    pub detail: Option<String>,
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
        /// Records `detail` with the replay in the audit trail.
        detail(detail: impl Into<String>) => detail = Some(detail.into());
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

/// One entry's corrected payload, for [`Dlq::replay_corrected_batch`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Correction {
    /// The entry.
    pub id: MessageId,
    /// The payload it is replayed with.
    pub payload: Vec<u8>,
    /// The entry's [`generation`](crate::dlq::DeadLetter::generation) when its payload was
    /// read to make this one: the replay of an entry replayed (and dead-lettered again)
    /// since is refused, as the payload corrected may not be its payload any more. `None`:
    /// whatever it is now.
    pub generation: Option<u32>,
}

impl Correction {
    /// Entry `id` with `payload`, whatever its generation.
    pub fn new(id: MessageId, payload: impl Into<Vec<u8>>) -> Self {
        Correction {
            id,
            payload: payload.into(),
            generation: None,
        }
    }

    setters! {
        /// Only if the entry is still at this generation.
        generation(generation: u32) => generation = Some(generation);
    }
}

/// The refusal of a correction made from a generation of entry `id` it is no longer at.
pub(crate) fn stale_correction(id: MessageId) -> Error {
    Error::InvalidState {
        id,
        expected: "the DLQ entry its new payload was made from (it was replayed since)",
    }
}

/// One entry of a replay and the payload it goes back with.
pub(super) struct Step<'p> {
    pub(super) id: MessageId,
    /// Refused unless the entry is at this generation.
    pub(super) generation: Option<u32>,
    /// `None`: its own payload; else this one, in its place.
    pub(super) payload: Option<&'p [u8]>,
}

impl Step<'_> {
    /// Entry `id`, with its own payload.
    pub(super) fn as_it_is(id: MessageId) -> Self {
        Step {
            id,
            generation: None,
            payload: None,
        }
    }
}

/// What a replay does with an entry it cannot replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// Lists it in the report and replays the others.
    Report,
    /// Fails with its error, replaying nothing.
    Fail,
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
    pub(super) fn replayable(
        &self,
        st: &State,
        id: MessageId,
        options: &ReplayOptions,
    ) -> Result<EntryRef> {
        let r = self.entry_ref(st, id)?;
        if matches!(r.info.status, DeadStatus::Reprocessed(..)) && !options.force {
            return Err(Error::AlreadyReprocessed(id));
        }
        Ok(r)
    }

    /// Replays the given entries, one record each, in one batch sharing one fsync.
    pub fn replay_ids(&self, ids: &[MessageId], options: &ReplayOptions) -> Result<ReplayReport> {
        let steps: Vec<Step<'_>> = ids.iter().map(|&id| Step::as_it_is(id)).collect();
        self.replay_steps(&steps, options, Refusal::Report)
    }

    /// Replays one entry with a corrected payload (the failed bytes stay in its history as
    /// [`DeadLetter::replaced_payload`](crate::dlq::DeadLetter::replaced_payload) if it
    /// fails again). A payload equal to the entry's own is a plain replay: nothing was
    /// replaced.
    pub fn replay_corrected(
        &self,
        id: MessageId,
        payload: impl AsRef<[u8]>,
        options: &ReplayOptions,
    ) -> Result<()> {
        let payload = payload.as_ref();
        // Before the target queue is declared: a refused payload creates nothing.
        self.store.check_size(payload.len())?;
        let step = Step {
            id,
            generation: None,
            payload: Some(payload),
        };
        self.replay_steps(&[step], options, Refusal::Fail)
            .map(|_| ())
    }

    /// Replays entries, each with its corrected payload, in one batch sharing one fsync
    /// (as [`Dlq::replay_corrected`] does one). An entry that cannot be replayed (no longer
    /// in the DLQ, reprocessed without `options.force`, its payload over the size limit,
    /// or replayed since the generation its correction names) is left as it is and listed
    /// in [`ReplayReport::failed`] with the reason.
    pub fn replay_corrected_batch(
        &self,
        corrections: &[Correction],
        options: &ReplayOptions,
    ) -> Result<ReplayReport> {
        let steps: Vec<Step<'_>> = corrections
            .iter()
            .map(|c| Step {
                id: c.id,
                generation: c.generation,
                payload: Some(&c.payload),
            })
            .collect();
        self.replay_steps(&steps, options, Refusal::Report)
    }

    /// The one replay path: each step's entry back to a queue, with its own payload or a
    /// corrected one, one record each and one audit record for them all, in one batch.
    /// A step that cannot be replayed is reported (or, with [`Refusal::Fail`], fails the
    /// whole call with its error, nothing written).
    pub(super) fn replay_steps(
        &self,
        steps: &[Step<'_>],
        options: &ReplayOptions,
        refusal: Refusal,
    ) -> Result<ReplayReport> {
        let target = options.declare_target(&self.store)?;
        let now = self.store.now();
        let visible_at = now + options.delay.as_millis() as u64;
        // Each replayed entry's target queue and attributes, for its trace event.
        let mut traced = Vec::new();
        let trace = spans::replays_traced() && !options.dry_run;
        let report = self.store.commit_with(|st| {
            let mut report = ReplayReport::new(options.dry_run);
            report.replayed.reserve(steps.len());
            // Sized once, the audit record included: a replay of many entries otherwise
            // spends a third of its time moving this batch (large entries) as it grows.
            let mut batch = Vec::with_capacity(steps.len() + 1);
            for step in steps {
                let r = match self.step_ref(st, step, options) {
                    Ok(r) => r,
                    Err(e) if refusal == Refusal::Fail => return Err(e),
                    Err(e) => {
                        report.failed.push((step.id, e.to_string()));
                        continue;
                    }
                };
                report.replayed.push(step.id);
                if options.dry_run {
                    continue;
                }
                let queue = target.unwrap_or(r.msg.queue());
                // The entry's payload record: for a corrected payload (kept as the previous
                // one) or for the trace event's attributes.
                let (old_meta, old_payload) = if step.payload.is_some() || trace {
                    let reader = &mut self.store.engine().reader();
                    let (meta, payload, _) = self.load_put(reader, r.msg.payload_pos)?;
                    (Some(meta), step.payload.map(|_| payload))
                } else {
                    (None, None)
                };
                if trace {
                    let attributes = old_meta.as_ref().map(|m| m.attributes.clone());
                    traced.push((
                        step.id,
                        queue_name(st, queue),
                        attributes.unwrap_or_default(),
                    ));
                }
                let attempts = options.attempts_of(&r);
                let generation = r.generation + 1;
                match (step.payload, old_meta, old_payload) {
                    (Some(payload), Some(old_meta), Some(old_payload))
                        if payload != old_payload =>
                    {
                        let meta = PutMeta {
                            id: step.id,
                            queue,
                            enqueued_at: old_meta.enqueued_at,
                            visible_at,
                            expires_at: None,
                            attributes: old_meta.attributes,
                            idempotency_key: None,
                            cause: PutCause::CorrectedReplay {
                                previous_payload: old_payload,
                                attempts,
                                generation,
                                from_dlq: self.queue,
                            },
                        };
                        let mut body = Vec::with_capacity(payload.len() + 64);
                        wire::encode_put(&mut body, &meta, payload)?;
                        batch.push((body, Decoded::Put(Put { meta, payload })));
                    }
                    _ => batch.push(op_entry(Op::Replay {
                        id: step.id,
                        queue,
                        at: now,
                        visible_at,
                        attempts,
                        generation,
                    })?),
                }
            }
            if options.dry_run || batch.is_empty() {
                return Ok((Vec::new(), report));
            }
            let audit = self.store.audit_record(
                now,
                AuditAction::Replay,
                &report.replayed,
                options.detail.as_deref(),
            )?;
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

    /// Step `step`'s entry, if it may be replayed as the step says (see
    /// [`Dlq::replayable`]; a corrected payload within the size limit, made from the
    /// entry's current generation when the step names one).
    fn step_ref(&self, st: &State, step: &Step<'_>, options: &ReplayOptions) -> Result<EntryRef> {
        let r = self.replayable(st, step.id, options)?;
        if let Some(payload) = step.payload {
            self.store.check_size(payload.len())?;
        }
        match step.generation {
            Some(g) if g != r.generation => Err(stale_correction(step.id)),
            _ => Ok(r),
        }
    }
}
