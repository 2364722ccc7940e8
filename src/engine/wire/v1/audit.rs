//! The wire structs of the audit trail, lineage and tombstones, shared by the audit record
//! (an Op variant) and the checkpoint body, with their conversions to and from the engine's
//! types ([`crate::engine::state::AuditEntry`] and the lineage types).
//!
//! As everywhere in the wire modules, the order of fields and variants is the format.
//! Strings are borrowed from the input when decoding (see [`crate::engine::wire::borrow`]);
//! an id set whose runs break its invariants does not decode.

use crate::engine::fingerprint::Fingerprint;
use crate::engine::state as engine;
use crate::engine::wire::convert::{wire_enum, wire_newtype, wire_struct, Queue, Text};

wire_enum! {
    /// What an audit entry records. Variant indexes: 0 to 6. Read only: version 2 added
    /// actions.
    read_only enum Action: engine::AuditAction {
        Replay,
        Delete,
        Purge,
        Import,
        MarkReprocessed,
        Retention,
        TtlExpiry,
    }
}

wire_struct! {
    /// One audit entry. Read only: version 2 added its detail.
    #[serde(bound(deserialize = "'de: 'a"))]
    read_only struct Entry<'a>: engine::AuditEntry {
        at_ms: u64,
        actor: Text<'a>,
        action: Action,
        ids: Runs,
    }
    // Version 1 records no detail of a change.
    fill { detail: None }
}

wire_newtype! {
    /// An id set as its sorted runs, `(first id, count)`: runs sorted, counts above 0, runs
    /// apart (a set that breaks this does not decode).
    struct Runs(Vec<(u64, u64)>): engine::IdSet {
        of: |e| e.runs().to_vec(),
        into: engine::IdSet::from_runs,
    }
}

wire_enum! {
    /// How a message left the store. Variant indexes: 0 to 4.
    enum Removal: engine::Removal {
        Deleted,
        Purged,
        Retention,
        Ttl,
        Processed,
    }
}

wire_struct! {
    /// A failure that ended a generation.
    #[serde(bound(deserialize = "'de: 'a"))]
    struct Failed<'a>: engine::Failed {
        queue: Queue,
        generation: u32,
        attempts: u32,
        first_received_at: Option<u64>,
        error_kind: Text<'a>,
        message: Text<'a>,
        fingerprint: FingerprintBits,
        worker: Option<Text<'a>>,
        dead_at: u64,
    }
}

wire_newtype! {
    /// A failure fingerprint, its 64 bits.
    struct FingerprintBits(u64): Fingerprint {
        of: |e| e.0,
        into: |bits| Some(Fingerprint(bits)),
    }
}

wire_enum! {
    /// A lineage step's event. Variant indexes: 0 to 4.
    #[serde(bound(deserialize = "'de: 'a"))]
    enum Event<'a>: engine::Event {
        DeadLettered(failed: Box<Failed<'a>>),
        Imported { failed: Box<Failed<'a>>, original_id: u64 },
        Replayed { from: Queue, to: Queue, generation: u32, corrected: bool },
        Marked { success: bool },
        Removed(how: Removal),
    }
}

wire_struct! {
    /// A step of a message's life.
    #[serde(bound(deserialize = "'de: 'a"))]
    struct Step<'a>: engine::Step {
        at: u64,
        actor: Option<Text<'a>>,
        event: Event<'a>,
    }
}

wire_struct! {
    /// The life of a message that was in a DLQ.
    #[serde(bound(deserialize = "'de: 'a"))]
    struct Lineage<'a>: engine::Lineage {
        enqueued_at: Option<u64>,
        steps: Vec<Step<'a>>,
        dropped: u32,
    }
}

wire_struct! {
    /// A message that left the store, with its lineage.
    #[serde(bound(deserialize = "'de: 'a"))]
    struct Tombstone<'a>: engine::Tombstone {
        id: u64,
        removed_at: u64,
        lineage: Lineage<'a>,
    }
}

wire_struct! {
    /// The audit part of a checkpoint body, after the index's tables. Read only: version 2's
    /// trail holds its own entries.
    #[serde(bound(deserialize = "'de: 'a"))]
    read_only struct AuditPart<'a>: engine::AuditSnapshot {
        lineage: Vec<(u64, Lineage<'a>)>,
        tombstones: Vec<Tombstone<'a>>,
        trail: Vec<Entry<'a>>,
        horizon: u64,
    }
}
