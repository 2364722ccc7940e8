//! The state machine: applying records to the in-memory index of messages.
//!
//! [`State::apply`] is the only code that changes message state, and it is deterministic: it
//! uses the times stored in records, never the clock, so replaying the log at open rebuilds
//! exactly the state the live process had (except leases, which a reopen releases: the store
//! is locked by one process, so no lease holder survives it).
//!
//! Invariants:
//! - a message is in exactly one place: ready or leased in its queue, or in its queue's DLQ;
//! - counters (ready, in flight, DLQ size, by-kind counts...) are kept incrementally and equal
//!   what a scan would count;
//! - memory held per pending message is its [`Msg`] (32 bytes, in a dense page of
//!   [`MsgIndex`] while ids are dense) plus one 16-byte ready-list entry; its payload and
//!   metadata stay in the log.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Serialize};

use crate::checkpoint::{QueueSnapshot, Snapshot};
use crate::record::{Decoded, ImportedEntry, Op, Put, PutCause, QueueId};
use crate::types::MessageId;

mod index;
pub use index::MsgIndex;

/// Error kind of messages dead-lettered because their TTL passed.
pub const EXPIRED_KIND: &str = "expired";

/// A fast hasher for dense integer ids (a Fibonacci multiply).
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }
}

/// HashMap keyed by ids.
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Where a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Place {
    /// Waiting in its queue.
    Ready,
    /// Waiting in its queue after a delivery ended without an outcome (lease expired or the
    /// process died).
    ReadyAfterLostLease,
    /// Delivered; `visible_at` holds the lease deadline.
    Leased,
    /// In its queue's DLQ.
    Dead,
}

impl Place {
    /// True for both ready states.
    pub fn is_ready(self) -> bool {
        matches!(self, Place::Ready | Place::ReadyAfterLostLease)
    }
}

/// The per-message index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Msg {
    /// Position of the record holding its payload.
    pub payload_pos: u64,
    /// Visible-at while ready; the lease deadline while leased; dead-lettered-at when dead.
    pub visible_at: u64,
    /// Its queue (for a dead message: the queue whose DLQ holds it).
    pub queue: QueueId,
    /// Deliveries counted.
    pub attempts: u32,
    /// Where it is.
    pub place: Place,
}

/// Extra facts kept only for messages that were delivered, replayed or have a TTL.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extra {
    /// First delivery time.
    pub first_received_at: Option<u64>,
    /// Position of the record holding its failure history: its latest retry record, or,
    /// after a replay that kept the attempt count, the dead-letter envelope it was replayed
    /// from (until its next failure writes a newer one). `None` for a DLQ entry: its
    /// envelope holds the whole history.
    pub history_pos: Option<u64>,
    /// Replay generation.
    pub generation: u32,
    /// The DLQ (by queue id) it was last replayed from.
    pub from_dlq: Option<QueueId>,
    /// True when its last lease was cut by a reopen (the consumer died with the process).
    pub lease_cut_by_restart: bool,
    /// Expiry time (TTL).
    pub expires_at: Option<u64>,
}

/// Status of a DLQ entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeadStatus {
    /// Not dealt with yet.
    Pending,
    /// Marked reprocessed with this outcome and time.
    Reprocessed(bool, u64),
}

/// The index entry of a DLQ entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadInfo {
    /// Position of the dead-letter record (the envelope).
    pub envelope_pos: u64,
    /// When it was dead-lettered.
    pub dead_at: u64,
    /// Interned error kind.
    pub kind: u32,
    /// Interned worker name (0: none).
    pub worker: u32,
    /// Status.
    pub status: DeadStatus,
    /// Retention deadline.
    pub expires_at: Option<u64>,
}

/// Counters of one queue, kept incrementally.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueCounters {
    /// Messages waiting (visible or not yet visible).
    pub ready: u64,
    /// Messages leased.
    pub in_flight: u64,
    /// Enqueued since the log began.
    pub enqueued: u64,
    /// Acked.
    pub acked: u64,
    /// Failed deliveries retried.
    pub retried: u64,
    /// Moved to the DLQ.
    pub dead_lettered: u64,
    /// Removed or dead-lettered by TTL.
    pub expired: u64,
    /// Deleted from the queue.
    pub deleted: u64,
}

/// Counters of one DLQ, kept incrementally.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DlqCounters {
    /// Entries pending.
    pub pending: u64,
    /// Entries marked reprocessed and still kept.
    pub reprocessed_kept: u64,
    /// Reprocessing outcomes that succeeded (replayed and acked, or marked ok).
    pub reprocessed_ok: u64,
    /// Reprocessing outcomes that failed (replayed and dead-lettered again, or marked failed).
    pub reprocessed_failed: u64,
    /// Entries replayed out.
    pub replayed: u64,
    /// Entries deleted or purged.
    pub deleted: u64,
    /// Entries removed by retention.
    pub expired: u64,
    /// Entry count per interned error kind.
    pub by_kind: IdMap<u32, u64>,
    /// Entry count per interned worker.
    pub by_worker: IdMap<u32, u64>,
}

