//! The wire structs of the record bodies, and their conversions to and from the engine's
//! records ([`crate::engine::record`]) and the public envelope types.
//!
//! bincode is positional: what a value means is the order of its fields and the order of
//! an enum's variants (a variant is written as its index). So nothing here is ever
//! reordered, renamed into another meaning, added to or removed: these structs are what
//! version-1 stores hold. Encoding borrows from the engine's values (no copies on the
//! write path); decoding borrows from the record body (strings and byte strings are
//! checked against the body's length before anything is allocated, see
//! [`crate::engine::wire::borrow`]), and the conversion into the engine's types copies
//! them out.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::audit;
use crate::engine::envelope;
use crate::engine::record as engine;
use crate::engine::wire::borrow;

/// A string: borrowed from the engine's value when encoding, from the body when decoding
/// (every container says `'de: 'a` for it).
type Text<'a> = &'a str;
type Map<'a> = Cow<'a, BTreeMap<String, String>>;

fn text(s: &str) -> Text<'_> {
    s
}

fn opt_text(s: &Option<String>) -> Option<Text<'_>> {
    s.as_deref()
}

fn owned_opt(s: Option<Text<'_>>) -> Option<String> {
    s.map(str::to_owned)
}

/// The metadata of a payload record (tag 1), before the payload.
#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(super) struct PutMeta<'a> {
    id: u64,
    queue: u32,
    enqueued_at: u64,
    visible_at: u64,
    expires_at: Option<u64>,
    #[serde(deserialize_with = "borrow::map")]
    attributes: Map<'a>,
    idempotency_key: Option<Text<'a>>,
    cause: PutCause<'a>,
}

/// Why a payload record was written. Variant indexes: 0, 1, 2.
#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(super) enum PutCause<'a> {
    Enqueue,
    CorrectedReplay {
        previous_payload: &'a [u8],
        attempts: u32,
        generation: u32,
        from_dlq: u32,
    },
    Imported(Box<ImportedEntry<'a>>),
}

/// The dead-letter part of an imported entry.
#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(super) struct ImportedEntry<'a> {
    failure: FailureInfo<'a>,
    dlq: DlqMetadata<'a>,
    first_received_at: Option<u64>,
    attempts: u32,
    generation: u32,
    replaced_payload: Option<&'a [u8]>,
    original_id: u64,
}

/// A failed attempt.
#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(super) struct Attempt<'a> {
    number: u32,
    at_ms: u64,
    error_kind: Text<'a>,
    error_message: Text<'a>,
    details: Option<Text<'a>>,
    duration_ms: u64,
    worker: Option<Text<'a>>,
}

/// The failure of a dead-lettered message, with its history.
#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(in crate::engine::wire) struct FailureInfo<'a> {
    error_kind: Text<'a>,
    error_message: Text<'a>,
    details: Option<Text<'a>>,
    stack_trace: Option<Text<'a>>,
    attempts: Vec<Attempt<'a>>,
    attempts_dropped: u32,
    failed_at_ms: u64,
    #[serde(deserialize_with = "borrow::map")]
    context: Map<'a>,
}

/// The DLQ's metadata of an entry.
#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(in crate::engine::wire) struct DlqMetadata<'a> {
    dead_lettered_at_ms: u64,
    worker: Option<Text<'a>>,
    environment: Option<Text<'a>>,
    code_version: Option<Text<'a>>,
    #[serde(deserialize_with = "borrow::map")]
    tags: Map<'a>,
    expires_at_ms: Option<u64>,
}

/// The first fields of a dead-letter record (variant 6): the message id and the final
/// error. Decoding it reads only them, so a listing takes the error message without
/// decoding the history, context and DLQ metadata behind it.
#[derive(Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(in crate::engine::wire) struct DeadLetterHead<'a> {
    pub id: u64,
    /// Read to reach the message; the kind a caller wants is the one the index interned.
    #[allow(dead_code)]
    pub error_kind: Text<'a>,
    pub error_message: Text<'a>,
}

