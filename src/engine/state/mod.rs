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
//! - memory held per pending message is its [`Msg`] (24 bytes, in a dense page of
//!   [`MsgIndex`] while ids are dense) plus its ready-list entry: a share of a run of the
//!   `fresh` list (next to nothing when messages arrive in batches) or a 16-byte heap
//!   entry; its payload and metadata stay in the log.

mod apply;
mod audit;
mod dlq_order;
mod fingerprints;
mod guards;
mod history;
mod index;
mod intern;
mod live;
mod past;
mod rates;
mod ready;
mod snapshot;

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::num::NonZeroU32;

use crate::engine::envelope::MessageId;
use crate::engine::record::QueueId;

pub use audit::{
    clip, AuditAction, AuditEntry, AuditLimits, AuditLog, AuditSnapshot, Event, Failed, IdSet,
    Lineage, Removal, Step, Tombstone, STORE_ACTOR,
};
pub use dlq_order::{DlqOrder, EntrySummary, NO_FINGERPRINT};
pub use fingerprints::FingerprintIndex;
pub use guards::{Guard, GuardedReplayState, Guards};
pub use history::{FailureHistory, HISTORY_HOURS, HOUR_MS};
pub use index::MsgIndex;
pub use intern::{IdHashSet, IdMap, Interner};
pub use past::PastEntry;
pub use rates::{Activity, RecentActivity, RATE_BUCKETS, RATE_BUCKET_MS};
pub use snapshot::{QueueSnapshot, Snapshot};

/// Error kind of messages dead-lettered because their TTL passed.
pub const EXPIRED_KIND: &str = "expired";
/// Where a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Waiting in its queue.
    Ready = 0,
    /// Waiting in its queue after a delivery ended without an outcome (lease expired or the
    /// process died).
    ReadyAfterLostLease = 1,
    /// Delivered; `visible_at` holds the lease deadline.
    Leased = 2,
    /// In its queue's DLQ.
    Dead = 3,
}

impl Place {
    /// True for both ready states.
    pub fn is_ready(self) -> bool {
        matches!(self, Place::Ready | Place::ReadyAfterLostLease)
    }
}

/// Queue ids a store can hold, `0..MAX_QUEUES`: [`Msg`] keeps a message's queue and place
/// in one `u32`, the place in two bits. Declaring one more queue is
/// [`crate::Error::TooManyQueues`]; a record or checkpoint naming a queue id at or above it
/// does not decode (`engine::wire`), so no index ever meets one.
pub const MAX_QUEUES: QueueId = (1 << 30) - 1;

/// The per-message index entry, 24 bytes (`Option<Msg>` too: a page slot costs no more).
///
/// The queue and the place share a `u32` (`(queue + 1) << 2 | place`, never zero, which
/// gives `Option<Msg>` its niche); they are read and changed through the methods below,
/// the only code that knows the packing.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Msg {
    /// Position of the record holding its payload.
    pub payload_pos: u64,
    /// Visible-at while ready; the lease deadline while leased; dead-lettered-at when dead.
    pub visible_at: u64,
    /// Deliveries counted.
    pub attempts: u32,
    /// Its queue (for a dead message: the queue whose DLQ holds it) and where it is.
    queue_place: NonZeroU32,
}

impl Msg {
    /// A message of queue `queue` (below [`MAX_QUEUES`]: the decoders and
    /// `Store::declare` see to it).
    pub fn new(
        payload_pos: u64,
        visible_at: u64,
        queue: QueueId,
        attempts: u32,
        place: Place,
    ) -> Msg {
        Msg {
            payload_pos,
            visible_at,
            attempts,
            queue_place: pack(queue, place),
        }
    }

    /// Its queue (for a dead message: the queue whose DLQ holds it).
    pub fn queue(&self) -> QueueId {
        (self.queue_place.get() >> 2) - 1
    }

    /// Where it is.
    pub fn place(&self) -> Place {
        PLACES[(self.queue_place.get() & 3) as usize]
    }

    /// Moves it to `place` in the same queue.
    pub fn set_place(&mut self, place: Place) {
        self.queue_place = pack(self.queue(), place);
    }

