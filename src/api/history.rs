//! The whole life of one message ([`Store::history`]): enqueue, its failed deliveries,
//! each dead-lettering, replay and mark, and its removal, who did what where known.
//!
//! Built from the index: the lineage of a message that was in a DLQ (kept in checkpoints,
//! so it outlives compaction), its tombstone once it left the store, the audit trail for
//! a message that never reached a DLQ, and, while the message is in the store, its
//! payload record (enqueue time) and current failure history. The audit trail itself
//! ([`Store::audit_trail`]) is read here too.

use serde::{Deserialize, Serialize};

use crate::api::core::store::{queue_name, Store};
use crate::api::core::types::MessageId;
use crate::engine::fingerprint::Fingerprint;
use crate::engine::record::QueueId;
use crate::engine::state::{AuditAction, AuditEntry, Event, Lineage, Place, Removal, Step};
use crate::error::{Error, Result};

/// Where a message is now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
#[non_exhaustive]
pub enum MessageState {
    /// Waiting in a queue.
    Queued {
        /// The queue.
        queue: String,
    },
    /// Delivered, its handler running.
    InFlight {
        /// The queue.
        queue: String,
    },
    /// In a DLQ.
    InDlq {
        /// The DLQ.
        dlq: String,
    },
    /// Gone from the store.
    Removed {
        /// How, where known (a message that never was in a DLQ is known from the audit
        /// trail only: `None` unless it was removed by TTL).
        how: Option<Removal>,
        /// When.
        at_ms: u64,
    },
}

/// What happened at one step of a message's life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum HistoryEvent {
    /// First enqueued.
    Enqueued {
        /// The queue.
        queue: String,
    },
    /// A delivery failed (from the current generation's failure history).
    Failed {
        /// Delivery number (1 for the first).
        attempt: u32,
        /// Error kind.
        error_kind: String,
        /// Error message.
        message: String,
    },
    /// Moved to a DLQ, ending a generation.
    DeadLettered {
        /// The DLQ.
        dlq: String,
        /// The generation that ended (0: before any replay).
        generation: u32,
        /// Deliveries counted.
        attempts: u32,
        /// Error kind.
        error_kind: String,
        /// Error message (at most 512 bytes).
        message: String,
        /// Failure fingerprint.
        fingerprint: Fingerprint,
        /// The worker that reported it.
        worker: Option<String>,
    },
    /// Arrived in a DLQ from an export.
    Imported {
        /// The DLQ.
        dlq: String,
        /// Its id in the store it was exported from.
        original_id: MessageId,
        /// Error kind.
        error_kind: String,
        /// Error message.
        message: String,
    },
    /// Replayed from a DLQ to a queue: generation `generation` starts.
    Replayed {
        /// The DLQ it left.
        from_dlq: String,
        /// The queue it went to.
        to_queue: String,
        /// The generation it starts.
        generation: u32,
        /// With a corrected payload.
        corrected: bool,
        /// What the audit trail recorded with the replay, while it keeps the entry
        /// ([`AuditEntry::detail`]: the transform, where the corrected payload came from).
        detail: Option<String>,
    },
    /// Marked reprocessed outside the queue.
    MarkedReprocessed {
        /// The outcome.
        success: bool,
    },
    /// Left the store.
    Removed {
        /// How.
        how: Removal,
    },
    /// A change the audit trail records for a message that was never in a DLQ.
    Audited {
        /// What.
        action: AuditAction,
        /// What more it was, when the trail says ([`AuditEntry::detail`]).
        detail: Option<String>,
    },
}

/// One step: when, who (where known), what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct HistoryStep {
    /// When (ms since the epoch).
    pub at_ms: u64,
    /// Who, where known.
    pub actor: Option<String>,
    /// What.
    #[serde(flatten)]
    pub event: HistoryEvent,
}

/// The life of one message, oldest step first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MessageHistory {
    /// The message.
    pub id: MessageId,
    /// Where it is now.
    pub state: MessageState,
    /// Replays (generations after the first).
    pub replays: u32,
    /// Steps, oldest first.
    pub steps: Vec<HistoryStep>,
    /// Older steps no longer kept ([`crate::Config::audit`]).
    pub steps_dropped: u32,
}

impl Store {
    /// The earliest time (ms) from which the store still knows every DLQ entry: what left
    /// a DLQ before it may be forgotten (tombstone and lineage limits,
    /// [`crate::Config::audit`]).
    pub fn audit_horizon(&self) -> u64 {
        self.engine().lock().audit.horizon()
    }

    /// The audit trail, oldest first: the last `limit` changes operators and the store
    /// made to DLQs, within what the store keeps ([`crate::Config::audit`]).
    pub fn audit_trail(&self, limit: usize) -> Vec<AuditEntry> {
        let st = self.engine().lock();
        let mut newest: Vec<AuditEntry> = st.audit.trail().rev().take(limit).cloned().collect();
        newest.reverse();
        newest
    }

