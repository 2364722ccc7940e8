//! Version 2's checkpoint body: version 1's tables and guarded replays
//! ([`crate::engine::wire::v1::snapshot`]) around version 2's audit part
//! ([`super::audit::AuditPart`]).

use super::audit::AuditPart;
use crate::engine::state as engine;
use crate::engine::wire::checkpoint::CheckpointError;
use crate::engine::wire::convert::{wire_struct, Text, WireOf};
use crate::engine::wire::v1::snapshot::{DeadInfo, Extra, Guards, Msgs, QueueSnapshot};
use crate::engine::wire::v1::{self, codec_error, config};
use crate::error::Result;

wire_struct! {
    /// The whole body: version 1's fields in version 1's order.
    #[serde(bound(deserialize = "'de: 'a"))]
    struct Snapshot<'a>: engine::Snapshot {
        next_id: u64,
        latest_time: u64,
        /// By queue id, from 0.
        queues: Vec<QueueSnapshot<'a>>,
        msgs: Msgs<'a>,
        extras: Vec<(u64, Extra)>,
        dead: Vec<(u64, DeadInfo)>,
        /// (enqueued-at, key, id), oldest first.
        idempotency: Vec<(u64, Text<'a>, u64)>,
        /// Interned error kinds and worker names, by id.
        strings: Vec<Text<'a>>,
        audit: AuditPart<'a>,
        guards: Guards<'a>,
    }
}

/// Encodes a snapshot as a checkpoint body (appended to `out`).
pub(in crate::engine::wire) fn encode(
    snapshot: &engine::Snapshot,
    out: &mut Vec<u8>,
) -> Result<()> {
    let body = Snapshot::of(snapshot);
    // Sized first, then written: a growing buffer would hold up to twice the bytes (at a
    // million pending messages, compaction's peak of memory is this checkpoint).
    let mut size = bincode::enc::write::SizeWriter::default();
    bincode::serde::encode_into_writer(&body, &mut size, config()).map_err(codec_error)?;
    out.reserve_exact(size.bytes_written);
    bincode::serde::encode_into_std_write(&body, out, config()).map_err(codec_error)?;
    Ok(())
}

/// Decodes a checkpoint body that starts at file offset `at`, with version 1's checks (no
/// more queues, and no queue id, than the index can hold).
pub(in crate::engine::wire) fn decode(
    body: &[u8],
    at: u64,
) -> std::result::Result<engine::Snapshot, CheckpointError> {
    v1::snapshot::decode_as::<Snapshot<'_>>(body, at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::record::GuardPlan;
    use crate::engine::state::{AuditAction, AuditEntry, GuardedReplayState, IdSet, State};

    #[test]
    fn guarded_replays_round_trip_after_the_audit_part() {
        let mut snapshot = State::default().snapshot();
        let plan = crate::engine::wire::v2::tests::guard_plan();
        let mut guard = engine::Guard::new(plan.clone(), 10);
        guard.outstanding.insert(9);
        guard.status = GuardedReplayState::Stopped {
            wave: 1,
            failed: 2,
            handled: 3,
        };
        snapshot.guards.insert(4, guard);
        let mut out = Vec::new();
        encode(&snapshot, &mut out).unwrap();
        assert_eq!(decode(&out, 56), Ok(snapshot.clone()));
        assert!(decode(&out[..out.len() - 1], 56).is_err());
        // A guarded replay of a queue id the index cannot hold is damage.
        let far = GuardPlan {
            target: Some(engine::MAX_QUEUES),
            ..plan
        };
        snapshot.guards.insert(5, engine::Guard::new(far, 10));
        let mut out = Vec::new();
        encode(&snapshot, &mut out).unwrap();
        assert_eq!(decode(&out, 56), Err(CheckpointError::Damaged(56)));
    }

    /// The trail keeps version 2's actions and details through a checkpoint.
    #[test]
    fn the_trail_round_trips_with_its_details() {
        let mut snapshot = State::default().snapshot();
        let entry = |action| AuditEntry::new(7, "ana@box", action, IdSet::of(&[3, 4]));
        snapshot.audit.trail = vec![
            entry(AuditAction::Replay).with_detail(".orderId |= ascii_upcase"),
            entry(AuditAction::RetryNow),
            entry(AuditAction::Delay),
            entry(AuditAction::MoveToDlq).with_detail("stuck on a bad address"),
            entry(AuditAction::DeleteMessage),
        ];
        let mut out = Vec::new();
        encode(&snapshot, &mut out).unwrap();
        assert_eq!(decode(&out, 56), Ok(snapshot));
    }
}