/// The failure history a retry record carries.
#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(super) struct History<'a> {
    first_received_at: Option<u64>,
    attempts: Vec<Attempt<'a>>,
    dropped: u32,
}

/// Every record other than a payload record (tag 2). Variant indexes: 0 to 13, in this
/// order.
#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(super) enum Op<'a> {
    DeclareQueue {
        queue: u32,
        name: Text<'a>,
    },
    Lease {
        at: u64,
        deadline: u64,
        ids: Cow<'a, [u64]>,
    },
    Extend {
        deadline: u64,
        ids: Cow<'a, [u64]>,
    },
    Ack {
        at: u64,
        ids: Cow<'a, [u64]>,
    },
    Retry {
        id: u64,
        visible_at: u64,
        history: History<'a>,
    },
    Release {
        id: u64,
        visible_at: u64,
    },
    DeadLetter {
        id: u64,
        failure: FailureInfo<'a>,
        dlq: DlqMetadata<'a>,
        first_received_at: Option<u64>,
        enqueued_at: Option<u64>,
    },
    Replay {
        id: u64,
        queue: u32,
        at: u64,
        visible_at: u64,
        attempts: u32,
        generation: u32,
    },
    Delete {
        at: u64,
        ids: Cow<'a, [u64]>,
        expired: bool,
    },
    MarkReprocessed {
        id: u64,
        success: bool,
        at: u64,
    },
    Reserve {
        at: u64,
        deadline: u64,
        ids: Cow<'a, [u64]>,
    },
    Start {
        at: u64,
        ids: Cow<'a, [u64]>,
    },
    Audit(audit::Entry<'a>),
    Guard {
        guard: u64,
        at: u64,
        event: GuardEvent<'a>,
    },
}

/// A guarded replay's step. Variant indexes: 0 to 4.
#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(super) enum GuardEvent<'a> {
    Start(Plan<'a>),
    Release {
        consumed: u32,
        released: Vec<Released>,
    },
    Pause,
    Resume,
    Cancel,
}

/// A guarded replay's plan, in its start record and in a checkpoint.
#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(super) struct Plan<'a> {
    dlq: u32,
    target: Option<u32>,
    reset_attempts: bool,
    force: bool,
    canary: u32,
    growth_permille: u32,
    max_failure_permille: u32,
    rate_per_sec: Option<u32>,
    selection: Text<'a>,
    actor: Text<'a>,
    ids: Cow<'a, [u64]>,
}

/// An entry a guarded replay's release moved back to a queue.
#[derive(Serialize, Deserialize)]
pub(super) struct Released {
    id: u64,
    queue: u32,
    attempts: u32,
    generation: u32,
}

impl<'a> From<&'a engine::PutMeta> for PutMeta<'a> {
    #[inline]
    fn from(m: &'a engine::PutMeta) -> Self {
        PutMeta {
            id: m.id,
            queue: m.queue,
            enqueued_at: m.enqueued_at,
            visible_at: m.visible_at,
            expires_at: m.expires_at,
            attributes: Cow::Borrowed(&m.attributes),
            idempotency_key: opt_text(&m.idempotency_key),
            cause: match &m.cause {
                engine::PutCause::Enqueue => PutCause::Enqueue,
                engine::PutCause::CorrectedReplay {
                    previous_payload,
                    attempts,
                    generation,
                    from_dlq,
                } => PutCause::CorrectedReplay {
                    previous_payload,
                    attempts: *attempts,
                    generation: *generation,
                    from_dlq: *from_dlq,
                },
                engine::PutCause::Imported(e) => PutCause::Imported(Box::new(ImportedEntry {
                    failure: (&e.failure).into(),
                    dlq: (&e.dlq).into(),
                    first_received_at: e.first_received_at,
                    attempts: e.attempts,
                    generation: e.generation,
                    replaced_payload: e.replaced_payload.as_deref(),
                    original_id: e.original_id,
                })),
            },
        }
    }
}

