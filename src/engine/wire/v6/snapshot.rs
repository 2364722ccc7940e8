//! Version-6 checkpoint body: a version-5 body (version 4's, then the audit part), byte
//! for byte, then the guarded replays, each with its plan and progress (see
//! [`crate::engine::state::Guard`]), in id order. bincode writes a struct as its fields one
//! after the other, so a struct that holds version 5's parts and then the replays is
//! exactly those bytes.
//!
//! As for the records, the order of fields and variants is the format: nothing here is
//! ever reordered, added to or removed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{config, Plan};
use crate::engine::state::{self as engine, GuardStatus};
use crate::engine::wire::checkpoint::CheckpointError;
use crate::engine::wire::v4::snapshot::Snapshot as V4Snapshot;
use crate::engine::wire::v5::audit::AuditPart;
use crate::error::{Error, Result};

/// The whole body.
#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
struct Snapshot<'a> {
    v4: V4Snapshot,
    audit: AuditPart<'a>,
    guards: Vec<Guard<'a>>,
}

/// One guarded replay.
#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
struct Guard<'a> {
    id: u64,
    plan: Plan<'a>,
    started_at: u64,
    updated_at: u64,
    status: Status,
    next: u64,
    wave: u32,
    wave_size: u64,
    wave_released: u64,
    wave_handled: u64,
    wave_failed: u64,
    /// Released messages with no outcome yet, ascending.
    outstanding: Vec<u64>,
    rate_anchor: Option<(u64, u64)>,
    replayed: u64,
    succeeded: u64,
    failed_again: u64,
    removed: u64,
    skipped: u64,
}

/// Variant indexes 0 to 4.
#[derive(Serialize, Deserialize)]
enum Status {
    Running,
    Paused,
    Completed,
    Stopped {
        wave: u32,
        failed: u64,
        handled: u64,
    },
    Cancelled,
}

/// Encodes a snapshot as a version-6 checkpoint body (appended to `out`).
pub(in crate::engine::wire) fn encode(
    mut snapshot: engine::Snapshot,
    out: &mut Vec<u8>,
) -> Result<()> {
    let audit = std::mem::take(&mut snapshot.audit);
    let guards = std::mem::take(&mut snapshot.guards);
    let body = Snapshot {
        v4: snapshot.into(),
        audit: (&audit).into(),
        guards: guards.iter().map(|(&id, g)| Guard::of(id, g)).collect(),
    };
    // Sized first, then written: a growing buffer would hold up to twice the bytes (at a
    // million pending messages, compaction's peak of memory is this checkpoint).
    let mut size = bincode::enc::write::SizeWriter::default();
    bincode::serde::encode_into_writer(&body, &mut size, config())
        .map_err(|e| Error::Codec(e.to_string()))?;
    out.reserve_exact(size.bytes_written);
    bincode::serde::encode_into_std_write(&body, out, config())
        .map_err(|e| Error::Codec(e.to_string()))?;
    Ok(())
}

