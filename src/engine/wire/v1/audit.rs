//! The wire structs of the audit trail, lineage and tombstones, shared by the audit record
//! (an Op variant) and the checkpoint body, and their conversions to and from the engine's
//! types ([`crate::engine::state::AuditEntry`] and the lineage types).
//!
//! As everywhere in the wire modules, the order of fields and variants is the format.
//! Strings are borrowed from the input when decoding (see [`crate::engine::wire::borrow`]);
//! an id set whose runs break its invariants does not decode.

use serde::{Deserialize, Serialize};

use crate::engine::fingerprint::Fingerprint;
use crate::engine::state as engine;

type Text<'a> = &'a str;

/// What an audit entry records. Variant indexes: 0 to 6.
#[derive(Serialize, Deserialize, Clone, Copy)]
pub(super) enum Action {
    Replay,
    Delete,
    Purge,
    Import,
    MarkReprocessed,
    Retention,
    TtlExpiry,
}

/// One audit entry: `ids` are sorted runs `(first id, count)`.
#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(super) struct Entry<'a> {
    at: u64,
    actor: Text<'a>,
    action: Action,
    ids: Vec<(u64, u64)>,
}

/// How a message left the store. Variant indexes: 0 to 4.
#[derive(Serialize, Deserialize, Clone, Copy)]
enum Removal {
    Deleted,
    Purged,
    Retention,
    Ttl,
    Processed,
}

/// A failure that ended a generation.
#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
struct Failed<'a> {
    queue: u32,
    generation: u32,
    attempts: u32,
    first_received_at: Option<u64>,
    error_kind: Text<'a>,
    message: Text<'a>,
    fingerprint: u64,
    worker: Option<Text<'a>>,
    dead_at: u64,
}

/// A lineage step's event. Variant indexes: 0 to 4.
#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
enum Event<'a> {
    DeadLettered(Failed<'a>),
    /// The entry, and its id in the store it was exported from.
    Imported(Failed<'a>, u64),
    Replayed {
        from: u32,
        to: u32,
        generation: u32,
        corrected: bool,
    },
    Marked(bool),
    Removed(Removal),
}

#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
struct Step<'a> {
    at: u64,
    actor: Option<Text<'a>>,
    event: Event<'a>,
}

#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(super) struct Lineage<'a> {
    enqueued_at: Option<u64>,
    steps: Vec<Step<'a>>,
    dropped: u32,
}

#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(super) struct Tombstone<'a> {
    id: u64,
    removed_at: u64,
    lineage: Lineage<'a>,
}

/// The audit part of a checkpoint body, after the index's tables.
#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub(in crate::engine::wire) struct AuditPart<'a> {
    lineage: Vec<(u64, Lineage<'a>)>,
    tombstones: Vec<Tombstone<'a>>,
    trail: Vec<Entry<'a>>,
    horizon: u64,
}

impl From<engine::AuditAction> for Action {
    fn from(a: engine::AuditAction) -> Self {
        use engine::AuditAction as A;
        match a {
            A::Replay => Action::Replay,
            A::Delete => Action::Delete,
            A::Purge => Action::Purge,
            A::Import => Action::Import,
            A::MarkReprocessed => Action::MarkReprocessed,
            A::Retention => Action::Retention,
            A::TtlExpiry => Action::TtlExpiry,
        }
    }
}

impl From<Action> for engine::AuditAction {
    fn from(a: Action) -> Self {
        use engine::AuditAction as A;
        match a {
            Action::Replay => A::Replay,
            Action::Delete => A::Delete,
            Action::Purge => A::Purge,
            Action::Import => A::Import,
            Action::MarkReprocessed => A::MarkReprocessed,
            Action::Retention => A::Retention,
            Action::TtlExpiry => A::TtlExpiry,
        }
    }
}

impl<'a> From<&'a engine::AuditEntry> for Entry<'a> {
    fn from(e: &'a engine::AuditEntry) -> Self {
        Entry {
            at: e.at_ms,
            actor: &e.actor,
            action: e.action.into(),
            ids: e.ids.runs().to_vec(),
        }
    }
}

impl Entry<'_> {
    /// The engine's entry; `None` when its id runs break their invariants.
    pub(super) fn into_engine(self) -> Option<engine::AuditEntry> {
        let ids = engine::IdSet::from_runs(self.ids)?;
        Some(engine::AuditEntry::new(
            self.at,
            self.actor,
            self.action.into(),
            ids,
        ))
    }
}

impl From<engine::Removal> for Removal {
    fn from(r: engine::Removal) -> Self {
        match r {
            engine::Removal::Deleted => Removal::Deleted,
            engine::Removal::Purged => Removal::Purged,
            engine::Removal::Retention => Removal::Retention,
            engine::Removal::Ttl => Removal::Ttl,
            engine::Removal::Processed => Removal::Processed,
        }
    }
}