impl From<PutMeta<'_>> for engine::PutMeta {
    #[inline]
    fn from(m: PutMeta<'_>) -> Self {
        engine::PutMeta {
            id: m.id,
            queue: m.queue,
            enqueued_at: m.enqueued_at,
            visible_at: m.visible_at,
            expires_at: m.expires_at,
            attributes: m.attributes.into_owned(),
            idempotency_key: owned_opt(m.idempotency_key),
            cause: match m.cause {
                PutCause::Enqueue => engine::PutCause::Enqueue,
                PutCause::CorrectedReplay {
                    previous_payload,
                    attempts,
                    generation,
                    from_dlq,
                } => engine::PutCause::CorrectedReplay {
                    previous_payload: previous_payload.to_vec(),
                    attempts,
                    generation,
                    from_dlq,
                },
                PutCause::Imported(e) => {
                    let e = *e;
                    engine::PutCause::Imported(Box::new(engine::ImportedEntry {
                        failure: e.failure.into(),
                        dlq: e.dlq.into(),
                        first_received_at: e.first_received_at,
                        attempts: e.attempts,
                        generation: e.generation,
                        replaced_payload: e.replaced_payload.map(<[u8]>::to_vec),
                        original_id: e.original_id,
                    }))
                }
            },
        }
    }
}

impl<'a> From<&'a envelope::Attempt> for Attempt<'a> {
    fn from(a: &'a envelope::Attempt) -> Self {
        Attempt {
            number: a.number,
            at_ms: a.at_ms,
            error_kind: text(&a.error_kind),
            error_message: text(&a.error_message),
            details: opt_text(&a.details),
            duration_ms: a.duration_ms,
            worker: opt_text(&a.worker),
        }
    }
}

impl From<Attempt<'_>> for envelope::Attempt {
    fn from(a: Attempt<'_>) -> Self {
        envelope::Attempt {
            number: a.number,
            at_ms: a.at_ms,
            error_kind: a.error_kind.to_owned(),
            error_message: a.error_message.to_owned(),
            details: owned_opt(a.details),
            duration_ms: a.duration_ms,
            worker: owned_opt(a.worker),
        }
    }
}

fn attempts_to_wire(attempts: &[envelope::Attempt]) -> Vec<Attempt<'_>> {
    attempts.iter().map(Attempt::from).collect()
}

fn attempts_from_wire(attempts: Vec<Attempt<'_>>) -> Vec<envelope::Attempt> {
    attempts.into_iter().map(envelope::Attempt::from).collect()
}

impl<'a> From<&'a envelope::FailureInfo> for FailureInfo<'a> {
    fn from(f: &'a envelope::FailureInfo) -> Self {
        FailureInfo {
            error_kind: text(&f.error_kind),
            error_message: text(&f.error_message),
            details: opt_text(&f.details),
            stack_trace: opt_text(&f.stack_trace),
            attempts: attempts_to_wire(&f.attempts),
            attempts_dropped: f.attempts_dropped,
            failed_at_ms: f.failed_at_ms,
            context: Cow::Borrowed(&f.context),
        }
    }
}

impl From<FailureInfo<'_>> for envelope::FailureInfo {
    fn from(f: FailureInfo<'_>) -> Self {
        envelope::FailureInfo {
            error_kind: f.error_kind.to_owned(),
            error_message: f.error_message.to_owned(),
            details: owned_opt(f.details),
            stack_trace: owned_opt(f.stack_trace),
            attempts: attempts_from_wire(f.attempts),
            attempts_dropped: f.attempts_dropped,
            failed_at_ms: f.failed_at_ms,
            context: f.context.into_owned(),
        }
    }
}

impl<'a> From<&'a envelope::DlqMetadata> for DlqMetadata<'a> {
    fn from(d: &'a envelope::DlqMetadata) -> Self {
        DlqMetadata {
            dead_lettered_at_ms: d.dead_lettered_at_ms,
            worker: opt_text(&d.worker),
            environment: opt_text(&d.environment),
            code_version: opt_text(&d.code_version),
            tags: Cow::Borrowed(&d.tags),
            expires_at_ms: d.expires_at_ms,
        }
    }
}