/// One queue and its DLQ.
#[derive(Debug, Default)]
pub struct QueueState {
    /// Its name.
    pub name: String,
    /// Messages visible at enqueue, in enqueue order (entries may be stale; checked on pop).
    fresh: VecDeque<(u64, MessageId)>,
    /// Messages visible later, by (visible-at, id) (entries may be stale; checked on pop).
    delayed: BinaryHeap<Reverse<(u64, MessageId)>>,
    /// Leases by deadline (entries may be stale).
    leases: BinaryHeap<Reverse<(u64, MessageId)>>,
    /// Counters.
    pub counters: QueueCounters,
    /// DLQ entries by (dead-at, id): the DLQ's browse order.
    pub dlq_order: BTreeSet<(u64, MessageId)>,
    /// DLQ counters.
    pub dlq: DlqCounters,
}

/// Interned strings (error kinds, worker names); id 0 is the empty string.
#[derive(Debug)]
pub struct Interner {
    names: Vec<String>,
    ids: HashMap<String, u32>,
}

impl Default for Interner {
    fn default() -> Self {
        Interner {
            names: vec![String::new()],
            ids: HashMap::from([(String::new(), 0)]),
        }
    }
}

impl Interner {
    /// The id of `s`, adding it if new.
    pub fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(s.to_string());
        self.ids.insert(s.to_string(), id);
        id
    }
    /// The id of `s` if known.
    pub fn get(&self, s: &str) -> Option<u32> {
        self.ids.get(s).copied()
    }
    /// Rebuilds an interner from its strings in id order.
    pub fn from_names(names: Vec<String>) -> Self {
        if names.first().map(String::as_str) != Some("") {
            let mut all = vec![String::new()];
            all.extend(names);
            return Self::from_names(all);
        }
        let ids = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i as u32))
            .collect();
        Interner { names, ids }
    }

    /// The string of an id.
    pub fn name(&self, id: u32) -> &str {
        self.names
            .get(id as usize)
            .map(String::as_str)
            .unwrap_or("")
    }
}

/// What an applied record changed that the store must react to (alerts, wake-ups).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Effects {
    /// Something became ready to lease.
    pub ready: bool,
    /// DLQ sizes changed for these queues (bit set over the first 64 queue ids is not enough,
    /// so a flag is kept and the store rechecks all DLQs with alert hooks).
    pub dlq_changed: bool,
}

/// The whole index.
#[derive(Debug, Default)]
pub struct State {
    /// Queues by id.
    pub queues: Vec<QueueState>,
    /// Queue ids by name.
    pub names: HashMap<String, QueueId>,
    /// Every message.
    pub msgs: MsgIndex,
    /// Extras of delivered, replayed or TTL'd messages.
    pub extras: IdMap<MessageId, Extra>,
    /// DLQ entries.
    pub dead: IdMap<MessageId, DeadInfo>,
    /// Messages with a TTL, by expiry.
    pub ttl: BTreeSet<(u64, MessageId)>,
    /// Next message id.
    pub next_id: MessageId,
    /// Idempotency keys: key -> (id, enqueued-at).
    pub idempotency: HashMap<String, (MessageId, u64)>,
    /// Idempotency keys in insertion order, for expiry.
    pub idempotency_order: VecDeque<(u64, String)>,
    /// Interned error kinds and worker names.
    pub strings: Interner,
    /// The latest time found in an applied record (the expiry clock never goes below it).
    pub latest_time: u64,
    /// Messages whose lease was cut by a restart and that have no outcome since: one of them
    /// may be what killed the process, so they are delivered one at a time.
    pub suspects: BTreeSet<MessageId>,
}

impl State {
    /// Applies one decoded record found at log position `pos`.
    pub fn apply(&mut self, rec: &Decoded<'_>, pos: u64) -> Effects {
        if let Some(t) = record_time(rec) {
            self.latest_time = self.latest_time.max(t);
        }
        match rec {
            Decoded::Put(put) => self.apply_put(put, pos),
            Decoded::Op(op) => self.apply_op(op, pos),
            Decoded::Relocated(inner) => {
                self.apply_relocated(inner, pos);
                Effects::default()
            }
        }
    }

