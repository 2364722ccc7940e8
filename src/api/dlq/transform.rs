//! Replaying DLQ entries with each payload passed through a caller's function (a fix for a
//! misnamed field, a jq expression in the command-line tool), or only showing what that
//! would replay.
//!
//! The payloads are read first and the function runs with no lock held, so a slow function
//! holds up no writer; the replay then goes through the one replay path
//! (`Dlq::replay_steps`) with each entry's generation as read, so an entry replayed (and
//! dead-lettered again) in between is refused rather than given a payload made from bytes
//! it no longer has. An entry whose function fails, or that cannot be replayed, stays in
//! the DLQ as it was, listed with the reason.

use std::collections::HashSet;
use std::fmt::Display;

use serde::{Deserialize, Serialize};

use super::replay::{Refusal, Step};
use super::{Dlq, Filter, ReplayOptions, ReplayReport};
use crate::api::core::types::{DeadLetter, EntryStatus, MessageId};
use crate::error::{Error, Result};

/// What a transformed replay did ([`Dlq::replay_transformed`]), or, for a dry run, would do.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TransformReport {
    /// Entries replayed (or, for a dry run, that would be), in the order given.
    pub replayed: Vec<MessageId>,
    /// Those of [`TransformReport::replayed`] whose payload the function gave back
    /// unchanged: they go back as they are (a plain replay, nothing replaced).
    pub unchanged: Vec<MessageId>,
    /// Entries left in the DLQ, with the reason: the function's error, or why the entry
    /// cannot be replayed (not in the DLQ any more, reprocessed, too large a new payload).
    pub failed: Vec<(MessageId, String)>,
    /// For a dry run, each entry that would be replayed with its payload before and after
    /// the function (empty otherwise).
    pub payloads: Vec<PayloadChange>,
    /// True for a dry run.
    pub dry_run: bool,
}

impl TransformReport {
    /// How many replayed entries got a new payload.
    pub fn transformed(&self) -> usize {
        self.replayed.len() - self.unchanged.len()
    }

    /// Adds `other`'s entries after this report's (one report for many calls).
    pub fn extend(&mut self, other: TransformReport) {
        self.replayed.extend(other.replayed);
        self.unchanged.extend(other.unchanged);
        self.failed.extend(other.failed);
        self.payloads.extend(other.payloads);
        self.dry_run |= other.dry_run;
    }
}

/// An entry's payload before and after a transform (a dry run's answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PayloadChange {
    /// The entry.
    pub id: MessageId,
    /// Its payload now.
    pub before: Vec<u8>,
    /// The payload it would be replayed with.
    pub after: Vec<u8>,
}

impl PayloadChange {
    /// Entry `id`'s payload `before` and `after`.
    pub fn new(id: MessageId, before: Vec<u8>, after: Vec<u8>) -> Self {
        PayloadChange { id, before, after }
    }

    /// True when the transform left the payload as it was.
    pub fn is_unchanged(&self) -> bool {
        self.before == self.after
    }
}

/// An entry a transform did not fail on: its generation as read and its payload after the
/// transform.
pub(crate) struct Planned {
    pub(crate) id: MessageId,
    pub(crate) generation: u32,
    pub(crate) payload: Vec<u8>,
    /// True when the transform gave the payload back as it was.
    pub(crate) unchanged: bool,
}

/// The whole of a transformed replay on any backend: reads each entry's generation and
/// payload with `read` (an entry it fails on is listed with the error), runs `transform` on
/// each payload, and hands those it did not fail on (and whose result is within
/// `max_size`) to `replay` in one call, unless `options.dry_run`, which only reports the
/// payloads before and after.
pub(crate) fn replay_transformed_with<F, E>(
    ids: &[MessageId],
    options: &ReplayOptions,
    max_size: usize,
    mut read: impl FnMut(MessageId) -> Result<(u32, Vec<u8>)>,
    mut transform: F,
    replay: impl FnOnce(&[Planned]) -> Result<ReplayReport>,
) -> Result<TransformReport>
where
    F: FnMut(&[u8]) -> std::result::Result<Vec<u8>, E>,
    E: Display,
{
    let mut report = TransformReport {
        dry_run: options.dry_run,
        ..TransformReport::default()
    };
    let mut planned = Vec::with_capacity(ids.len());
    for &id in ids {
        let (generation, before) = match read(id) {
            Ok(read) => read,
            Err(e) => {
                report.failed.push((id, e.to_string()));
                continue;
            }
        };
        let after = match transform(&before) {
            Ok(after) if after.len() > max_size => {
                let e = Error::TooLarge {
                    size: after.len(),
                    max: max_size,
                };
                report.failed.push((id, e.to_string()));
                continue;
            }
            Ok(after) => after,
            Err(e) => {
                report.failed.push((id, e.to_string()));
                continue;
            }
        };
        let unchanged = after == before;
        if options.dry_run {
            report.replayed.push(id);
            if unchanged {
                report.unchanged.push(id);
            }
            report.payloads.push(PayloadChange::new(id, before, after));
        } else {
            planned.push(Planned {
                id,
                generation,
                payload: after,
                unchanged,
            });
        }
    }
    if planned.is_empty() {
        return Ok(report);
    }
    let replay = replay(&planned)?;
    let done: HashSet<MessageId> = replay.replayed.iter().copied().collect();
    report.unchanged.extend(
        planned
            .iter()
            .filter(|p| p.unchanged && done.contains(&p.id))
            .map(|p| p.id),
    );
    report.replayed.extend(replay.replayed);
    report.failed.extend(replay.failed);
    Ok(report)
}