    /// The same message moved to `place`.
    pub fn with_place(mut self, place: Place) -> Msg {
        self.set_place(place);
        self
    }
}

/// Every place, by the two bits [`Msg`] packs it in (its discriminant).
const PLACES: [Place; 4] = [
    Place::Ready,
    Place::ReadyAfterLostLease,
    Place::Leased,
    Place::Dead,
];

/// `(queue + 1) << 2 | place`: at least 4, so never zero. A queue id at or above
/// [`MAX_QUEUES`] (which nothing builds) would be taken modulo it; debug builds stop there.
fn pack(queue: QueueId, place: Place) -> NonZeroU32 {
    debug_assert!(
        queue < MAX_QUEUES,
        "queue id {queue} over the index's limit"
    );
    let packed = ((queue % MAX_QUEUES + 1) << 2) | place as u32;
    NonZeroU32::new(packed).unwrap_or(NonZeroU32::MAX)
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Msg")
            .field("payload_pos", &self.payload_pos)
            .field("visible_at", &self.visible_at)
            .field("queue", &self.queue())
            .field("attempts", &self.attempts)
            .field("place", &self.place())
            .finish()
    }
}

/// Extra facts kept only for messages that were delivered, replayed or have a TTL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    /// True while it is reserved for a worker pool and its handler has not started: if the
    /// reservation ends now, its delivery is taken back (see [`State::end_reservation`]).
    pub awaiting_start: bool,
    /// Expiry time (TTL).
    pub expires_at: Option<u64>,
}

/// Status of a DLQ entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadStatus {
    /// Not dealt with yet.
    Pending,
    /// Marked reprocessed with this outcome and time.
    Reprocessed(bool, u64),
}

/// The index entry of a DLQ entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// Counters of one queue, kept incrementally as records are applied (public as
/// `deadletter::queue::QueueCounters`, the counts of a `QueueStats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct QueueCounters {
    /// Messages waiting (visible now or later).
    pub ready: u64,
    /// Messages leased.
    pub in_flight: u64,
    /// Enqueued (since the oldest record in the log).
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
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    fresh: ready::Fresh,
    /// Messages visible later, by (visible-at, id) (entries may be stale; checked on pop).
    delayed: BinaryHeap<Reverse<(u64, MessageId)>>,
    /// Leases by deadline (entries may be stale).
    leases: BinaryHeap<Reverse<(u64, MessageId)>>,
    /// Counters.
    pub counters: QueueCounters,
    /// DLQ entries by (dead-at, id), the DLQ's browse order, each with what filters check.
    pub dlq_order: DlqOrder,
    /// DLQ counters.
    pub dlq: DlqCounters,
    /// Dead-letterings per hour and error kind.
    pub history: FailureHistory,
    /// Enqueues, acks, retries and dead-letterings of the last minutes (not persisted).
    pub activity: RecentActivity,
}

/// What an applied record changed that the store must react to (alerts, wake-ups).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Effects {
    /// Something became ready to lease.
    pub ready: bool,
    /// DLQ sizes changed for these queues (bit set over the first 64 queue ids is not enough,
    /// so a flag is kept and the store rechecks all DLQs with alert hooks).
    pub dlq_changed: bool,
    /// A guarded replay has something to release now (the store drives it).
    pub guard: bool,
}

impl Effects {
    /// Effects of a record that made something ready or changed a DLQ (`guard` is the
    /// committer's to set).
    pub fn of(ready: bool, dlq_changed: bool) -> Effects {
        Effects {
            ready,
            dlq_changed,
            guard: false,
        }
    }
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
    /// When the leases released at open were lost: the latest time the log recorded, when
    /// their holder was last seen alive. Those messages are ready from time 0 (at once,
    /// before anything else); the age of the oldest waiting message counts from this.
    pub leases_lost_at: u64,
    /// The fingerprint of every DLQ entry (not persisted: recomputed from envelopes).
    pub fingerprints: FingerprintIndex,
    /// Lineage, tombstones and the audit trail.
    pub audit: AuditLog,
    /// Stack-trace frames of the fingerprints lineage records (the engine sets it with the
    /// audit limits; compaction's index computes them without a fingerprint index).
    pub audit_frames: usize,
    /// True for an index that only ever replays records (compaction's own): it keeps no
    /// ready lists and no lease deadlines (see [`State::set_replay_only`]).
    pub replay_only: bool,
    /// Guarded replays and the replayed messages they wait for.
    pub guards: Guards,
}