impl From<Removal> for engine::Removal {
    fn from(r: Removal) -> Self {
        match r {
            Removal::Deleted => engine::Removal::Deleted,
            Removal::Purged => engine::Removal::Purged,
            Removal::Retention => engine::Removal::Retention,
            Removal::Ttl => engine::Removal::Ttl,
            Removal::Processed => engine::Removal::Processed,
        }
    }
}

impl<'a> From<&'a engine::Failed> for Failed<'a> {
    fn from(f: &'a engine::Failed) -> Self {
        Failed {
            queue: f.queue,
            generation: f.generation,
            attempts: f.attempts,
            first_received_at: f.first_received_at,
            error_kind: &f.error_kind,
            message: &f.message,
            fingerprint: f.fingerprint.0,
            worker: f.worker.as_deref(),
            dead_at: f.dead_at,
        }
    }
}

impl From<Failed<'_>> for engine::Failed {
    fn from(f: Failed<'_>) -> Self {
        engine::Failed {
            queue: f.queue,
            generation: f.generation,
            attempts: f.attempts,
            first_received_at: f.first_received_at,
            error_kind: f.error_kind.to_owned(),
            message: f.message.to_owned(),
            fingerprint: Fingerprint(f.fingerprint),
            worker: f.worker.map(str::to_owned),
            dead_at: f.dead_at,
        }
    }
}

impl<'a> From<&'a engine::Lineage> for Lineage<'a> {
    fn from(l: &'a engine::Lineage) -> Self {
        Lineage {
            enqueued_at: l.enqueued_at,
            steps: l
                .steps
                .iter()
                .map(|s| Step {
                    at: s.at,
                    actor: s.actor.as_deref(),
                    event: match &s.event {
                        engine::Event::DeadLettered(f) => Event::DeadLettered((&**f).into()),
                        engine::Event::Imported {
                            failed,
                            original_id,
                        } => Event::Imported((&**failed).into(), *original_id),
                        engine::Event::Replayed {
                            from,
                            to,
                            generation,
                            corrected,
                        } => Event::Replayed {
                            from: *from,
                            to: *to,
                            generation: *generation,
                            corrected: *corrected,
                        },
                        engine::Event::Marked { success } => Event::Marked(*success),
                        engine::Event::Removed(how) => Event::Removed((*how).into()),
                    },
                })
                .collect(),
            dropped: l.dropped,
        }
    }
}

impl From<Lineage<'_>> for engine::Lineage {
    fn from(l: Lineage<'_>) -> Self {
        engine::Lineage {
            enqueued_at: l.enqueued_at,
            steps: l
                .steps
                .into_iter()
                .map(|s| engine::Step {
                    at: s.at,
                    actor: s.actor.map(str::to_owned),
                    event: match s.event {
                        Event::DeadLettered(f) => engine::Event::DeadLettered(Box::new(f.into())),
                        Event::Imported(f, original_id) => engine::Event::Imported {
                            failed: Box::new(f.into()),
                            original_id,
                        },
                        Event::Replayed {
                            from,
                            to,
                            generation,
                            corrected,
                        } => engine::Event::Replayed {
                            from,
                            to,
                            generation,
                            corrected,
                        },
                        Event::Marked(success) => engine::Event::Marked { success },
                        Event::Removed(how) => engine::Event::Removed(how.into()),
                    },
                })
                .collect(),
            dropped: l.dropped,
        }
    }
}

impl<'a> From<&'a engine::AuditSnapshot> for AuditPart<'a> {
    fn from(a: &'a engine::AuditSnapshot) -> Self {
        AuditPart {
            lineage: a.lineage.iter().map(|(id, l)| (*id, l.into())).collect(),
            tombstones: a
                .tombstones
                .iter()
                .map(|t| Tombstone {
                    id: t.id,
                    removed_at: t.removed_at,
                    lineage: (&t.lineage).into(),
                })
                .collect(),
            trail: a.trail.iter().map(Entry::from).collect(),
            horizon: a.horizon,
        }
    }
}

impl AuditPart<'_> {
    /// The engine's form; `None` when an audit entry's id runs break their invariants.
    pub(in crate::engine::wire) fn into_engine(self) -> Option<engine::AuditSnapshot> {
        Some(engine::AuditSnapshot {
            lineage: self
                .lineage
                .into_iter()
                .map(|(id, l)| (id, l.into()))
                .collect(),
            tombstones: self
                .tombstones
                .into_iter()
                .map(|t| engine::Tombstone {
                    id: t.id,
                    removed_at: t.removed_at,
                    lineage: t.lineage.into(),
                })
                .collect(),
            trail: self
                .trail
                .into_iter()
                .map(Entry::into_engine)
                .collect::<Option<Vec<_>>>()?,
            horizon: self.horizon,
        })
    }
}
