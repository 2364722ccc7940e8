//! Version-4 wire structs of a checkpoint's body (the index snapshot), and their
//! conversions to and from [`crate::engine::state::Snapshot`]: version 1's, with one field
//! added at the end of each queue, `history` (its DLQ's dead-letterings per hour and error
//! kind: (hour since the epoch, interned error kind, count), oldest hour first).
//!
//! As for the records, the order of fields and variants is the format: nothing here is
//! ever reordered, added to or removed. The structs own their strings (a checkpoint is
//! encoded from a snapshot it consumes, without a copy of the index), and read them with
//! [`crate::engine::wire::borrow`]. The two per-DLQ counts by interned string are
//! written as bincode maps (a length, then key and value pairs), in the order the index's
//! hash maps hold them; a sequence of pairs has exactly those bytes, so that is what they
//! are here.

use serde::de::{Error as _, SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::config;
use crate::engine::state::{self as engine, FailureHistory, IdMap};
use crate::engine::wire::borrow;
use crate::engine::wire::checkpoint::CheckpointError;

/// The whole body (version 5's starts with it).
#[derive(Serialize, Deserialize)]
pub(in crate::engine::wire) struct Snapshot {
    next_id: u64,
    latest_time: u64,
    queues: Vec<QueueSnapshot>,
    msgs: Msgs,
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
    /// (hour, interned error kind, dead-letterings), oldest hour first.
    history: Vec<(u64, u32, u64)>,
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

/// The messages, with the bytes of a `Vec<(u64, Msg)>`, converted to and from the index's
/// entries one at a time: encoding or decoding a checkpoint holds no second vector of them
/// (compaction writes checkpoints of a million pending messages; this was its peak).
/// Decoding refuses a queue id the index cannot hold (at or above
/// [`engine::MAX_QUEUES`]).
pub(in crate::engine::wire) struct Msgs(Vec<(u64, engine::Msg)>);

impl Serialize for Msgs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for &(id, m) in &self.0 {
            seq.serialize_element(&(id, Msg::from(m)))?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Msgs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = Msgs;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a sequence of (id, message)")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Msgs, A::Error> {
                // As serde's own `Vec`: a damaged length reserves no more than 1 MiB ahead.
                let ahead = (1 << 20) / std::mem::size_of::<(u64, engine::Msg)>();
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(ahead));
                while let Some((id, m)) = seq.next_element::<(u64, Msg)>()? {
                    if m.queue >= engine::MAX_QUEUES {
                        return Err(A::Error::custom("a queue id over the index's limit"));
                    }
                    out.push((id, m.into()));
                }
                Ok(Msgs(out))
            }
        }
        d.deserialize_seq(Entries)
    }
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

/// Decodes a version-4 checkpoint body that starts at file offset `at`.
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

fn pairs(map: IdMap<u32, u64>) -> Vec<(u32, u64)> {
    map.into_iter().collect()
}

impl From<engine::Snapshot> for Snapshot {
    fn from(s: engine::Snapshot) -> Self {
        Snapshot {
            next_id: s.next_id,
            latest_time: s.latest_time,
            queues: s
                .queues
                .into_iter()
                .map(|q| QueueSnapshot {
                    name: q.name,
                    counters: q.counters.into(),
                    dlq: q.dlq.into(),
                    history: q.history.counts().collect(),
                })
                .collect(),
            msgs: Msgs(s.msgs),
            extras: s.extras.into_iter().map(|(id, e)| (id, e.into())).collect(),
            dead: s.dead.into_iter().map(|(id, d)| (id, d.into())).collect(),
            idempotency: s.idempotency,
            strings: s.strings,
        }
    }
}

impl Snapshot {
    /// True when every queue id it names is one the index can hold (below
    /// [`engine::MAX_QUEUES`]; its messages' were checked as they were decoded); a
    /// checkpoint that names another does not decode.
    pub(in crate::engine::wire) fn queues_fit(&self) -> bool {
        self.queues.len() <= engine::MAX_QUEUES as usize
    }
}

impl From<Snapshot> for engine::Snapshot {
    fn from(s: Snapshot) -> Self {
        engine::Snapshot {
            next_id: s.next_id,
            latest_time: s.latest_time,
            queues: s
                .queues
                .into_iter()
                .map(|q| engine::QueueSnapshot {
                    name: q.name,
                    counters: q.counters.into(),
                    dlq: q.dlq.into(),
                    history: FailureHistory::from_counts(q.history),
                })
                .collect(),
            msgs: s.msgs.0,
            extras: s.extras.into_iter().map(|(id, e)| (id, e.into())).collect(),
            dead: s.dead.into_iter().map(|(id, d)| (id, d.into())).collect(),
            idempotency: s.idempotency,
            strings: s.strings,
            // Version 4 kept no lineage: what left a DLQ before this checkpoint is unknown.
            audit: engine::AuditSnapshot {
                horizon: s.latest_time,
                ..engine::AuditSnapshot::default()
            },
            // Guarded replays came with version 6.
            guards: Default::default(),
        }
    }
}

