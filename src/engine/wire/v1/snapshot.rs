//! The wire structs of a checkpoint's body (the index snapshot), with their conversions to
//! and from [`crate::engine::state::Snapshot`]: the index's tables (queues with their
//! counters and failure history, messages, extras, DLQ entries, idempotency keys, interned
//! strings), then the audit part ([`super::audit`]: lineage, tombstones, trail, horizon),
//! then the guarded replays.
//!
//! Read only as a whole: version 2 writes its own body ([`crate::engine::wire::v2`]), with
//! these tables and the guarded replays as they are here and its own audit part.
//!
//! As for the records, the order of fields and variants is the format: nothing here is
//! ever reordered, added to or removed. Strings are borrowed from the snapshot when
//! encoding and from the body when decoding. The two per-DLQ counts by interned string
//! are written as bincode maps (a length, then key and value pairs), in the order the
//! index's hash maps hold them; a sequence of pairs has exactly those bytes, so that is
//! what they are here.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde::de::{Error as _, SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::audit::AuditPart;
use super::config;
use super::records::Plan;
use crate::engine::state::{self as engine, FailureHistory, IdMap};
use crate::engine::wire::checkpoint::CheckpointError;
use crate::engine::wire::convert::{
    wire_enum, wire_newtype, wire_struct, Queue, Text, Wire, WireOf,
};
use crate::error::Result;

wire_struct! {
    /// The whole body. Read only: version 2's audit part differs.
    #[serde(bound(deserialize = "'de: 'a"))]
    read_only struct Snapshot<'a>: engine::Snapshot {
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

wire_struct! {
    /// A queue and its DLQ.
    #[serde(bound(deserialize = "'de: 'a"))]
    struct QueueSnapshot<'a>: engine::QueueSnapshot {
        name: Text<'a>,
        counters: QueueCounters,
        dlq: DlqCounters,
        history: Counts,
    }
}

wire_struct! {
    /// A queue's counters.
    struct QueueCounters: engine::QueueCounters {
        ready: u64,
        in_flight: u64,
        enqueued: u64,
        acked: u64,
        retried: u64,
        dead_lettered: u64,
        expired: u64,
        deleted: u64,
    }
}

wire_struct! {
    /// A DLQ's counters.
    struct DlqCounters: engine::DlqCounters {
        pending: u64,
        reprocessed_kept: u64,
        reprocessed_ok: u64,
        reprocessed_failed: u64,
        replayed: u64,
        deleted: u64,
        expired: u64,
        by_kind: Pairs,
        by_worker: Pairs,
    }
}

wire_newtype! {
    /// Entries by interned string (id, count), in the order the index's map holds them.
    struct Pairs(Vec<(u32, u64)>): IdMap<u32, u64> {
        of: |e| e.iter().map(|(&k, &n)| (k, n)).collect(),
        into: |pairs| Some(pairs.into_iter().collect()),
    }
}

wire_newtype! {
    /// A DLQ's failure history: (hour since the epoch, interned error kind,
    /// dead-letterings), oldest hour first.
    struct Counts(Vec<(u64, u32, u64)>): FailureHistory {
        of: |e| e.counts().collect(),
        into: |counts| Some(FailureHistory::from_counts(counts)),
    }
}

/// The messages, with the bytes of a `Vec<(u64, Msg)>`, converted to and from the index's
/// entries one at a time: encoding or decoding a checkpoint holds no second vector of them
/// (compaction writes checkpoints of a million pending messages; this was its peak).
pub(in crate::engine::wire) struct Msgs<'a>(Cow<'a, [(u64, engine::Msg)]>);

impl<'a> Wire<'a> for Msgs<'a> {
    type Engine = Vec<(u64, engine::Msg)>;
    fn into_engine(self) -> Option<Vec<(u64, engine::Msg)>> {
        Some(self.0.into_owned())
    }
}

