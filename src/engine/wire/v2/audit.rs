//! Version 2's audit entries: version 1's with four more actions (an operator's changes to
//! the messages waiting in a queue) and a detail (what more a change was: a replay's
//! transform, an operator's reason), in the audit record and in the checkpoint's audit
//! part. Lineage and tombstones are version 1's ([`crate::engine::wire::v1::audit`]).
//!
//! As everywhere in the wire modules, the order of fields and variants is the format.

use crate::engine::state as engine;
use crate::engine::wire::convert::{wire_enum, wire_struct, Text};
use crate::engine::wire::v1::audit::{Lineage, Runs, Tombstone};

wire_enum! {
    /// What an audit entry records. Variant indexes: 0 to 10 (0 to 6 as in version 1).
    enum Action: engine::AuditAction {
        Replay,
        Delete,
        Purge,
        Import,
        MarkReprocessed,
        Retention,
        TtlExpiry,
        RetryNow,
        Delay,
        MoveToDlq,
        DeleteMessage,
    }
}

wire_struct! {
    /// One audit entry: version 1's fields, then its detail.
    #[serde(bound(deserialize = "'de: 'a"))]
    struct Entry<'a>: engine::AuditEntry {
        at_ms: u64,
        actor: Text<'a>,
        action: Action,
        ids: Runs,
        detail: Option<Text<'a>>,
    }
}

wire_struct! {
    /// The audit part of a checkpoint body, after the index's tables: version 1's, with
    /// this version's trail entries.
    #[serde(bound(deserialize = "'de: 'a"))]
    struct AuditPart<'a>: engine::AuditSnapshot {
        lineage: Vec<(u64, Lineage<'a>)>,
        tombstones: Vec<Tombstone<'a>>,
        trail: Vec<Entry<'a>>,
        horizon: u64,
    }
}