    /// The whole life of message `id`: enqueue, failed deliveries, each dead-lettering
    /// (with its failure), each replay generation and its outcome, marks, and its removal,
    /// with who did it where known. Answered from what the store keeps, so after
    /// compaction and a reopen too: the lineage of every message that was in a DLQ, the
    /// tombstones of those removed (bounded, [`crate::Config::audit`]) and the audit trail.
    /// [`Error::NotFound`] when the store knows nothing of it.
    pub fn history(&self, id: MessageId) -> Result<MessageHistory> {
        let engine = self.engine();
        let st = engine.lock();
        let queue_name = |q: QueueId| queue_name(&st, q);
        let dlq_name = |q: QueueId| self.dlq_name(&queue_name(q));
        let live = st.msgs.get(&id).copied();
        let tombstone = st.audit.tombstone(id);
        let lineage: Option<&Lineage> = st.audit.lineage(id).or(tombstone.map(|t| &t.lineage));
        let mut steps = Vec::new();
        // Enqueue.
        let enqueued_at = match (lineage.and_then(|l| l.enqueued_at), live) {
            (Some(t), _) => Some(t),
            (None, Some(m)) => Some(engine.read_enqueued_at(m.payload_pos)?),
            (None, None) => None,
        };
        let first_queue = lineage
            .and_then(first_failure_queue)
            .or(live.map(|m| m.queue()))
            .unwrap_or(0);
        if let Some(at) = enqueued_at {
            let queue = queue_name(first_queue);
            steps.push(step(at, None, HistoryEvent::Enqueued { queue }));
        }
        if let Some(l) = lineage {
            for s in &l.steps {
                let mut event = event_of(s, &queue_name, &dlq_name);
                if let HistoryEvent::Replayed { detail, .. } = &mut event {
                    // The audit entry of the replay: its time and actor are the step's.
                    *detail = st
                        .audit
                        .trail()
                        .rev()
                        .find(|e| {
                            e.action == AuditAction::Replay
                                && e.at_ms == s.at
                                && s.actor.as_deref() == Some(e.actor.as_str())
                                && e.ids.contains(id)
                        })
                        .and_then(|e| e.detail.clone());
                }
                steps.push(step(s.at, s.actor.clone(), event));
            }
        } else {
            for e in st.audit.trail().filter(|e| e.ids.contains(id)) {
                let audited = HistoryEvent::Audited {
                    action: e.action,
                    detail: e.detail.clone(),
                };
                steps.push(step(e.at_ms, Some(e.actor.clone()), audited));
            }
        }
        // The current generation's failed deliveries, while the message is in a queue.
        if live.is_some_and(|m| m.place() != Place::Dead) {
            let history_pos = st.extras.get(&id).and_then(|e| e.history_pos);
            let since = lineage.and_then(|l| l.steps.last()).map_or(0, |s| s.at);
            for a in engine.read_history(history_pos)?.attempts {
                if a.at_ms >= since {
                    let failed = HistoryEvent::Failed {
                        attempt: a.number,
                        error_kind: a.error_kind,
                        message: a.error_message,
                    };
                    steps.push(step(a.at_ms, None, failed));
                }
            }
        }
        steps.sort_by_key(|s| s.at_ms);
        let state = match (live, tombstone) {
            (Some(m), _) => live_state(m.place(), m.queue(), &queue_name, &dlq_name),
            (None, Some(t)) => MessageState::Removed {
                how: t.lineage.removal().map(|(_, how)| how),
                at_ms: t.removed_at,
            },
            (None, None) => match steps.last() {
                Some(last) => MessageState::Removed {
                    how: matches!(
                        last.event,
                        HistoryEvent::Audited {
                            action: AuditAction::TtlExpiry,
                            ..
                        }
                    )
                    .then_some(Removal::Ttl),
                    at_ms: last.at_ms,
                },
                None => return Err(Error::NotFound(id)),
            },
        };
        Ok(MessageHistory {
            id,
            state,
            replays: lineage.map_or(0, Lineage::replays),
            steps,
            steps_dropped: lineage.map_or(0, |l| l.dropped),
        })
    }
}

fn step(at_ms: u64, actor: Option<String>, event: HistoryEvent) -> HistoryStep {
    HistoryStep {
        at_ms,
        actor,
        event,
    }
}

/// The queue a lineage's message first failed in (the queue it was enqueued in, unless
/// its oldest steps were dropped).
fn first_failure_queue(lineage: &Lineage) -> Option<QueueId> {
    lineage.steps.iter().find_map(|s| match &s.event {
        Event::DeadLettered(f) | Event::Imported { failed: f, .. } => Some(f.queue),
        _ => None,
    })
}

fn live_state(
    place: Place,
    queue: QueueId,
    queue_name: &impl Fn(QueueId) -> String,
    dlq_name: &impl Fn(QueueId) -> String,
) -> MessageState {
    match place {
        Place::Dead => MessageState::InDlq {
            dlq: dlq_name(queue),
        },
        Place::Leased => MessageState::InFlight {
            queue: queue_name(queue),
        },
        Place::Ready | Place::ReadyAfterLostLease => MessageState::Queued {
            queue: queue_name(queue),
        },
    }
}

fn event_of(
    s: &Step,
    queue_name: &impl Fn(QueueId) -> String,
    dlq_name: &impl Fn(QueueId) -> String,
) -> HistoryEvent {
    match &s.event {
        Event::DeadLettered(f) => HistoryEvent::DeadLettered {
            dlq: dlq_name(f.queue),
            generation: f.generation,
            attempts: f.attempts,
            error_kind: f.error_kind.clone(),
            message: f.message.clone(),
            fingerprint: f.fingerprint,
            worker: f.worker.clone(),
        },
        Event::Imported {
            failed,
            original_id,
        } => HistoryEvent::Imported {
            dlq: dlq_name(failed.queue),
            original_id: *original_id,
            error_kind: failed.error_kind.clone(),
            message: failed.message.clone(),
        },
        Event::Replayed {
            from,
            to,
            generation,
            corrected,
        } => HistoryEvent::Replayed {
            from_dlq: dlq_name(*from),
            to_queue: queue_name(*to),
            generation: *generation,
            corrected: *corrected,
            detail: None,
        },
        Event::Marked { success } => HistoryEvent::MarkedReprocessed { success: *success },
        Event::Removed(how) => HistoryEvent::Removed { how: *how },
    }
}