    /// A relocated copy at `pos`: the pointer to the original moves here, if the original is
    /// still the one the index points to's record kind (payload, envelope, history).
    fn apply_relocated(&mut self, original: &Decoded<'_>, pos: u64) {
        match original {
            Decoded::Put(put) => {
                let id = put.meta.id;
                let Some(m) = self.msgs.get_mut(&id) else {
                    return;
                };
                let old = m.payload_pos;
                m.payload_pos = pos;
                if let Some(d) = self.dead.get_mut(&id) {
                    // An imported entry's envelope is its payload record.
                    if d.envelope_pos == old {
                        d.envelope_pos = pos;
                    }
                }
                if let Some(e) = self.extras.get_mut(&id) {
                    // And so is its history once it is replayed with its attempts kept.
                    if e.history_pos == Some(old) {
                        e.history_pos = Some(pos);
                    }
                }
            }
            Decoded::Op(Op::DeadLetter { id, .. }) => {
                // A DLQ entry's envelope, or the history of a message replayed from the DLQ
                // with its attempts kept; never both at once (a DLQ entry has no
                // `history_pos`).
                if let Some(d) = self.dead.get_mut(id) {
                    d.envelope_pos = pos;
                } else if let Some(e) = self.extras.get_mut(id) {
                    if e.history_pos.is_some() {
                        e.history_pos = Some(pos);
                    }
                }
            }
            Decoded::Op(Op::Retry { id, .. }) => {
                if let Some(e) = self.extras.get_mut(id) {
                    if e.history_pos.is_some() {
                        e.history_pos = Some(pos);
                    }
                }
            }
            _ => {}
        }
    }

    /// Every log record the index points to, with what points to it: the records
    /// compaction must keep (or relocate) for the index to stay readable.
    pub fn live_refs(&self) -> Vec<LiveRef> {
        let mut refs = Vec::with_capacity(self.msgs.len() + self.dead.len());
        for (id, m) in self.msgs.iter() {
            refs.push(LiveRef {
                pos: m.payload_pos,
                id,
                kind: RefKind::Payload,
            });
        }
        for (&id, d) in &self.dead {
            refs.push(LiveRef {
                pos: d.envelope_pos,
                id,
                kind: RefKind::Envelope,
            });
        }
        for (&id, e) in &self.extras {
            if let Some(pos) = e.history_pos {
                refs.push(LiveRef {
                    pos,
                    id,
                    kind: RefKind::History,
                });
            }
        }
        refs
    }

    /// True while the index still points to `r.pos` as `r` says.
    pub fn still_refers(&self, r: &LiveRef) -> bool {
        match r.kind {
            RefKind::Payload => self.msgs.get(&r.id).is_some_and(|m| m.payload_pos == r.pos),
            RefKind::Envelope => self
                .dead
                .get(&r.id)
                .is_some_and(|d| d.envelope_pos == r.pos),
            RefKind::History => self
                .extras
                .get(&r.id)
                .is_some_and(|e| e.history_pos == Some(r.pos)),
        }
    }

