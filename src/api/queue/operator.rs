//! An operator's changes to messages waiting in a queue: retry now, delay, move to the DLQ,
//! delete ([`MessageAction`], [`Queue::apply_action`]).
//!
//! Each is written with the records that already mean it: a `Release` (visible at a new
//! time: now, or the delay's end) per message for retry now and delay, a `DeadLetter` per
//! message (its failure of kind [`MOVED_BY_OPERATOR`], naming the actor and the reason)
//! for a move to the DLQ, one `Delete` for a delete, then the audit record of the change
//! (`AuditAction::RetryNow`, `Delay` with its end, `MoveToDlq` with the reason,
//! `DeleteMessage`, by the handle's actor): all of one call in one write.
//! Invariants: only waiting messages of this queue are changed (an in-flight one is its
//! consumer's until it reports or its lease expires; a DLQ entry has the DLQ's own calls);
//! a refused message is reported and nothing is written for it; a strict call that meets
//! one refuses the whole call and writes nothing.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::browse::QueuedState;
use super::{FailureReport, Queue};
use crate::api::core::types::{Failure, MessageId};
use crate::engine::op_entry;
use crate::engine::record::Op;
use crate::engine::state::AuditAction;
use crate::engine::Batch;
use crate::error::{Error, Result};

/// The error kind of a message an operator moved to the DLQ.
pub const MOVED_BY_OPERATOR: &str = "moved_by_operator";

/// What an operator does to waiting messages ([`Queue::apply_action`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum MessageAction {
    /// A delayed or retrying message becomes visible now (its attempts stay counted).
    RetryNow,
    /// A waiting message becomes visible at this time (ms), which must be in the future.
    DelayUntil(u64),
    /// A waiting message moves to the queue's DLQ, its failure of kind
    /// [`MOVED_BY_OPERATOR`] with this reason and the actor in its message.
    MoveToDlq {
        /// Why, in the operator's words.
        reason: String,
    },
    /// A waiting message is deleted for good.
    Delete,
}

impl MessageAction {
    /// Its name, as the audit trail and the command-line tool say it.
    pub fn name(&self) -> &'static str {
        match self {
            MessageAction::RetryNow => "retry_now",
            MessageAction::DelayUntil(_) => "delay",
            MessageAction::MoveToDlq { .. } => "move_to_dlq",
            MessageAction::Delete => "delete",
        }
    }
}

/// What [`Queue::apply_action`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ActionReport {
    /// The messages changed.
    pub applied: Vec<MessageId>,
    /// The messages refused, with the reason (gone, in flight, in another queue, a DLQ
    /// entry, or a retry now of a message visible already).
    pub refused: Vec<(MessageId, String)>,
}

impl Queue {
    /// Makes delayed or retrying messages visible now (one `Release` record each); strict:
    /// any id that is not such a message of this queue refuses the call, and nothing is
    /// written. Returns the ids changed.
    ///
    /// ```
    /// use deadletter::{Config, Failure, Store};
    /// use deadletter::queue::{FailureReport, QueuedState};
    ///
    /// # let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(&dir, Config::fast())?;
    /// let orders = store.queue("orders")?;
    /// let id = orders.enqueue(b"ORD-1")?;
    /// let msg = orders.lease(1)?.remove(0);
    /// let timeout = Failure::transient("Timeout", "no answer");
    /// let much_later = 4_000_000_000_000; // in 2096
    /// orders.retry(&msg, &FailureReport::new(&timeout), much_later)?;
    /// assert_eq!(orders.message(id)?.state, QueuedState::Retrying);
    ///
    /// orders.retry_now(&[id])?;
    /// assert_eq!(orders.message(id)?.state, QueuedState::Ready);
    /// assert_eq!(orders.lease(1)?[0].attempt(), 2);
    /// // In flight now: its consumer's, so it is refused and nothing changes.
    /// assert!(orders.retry_now(&[id]).is_err());
    /// # Ok::<(), deadletter::Error>(())
    /// ```
    pub fn retry_now(&self, ids: &[MessageId]) -> Result<Vec<MessageId>> {
        self.strict(MessageAction::RetryNow, ids)
    }

    /// Makes waiting messages visible at `until_ms` (in the future; one `Release` record
    /// each), strict as [`Queue::retry_now`].
    pub fn delay_until(&self, ids: &[MessageId], until_ms: u64) -> Result<Vec<MessageId>> {
        self.strict(MessageAction::DelayUntil(until_ms), ids)
    }

    /// Moves waiting messages to the queue's DLQ, each with a failure of kind
    /// [`MOVED_BY_OPERATOR`] whose message names the actor and `reason`; strict as
    /// [`Queue::retry_now`].
    pub fn move_to_dlq(&self, ids: &[MessageId], reason: &str) -> Result<Vec<MessageId>> {
        let reason = reason.to_string();
        self.strict(MessageAction::MoveToDlq { reason }, ids)
    }