/// The heap bytes of a hash map at its capacity: hashbrown keeps capacity * 8 / 7 buckets
/// (a power of two), each an entry plus one control byte.
#[cfg(any(test, feature = "sim"))]
fn table_bytes<K, V, S>(m: &HashMap<K, V, S>) -> usize {
    let buckets = match m.capacity() {
        0 => 0,
        c => (c * 8 / 7).next_power_of_two(),
    };
    buckets * (std::mem::size_of::<(K, V)>() + 1)
}

impl State {
    /// After an open that skipped lost ranges of the log (quarantine), moves the next id
    /// past any id those ranges may have handed out, so no id is ever given twice. Ids are
    /// handed out by payload records in log order, each at least a frame header and one
    /// byte long: a range of `n` bytes handed out at most `n / 17` of them, all above the
    /// ids of the records before it (the replayed `next_id` already passed those after it).
    pub fn skip_lost_ids(&mut self, report: &crate::storage::log::RecoveryReport) {
        let min_record = (crate::storage::format::FRAME_HEADER_LEN + 1) as u64;
        let lost: u64 = report
            .quarantined
            .iter()
            .map(|q| q.end.saturating_sub(q.start))
            .fold(0, u64::saturating_add);
        if lost > 0 {
            self.next_id = self.next_id.saturating_add(lost / min_record + 1);
        }
    }

    /// An estimate of the heap memory the index holds, in bytes: hash tables, ready lists,
    /// heaps and ordered sets at their allocated capacity (interned strings, queue names and
    /// idempotency keys are not counted). Payloads and envelopes are in the log, not here.
    #[cfg(feature = "sim")]
    pub fn index_bytes(&self) -> u64 {
        fn ordered(len: usize, entry: usize) -> usize {
            // B-tree nodes are between half and completely full, plus per-node overhead.
            len * entry * 3 / 2
        }
        let key = std::mem::size_of::<(u64, MessageId)>();
        let mut bytes =
            self.msgs.heap_bytes() as usize + table_bytes(&self.extras) + table_bytes(&self.dead);
        bytes += ordered(self.ttl.len(), key);
        for q in &self.queues {
            bytes += q.fresh.heap_bytes();
            bytes += q.delayed.capacity() * std::mem::size_of::<Reverse<(u64, MessageId)>>();
            bytes += q.leases.capacity() * std::mem::size_of::<Reverse<(u64, MessageId)>>();
            bytes += ordered(q.dlq_order.len(), key + std::mem::size_of::<EntrySummary>());
            bytes += table_bytes(&q.dlq.by_kind) + table_bytes(&q.dlq.by_worker);
        }
        bytes as u64
    }

    /// Forgets idempotency keys recorded before `cutoff`.
    pub fn expire_idempotency(&mut self, cutoff: u64) {
        while self
            .idempotency_order
            .front()
            .is_some_and(|(at, _)| *at < cutoff)
        {
            let Some((at, key)) = self.idempotency_order.pop_front() else {
                break;
            };
            if self.idempotency.get(&key).is_some_and(|&(_, t)| t == at) {
                self.idempotency.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_msg_packs_queue_and_place_into_24_bytes() {
        assert_eq!(std::mem::size_of::<Msg>(), 24);
        assert_eq!(std::mem::size_of::<Option<Msg>>(), 24);
        for queue in [0, 1, 2, 1000, MAX_QUEUES - 2, MAX_QUEUES - 1] {
            for place in PLACES {
                let m = Msg::new(u64::MAX, u64::MAX - 1, queue, u32::MAX, place);
                assert_eq!((m.queue(), m.place()), (queue, place));
                assert_eq!(
                    (m.payload_pos, m.visible_at, m.attempts),
                    (u64::MAX, u64::MAX - 1, u32::MAX)
                );
                for other in PLACES {
                    let moved = m.with_place(other);
                    assert_eq!((moved.queue(), moved.place()), (queue, other));
                    assert_eq!(moved.with_place(place), m);
                }
            }
        }
    }
}