    /// The persistent part of the index, for a checkpoint.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            next_id: self.next_id,
            latest_time: self.latest_time,
            queues: self
                .queues
                .iter()
                .map(|q| QueueSnapshot {
                    name: q.name.clone(),
                    counters: q.counters,
                    dlq: q.dlq.clone(),
                })
                .collect(),
            msgs: self.msgs.iter().map(|(id, m)| (id, *m)).collect(),
            extras: self.extras.iter().map(|(&id, e)| (id, e.clone())).collect(),
            dead: self.dead.iter().map(|(&id, d)| (id, *d)).collect(),
            idempotency: self
                .idempotency_order
                .iter()
                .filter_map(|(at, key)| {
                    let (id, t) = self.idempotency.get(key)?;
                    (t == at).then(|| (*at, key.clone(), *id))
                })
                .collect(),
            strings: self.strings.names.clone(),
        }
    }

    /// Rebuilds an index from a snapshot (the derived lists and sets are recomputed).
    pub fn restore(snap: Snapshot) -> State {
        let mut st = State {
            next_id: snap.next_id,
            latest_time: snap.latest_time,
            ..State::default()
        };
        for (i, q) in snap.queues.into_iter().enumerate() {
            if !q.name.is_empty() {
                st.names.insert(q.name.clone(), i as QueueId);
            }
            let qs = st.queue_mut(i as QueueId);
            qs.name = q.name;
            qs.counters = q.counters;
            qs.dlq = q.dlq;
        }
        let mut lost = Vec::new();
        for (id, mut m) in snap.msgs {
            if m.place == Place::ReadyAfterLostLease {
                // Its last delivery ended without an outcome and without a record (a lease
                // expiry or a restart), so replaying the log would find it leased and
                // `release_all_leases` would make it a suspect cut by the restart, ready at
                // once. Do the same here, so a reopen from a checkpoint and one from the log
                // agree (and suspects stay suspects across a checkpoint).
                m.visible_at = 0;
                lost.push(id);
            }
            st.msgs.insert(id, m);
        }
        for (id, e) in snap.extras {
            if let Some(exp) = e.expires_at {
                st.ttl.insert((exp, id));
            }
            st.extras.insert(id, e);
        }
        for id in lost {
            st.extras.entry(id).or_default().lease_cut_by_restart = true;
            st.suspects.insert(id);
        }
        for (id, d) in snap.dead {
            if let Some(q) = st.msgs.get(&id).map(|m| m.queue) {
                st.queue_mut(q).dlq_order.insert((d.dead_at, id));
            }
            st.dead.insert(id, d);
        }
        for (at, key, id) in snap.idempotency {
            st.idempotency.insert(key.clone(), (id, at));
            st.idempotency_order.push_back((at, key));
        }
        st.strings = Interner::from_names(snap.strings);
        for q in &mut st.queues {
            q.leases.clear();
        }
        st.rebuild_ready_lists();
        st
    }

    fn queue_mut(&mut self, q: QueueId) -> &mut QueueState {
        let i = q as usize;
        if self.queues.len() <= i {
            self.queues.resize_with(i + 1, QueueState::default);
        }
        &mut self.queues[i]
    }

    fn apply_put(&mut self, put: &Put<'_>, pos: u64) -> Effects {
        let m = &put.meta;
        self.next_id = self.next_id.max(m.id + 1);
        let (attempts, generation, from_dlq, previous_place) = match &m.cause {
            PutCause::Enqueue => (0, 0, None, None),
            PutCause::Imported(entry) => {
                self.apply_import(m.id, m.queue, pos, entry);
                return Effects {
                    ready: false,
                    dlq_changed: true,
                };
            }
            PutCause::CorrectedReplay {
                attempts,
                generation,
                from_dlq,
                ..
            } => {
                let prev = self.msgs.get(&m.id).map(|x| x.place);
                if prev.is_some_and(|p| p != Place::Dead) {
                    // Only a DLQ entry is replayed (as for `Op::Replay`). A message elsewhere
                    // meets this record only when recovery skipped the damaged range that
                    // held its dead-lettering (quarantine): moving it would leave its old
                    // place counted.
                    return Effects::default();
                }
                (*attempts, *generation, Some(*from_dlq), prev)
            }
        };
        let mut history = None;
        if previous_place.is_some() {
            // A corrected replay: leave the DLQ first.
            if let Some(old) = self.msgs.get(&m.id) {
                history = self.replay_history(m.id, old.payload_pos, attempts, true);
            }
            self.leave_dlq(m.id, Leave::Replayed);
        } else if matches!(m.cause, PutCause::CorrectedReplay { .. }) {
            // The entry is gone (deleted meanwhile): nothing to replay.
            return Effects::default();
        }
        self.msgs.insert(
            m.id,
            Msg {
                payload_pos: pos,
                visible_at: m.visible_at,
                queue: m.queue,
                attempts,
                place: Place::Ready,
            },
        );
        if generation > 0 || m.expires_at.is_some() {
            let extra = self.extras.entry(m.id).or_default();
            extra.generation = generation;
            extra.from_dlq = from_dlq;
            if from_dlq.is_some() {
                extra.history_pos = history;
            }
            if let Some(exp) = m.expires_at {
                extra.expires_at = Some(exp);
                self.ttl.insert((exp, m.id));
            }
        }
        if let Some(key) = &m.idempotency_key {
            if matches!(m.cause, PutCause::Enqueue) {
                self.idempotency.insert(key.clone(), (m.id, m.enqueued_at));
                self.idempotency_order
                    .push_back((m.enqueued_at, key.clone()));
            }
        }
        let q = self.queue_mut(m.queue);
        q.counters.ready += 1;
        if previous_place.is_none() {
            q.counters.enqueued += 1;
        }
        if m.visible_at <= m.enqueued_at && previous_place.is_none() {
            q.fresh.push_back((m.visible_at, m.id));
        } else {
            q.delayed.push(Reverse((m.visible_at, m.id)));
        }
        Effects {
            ready: true,
            dlq_changed: previous_place.is_some(),
        }
    }

    /// An imported entry goes straight into the DLQ of `queue`.
    fn apply_import(&mut self, id: MessageId, queue: QueueId, pos: u64, e: &ImportedEntry) {
        if self.msgs.contains_key(&id) {
            return;
        }
        self.msgs.insert(
            id,
            Msg {
                payload_pos: pos,
                visible_at: 0,
                queue,
                attempts: e.attempts,
                place: Place::Ready,
            },
        );
        if e.generation > 0 || e.first_received_at.is_some() {
            let extra = self.extras.entry(id).or_default();
            extra.generation = e.generation;
            extra.first_received_at = e.first_received_at;
        }
        self.queue_mut(queue).counters.ready += 1;
        self.dead_letter_one(id, pos, &e.failure, &e.dlq);
    }

    fn apply_op(&mut self, op: &Op, pos: u64) -> Effects {
        match op {
            Op::DeclareQueue { queue, name } => {
                self.queue_mut(*queue).name = name.clone();
                self.names.insert(name.clone(), *queue);
                Effects::default()
            }
            Op::Lease { at, deadline, ids } => {
                for id in ids {
                    self.lease_one(*id, *at, *deadline);
                }
                Effects::default()
            }
            Op::Extend { deadline, ids } => {
                for id in ids {
                    if let Some(m) = self.msgs.get_mut(id) {
                        if m.place == Place::Leased {
                            m.visible_at = *deadline;
                            let q = m.queue;
                            self.queue_mut(q).leases.push(Reverse((*deadline, *id)));
                        }
                    }
                }
                Effects::default()
            }
            Op::Ack { ids, .. } => {
                for id in ids {
                    self.ack_one(*id);
                }
                Effects::default()
            }
            Op::Retry { id, visible_at, .. } => {
                self.suspects.remove(id);
                let Some(m) = self.msgs.get(id).copied() else {
                    return Effects::default();
                };
                if m.place == Place::Dead {
                    return Effects::default();
                }
                self.extras.entry(*id).or_default().history_pos = Some(pos);
                self.make_ready(*id, m, *visible_at, Place::Ready);
                self.queue_mut(m.queue).counters.retried += 1;
                Effects {
                    ready: true,
                    dlq_changed: false,
                }
            }
            Op::Release { id, visible_at } => {
                self.suspects.remove(id);
                let Some(m) = self.msgs.get(id).copied() else {
                    return Effects::default();
                };
                if m.place != Place::Leased {
                    return Effects::default();
                }
                self.make_ready(*id, m, *visible_at, Place::Ready);
                Effects {
                    ready: true,
                    dlq_changed: false,
                }
            }
            Op::DeadLetter {
                id, failure, dlq, ..
            } => {
                self.dead_letter_one(*id, pos, failure, dlq);
                Effects {
                    ready: false,
                    dlq_changed: true,
                }
            }
            Op::Replay {
                id,
                queue,
                visible_at,
                attempts,
                generation,
                ..
            } => {
                let Some(m) = self.msgs.get(id).copied() else {
                    return Effects::default();
                };
                if m.place != Place::Dead {
                    return Effects::default();
                }
                let from = m.queue;
                let history = self.replay_history(*id, m.payload_pos, *attempts, false);
                self.leave_dlq(*id, Leave::Replayed);
                let extra = self.extras.entry(*id).or_default();
                extra.generation = *generation;
                extra.from_dlq = Some(from);
                extra.history_pos = history;
                self.msgs.insert(
                    *id,
                    Msg {
                        payload_pos: m.payload_pos,
                        visible_at: *visible_at,
                        queue: *queue,
                        attempts: *attempts,
                        place: Place::Ready,
                    },
                );
                let q = self.queue_mut(*queue);
                q.counters.ready += 1;
                q.delayed.push(Reverse((*visible_at, *id)));
                Effects {
                    ready: true,
                    dlq_changed: true,
                }
            }
            Op::Delete { ids, expired, .. } => {
                let mut dlq_changed = false;
                for id in ids {
                    dlq_changed |= self.delete_one(*id, *expired);
                }
                Effects {
                    ready: false,
                    dlq_changed,
                }
            }
            Op::MarkReprocessed { id, success, at } => {
                let Some(info) = self.dead.get_mut(id) else {
                    return Effects::default();
                };
                let was_pending = info.status == DeadStatus::Pending;
                info.status = DeadStatus::Reprocessed(*success, *at);
                let q = self.msgs.get(id).map(|m| m.queue).unwrap_or(0);
                let d = &mut self.queue_mut(q).dlq;
                if was_pending {
                    d.pending = d.pending.saturating_sub(1);
                    d.reprocessed_kept += 1;
                }
                if *success {
                    d.reprocessed_ok += 1;
                } else {
                    d.reprocessed_failed += 1;
                }
                Effects {
                    ready: false,
                    dlq_changed: true,
                }
            }
        }
    }

    fn lease_one(&mut self, id: MessageId, at: u64, deadline: u64) {
        let Some(m) = self.msgs.get_mut(&id) else {
            return;
        };
        // A live lease only takes ready messages. A replayed one may find the message still
        // leased: its earlier lease ended by expiry or by a restart, neither of which is
        // logged, so the new delivery counts on top of it.
        let was_leased = match m.place {
            Place::Ready | Place::ReadyAfterLostLease => false,
            Place::Leased => true,
            Place::Dead => return,
        };
        m.place = Place::Leased;
        m.attempts += 1;
        m.visible_at = deadline;
        let q = m.queue;
        let extra = self.extras.entry(id).or_default();
        extra.first_received_at.get_or_insert(at);
        extra.lease_cut_by_restart = false;
        let qs = self.queue_mut(q);
        if !was_leased {
            qs.counters.ready -= 1;
            qs.counters.in_flight += 1;
        }
        qs.leases.push(Reverse((deadline, id)));
    }

    fn make_ready(&mut self, id: MessageId, m: Msg, visible_at: u64, place: Place) {
        let qs = self.queue_mut(m.queue);
        if m.place == Place::Leased {
            qs.counters.in_flight -= 1;
            qs.counters.ready += 1;
        }
        qs.delayed.push(Reverse((visible_at, id)));
        if let Some(x) = self.msgs.get_mut(&id) {
            x.place = place;
            x.visible_at = visible_at;
        }
    }

    fn ack_one(&mut self, id: MessageId) {
        self.suspects.remove(&id);
        let Some(m) = self.msgs.get(&id).copied() else {
            return;
        };
        if m.place == Place::Dead {
            return;
        }
        self.msgs.remove(&id);
        let extra = self.remove_extra(id);
        let qs = self.queue_mut(m.queue);
        if m.place == Place::Leased {
            qs.counters.in_flight -= 1;
        } else {
            qs.counters.ready -= 1;
        }
        qs.counters.acked += 1;
        if let Some(from) = extra.and_then(|e| e.from_dlq) {
            self.queue_mut(from).dlq.reprocessed_ok += 1;
        }
    }

    fn remove_extra(&mut self, id: MessageId) -> Option<Extra> {
        let extra = self.extras.remove(&id);
        if let Some(exp) = extra.as_ref().and_then(|e| e.expires_at) {
            self.ttl.remove(&(exp, id));
        }
        extra
    }

    fn dead_letter_one(
        &mut self,
        id: MessageId,
        pos: u64,
        failure: &crate::types::FailureInfo,
        dlq: &crate::types::DlqMetadata,
    ) {
        self.suspects.remove(&id);
        let Some(m) = self.msgs.get(&id).copied() else {
            return;
        };
        if m.place == Place::Dead {
            return;
        }
        let kind = self.strings.intern(&failure.error_kind);
        let worker = dlq
            .worker
            .as_deref()
            .map(|w| self.strings.intern(w))
            .unwrap_or(0);
        let dead_at = dlq.dead_lettered_at_ms;
        let from_dlq = self.extras.get(&id).and_then(|e| e.from_dlq);
        if let Some(exp) = self.extras.get(&id).and_then(|e| e.expires_at) {
            self.ttl.remove(&(exp, id));
        }
        if let Some(e) = self.extras.get_mut(&id) {
            e.expires_at = None;
            // The envelope holds the whole history now.
            e.history_pos = None;
        }
        self.dead.insert(
            id,
            DeadInfo {
                envelope_pos: pos,
                dead_at,
                kind,
                worker,
                status: DeadStatus::Pending,
                expires_at: dlq.expires_at_ms,
            },
        );
        // Through `insert`: the index keeps DLQ entries apart from the dense pages.
        self.msgs.insert(
            id,
            Msg {
                place: Place::Dead,
                visible_at: dead_at,
                ..m
            },
        );
        if let Some(from) = from_dlq {
            self.queue_mut(from).dlq.reprocessed_failed += 1;
        }
        let qs = self.queue_mut(m.queue);
        if m.place == Place::Leased {
            qs.counters.in_flight -= 1;
        } else {
            qs.counters.ready -= 1;
        }
        qs.counters.dead_lettered += 1;
        if failure.error_kind == EXPIRED_KIND {
            qs.counters.expired += 1;
        }
        qs.dlq_order.insert((dead_at, id));
        qs.dlq.pending += 1;
        *qs.dlq.by_kind.entry(kind).or_default() += 1;
        *qs.dlq.by_worker.entry(worker).or_default() += 1;
    }

    /// Where the history of DLQ entry `id` is found once it is replayed with `attempts`: its
    /// envelope when the attempt count is kept (so the failure that sent it to the DLQ stays
    /// in its history), none when it is reset. An imported entry's envelope is its payload
    /// record; a corrected replay replaces that record as the payload, and a record is only
    /// ever referenced as one kind of record besides, so its history starts anew then.
    fn replay_history(
        &self,
        id: MessageId,
        payload_pos: u64,
        attempts: u32,
        corrected: bool,
    ) -> Option<u64> {
        if attempts == 0 {
            return None;
        }
        self.dead
            .get(&id)
            .map(|d| d.envelope_pos)
            .filter(|&pos| !(corrected && pos == payload_pos))
    }

    /// Removes a DLQ entry's index and counts (the message itself is handled by the caller).
    fn leave_dlq(&mut self, id: MessageId, why: Leave) -> bool {
        let Some(info) = self.dead.remove(&id) else {
            return false;
        };
        let q = self.msgs.get(&id).map(|m| m.queue).unwrap_or(0);
        let qs = self.queue_mut(q);
        qs.dlq_order.remove(&(info.dead_at, id));
        match info.status {
            DeadStatus::Pending => qs.dlq.pending = qs.dlq.pending.saturating_sub(1),
            DeadStatus::Reprocessed(..) => {
                qs.dlq.reprocessed_kept = qs.dlq.reprocessed_kept.saturating_sub(1)
            }
        }
        decrement(&mut qs.dlq.by_kind, info.kind);
        decrement(&mut qs.dlq.by_worker, info.worker);
        match why {
            Leave::Replayed => qs.dlq.replayed += 1,
            Leave::Deleted => qs.dlq.deleted += 1,
            Leave::Expired => qs.dlq.expired += 1,
        }
        true
    }

    /// Deletes a message wherever it is. Returns true if it was a DLQ entry.
    ///
    /// A delete is only written for a message that is not leased (a DLQ entry, or a ready
    /// message past its TTL). Replaying the log may still find the message leased: its
    /// lease ended by expiry, which is not logged, before the delete was written.
    fn delete_one(&mut self, id: MessageId, expired: bool) -> bool {
        self.suspects.remove(&id);
        let Some(m) = self.msgs.get(&id).copied() else {
            return false;
        };
        let was_dead = m.place == Place::Dead;
        match m.place {
            Place::Dead => {
                self.leave_dlq(
                    id,
                    if expired {
                        Leave::Expired
                    } else {
                        Leave::Deleted
                    },
                );
            }
            Place::Ready | Place::ReadyAfterLostLease | Place::Leased => {
                let qs = self.queue_mut(m.queue);
                if m.place == Place::Leased {
                    qs.counters.in_flight -= 1;
                } else {
                    qs.counters.ready -= 1;
                }
                if expired {
                    qs.counters.expired += 1;
                } else {
                    qs.counters.deleted += 1;
                }
            }
        }
        self.msgs.remove(&id);
        self.remove_extra(id);
        was_dead
    }

    /// Releases every lease as a reopen does: the process that held them is gone. Called
    /// once, after the log has been replayed; it also rebuilds the ready lists (see
    /// [`State::rebuild_ready_lists`]).
    pub fn release_all_leases(&mut self) {
        let leased: Vec<(MessageId, Msg)> = self
            .msgs
            .iter()
            .filter(|(_, m)| m.place == Place::Leased)
            .map(|(id, m)| (id, *m))
            .collect();
        for (id, m) in leased {
            self.make_ready(id, m, 0, Place::ReadyAfterLostLease);
            self.extras.entry(id).or_default().lease_cut_by_restart = true;
            self.suspects.insert(id);
        }
        for q in &mut self.queues {
            q.leases.clear();
        }
        self.rebuild_ready_lists();
    }

    /// Empties the lists that replaying records fills and only live operations drain (the
    /// ready lists, rebuilt from the messages, and the lease deadlines). For an index that
    /// only ever replays records (compaction keeps one), whose lists would otherwise grow
    /// with every enqueue and lease.
    pub fn reset_replay_lists(&mut self) {
        for q in &mut self.queues {
            q.leases.clear();
        }
        self.rebuild_ready_lists();
    }

    /// Rebuilds every queue's ready lists from the messages' current state.
    ///
    /// Replaying the log applies leases without popping the ready lists (only a live lease
    /// pops), so after a replay they hold an entry for every message that was ever ready.
    /// Such a stale entry becomes valid again when its message is ready again (a replay
    /// from the DLQ, a lease released by the reopen), next to the entry that made it ready,
    /// and one lease would then hand the same message out twice. Rebuilt, each ready
    /// message has exactly one entry, and the lists hold nothing else.
    pub fn rebuild_ready_lists(&mut self) {
        let mut per_queue: Vec<Vec<Reverse<(u64, MessageId)>>> =
            (0..self.queues.len()).map(|_| Vec::new()).collect();
        for (id, m) in self.msgs.iter() {
            if m.place.is_ready() {
                if let Some(list) = per_queue.get_mut(m.queue as usize) {
                    list.push(Reverse((m.visible_at, id)));
                }
            }
        }
        for (qs, list) in self.queues.iter_mut().zip(per_queue) {
            qs.fresh = VecDeque::new();
            qs.delayed = BinaryHeap::from(list);
        }
    }

    /// Turns leases whose deadline passed into ready messages.
    pub fn expire_leases(&mut self, q: QueueId, now: u64) {
        loop {
            let Some(&Reverse((deadline, id))) =
                self.queues.get(q as usize).and_then(|qs| qs.leases.peek())
            else {
                return;
            };
            if deadline > now {
                return;
            }
            self.queues[q as usize].leases.pop();
            if let Some(m) = self.msgs.get(&id).copied() {
                if m.place == Place::Leased && m.visible_at == deadline && m.queue == q {
                    self.make_ready(id, m, deadline, Place::ReadyAfterLostLease);
                }
            }
        }
    }

    /// The next ready message of queue `q` visible at `now`, removed from the ready lists
    /// (the caller leases or dead-letters it).
    pub fn pop_visible(&mut self, q: QueueId, now: u64) -> Option<MessageId> {
        let qs = self.queues.get_mut(q as usize)?;
        let fresh = loop {
            let Some(&(at, id)) = qs.fresh.front() else {
                break None;
            };
            match self.msgs.get(&id) {
                Some(m) if m.place.is_ready() && m.queue == q && m.visible_at == at => {
                    break Some((at, id));
                }
                _ => {
                    qs.fresh.pop_front();
                }
            }
        };
        let delayed = loop {
            let Some(&Reverse((at, id))) = qs.delayed.peek() else {
                break None;
            };
            match self.msgs.get(&id) {
                Some(m) if m.place.is_ready() && m.queue == q && m.visible_at == at => {
                    break Some((at, id));
                }
                _ => {
                    qs.delayed.pop();
                }
            }
        };
        let ((at, id), from_fresh) = match (fresh, delayed) {
            (None, None) => return None,
            (Some(f), None) => (f, true),
            (None, Some(d)) => (d, false),
            (Some(f), Some(d)) => {
                if f <= d {
                    (f, true)
                } else {
                    (d, false)
                }
            }
        };
        if at > now {
            return None;
        }
        if from_fresh {
            qs.fresh.pop_front();
        } else {
            qs.delayed.pop();
        }
        Some(id)
    }

    /// Puts back a message popped by [`State::pop_visible`] but not leased after all.
    pub fn push_back_ready(&mut self, id: MessageId) {
        if let Some(m) = self.msgs.get(&id) {
            let q = m.queue;
            let at = m.visible_at;
            self.queue_mut(q).delayed.push(Reverse((at, id)));
        }
    }

    /// The earliest time a ready message of `q` becomes visible (stale entries included, so
    /// this can be early but never late).
    pub fn next_visible_at(&self, q: QueueId) -> Option<u64> {
        let qs = self.queues.get(q as usize)?;
        let fresh = qs.fresh.front().map(|(at, _)| *at);
        let delayed = qs.delayed.peek().map(|Reverse((at, _))| *at);
        let lease = qs.leases.peek().map(|Reverse((at, _))| *at);
        [fresh, delayed, lease].into_iter().flatten().min()
    }

    /// An estimate of the heap memory the index holds, in bytes: hash tables, ready lists,
    /// heaps and ordered sets at their allocated capacity (interned strings, queue names and
    /// idempotency keys are not counted). Payloads and envelopes are in the log, not here.
    pub fn index_bytes(&self) -> u64 {
        fn table<K, V, S>(m: &HashMap<K, V, S>) -> usize {
            // hashbrown keeps capacity * 8 / 7 buckets (a power of two), each an entry plus
            // one control byte.
            let buckets = match m.capacity() {
                0 => 0,
                c => (c * 8 / 7).next_power_of_two(),
            };
            buckets * (std::mem::size_of::<(K, V)>() + 1)
        }
        fn ordered<T>(s: &BTreeSet<T>) -> usize {
            // B-tree nodes are between half and completely full, plus per-node overhead.
            s.len() * std::mem::size_of::<T>() * 3 / 2
        }
        let mut bytes = self.msgs.heap_bytes() as usize + table(&self.extras) + table(&self.dead);
        bytes += ordered(&self.ttl);
        for q in &self.queues {
            bytes += q.fresh.capacity() * std::mem::size_of::<(u64, MessageId)>();
            bytes += q.delayed.capacity() * std::mem::size_of::<Reverse<(u64, MessageId)>>();
            bytes += q.leases.capacity() * std::mem::size_of::<Reverse<(u64, MessageId)>>();
            bytes += ordered(&q.dlq_order);
            bytes += table(&q.dlq.by_kind) + table(&q.dlq.by_worker);
        }
        bytes as u64
    }

    /// True when a suspect message of queue `q` other than `except` (one being acked in the
    /// same write) is leased now.
    pub fn suspect_in_flight(&self, q: QueueId, except: Option<MessageId>) -> bool {
        self.suspects.iter().any(|id| {
            Some(*id) != except
                && self
                    .msgs
                    .get(id)
                    .is_some_and(|m| m.queue == q && m.place == Place::Leased)
        })
    }

    /// Forgets idempotency keys recorded before `cutoff`.
    pub fn expire_idempotency(&mut self, cutoff: u64) {
        while let Some((at, _)) = self.idempotency_order.front() {
            if *at >= cutoff {
                break;
            }
            let Some((at, key)) = self.idempotency_order.pop_front() else {
                break;
            };
            if self.idempotency.get(&key).is_some_and(|&(_, t)| t == at) {
                self.idempotency.remove(&key);
            }
        }
    }
}