/// Decodes a version-6 checkpoint body that starts at file offset `at`.
pub(in crate::engine::wire) fn decode(
    body: &[u8],
    at: u64,
) -> std::result::Result<engine::Snapshot, CheckpointError> {
    let (snapshot, used): (Snapshot<'_>, usize) =
        bincode::serde::borrow_decode_from_slice(body, config())
            .map_err(|_| CheckpointError::Damaged(at))?;
    if used != body.len() {
        return Err(CheckpointError::Damaged(at + used as u64));
    }
    if !snapshot.v4.queues_fit() {
        return Err(CheckpointError::Damaged(at));
    }
    let audit = snapshot
        .audit
        .into_engine()
        .ok_or(CheckpointError::Damaged(at))?;
    let mut engine: engine::Snapshot = snapshot.v4.into();
    engine.audit = audit;
    engine.guards = snapshot
        .guards
        .into_iter()
        .map(|g| (g.id, g.into()))
        .collect::<BTreeMap<_, _>>();
    Ok(engine)
}

impl<'a> Guard<'a> {
    fn of(id: u64, g: &'a engine::Guard) -> Self {
        Guard {
            id,
            plan: Plan::from(&g.plan),
            started_at: g.started_at,
            updated_at: g.updated_at,
            status: match g.status {
                GuardStatus::Running => Status::Running,
                GuardStatus::Paused => Status::Paused,
                GuardStatus::Completed => Status::Completed,
                GuardStatus::Stopped {
                    wave,
                    failed,
                    handled,
                } => Status::Stopped {
                    wave,
                    failed,
                    handled,
                },
                GuardStatus::Cancelled => Status::Cancelled,
            },
            next: g.next,
            wave: g.wave,
            wave_size: g.wave_size,
            wave_released: g.wave_released,
            wave_handled: g.wave_handled,
            wave_failed: g.wave_failed,
            outstanding: g.outstanding.iter().copied().collect(),
            rate_anchor: g.rate_anchor,
            replayed: g.replayed,
            succeeded: g.succeeded,
            failed_again: g.failed_again,
            removed: g.removed,
            skipped: g.skipped,
        }
    }
}

impl From<Guard<'_>> for engine::Guard {
    fn from(g: Guard<'_>) -> Self {
        engine::Guard {
            plan: g.plan.into(),
            started_at: g.started_at,
            updated_at: g.updated_at,
            status: match g.status {
                Status::Running => GuardStatus::Running,
                Status::Paused => GuardStatus::Paused,
                Status::Completed => GuardStatus::Completed,
                Status::Stopped {
                    wave,
                    failed,
                    handled,
                } => GuardStatus::Stopped {
                    wave,
                    failed,
                    handled,
                },
                Status::Cancelled => GuardStatus::Cancelled,
            },
            next: g.next,
            wave: g.wave,
            wave_size: g.wave_size,
            wave_released: g.wave_released,
            wave_handled: g.wave_handled,
            wave_failed: g.wave_failed,
            outstanding: g.outstanding.into_iter().collect(),
            rate_anchor: g.rate_anchor,
            replayed: g.replayed,
            succeeded: g.succeeded,
            failed_again: g.failed_again,
            removed: g.removed,
            skipped: g.skipped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::record::GuardPlan;
    use crate::engine::state::State;
    use crate::engine::wire::fixture_bytes::{files, fixture_stores};

    /// Every version-6 checkpoint of the fixture stores is exactly its wire structs' bytes.
    #[test]
    fn fixture_checkpoints_are_these_wire_structs() {
        let mut seen = 0;
        for (_, store) in fixture_stores() {
            for path in files(&store, |n| n.starts_with("checkpoint-")) {
                let bytes = std::fs::read(&path).unwrap();
                if bytes[8..10] != [6, 0] {
                    continue;
                }
                let body = &bytes[32..];
                let (snapshot, used): (Snapshot<'_>, usize) =
                    bincode::serde::borrow_decode_from_slice(body, config()).unwrap();
                assert_eq!(used, body.len(), "{}", path.display());
                let again = bincode::serde::encode_to_vec(snapshot, config()).unwrap();
                assert_eq!(again, body, "{}", path.display());
                seen += 1;
            }
        }
        assert!(seen > 0);
    }

    #[test]
    fn guarded_replays_round_trip_after_the_version_5_body() {
        let mut snapshot = State::default().snapshot();
        let plan = GuardPlan {
            dlq: 0,
            target: None,
            reset_attempts: false,
            force: true,
            canary: 3,
            growth_permille: 1500,
            max_failure_permille: 250,
            rate_per_sec: None,
            selection: "all".into(),
            actor: "ana@ops-1".into(),
            ids: vec![1, 2, 3, 4],
        };
        let mut guard = engine::Guard::new(plan, 10);
        guard.outstanding.insert(2);
        guard.status = GuardStatus::Stopped {
            wave: 1,
            failed: 2,
            handled: 3,
        };
        snapshot.guards.insert(4, guard);
        let mut out = Vec::new();
        encode(snapshot.clone(), &mut out).unwrap();
        assert_eq!(decode(&out, 32), Ok(snapshot.clone()));
        // The version-5 body alone is not a version-6 body.
        let mut v5_only = Vec::new();
        crate::engine::wire::v5::snapshot::encode(snapshot, &mut v5_only).unwrap();
        assert!(decode(&v5_only, 32).is_err());
        assert!(decode(&out[..out.len() - 1], 32).is_err());
    }
}