/// What a transform reads of a whole entry (on a backend that reads entries whole): its
/// generation and payload, or [`Error::AlreadyReprocessed`] for one marked reprocessed
/// that `options` does not force.
pub(crate) fn generation_and_payload(
    entry: DeadLetter,
    options: &ReplayOptions,
) -> Result<(u32, Vec<u8>)> {
    if matches!(entry.status, EntryStatus::Reprocessed { .. }) && !options.force {
        return Err(Error::AlreadyReprocessed(entry.id()));
    }
    Ok((entry.generation, entry.payload))
}

impl Dlq {
    /// Replays the entries matching `filter` (up to `options.limit`), each with its payload
    /// passed through `transform`: see [`Dlq::replay_transformed_ids`].
    pub fn replay_transformed<F, E>(
        &self,
        filter: &Filter,
        options: &ReplayOptions,
        transform: F,
    ) -> Result<TransformReport>
    where
        F: FnMut(&[u8]) -> std::result::Result<Vec<u8>, E>,
        E: Display,
    {
        let ids = self.ids(filter, options.limit)?;
        self.replay_transformed_ids(&ids, options, transform)
    }

    /// Replays the given entries, each with the payload `transform` makes of its own, in
    /// one batch sharing one fsync. An entry whose `transform` fails stays in the DLQ as it
    /// was, listed in [`TransformReport::failed`] with the error; one it gives back
    /// unchanged goes back as it is ([`TransformReport::unchanged`]); the others go back as
    /// [`Dlq::replay_corrected`] sends one, their old payload kept in their history. With
    /// `options.dry_run`, nothing changes and [`TransformReport::payloads`] has each
    /// entry's payload before and after.
    ///
    /// `transform` runs with no lock held, after every payload was read (they are all in
    /// memory at once: give a bulk transform in slices of a few hundred ids, as the
    /// command-line tool does); an entry replayed in between is refused.
    ///
    /// ```
    /// use deadletter::{Config, Failure, Filter, ReplayOptions, Store};
    /// use deadletter::queue::FailureReport;
    ///
    /// # let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(&dir, Config::fast())?;
    /// let orders = store.queue("orders")?;
    /// orders.enqueue_batch(&["ord-1", "ORD-2", "ord;3"])?;
    /// let bug = Failure::permanent("ParseError", "lower-case order id");
    /// for msg in orders.lease(3)? {
    ///     orders.dead_letter(&msg, &FailureReport::new(&bug))?;
    /// }
    /// let dlq = orders.dlq();
    /// let upper = |p: &[u8]| match std::str::from_utf8(p) {
    ///     Ok(s) if !s.contains(';') => Ok(s.to_ascii_uppercase().into_bytes()),
    ///     _ => Err("not an order id"),
    /// };
    ///
    /// // What would go back, and with what: nothing changes.
    /// let plan = dlq.replay_transformed(&Filter::all(), &ReplayOptions::to_origin().dry_run(), upper)?;
    /// assert_eq!(plan.payloads[0].after, b"ORD-1");
    /// assert_eq!((plan.transformed(), plan.unchanged.len(), plan.failed.len()), (1, 1, 1));
    /// assert_eq!(dlq.len(), 3);
    ///
    /// let done = dlq.replay_transformed(&Filter::all(), &ReplayOptions::to_origin(), upper)?;
    /// assert_eq!(done.replayed.len(), 2);
    /// assert_eq!(done.failed[0].1, "not an order id"); // "ord;3" stays in the DLQ
    /// assert_eq!(dlq.len(), 1);
    /// let back: Vec<Vec<u8>> = orders.lease(2)?.iter().map(|m| m.payload().to_vec()).collect();
    /// assert_eq!(back, [b"ORD-1".to_vec(), b"ORD-2".to_vec()]);
    /// # Ok::<(), deadletter::Error>(())
    /// ```
    pub fn replay_transformed_ids<F, E>(
        &self,
        ids: &[MessageId],
        options: &ReplayOptions,
        transform: F,
    ) -> Result<TransformReport>
    where
        F: FnMut(&[u8]) -> std::result::Result<Vec<u8>, E>,
        E: Display,
    {
        let max = self.store.config().max_message_size;
        let read = |id| self.read_payload(id, options);
        replay_transformed_with(ids, options, max, read, transform, |planned| {
            let steps: Vec<Step<'_>> = planned
                .iter()
                .map(|p| Step {
                    id: p.id,
                    generation: Some(p.generation),
                    payload: (!p.unchanged).then_some(&p.payload[..]),
                })
                .collect();
            self.replay_steps(&steps, options, Refusal::Report)
        })
    }

    /// Entry `id`'s generation and payload, if `options` may replay it.
    fn read_payload(&self, id: MessageId, options: &ReplayOptions) -> Result<(u32, Vec<u8>)> {
        // The index lock is held for this statement only.
        let r = self.replayable(&self.store.engine().lock(), id, options)?;
        let (_, payload, _) =
            self.load_put(&mut self.store.engine().reader(), r.msg.payload_pos)?;
        Ok((r.generation, payload))
    }
}