impl From<DlqMetadata<'_>> for envelope::DlqMetadata {
    fn from(d: DlqMetadata<'_>) -> Self {
        envelope::DlqMetadata {
            dead_lettered_at_ms: d.dead_lettered_at_ms,
            worker: owned_opt(d.worker),
            environment: owned_opt(d.environment),
            code_version: owned_opt(d.code_version),
            tags: d.tags.into_owned(),
            expires_at_ms: d.expires_at_ms,
        }
    }
}

impl<'a> Op<'a> {
    /// The wire form of `op`.
    #[inline]
    pub(in crate::engine::wire) fn of(op: &'a engine::Op) -> Self {
        match op {
            engine::Op::DeclareQueue { queue, name } => Op::DeclareQueue {
                queue: *queue,
                name: text(name),
            },
            engine::Op::Lease { at, deadline, ids } => Op::Lease {
                at: *at,
                deadline: *deadline,
                ids: Cow::Borrowed(ids),
            },
            engine::Op::Extend { deadline, ids } => Op::Extend {
                deadline: *deadline,
                ids: Cow::Borrowed(ids),
            },
            engine::Op::Ack { at, ids } => Op::Ack {
                at: *at,
                ids: Cow::Borrowed(ids),
            },
            engine::Op::Retry {
                id,
                visible_at,
                history,
            } => Op::Retry {
                id: *id,
                visible_at: *visible_at,
                history: History {
                    first_received_at: history.first_received_at,
                    attempts: attempts_to_wire(&history.attempts),
                    dropped: history.dropped,
                },
            },
            engine::Op::Release { id, visible_at } => Op::Release {
                id: *id,
                visible_at: *visible_at,
            },
            engine::Op::DeadLetter {
                id,
                failure,
                dlq,
                first_received_at,
                enqueued_at,
            } => Op::DeadLetter {
                id: *id,
                failure: failure.into(),
                dlq: dlq.into(),
                first_received_at: *first_received_at,
                enqueued_at: *enqueued_at,
            },
            engine::Op::Replay {
                id,
                queue,
                at,
                visible_at,
                attempts,
                generation,
            } => Op::Replay {
                id: *id,
                queue: *queue,
                at: *at,
                visible_at: *visible_at,
                attempts: *attempts,
                generation: *generation,
            },
            engine::Op::Delete { at, ids, expired } => Op::Delete {
                at: *at,
                ids: Cow::Borrowed(ids),
                expired: *expired,
            },
            engine::Op::MarkReprocessed { id, success, at } => Op::MarkReprocessed {
                id: *id,
                success: *success,
                at: *at,
            },
            engine::Op::Reserve { at, deadline, ids } => Op::Reserve {
                at: *at,
                deadline: *deadline,
                ids: Cow::Borrowed(ids),
            },
            engine::Op::Start { at, ids } => Op::Start {
                at: *at,
                ids: Cow::Borrowed(ids),
            },
            engine::Op::Audit(entry) => Op::Audit(entry.into()),
            engine::Op::Guard { guard, at, event } => Op::Guard {
                guard: *guard,
                at: *at,
                event: match event {
                    engine::GuardEvent::Start(plan) => GuardEvent::Start((&**plan).into()),
                    engine::GuardEvent::Release { consumed, released } => GuardEvent::Release {
                        consumed: *consumed,
                        released: released
                            .iter()
                            .map(|r| Released {
                                id: r.id,
                                queue: r.queue,
                                attempts: r.attempts,
                                generation: r.generation,
                            })
                            .collect(),
                    },
                    engine::GuardEvent::Pause => GuardEvent::Pause,
                    engine::GuardEvent::Resume => GuardEvent::Resume,
                    engine::GuardEvent::Cancel => GuardEvent::Cancel,
                },
            },
        }
    }