impl<'a> WireOf<'a> for Msgs<'a> {
    fn of(e: &'a Vec<(u64, engine::Msg)>) -> Self {
        Msgs(Cow::Borrowed(e))
    }
}

impl Serialize for Msgs<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for &(id, m) in self.0.iter() {
            seq.serialize_element(&(id, Msg::from(m)))?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Msgs<'_> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = Vec<(u64, engine::Msg)>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a sequence of (id, message)")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                // As serde's own `Vec`: a damaged length reserves no more than 1 MiB ahead.
                let ahead = (1 << 20) / std::mem::size_of::<(u64, engine::Msg)>();
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(ahead));
                while let Some((id, m)) = seq.next_element::<(u64, Msg)>()? {
                    let (Some(queue), Some(place)) = (m.queue.into_engine(), m.place.into_engine())
                    else {
                        return Err(A::Error::custom("a queue id over the index's limit"));
                    };
                    let msg =
                        engine::Msg::new(m.payload_pos, m.visible_at, queue, m.attempts, place);
                    out.push((id, msg));
                }
                Ok(out)
            }
        }
        d.deserialize_seq(Entries).map(|v| Msgs(Cow::Owned(v)))
    }
}

/// A message of the index.
#[derive(Serialize, Deserialize)]
struct Msg {
    payload_pos: u64,
    visible_at: u64,
    queue: Queue,
    attempts: u32,
    place: Place,
}

impl From<engine::Msg> for Msg {
    fn from(m: engine::Msg) -> Self {
        Msg {
            payload_pos: m.payload_pos,
            visible_at: m.visible_at,
            queue: Queue(m.queue()),
            attempts: m.attempts,
            place: Place::of(&m.place()),
        }
    }
}

wire_enum! {
    /// Where a message is. Variant indexes: 0 to 3.
    enum Place: engine::Place {
        Ready,
        ReadyAfterLostLease,
        Leased,
        Dead,
    }
}

wire_struct! {
    /// Facts only some messages have.
    struct Extra: engine::Extra {
        first_received_at: Option<u64>,
        history_pos: Option<u64>,
        generation: u32,
        from_dlq: Option<u32>,
        lease_cut_by_restart: bool,
        expires_at: Option<u64>,
    }
    // A snapshot holds no reservation (`State::snapshot` turns them back).
    fill { awaiting_start: false }
}

wire_struct! {
    /// A DLQ entry of the index.
    struct DeadInfo: engine::DeadInfo {
        envelope_pos: u64,
        dead_at: u64,
        kind: u32,
        worker: u32,
        status: DeadStatus,
        expires_at: Option<u64>,
    }
}

wire_enum! {
    /// Variant indexes: 0, 1.
    enum DeadStatus: engine::DeadStatus {
        Pending,
        /// Success, and when it was marked.
        Reprocessed(success: bool, at: u64),
    }
}

/// The guarded replays, in id order: (id, replay).
#[derive(Serialize, Deserialize)]
#[serde(transparent, bound(deserialize = "'de: 'a"))]
pub(in crate::engine::wire) struct Guards<'a>(Vec<(u64, Guard<'a>)>);

impl<'a> WireOf<'a> for Guards<'a> {
    fn of(e: &'a BTreeMap<u64, engine::Guard>) -> Self {
        Guards(e.iter().map(|(&id, g)| (id, Guard::of(g))).collect())
    }
}

impl<'a> Wire<'a> for Guards<'a> {
    type Engine = BTreeMap<u64, engine::Guard>;
    fn into_engine(self) -> Option<BTreeMap<u64, engine::Guard>> {
        self.0
            .into_iter()
            .map(|(id, g)| Some((id, g.into_engine()?)))
            .collect()
    }
}

wire_struct! {
    /// One guarded replay.
    #[serde(bound(deserialize = "'de: 'a"))]
    struct Guard<'a>: engine::Guard {
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
        outstanding: Ascending,
        rate_anchor: Option<(u64, u64)>,
        replayed: u64,
        succeeded: u64,
        failed_again: u64,
        removed: u64,
        skipped: u64,
    }
}

