//! Outcomes of a delivery: ack, extend, release, retry and dead-letter, and the records
//! that move a message to its DLQ (a failure, or its TTL passing).
//!
//! A failure report is built once ([`Queue::report_failure`]) and settled as its caller
//! asks: durably for [`Queue::retry`] and [`Queue::dead_letter`]; only handed to the
//! operating system for the worker pool, which makes its reports durable with its next
//! reservation or an explicit sync before it counts them settled (see `api::worker`).

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Message, Queue};
use crate::api::core::config::QueueOptions;
use crate::api::core::types::{Attempt, DlqMetadata, Failure, FailureInfo, MessageId};
use crate::api::trace::spans;
use crate::engine::record::{History, Op};
use crate::engine::state::{Msg, State};
use crate::engine::{op_entry, Settle};
use crate::error::Result;

/// How a failure report moves the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureOutcome {
    /// Retried: visible again at this time (ms).
    Retried {
        /// Next visible time.
        visible_at_ms: u64,
    },
    /// Moved to the DLQ.
    DeadLettered,
}

/// A failure report: what failed, how long the handler ran, and who ran it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FailureReport<'a> {
    /// The failure.
    pub failure: &'a Failure,
    /// How long the handler ran.
    pub duration: Duration,
    /// The worker's name.
    pub worker: Option<&'a str>,
    /// Tags to add to the DLQ entry if the message is dead-lettered.
    pub tags: BTreeMap<String, String>,
}

impl<'a> FailureReport<'a> {
    /// A report with no duration or worker.
    pub fn new(failure: &'a Failure) -> Self {
        FailureReport {
            failure,
            duration: Duration::ZERO,
            worker: None,
            tags: BTreeMap::new(),
        }
    }
    setters! {
        /// Sets the duration.
        duration(d: Duration) => duration = d;
        /// Sets the worker.
        worker(w: &'a str) => worker = Some(w);
    }
    /// Adds a tag to the DLQ entry, if the message is dead-lettered.
    pub fn tag(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.tags.insert(key.into(), value.into());
        self
    }

    /// The history record of this failure of delivery `number` at `at_ms`, as a message's
    /// failure history keeps it (on any backend).
    pub fn attempt(&self, number: u32, at_ms: u64) -> Attempt {
        Attempt {
            number,
            at_ms,
            error_kind: self.failure.kind.clone(),
            error_message: self.failure.message.clone(),
            details: self.failure.details().map(str::to_string),
            duration_ms: self.duration.as_millis() as u64,
            worker: self.worker.map(str::to_string),
        }
    }
}

impl Queue {
    /// Acknowledges a delivered message: it is removed.
    pub fn ack(&self, msg: &Message) -> Result<()> {
        self.ack_all(std::slice::from_ref(msg))
    }

    /// Acknowledges several delivered messages with one record.
    pub fn ack_all(&self, msgs: &[Message]) -> Result<()> {
        let now = self.store.now();
        self.store.commit_with(|st| {
            for m in msgs {
                self.check_lease(st, m)?;
            }
            let ids = msgs.iter().map(|m| m.id).collect();
            Ok((vec![op_entry(Op::Ack { at: now, ids })?], ()))
        })
    }

    /// Extends a lease (heartbeat) to `visibility` from now.
    pub fn extend(&self, msg: &Message, visibility: Duration) -> Result<()> {
        let deadline = self.store.now() + visibility.as_millis().max(1) as u64;
        self.store.commit_with(|st| {
            self.check_lease(st, msg)?;
            let ids = vec![msg.id];
            Ok((vec![op_entry(Op::Extend { deadline, ids })?], ()))
        })
    }

    /// Gives a lease back without an outcome: visible again after `delay`; the delivery
    /// stays counted.
    pub fn release(&self, msg: &Message, delay: Duration) -> Result<()> {
        let visible_at = self.store.now() + delay.as_millis() as u64;
        self.store.commit_with(|st| {
            self.check_lease(st, msg)?;
            let op = Op::Release {
                id: msg.id,
                visible_at,
            };
            Ok((vec![op_entry(op)?], ()))
        })
    }