    /// The engine's record; `None` when an audit record's id runs break their invariants.
    #[inline]
    pub(in crate::engine::wire) fn into_engine(self) -> Option<engine::Op> {
        Some(match self {
            Op::DeclareQueue { queue, name } => engine::Op::DeclareQueue {
                queue,
                name: name.to_owned(),
            },
            Op::Lease { at, deadline, ids } => engine::Op::Lease {
                at,
                deadline,
                ids: ids.into_owned(),
            },
            Op::Extend { deadline, ids } => engine::Op::Extend {
                deadline,
                ids: ids.into_owned(),
            },
            Op::Ack { at, ids } => engine::Op::Ack {
                at,
                ids: ids.into_owned(),
            },
            Op::Retry {
                id,
                visible_at,
                history,
            } => engine::Op::Retry {
                id,
                visible_at,
                history: engine::History {
                    first_received_at: history.first_received_at,
                    attempts: attempts_from_wire(history.attempts),
                    dropped: history.dropped,
                },
            },
            Op::Release { id, visible_at } => engine::Op::Release { id, visible_at },
            Op::DeadLetter {
                id,
                failure,
                dlq,
                first_received_at,
                enqueued_at,
            } => engine::Op::DeadLetter {
                id,
                failure: failure.into(),
                dlq: dlq.into(),
                first_received_at,
                enqueued_at,
            },
            Op::Replay {
                id,
                queue,
                at,
                visible_at,
                attempts,
                generation,
            } => engine::Op::Replay {
                id,
                queue,
                at,
                visible_at,
                attempts,
                generation,
            },
            Op::Delete { at, ids, expired } => engine::Op::Delete {
                at,
                ids: ids.into_owned(),
                expired,
            },
            Op::MarkReprocessed { id, success, at } => {
                engine::Op::MarkReprocessed { id, success, at }
            }
            Op::Reserve { at, deadline, ids } => engine::Op::Reserve {
                at,
                deadline,
                ids: ids.into_owned(),
            },
            Op::Start { at, ids } => engine::Op::Start {
                at,
                ids: ids.into_owned(),
            },
            Op::Audit(entry) => engine::Op::Audit(entry.into_engine()?),
            Op::Guard { guard, at, event } => engine::Op::Guard {
                guard,
                at,
                event: match event {
                    GuardEvent::Start(plan) => engine::GuardEvent::Start(Box::new(plan.into())),
                    GuardEvent::Release { consumed, released } => engine::GuardEvent::Release {
                        consumed,
                        released: released
                            .into_iter()
                            .map(|r| engine::GuardRelease {
                                id: r.id,
                                queue: r.queue,
                                attempts: r.attempts,
                                generation: r.generation,
                            })
                            .collect(),
                    },
                    GuardEvent::Pause => engine::GuardEvent::Pause,
                    GuardEvent::Resume => engine::GuardEvent::Resume,
                    GuardEvent::Cancel => engine::GuardEvent::Cancel,
                },
            },
        })
    }
}

impl Plan<'_> {
    /// True when the queue ids it names are ones the index can hold.
    pub(super) fn queues_fit(&self) -> bool {
        let fits = |q: u32| q < crate::engine::state::MAX_QUEUES;
        fits(self.dlq) && self.target.is_none_or(fits)
    }
}

impl<'a> From<&'a engine::GuardPlan> for Plan<'a> {
    fn from(p: &'a engine::GuardPlan) -> Self {
        Plan {
            dlq: p.dlq,
            target: p.target,
            reset_attempts: p.reset_attempts,
            force: p.force,
            canary: p.canary,
            growth_permille: p.growth_permille,
            max_failure_permille: p.max_failure_permille,
            rate_per_sec: p.rate_per_sec,
            selection: text(&p.selection),
            actor: text(&p.actor),
            ids: Cow::Borrowed(&p.ids),
        }
    }
}

impl From<Plan<'_>> for engine::GuardPlan {
    fn from(p: Plan<'_>) -> Self {
        engine::GuardPlan {
            dlq: p.dlq,
            target: p.target,
            reset_attempts: p.reset_attempts,
            force: p.force,
            canary: p.canary,
            growth_permille: p.growth_permille,
            max_failure_permille: p.max_failure_permille,
            rate_per_sec: p.rate_per_sec,
            selection: p.selection.to_owned(),
            actor: p.actor.to_owned(),
            ids: p.ids.into_owned(),
        }
    }
}