wire_newtype! {
    /// Released messages with no outcome yet, ascending.
    struct Ascending(Vec<u64>): BTreeSet<u64> {
        of: |e| e.iter().copied().collect(),
        into: |ids| Some(ids.into_iter().collect()),
    }
}

wire_enum! {
    /// Where a guarded replay is. Variant indexes 0 to 4.
    enum Status: engine::GuardedReplayState {
        Running,
        Paused,
        Completed,
        Stopped { wave: u32, failed: u64, handled: u64 },
        Cancelled,
    }
}

/// Decodes a checkpoint body that starts at file offset `at`. It names no more queues, and
/// no queue id, than the index can hold (below [`engine::MAX_QUEUES`]), or it does not
/// decode.
pub(in crate::engine::wire) fn decode(
    body: &[u8],
    at: u64,
) -> std::result::Result<engine::Snapshot, CheckpointError> {
    decode_as::<Snapshot<'_>>(body, at)
}

/// Decodes a checkpoint body as the wire struct `S` (this version's [`Snapshot`], or a
/// later version's body), with [`decode`]'s checks.
pub(in crate::engine::wire) fn decode_as<'a, S>(
    body: &'a [u8],
    at: u64,
) -> std::result::Result<engine::Snapshot, CheckpointError>
where
    S: Deserialize<'a> + Wire<'a, Engine = engine::Snapshot>,
{
    let (s, used): (S, usize) = bincode::serde::borrow_decode_from_slice(body, config())
        .map_err(|_| CheckpointError::Damaged(at))?;
    if used != body.len() {
        return Err(CheckpointError::Damaged(at + used as u64));
    }
    let s = s.into_engine().ok_or(CheckpointError::Damaged(at))?;
    if s.queues.len() > engine::MAX_QUEUES as usize {
        return Err(CheckpointError::Damaged(at));
    }
    Ok(s)
}

#[cfg(test)]
pub(in crate::engine::wire) mod tests {
    use super::*;

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
        // The body's fields up to the messages (no queue), with the messages as the wire
        // structs they are written as, and empty tables after them.
        #[derive(Serialize)]
        struct Raw {
            next_id: u64,
            latest_time: u64,
            queues: Vec<u8>,
            msgs: Vec<(u64, Msg)>,
            rest: [u8; 4],
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
                        queue: Queue(queue),
                        attempts: 2,
                        place: Place::Leased,
                    },
                )],
                // No extra, DLQ entry, idempotency key or interned string.
                rest: [0; 4],
            };
            let mut body = bincode::serde::encode_to_vec(raw, config()).unwrap();
            // The audit part (no lineage, tombstone or trail entry, horizon 0) and no
            // guarded replay.
            body.extend([0; 5]);
            body
        };
        for queue in [engine::MAX_QUEUES, u32::MAX] {
            assert_eq!(decode(&body(queue), 32), Err(CheckpointError::Damaged(32)));
        }
        let last = engine::MAX_QUEUES - 1;
        let snapshot = decode(&body(last), 32).unwrap();
        let want = engine::Msg::new(40, 5, last, 2, engine::Place::Leased);
        assert_eq!(snapshot.msgs, vec![(7, want)]);
    }

    /// A checkpoint body re-encoded from the wire structs alone: every version-1
    /// checkpoint of the fixture stores is exactly these bytes (hash-map entries included,
    /// in the order the file has them).
    pub(in crate::engine::wire) fn reencode_wire(body: &[u8]) -> Vec<u8> {
        let (snapshot, used): (Snapshot<'_>, usize) =
            bincode::serde::borrow_decode_from_slice(body, config()).unwrap();
        assert_eq!(used, body.len());
        bincode::serde::encode_to_vec(snapshot, config()).unwrap()
    }
}