/// Why an entry leaves a DLQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leave {
    Replayed,
    Deleted,
    Expired,
}

fn decrement(map: &mut IdMap<u32, u64>, key: u32) {
    if let Some(n) = map.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            map.remove(&key);
        }
    }
}

/// What points to a live record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefKind {
    /// A message's payload record.
    Payload,
    /// A DLQ entry's envelope (its dead-letter record).
    Envelope,
    /// A message's failure history (its latest retry record).
    History,
}

/// A live record and the message that needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveRef {
    /// The record's position.
    pub pos: u64,
    /// The message.
    pub id: MessageId,
    /// How the message uses it.
    pub kind: RefKind,
}

/// The time a record carries, if any.
fn record_time(rec: &Decoded<'_>) -> Option<u64> {
    match rec {
        Decoded::Put(p) => Some(p.meta.enqueued_at),
        Decoded::Op(op) => match op {
            Op::Lease { at, .. }
            | Op::Ack { at, .. }
            | Op::Replay { at, .. }
            | Op::Delete { at, .. }
            | Op::MarkReprocessed { at, .. } => Some(*at),
            Op::DeadLetter { dlq, .. } => Some(dlq.dead_lettered_at_ms),
            _ => None,
        },
        Decoded::Relocated(_) => None,
    }
}
