//! The wire structs of the record bodies, with their conversions to and from the engine's
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

use serde::Deserialize;

use super::audit;
use crate::engine::envelope;
use crate::engine::record as engine;
use crate::engine::wire::borrow;
use crate::engine::wire::convert::{wire_enum, wire_struct, Queue, Text};

type Map<'a> = Cow<'a, BTreeMap<String, String>>;
pub(in crate::engine::wire) type Ids<'a> = Cow<'a, [u64]>;

wire_struct! {
    /// The metadata of a payload record (tag 1), before the payload.
    #[serde(bound(deserialize = "'de: 'a"))]
    struct PutMeta<'a>: engine::PutMeta {
        id: u64,
        queue: Queue,
        enqueued_at: u64,
        visible_at: u64,
        expires_at: Option<u64>,
        #[serde(deserialize_with = "borrow::map")]
        attributes: Map<'a>,
        idempotency_key: Option<Text<'a>>,
        cause: PutCause<'a>,
    }
}

wire_enum! {
    /// Why a payload record was written. Variant indexes: 0 to 2.
    #[serde(bound(deserialize = "'de: 'a"))]
    enum PutCause<'a>: engine::PutCause {
        Enqueue,
        CorrectedReplay {
            previous_payload: &'a [u8],
            attempts: u32,
            generation: u32,
            from_dlq: Queue,
        },
        Imported(entry: Box<ImportedEntry<'a>>),
    }
}

wire_struct! {
    /// The dead-letter part of an imported entry.
    #[serde(bound(deserialize = "'de: 'a"))]
    struct ImportedEntry<'a>: engine::ImportedEntry {
        failure: FailureInfo<'a>,
        dlq: DlqMetadata<'a>,
        first_received_at: Option<u64>,
        attempts: u32,
        generation: u32,
        replaced_payload: Option<&'a [u8]>,
        original_id: u64,
    }
}

wire_struct! {
    /// A failed attempt.
    #[serde(bound(deserialize = "'de: 'a"))]
    struct Attempt<'a>: envelope::Attempt {
        number: u32,
        at_ms: u64,
        error_kind: Text<'a>,
        error_message: Text<'a>,
        details: Option<Text<'a>>,
        duration_ms: u64,
        worker: Option<Text<'a>>,
    }
}

wire_struct! {
    /// The failure of a dead-lettered message, with its history.
    #[serde(bound(deserialize = "'de: 'a"))]
    struct FailureInfo<'a>: envelope::FailureInfo {
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
}

wire_struct! {
    /// The DLQ's metadata of an entry.
    #[serde(bound(deserialize = "'de: 'a"))]
    struct DlqMetadata<'a>: envelope::DlqMetadata {
        dead_lettered_at_ms: u64,
        worker: Option<Text<'a>>,
        environment: Option<Text<'a>>,
        code_version: Option<Text<'a>>,
        #[serde(deserialize_with = "borrow::map")]
        tags: Map<'a>,
        expires_at_ms: Option<u64>,
    }
}

/// The first fields of a dead-letter record (variant 6): the message id and the final
/// error. Decoding it reads only them, so a listing takes the error message without
/// decoding the history, context and DLQ metadata behind it.
#[derive(Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(super) struct DeadLetterHead<'a> {
    pub id: u64,
    /// Read to reach the message; the kind a caller wants is the one the index interned.
    #[allow(dead_code)]
    pub error_kind: Text<'a>,
    pub error_message: Text<'a>,
}

wire_struct! {
    /// The failure history a retry record carries.
    #[serde(bound(deserialize = "'de: 'a"))]
    struct History<'a>: engine::History {
        first_received_at: Option<u64>,
        attempts: Vec<Attempt<'a>>,
        dropped: u32,
    }
}

wire_enum! {
    /// Every record other than a payload record (tag 2). Variant indexes: 0 to 13, in this
    /// order. (A value lives for one record's encoding or decoding: boxing the dead-letter
    /// variant's envelope would only add an allocation.)
    ///
    /// Read only: version 2's audit entries differ.
    #[serde(bound(deserialize = "'de: 'a"))]
    #[allow(clippy::large_enum_variant)]
    read_only enum Op<'a>: engine::Op {
        DeclareQueue { queue: Queue, name: Text<'a> },
        Lease { at: u64, deadline: u64, ids: Ids<'a> },
        Extend { deadline: u64, ids: Ids<'a> },
        Ack { at: u64, ids: Ids<'a> },
        Retry { id: u64, visible_at: u64, history: History<'a> },
        Release { id: u64, visible_at: u64 },
        DeadLetter {
            id: u64,
            failure: FailureInfo<'a>,
            dlq: DlqMetadata<'a>,
            first_received_at: Option<u64>,
            enqueued_at: u64,
        },
        Replay {
            id: u64,
            queue: Queue,
            at: u64,
            visible_at: u64,
            attempts: u32,
            generation: u32,
        },
        Delete { at: u64, ids: Ids<'a>, expired: bool },
        MarkReprocessed { id: u64, success: bool, at: u64 },
        Reserve { at: u64, deadline: u64, ids: Ids<'a> },
        Start { at: u64, ids: Ids<'a> },
        Audit(entry: audit::Entry<'a>),
        Guard { guard: u64, at: u64, event: GuardEvent<'a> },
    }
}

wire_enum! {
    /// A guarded replay's step. Variant indexes: 0 to 4.
    #[serde(bound(deserialize = "'de: 'a"))]
    enum GuardEvent<'a>: engine::GuardEvent {
        Start(plan: Box<Plan<'a>>),
        Release { consumed: u32, released: Vec<Released> },
        Pause,
        Resume,
        Cancel,
    }
}

wire_struct! {
    /// A guarded replay's plan, in its start record and in a checkpoint.
    #[serde(bound(deserialize = "'de: 'a"))]
    struct Plan<'a>: engine::GuardPlan {
        dlq: Queue,
        target: Option<Queue>,
        reset_attempts: bool,
        force: bool,
        canary: u32,
        growth_permille: u32,
        max_failure_permille: u32,
        rate_per_sec: Option<u32>,
        selection: Text<'a>,
        actor: Text<'a>,
        ids: Ids<'a>,
    }
}

wire_struct! {
    /// An entry a guarded replay's release moved back to a queue.
    struct Released: engine::GuardRelease {
        id: u64,
        queue: Queue,
        attempts: u32,
        generation: u32,
    }
}