    /// Reports a failed delivery. A permanent failure, or one on the last allowed attempt,
    /// moves the message to the DLQ; otherwise it becomes visible again at `retry_at_ms`.
    pub fn retry(
        &self,
        msg: &Message,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> Result<FailureOutcome> {
        let (outcome, _) = self.report_failure(Settle::Durable, msg, report, Some(retry_at_ms))?;
        let retry_at = match outcome {
            FailureOutcome::Retried { visible_at_ms } => Some(visible_at_ms),
            FailureOutcome::DeadLettered => None,
        };
        traced_failure(msg, report, retry_at);
        Ok(outcome)
    }

    /// Moves a delivered message to the DLQ at once (a permanent failure).
    pub fn dead_letter(&self, msg: &Message, report: &FailureReport<'_>) -> Result<()> {
        self.report_failure(Settle::Durable, msg, report, None)?;
        traced_failure(msg, report, None);
        Ok(())
    }

    /// Reports a failed delivery, settled as `mode` says: as [`Queue::retry`] does with
    /// `Some(retry_at_ms)`, as [`Queue::dead_letter`] does with `None`. Returns the outcome
    /// and the log position to pass to `Store::sync_to` to make the report durable (0:
    /// nothing to wait for).
    pub(crate) fn report_failure(
        &self,
        mode: Settle,
        msg: &Message,
        report: &FailureReport<'_>,
        retry_at_ms: Option<u64>,
    ) -> Result<(FailureOutcome, u64)> {
        let max_attempts = retry_at_ms.map(|_| self.store.queue_options(self.id).max_attempts);
        let now = self.store.now();
        self.store.commit_as(mode, |st| {
            let m = self.check_lease(st, msg)?;
            let retry_at_ms = match (retry_at_ms, max_attempts) {
                (Some(at), Some(max)) if !report.failure.is_permanent() && m.attempts < max => at,
                _ => {
                    let op = self.dead_letter_op(st, msg.id, m, report, now, true)?;
                    return Ok((vec![op_entry(op)?], FailureOutcome::DeadLettered));
                }
            };
            let mut history = self.history(st, msg.id)?;
            let max_history = self.store.config().max_history;
            history.push(report.attempt(m.attempts, now), max_history);
            // At least one millisecond ahead: a message retried at once goes behind the
            // messages already waiting, never ahead of them on a tie.
            let visible_at = retry_at_ms.max(now + 1);
            let op = Op::Retry {
                id: msg.id,
                visible_at,
                history,
            };
            let outcome = FailureOutcome::Retried {
                visible_at_ms: visible_at,
            };
            Ok((vec![op_entry(op)?], outcome))
        })
    }

    /// Builds the dead-letter record of message `id`.
    pub(crate) fn dead_letter_op(
        &self,
        st: &State,
        id: MessageId,
        m: Msg,
        report: &FailureReport<'_>,
        now: u64,
        record_attempt: bool,
    ) -> Result<Op> {
        let config = self.store.config();
        let mut history = self.history(st, id)?;
        if record_attempt
            || report.failure.kind == "ConsumerDied"
            || report.failure.kind == "LeaseExpired"
        {
            history.push(report.attempt(m.attempts, now), config.max_history);
        }
        let enqueued_at = self.store.engine().read_enqueued_at(m.payload_pos)?;
        let f = report.failure;
        Ok(Op::DeadLetter {
            id,
            failure: FailureInfo {
                error_kind: f.kind.clone(),
                error_message: f.message.clone(),
                details: f.details().map(str::to_string),
                stack_trace: if config.include_stack_traces {
                    f.stack_trace().map(str::to_string)
                } else {
                    None
                },
                attempts: history.attempts,
                attempts_dropped: history.dropped,
                failed_at_ms: now,
                context: f.context().clone(),
            },
            dlq: DlqMetadata {
                dead_lettered_at_ms: now,
                worker: report.worker.map(str::to_string),
                environment: config.environment.clone(),
                code_version: config.code_version.clone(),
                tags: report.tags.clone(),
                expires_at_ms: config.retention.map(|r| now + r.as_millis() as u64),
            },
            first_received_at: history.first_received_at,
            enqueued_at,
        })
    }

    /// The failure history message `id` has so far, with when it was first received.
    fn history(&self, st: &State, id: MessageId) -> Result<History> {
        let extra = st.extras.get(&id);
        let pos = extra.and_then(|e| e.history_pos);
        let mut history = self.store.engine().read_history(pos)?;
        history.first_received_at = extra.and_then(|e| e.first_received_at);
        Ok(history)
    }

    /// The record that expires message `id` (TTL): to the DLQ or deleted.
    pub(crate) fn expire_op(
        &self,
        st: &State,
        id: MessageId,
        m: Msg,
        now: u64,
        options: &QueueOptions,
    ) -> Result<Op> {
        if options.expired_to_dlq {
            let failure = Failure::permanent(
                crate::engine::state::EXPIRED_KIND,
                "the message's time to live passed",
            );
            let report = FailureReport::new(&failure);
            self.dead_letter_op(st, id, m, &report, now, false)
        } else {
            Ok(Op::Delete {
                at: now,
                ids: vec![id],
                expired: true,
            })
        }
    }
}

/// The failure's event (feature `tracing`): retried at `retry_at`, or dead-lettered.
fn traced_failure(msg: &Message, report: &FailureReport<'_>, retry_at: Option<u64>) {
    let kind = &report.failure.kind;
    spans::failed(
        msg.queue(),
        msg.id(),
        msg.attempt(),
        kind,
        retry_at,
        msg.attributes(),
    );
}
