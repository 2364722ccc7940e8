//! Snapshots of the index (the persistent part, written by checkpoints) and the rebuild
//! of a whole index from one. How a snapshot is written on disk is
//! [`crate::engine::wire`]'s business.

use std::collections::BTreeMap;

use super::{
    AuditLog, AuditSnapshot, DeadInfo, DlqCounters, EntrySummary, Extra, FailureHistory, Guard,
    Guards, Interner, Msg, Place, QueueCounters, State, NO_FINGERPRINT,
};
use crate::engine::envelope::MessageId;
use crate::engine::record::GuardId;
use crate::engine::record::QueueId;

/// One queue in a snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueSnapshot {
    /// Its name (empty for an id never declared).
    pub name: String,
    /// Its counters.
    pub counters: QueueCounters,
    /// Its DLQ's counters.
    pub dlq: DlqCounters,
    /// Its DLQ's dead-letterings per hour and error kind.
    pub history: FailureHistory,
}

/// The persistent part of the index; everything else is rebuilt from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Next message id.
    pub next_id: MessageId,
    /// Latest time seen in a record.
    pub latest_time: u64,
    /// Queues by id.
    pub queues: Vec<QueueSnapshot>,
    /// Every message.
    pub msgs: Vec<(MessageId, Msg)>,
    /// Extras.
    pub extras: Vec<(MessageId, Extra)>,
    /// DLQ entries.
    pub dead: Vec<(MessageId, DeadInfo)>,
    /// Idempotency keys in insertion order: (enqueued-at, key, id).
    pub idempotency: Vec<(u64, String, MessageId)>,
    /// Interned strings, by id.
    pub strings: Vec<String>,
    /// Lineage, tombstones and the audit trail.
    pub audit: AuditSnapshot,
    /// Guarded replays.
    pub guards: BTreeMap<GuardId, Guard>,
}

impl State {
    /// The persistent part of the index, for a checkpoint.
    ///
    /// A message reserved for a worker pool whose handler has not started is written as
    /// ready, its delivery taken back, as a reopen would find it (a checkpoint has no
    /// reservations): the start record, if one follows in the log, delivers it again.
    /// The lowest log position the index refers to: a payload, a failure history or a
    /// DLQ envelope. The log must still hold every record from there on (`None`: it
    /// refers to none).
    pub fn lowest_position(&self) -> Option<u64> {
        let payloads = self.msgs.iter().map(|(_, m)| m.payload_pos);
        let histories = self.extras.values().filter_map(|e| e.history_pos);
        let envelopes = self.dead.values().map(|d| d.envelope_pos);
        payloads.chain(histories).chain(envelopes).min()
    }

    pub fn snapshot(&self) -> Snapshot {
        let mut queues: Vec<QueueSnapshot> = self
            .queues
            .iter()
            .map(|q| QueueSnapshot {
                name: q.name.clone(),
                counters: q.counters,
                dlq: q.dlq.clone(),
                history: q.history.clone(),
            })
            .collect();
        let awaiting = |id: MessageId| self.extras.get(&id).is_some_and(|e| e.awaiting_start);
        // Sized once: the index's iterator cannot say its length, and growing by doubling
        // would hold up to twice the entries (a checkpoint of compaction's index is the
        // peak of its memory).
        let mut msgs = Vec::with_capacity(self.msgs.len());
        msgs.extend(self.msgs.iter().map(|(id, m)| {
            let mut m = *m;
            if m.place() == Place::Leased && awaiting(id) {
                if let Some(c) = queues.get_mut(m.queue() as usize).map(|q| &mut q.counters) {
                    c.in_flight -= 1;
                    c.ready += 1;
                }
                m.set_place(Place::Ready);
                m.visible_at = 0;
                m.attempts = m.attempts.saturating_sub(1);
            }
            (id, m)
        }));
        Snapshot {
            next_id: self.next_id,
            latest_time: self.latest_time,
            queues,
            msgs,
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
            strings: self.strings.names().to_vec(),
            audit: self.audit.snapshot(),
            guards: self.guards.all.clone(),
        }
    }

    /// Rebuilds an index from a snapshot (the derived sets are recomputed). Its ready lists
    /// are empty: the caller replays the log after the snapshot and then rebuilds them
    /// once ([`State::rebuild_ready_lists`]; a reopen's `release_all_leases` does).
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
            qs.history = q.history;
        }
        let mut lost = Vec::new();
        for (id, mut m) in snap.msgs {
            if m.place() == Place::ReadyAfterLostLease {
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
            if let Some(m) = st.msgs.get(&id).copied() {
                // Fingerprints are not in a snapshot: the engine adds them at open.
                let summary = EntrySummary::of(&d, m.attempts, NO_FINGERPRINT);
                st.queue_mut(m.queue())
                    .dlq_order
                    .insert((d.dead_at, id), summary);
            }
            st.dead.insert(id, d);
        }
        for (at, key, id) in snap.idempotency {
            st.idempotency.insert(key.clone(), (id, at));
            st.idempotency_order.push_back((at, key));
        }
        st.strings = Interner::from_names(snap.strings);
        st.audit = AuditLog::restore(snap.audit);
        st.guards = Guards::from_replays(snap.guards);
        st
    }
}
