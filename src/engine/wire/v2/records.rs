//! Version 2's op records: version 1's variants in version 1's order, the audit record with
//! version 2's entry ([`super::audit::Entry`]). Every other wire struct of a record (the
//! payload record's metadata, failures, histories, guarded replays' steps) is version 1's
//! ([`crate::engine::wire::v1::records`]), written as it is there.

use super::audit;
use crate::engine::record as engine;
use crate::engine::wire::convert::{wire_enum, Queue, Text};
use crate::engine::wire::v1::records::{DlqMetadata, FailureInfo, GuardEvent, History, Ids};

wire_enum! {
    /// Every record other than a payload record (tag 2). Variant indexes: 0 to 13, in
    /// version 1's order (the dead-letter record is variant 6 in both, which
    /// `dead_letter_error` relies on).
    #[serde(bound(deserialize = "'de: 'a"))]
    #[allow(clippy::large_enum_variant)]
    enum Op<'a>: engine::Op {
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
