//! Version-1 wire structs of a checkpoint's body (the index snapshot), and their
//! conversion to [`crate::engine::state::Snapshot`] (versions 1 to 3 wrote these; no
//! longer written: the encoder went with version 4). Such a snapshot has no failure
//! history: each DLQ's starts from the entries it holds (see `history_of_entries`).
//!
//! As for the records, the order of fields and variants is the format: nothing here is
//! ever reordered, added to or removed. The structs own their strings (a checkpoint is
//! encoded from a snapshot it consumes, without a copy of the index), and read them with
//! [`crate::engine::wire::borrow`]. The two per-DLQ counts by interned string are
//! written as bincode maps (a length, then key and value pairs), in the order the index's
//! hash maps hold them; a sequence of pairs has exactly those bytes, so that is what they
//! are here.

use serde::{Deserialize, Serialize};

use super::config;
use std::collections::HashMap;

use crate::engine::state::{self as engine, FailureHistory};
use crate::engine::wire::borrow;
use crate::engine::wire::checkpoint::CheckpointError;

/// The whole body.
#[derive(Serialize, Deserialize)]
struct Snapshot {
    next_id: u64,
    latest_time: u64,
    queues: Vec<QueueSnapshot>,
    msgs: Vec<(u64, Msg)>,
    extras: Vec<(u64, Extra)>,
    dead: Vec<(u64, DeadInfo)>,
    /// (enqueued-at, key, id), oldest first.
    #[serde(deserialize_with = "borrow::keyed")]
    idempotency: Vec<(u64, String, u64)>,
    /// Interned error kinds and worker names, by id.
    #[serde(deserialize_with = "borrow::strings")]
    strings: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct QueueSnapshot {
    #[serde(deserialize_with = "borrow::string")]
    name: String,
    counters: QueueCounters,
    dlq: DlqCounters,
}

#[derive(Serialize, Deserialize)]
struct QueueCounters {
    ready: u64,
    in_flight: u64,
    enqueued: u64,
    acked: u64,
    retried: u64,
    dead_lettered: u64,
    expired: u64,
    deleted: u64,
}

#[derive(Serialize, Deserialize)]
struct DlqCounters {
    pending: u64,
    reprocessed_kept: u64,
    reprocessed_ok: u64,
    reprocessed_failed: u64,
    replayed: u64,
    deleted: u64,
    expired: u64,
    by_kind: Vec<(u32, u64)>,
    by_worker: Vec<(u32, u64)>,
}

#[derive(Serialize, Deserialize)]
struct Msg {
    payload_pos: u64,
    visible_at: u64,
    queue: u32,
    attempts: u32,
    place: Place,
}

/// Variant indexes: 0 to 3.
#[derive(Serialize, Deserialize)]
enum Place {
    Ready,
    ReadyAfterLostLease,
    Leased,
    Dead,
}

#[derive(Serialize, Deserialize)]
struct Extra {
    first_received_at: Option<u64>,
    history_pos: Option<u64>,
    generation: u32,
    from_dlq: Option<u32>,
    lease_cut_by_restart: bool,
    expires_at: Option<u64>,
}

#[derive(Serialize, Deserialize)]
struct DeadInfo {
    envelope_pos: u64,
    dead_at: u64,
    kind: u32,
    worker: u32,
    status: DeadStatus,
    expires_at: Option<u64>,
}

/// Variant indexes: 0, 1.
#[derive(Serialize, Deserialize)]
enum DeadStatus {
    Pending,
    /// Success, and when it was marked.
    Reprocessed(bool, u64),
}

/// Decodes a version-1 checkpoint body that starts at file offset `at`.
pub(in crate::engine::wire) fn decode(
    body: &[u8],
    at: u64,
) -> std::result::Result<engine::Snapshot, CheckpointError> {
    let (snapshot, used): (Snapshot, usize) =
        bincode::serde::borrow_decode_from_slice(body, config())
            .map_err(|_| CheckpointError::Damaged(at))?;
    if used != body.len() {
        return Err(CheckpointError::Damaged(at + used as u64));
    }
    if !snapshot.queues_fit() {
        return Err(CheckpointError::Damaged(at));
    }
    Ok(snapshot.into())
}

/// The failure history a checkpoint of version 1 to 3 implies: it has none, so each DLQ's history
/// starts with the entries it still holds, counted at the hour they were dead-lettered
/// (what left the DLQ before the checkpoint is not known any more). Records after the
/// checkpoint are counted as they are applied.
fn history_of_entries(s: &Snapshot) -> Vec<FailureHistory> {
    let mut history = vec![FailureHistory::default(); s.queues.len()];
    let queue_of: HashMap<u64, u32> = s
        .msgs
        .iter()
        .filter(|(_, m)| matches!(m.place, Place::Dead))
        .map(|(id, m)| (*id, m.queue))
        .collect();
    for (id, d) in &s.dead {
        let h = queue_of.get(id).and_then(|&q| history.get_mut(q as usize));
        if let Some(h) = h {
            h.record(d.dead_at, d.kind);
        }
    }
    history
}

impl Snapshot {
    /// True when every queue id it names is one the index can hold (below
    /// [`engine::MAX_QUEUES`]); a checkpoint that names another does not decode.
    fn queues_fit(&self) -> bool {
        self.queues.len() <= engine::MAX_QUEUES as usize
            && self.msgs.iter().all(|(_, m)| m.queue < engine::MAX_QUEUES)
    }
}

impl From<Snapshot> for engine::Snapshot {
    fn from(s: Snapshot) -> Self {
        let history = history_of_entries(&s);
        engine::Snapshot {
            next_id: s.next_id,
            latest_time: s.latest_time,
            queues: s
                .queues
                .into_iter()
                .zip(history)
                .map(|(q, history)| engine::QueueSnapshot {
                    name: q.name,
                    counters: q.counters.into(),
                    dlq: q.dlq.into(),
                    history,
                })
                .collect(),
            msgs: s.msgs.into_iter().map(|(id, m)| (id, m.into())).collect(),
            extras: s.extras.into_iter().map(|(id, e)| (id, e.into())).collect(),
            dead: s.dead.into_iter().map(|(id, d)| (id, d.into())).collect(),
            idempotency: s.idempotency,
            strings: s.strings,
            // Versions 1 to 4 kept no lineage: what left a DLQ before this checkpoint is
            // unknown.
            audit: engine::AuditSnapshot {
                horizon: s.latest_time,
                ..engine::AuditSnapshot::default()
            },
            // Guarded replays came with version 6.
            guards: Default::default(),
        }
    }
}

impl From<QueueCounters> for engine::QueueCounters {
    fn from(c: QueueCounters) -> Self {
        engine::QueueCounters {
            ready: c.ready,
            in_flight: c.in_flight,
            enqueued: c.enqueued,
            acked: c.acked,
            retried: c.retried,
            dead_lettered: c.dead_lettered,
            expired: c.expired,
            deleted: c.deleted,
        }
    }
}

impl From<DlqCounters> for engine::DlqCounters {
    fn from(c: DlqCounters) -> Self {
        engine::DlqCounters {
            pending: c.pending,
            reprocessed_kept: c.reprocessed_kept,
            reprocessed_ok: c.reprocessed_ok,
            reprocessed_failed: c.reprocessed_failed,
            replayed: c.replayed,
            deleted: c.deleted,
            expired: c.expired,
            by_kind: c.by_kind.into_iter().collect(),
            by_worker: c.by_worker.into_iter().collect(),
        }
    }
}

impl From<Msg> for engine::Msg {
    fn from(m: Msg) -> Self {
        let place = match m.place {
            Place::Ready => engine::Place::Ready,
            Place::ReadyAfterLostLease => engine::Place::ReadyAfterLostLease,
            Place::Leased => engine::Place::Leased,
            Place::Dead => engine::Place::Dead,
        };
        // Below `MAX_QUEUES`: `decode` checked (`Snapshot::queues_fit`).
        engine::Msg::new(m.payload_pos, m.visible_at, m.queue, m.attempts, place)
    }
}

impl From<Extra> for engine::Extra {
    fn from(e: Extra) -> Self {
        engine::Extra {
            first_received_at: e.first_received_at,
            history_pos: e.history_pos,
            generation: e.generation,
            from_dlq: e.from_dlq,
            lease_cut_by_restart: e.lease_cut_by_restart,
            expires_at: e.expires_at,
            // A snapshot holds no reservation (`State::snapshot` turns them back).
            awaiting_start: false,
        }
    }
}

impl From<DeadInfo> for engine::DeadInfo {
    fn from(d: DeadInfo) -> Self {
        engine::DeadInfo {
            envelope_pos: d.envelope_pos,
            dead_at: d.dead_at,
            kind: d.kind,
            worker: d.worker,
            status: match d.status {
                DeadStatus::Pending => engine::DeadStatus::Pending,
                DeadStatus::Reprocessed(ok, at) => engine::DeadStatus::Reprocessed(ok, at),
            },
            expires_at: d.expires_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::wire::fixture_bytes::{files, fixture_stores};

    /// Lengths far past the body are refused before anything is allocated.
    #[test]
    fn huge_lengths_are_damage() {
        let huge = [0xFD, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F];
        // next_id, latest_time, then one queue whose name claims 2^60 bytes.
        let name = [&[0, 0, 1][..], &huge].concat();
        assert_eq!(decode(&name, 32), Err(CheckpointError::Damaged(32)));
        // No queue, then 2^60 messages.
        let msgs = [&[0, 0, 0][..], &huge].concat();
        assert_eq!(decode(&msgs, 32), Err(CheckpointError::Damaged(32)));
        // ..., no idempotency keys, then one interned string of 2^60 bytes.
        let strings = [&[0, 0, 0, 0, 0, 0, 0, 1][..], &huge].concat();
        assert_eq!(decode(&strings, 32), Err(CheckpointError::Damaged(32)));
    }

    /// Every version-1 checkpoint of the fixture stores is exactly its wire structs' bytes
    /// (hash-map entries included, in the order the file has them).
    #[test]
    fn fixture_checkpoints_are_these_wire_structs() {
        let mut seen = 0;
        for (_, store) in fixture_stores() {
            for path in files(&store, |n| n.starts_with("checkpoint-")) {
                let bytes = std::fs::read(&path).unwrap();
                if !matches!(bytes[8..10], [1, 0] | [2, 0] | [3, 0]) {
                    continue;
                }
                let body = &bytes[32..];
                let (snapshot, used): (Snapshot, usize) =
                    bincode::serde::borrow_decode_from_slice(body, config()).unwrap();
                assert_eq!(used, body.len());
                let again = bincode::serde::encode_to_vec(snapshot, config()).unwrap();
                assert_eq!(again, body, "{}", path.display());
                seen += 1;
            }
        }
        assert!(seen > 0);
    }
}