impl From<engine::QueueCounters> for QueueCounters {
    fn from(c: engine::QueueCounters) -> Self {
        QueueCounters {
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

impl From<engine::DlqCounters> for DlqCounters {
    fn from(c: engine::DlqCounters) -> Self {
        DlqCounters {
            pending: c.pending,
            reprocessed_kept: c.reprocessed_kept,
            reprocessed_ok: c.reprocessed_ok,
            reprocessed_failed: c.reprocessed_failed,
            replayed: c.replayed,
            deleted: c.deleted,
            expired: c.expired,
            by_kind: pairs(c.by_kind),
            by_worker: pairs(c.by_worker),
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

impl From<engine::Msg> for Msg {
    fn from(m: engine::Msg) -> Self {
        Msg {
            payload_pos: m.payload_pos,
            visible_at: m.visible_at,
            queue: m.queue(),
            attempts: m.attempts,
            place: match m.place() {
                engine::Place::Ready => Place::Ready,
                engine::Place::ReadyAfterLostLease => Place::ReadyAfterLostLease,
                engine::Place::Leased => Place::Leased,
                engine::Place::Dead => Place::Dead,
            },
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
        // Below `MAX_QUEUES`: `Msgs` checked as it decoded.
        engine::Msg::new(m.payload_pos, m.visible_at, m.queue, m.attempts, place)
    }
}

impl From<engine::Extra> for Extra {
    fn from(e: engine::Extra) -> Self {
        Extra {
            first_received_at: e.first_received_at,
            history_pos: e.history_pos,
            generation: e.generation,
            from_dlq: e.from_dlq,
            lease_cut_by_restart: e.lease_cut_by_restart,
            expires_at: e.expires_at,
        }
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

impl From<engine::DeadInfo> for DeadInfo {
    fn from(d: engine::DeadInfo) -> Self {
        DeadInfo {
            envelope_pos: d.envelope_pos,
            dead_at: d.dead_at,
            kind: d.kind,
            worker: d.worker,
            status: match d.status {
                engine::DeadStatus::Pending => DeadStatus::Pending,
                engine::DeadStatus::Reprocessed(ok, at) => DeadStatus::Reprocessed(ok, at),
            },
            expires_at: d.expires_at,
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

    /// A message of a queue id the index cannot hold is damage, the last one it can hold
    /// is read as it is.
    #[test]
    fn queue_ids_past_the_index_limit_are_damage() {
        // The body's fields, with the messages as the wire structs they are written as.
        #[derive(Serialize)]
        struct Raw {
            next_id: u64,
            latest_time: u64,
            queues: Vec<QueueSnapshot>,
            msgs: Vec<(u64, Msg)>,
            extras: Vec<(u64, Extra)>,
            dead: Vec<(u64, DeadInfo)>,
            idempotency: Vec<(u64, String, u64)>,
            strings: Vec<String>,
        }
        let body = |queue: u32| {
            let raw = Raw {
                next_id: 8,
                latest_time: 0,
                queues: Vec::new(),
                msgs: vec![(
                    7,
                    Msg {
                        payload_pos: 40,
                        visible_at: 5,
                        queue,
                        attempts: 2,
                        place: Place::Leased,
                    },
                )],
                extras: Vec::new(),
                dead: Vec::new(),
                idempotency: Vec::new(),
                strings: Vec::new(),
            };
            bincode::serde::encode_to_vec(raw, config()).unwrap()
        };
        for queue in [engine::MAX_QUEUES, u32::MAX] {
            assert_eq!(decode(&body(queue), 32), Err(CheckpointError::Damaged(32)));
        }
        let last = engine::MAX_QUEUES - 1;
        let snapshot = decode(&body(last), 32).unwrap();
        let want = engine::Msg::new(40, 5, last, 2, engine::Place::Leased);
        assert_eq!(snapshot.msgs, vec![(7, want)]);
    }

    /// Every version-4 checkpoint of the fixture stores is exactly its wire structs' bytes
    /// (hash-map entries included, in the order the file has them).
    #[test]
    fn fixture_checkpoints_are_these_wire_structs() {
        let mut seen = 0;
        for (_, store) in fixture_stores() {
            for path in files(&store, |n| n.starts_with("checkpoint-")) {
                let bytes = std::fs::read(&path).unwrap();
                if bytes[8..10] != [4, 0] {
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