    /// Deletes waiting messages for good (one `Delete` record); strict as
    /// [`Queue::retry_now`].
    pub fn delete_messages(&self, ids: &[MessageId]) -> Result<Vec<MessageId>> {
        self.strict(MessageAction::Delete, ids)
    }

    fn strict(&self, action: MessageAction, ids: &[MessageId]) -> Result<Vec<MessageId>> {
        Ok(self.apply_action(&action, ids, true)?.applied)
    }

    /// Applies `action` to the messages `ids` of this queue, in one write. A message it
    /// cannot apply to (gone, in flight, a DLQ entry, in another queue, already visible
    /// for a retry now) is refused: with `strict`, the call returns that message's error
    /// and writes nothing; otherwise it is reported in [`ActionReport::refused`] and the
    /// others are changed (what a command that selected them on a snapshot wants).
    /// [`Error::InvalidConfig`] for a delay to a time not in the future or an empty
    /// reason; [`Error::ReadOnly`] on a snapshot.
    pub fn apply_action(
        &self,
        action: &MessageAction,
        ids: &[MessageId],
        strict: bool,
    ) -> Result<ActionReport> {
        self.store.writable()?;
        let now = self.store.now();
        match action {
            MessageAction::DelayUntil(until) if *until <= now => {
                return Err(Error::InvalidConfig(format!(
                    "a delay until {until} ms is not in the future (now is {now} ms)"
                )));
            }
            MessageAction::MoveToDlq { reason } if reason.trim().is_empty() => {
                return Err(Error::InvalidConfig(
                    "a move to the DLQ needs a reason (it becomes the entry's error message)"
                        .into(),
                ));
            }
            _ => {}
        }
        let failure = match action {
            MessageAction::MoveToDlq { reason } => Some(
                Failure::permanent(
                    MOVED_BY_OPERATOR,
                    format!(
                        "moved to the DLQ by {}: {reason}",
                        self.store.actor().name()
                    ),
                )
                .with_context("actor", self.store.actor().name())
                .with_context("reason", reason.as_str()),
            ),
            _ => None,
        };
        self.store.commit_with(|st| {
            let mut report = ActionReport::default();
            let mut seen = HashSet::with_capacity(ids.len());
            for &id in ids {
                let refusal = match self.pick(st, id, now) {
                    Ok(p) if p.state == QueuedState::InFlight => Err(Error::InvalidState {
                        id,
                        expected: "waiting in its queue (it is in flight: its consumer \
                                   reports its outcome, or its lease expires)",
                    }),
                    Ok(p)
                        if p.state == QueuedState::Ready && *action == MessageAction::RetryNow =>
                    {
                        Err(Error::InvalidState {
                            id,
                            expected: "delayed or retrying (it is visible already)",
                        })
                    }
                    Ok(_) => Ok(()),
                    Err(e) => Err(e),
                };
                match refusal {
                    Ok(()) if !seen.insert(id) => {}
                    Ok(()) => report.applied.push(id),
                    Err(e) if strict => return Err(e),
                    Err(e) => report.refused.push((id, e.to_string())),
                }
            }
            let mut batch: Batch<'_> = Vec::with_capacity(report.applied.len() + 1);
            match action {
                MessageAction::RetryNow | MessageAction::DelayUntil(_) => {
                    let visible_at = match action {
                        MessageAction::DelayUntil(until) => *until,
                        _ => now,
                    };
                    for &id in &report.applied {
                        batch.push(op_entry(Op::Release { id, visible_at })?);
                    }
                }
                MessageAction::MoveToDlq { .. } => {
                    let Some(failure) = failure.as_ref() else {
                        return Err(Error::InvalidConfig(
                            "a move to the DLQ has no failure".into(),
                        ));
                    };
                    let failure_report = FailureReport::new(failure);
                    for &id in &report.applied {
                        let m = *st.msgs.get(&id).ok_or(Error::NotFound(id))?;
                        let op = self.dead_letter_op(st, id, m, &failure_report, now, false)?;
                        batch.push(op_entry(op)?);
                    }
                }
                MessageAction::Delete => {
                    if !report.applied.is_empty() {
                        let ids = report.applied.clone();
                        batch.push(op_entry(Op::Delete {
                            at: now,
                            ids,
                            expired: false,
                        })?);
                    }
                }
            }
            // Who did it, and why (a move's reason) or until when (a delay).
            if !report.applied.is_empty() {
                let (audited, detail) = match action {
                    MessageAction::RetryNow => (AuditAction::RetryNow, None),
                    MessageAction::DelayUntil(until) => (
                        AuditAction::Delay,
                        Some(format!("until {until} (ms since the epoch)")),
                    ),
                    MessageAction::MoveToDlq { reason } => {
                        (AuditAction::MoveToDlq, Some(reason.clone()))
                    }
                    MessageAction::Delete => (AuditAction::DeleteMessage, None),
                };
                let ids = &report.applied;
                batch.push(
                    self.store
                        .audit_record(now, audited, ids, detail.as_deref())?,
                );
            }
            Ok((batch, report))
        })
    }
}
