//! The wire structs of a checkpoint's body (the index snapshot), and their conversions to
//! and from [`crate::engine::state::Snapshot`]: the index's tables (queues with their
//! counters and failure history, messages, extras, DLQ entries, idempotency keys, interned
//! strings), then the audit part ([`super::audit::AuditPart`]: lineage, tombstones, trail,
//! horizon), then the guarded replays.
//!
//! As for the records, the order of fields and variants is the format: nothing here is
//! ever reordered, added to or removed. The index's tables own their strings (a checkpoint
//! is encoded from a snapshot it consumes, without a copy of the index), and read them with
//! [`crate::engine::wire::borrow`]; the audit part and the guarded replays borrow from the
//! snapshot when encoding and from the body when decoding. The two per-DLQ counts by
//! interned string are written as bincode maps (a length, then key and value pairs), in
//! the order the index's hash maps hold them; a sequence of pairs has exactly those bytes,
//! so that is what they are here.

use std::collections::BTreeMap;

use serde::de::{Error as _, SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::audit::AuditPart;
use super::config;
use super::records::Plan;
use crate::engine::state::{self as engine, FailureHistory, GuardStatus, IdMap};
use crate::engine::wire::borrow;
use crate::engine::wire::checkpoint::CheckpointError;
use crate::error::{Error, Result};

/// The whole body.
#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
struct Snapshot<'a> {
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
    audit: AuditPart<'a>,
    /// In id order.
    guards: Vec<Guard<'a>>,
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

/// Encodes a snapshot as a checkpoint body (appended to `out`).
pub(in crate::engine::wire) fn encode(
    mut snapshot: engine::Snapshot,
    out: &mut Vec<u8>,
) -> Result<()> {
    let audit = std::mem::take(&mut snapshot.audit);
    let guards = std::mem::take(&mut snapshot.guards);
    let body = Snapshot {
        next_id: snapshot.next_id,
        latest_time: snapshot.latest_time,
        queues: snapshot
            .queues
            .into_iter()
            .map(|q| QueueSnapshot {
                name: q.name,
                counters: q.counters.into(),
                dlq: q.dlq.into(),
                history: q.history.counts().collect(),
            })
            .collect(),
        msgs: Msgs(snapshot.msgs),
        extras: snapshot
            .extras
            .into_iter()
            .map(|(id, e)| (id, e.into()))
            .collect(),
        dead: snapshot
            .dead
            .into_iter()
            .map(|(id, d)| (id, d.into()))
            .collect(),
        idempotency: snapshot.idempotency,
        strings: snapshot.strings,
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

/// Decodes a checkpoint body that starts at file offset `at`.
pub(in crate::engine::wire) fn decode(
    body: &[u8],
    at: u64,
) -> std::result::Result<engine::Snapshot, CheckpointError> {
    let (s, used): (Snapshot<'_>, usize) = bincode::serde::borrow_decode_from_slice(body, config())
        .map_err(|_| CheckpointError::Damaged(at))?;
    if used != body.len() {
        return Err(CheckpointError::Damaged(at + used as u64));
    }
    if !s.queues_fit() {
        return Err(CheckpointError::Damaged(at));
    }
    let audit = s.audit.into_engine().ok_or(CheckpointError::Damaged(at))?;
    Ok(engine::Snapshot {
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
        audit,
        guards: s
            .guards
            .into_iter()
            .map(|g| (g.id, g.into()))
            .collect::<BTreeMap<_, _>>(),
    })
}

fn pairs(map: IdMap<u32, u64>) -> Vec<(u32, u64)> {
    map.into_iter().collect()
}

impl Snapshot<'_> {
    /// True when every queue id it names is one the index can hold (below
    /// [`engine::MAX_QUEUES`]; its messages' were checked as they were decoded); a
    /// checkpoint that names another does not decode.
    fn queues_fit(&self) -> bool {
        self.queues.len() <= engine::MAX_QUEUES as usize
            && self.guards.iter().all(|g| g.plan.queues_fit())
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

    /// Every version-1 checkpoint of the fixture stores is exactly its wire structs' bytes
    /// (hash-map entries included, in the order the file has them).
    #[test]
    fn fixture_checkpoints_are_these_wire_structs() {
        let mut seen = 0;
        for (_, store) in fixture_stores() {
            for path in files(&store, |n| n.starts_with("checkpoint-")) {
                let bytes = std::fs::read(&path).unwrap();
                if bytes[8..10] != [1, 0] {
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
    fn guarded_replays_round_trip_after_the_audit_part() {
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
        let mut guard = engine::Guard::new(plan.clone(), 10);
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
        assert!(decode(&out[..out.len() - 1], 32).is_err());
        // A guarded replay of a queue id the index cannot hold is damage.
        let far = GuardPlan {
            target: Some(engine::MAX_QUEUES),
            ..plan
        };
        snapshot.guards.insert(5, engine::Guard::new(far, 10));
        let mut out = Vec::new();
        encode(snapshot, &mut out).unwrap();
        assert_eq!(decode(&out, 32), Err(CheckpointError::Damaged(32)));
    }
}
