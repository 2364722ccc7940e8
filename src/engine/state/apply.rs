//! Applying records: [`State::apply`] and the per-record transitions it dispatches to.
//! The only code that changes a message's place, attempts or counters.

use super::guards::Outcome;
use super::{
    clip, Activity, AuditAction, AuditEntry, DeadInfo, DeadStatus, Effects, EntrySummary, Event,
    Extra, Failed, IdMap, IdSet, Msg, Place, QueueState, Removal, State, Step, EXPIRED_KIND,
    NO_FINGERPRINT, STORE_ACTOR,
};
use crate::engine::envelope::{DlqMetadata, FailureInfo, MessageId};
use crate::engine::fingerprint::Fingerprint;
use crate::engine::record::{Decoded, GuardEvent, ImportedEntry, Op, Put, PutCause, QueueId};

impl State {
    /// Applies one decoded record found at log position `pos`.
    pub fn apply(&mut self, rec: &Decoded<'_>, pos: u64) -> Effects {
        if let Some(t) = record_time(rec) {
            self.latest_time = self.latest_time.max(t);
        }
        match rec {
            Decoded::Put(put) => self.apply_put(put, pos),
            Decoded::Op(op) => self.apply_op(op, pos),
            Decoded::Relocated(inner) => self.apply_relocated(inner, pos),
        }
    }

    /// A relocated copy at `pos`: the pointer to the original moves here, if the original is
    /// still the one the index points to's record kind (payload, envelope, history).
    fn apply_relocated(&mut self, original: &Decoded<'_>, pos: u64) -> Effects {
        match original {
            Decoded::Put(put) => {
                let id = put.meta.id;
                let Some(m) = self.msgs.get_mut(&id) else {
                    return Effects::default();
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
                match self.dead.get_mut(id) {
                    Some(d) => d.envelope_pos = pos,
                    None => self.move_history(*id, pos),
                }
            }
            Decoded::Op(Op::Retry { id, .. }) => self.move_history(*id, pos),
            _ => {}
        }
        Effects::default()
    }

    /// The history of `id`, if it has one, is now the relocated copy at `pos`.
    fn move_history(&mut self, id: MessageId, pos: u64) {
        if let Some(e) = self.extras.get_mut(&id).filter(|e| e.history_pos.is_some()) {
            e.history_pos = Some(pos);
        }
    }

    pub(super) fn queue_mut(&mut self, q: QueueId) -> &mut QueueState {
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
                self.apply_import(m.id, m.queue, pos, entry, m.enqueued_at);
                return Effects::of(false, true);
            }
            PutCause::CorrectedReplay {
                attempts,
                generation,
                from_dlq,
                ..
            } => {
                let prev = self.msgs.get(&m.id).map(|x| x.place());
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
            // The record has no time of its own: its audit record's names it (until then,
            // the time it is visible from).
            let replayed = Event::Replayed {
                from: from_dlq.unwrap_or(m.queue),
                to: m.queue,
                generation,
                corrected: true,
            };
            self.record_step(m.id, m.visible_at, replayed);
        } else if matches!(m.cause, PutCause::CorrectedReplay { .. }) {
            // The entry is gone (deleted meanwhile): nothing to replay.
            return Effects::default();
        }
        self.msgs.insert(
            m.id,
            Msg::new(pos, m.visible_at, m.queue, attempts, Place::Ready),
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
        if let (Some(key), PutCause::Enqueue) = (&m.idempotency_key, &m.cause) {
            self.idempotency.insert(key.clone(), (m.id, m.enqueued_at));
            self.idempotency_order
                .push_back((m.enqueued_at, key.clone()));
        }
        let at = self.latest_time;
        let q = self.queue_mut(m.queue);
        q.counters.ready += 1;
        if previous_place.is_none() {
            q.counters.enqueued += 1;
            q.activity.add(Activity::Enqueued, 1, at);
        }
        let fresh = m.visible_at <= m.enqueued_at && previous_place.is_none();
        self.push_ready(m.queue, m.visible_at, m.id, fresh);
        Effects::of(true, previous_place.is_some())
    }

    /// An imported entry goes straight into the DLQ of `queue`.
    fn apply_import(
        &mut self,
        id: MessageId,
        queue: QueueId,
        pos: u64,
        e: &ImportedEntry,
        enqueued_at: u64,
    ) {
        if self.msgs.contains_key(&id) {
            return;
        }
        self.msgs
            .insert(id, Msg::new(pos, 0, queue, e.attempts, Place::Ready));
        if e.generation > 0 || e.first_received_at.is_some() {
            let extra = self.extras.entry(id).or_default();
            extra.generation = e.generation;
            extra.first_received_at = e.first_received_at;
        }
        self.queue_mut(queue).counters.ready += 1;
        if self.dead_letter_one(id, pos, &e.failure, &e.dlq) {
            let failed = Box::new(self.failed(id, &e.failure, &e.dlq, e.first_received_at));
            let imported = Event::Imported {
                failed,
                original_id: e.original_id,
            };
            let step = Step::new(e.dlq.dead_lettered_at_ms, None, imported);
            self.audit.record(id, Some(enqueued_at), step);
        }
    }

    fn apply_op(&mut self, op: &Op, pos: u64) -> Effects {
        match op {
            Op::DeclareQueue { queue, name } => {
                self.queue_mut(*queue).name = name.clone();
                self.names.insert(name.clone(), *queue);
                Effects::default()
            }
            Op::Lease { at, deadline, ids } | Op::Reserve { at, deadline, ids } => {
                let reserve = matches!(op, Op::Reserve { .. });
                for id in ids {
                    self.lease_one(*id, *at, *deadline);
                    if reserve && self.msg_in(*id, |p| p == Place::Leased).is_some() {
                        self.extras.entry(*id).or_default().awaiting_start = true;
                    }
                }
                Effects::default()
            }
            Op::Start { at, ids } => {
                for id in ids {
                    self.start_one(*id, *at);
                }
                Effects::default()
            }
            Op::Extend { deadline, ids } => {
                for id in ids {
                    let leased = self.msgs.get_mut(id).filter(|m| m.place() == Place::Leased);
                    if let Some(m) = leased {
                        m.visible_at = *deadline;
                        let q = m.queue();
                        self.push_lease(q, *deadline, *id);
                    }
                }
                Effects::default()
            }
            Op::Ack { ids, at } => {
                for id in ids {
                    self.ack_one(*id, *at);
                }
                Effects::default()
            }
            Op::Retry { id, visible_at, .. } => {
                self.suspects.remove(id);
                let Some(m) = self.msg_in(*id, |p| p != Place::Dead) else {
                    return Effects::default();
                };
                self.extras.entry(*id).or_default().history_pos = Some(pos);
                self.make_ready(*id, m, *visible_at, Place::Ready);
                let at = self.latest_time;
                let qs = self.queue_mut(m.queue());
                qs.counters.retried += 1;
                qs.activity.add(Activity::Retried, 1, at);
                self.guard_outcome(*id, Outcome::FailedAgain);
                Effects::of(true, false)
            }
            Op::Release { id, visible_at } => {
                self.suspects.remove(id);
                let Some(m) = self.msg_in(*id, |p| p != Place::Dead) else {
                    return Effects::default();
                };
                // A leased message's lease is given back; a waiting one (an operator's
                // retry now or delay, format version 2) is visible at the new time.
                if !self.end_reservation(*id, *visible_at) {
                    self.make_ready(*id, m, *visible_at, Place::Ready);
                }
                Effects::of(true, false)
            }
            Op::DeadLetter {
                id,
                failure,
                dlq,
                first_received_at,
                enqueued_at,
            } => {
                if self.dead_letter_one(*id, pos, failure, dlq) {
                    let failed = self.failed(*id, failure, dlq, *first_received_at);
                    let expired = failure.error_kind == EXPIRED_KIND;
                    let at = dlq.dead_lettered_at_ms;
                    let actor = expired.then_some(STORE_ACTOR);
                    let step = Step::new(at, actor, Event::DeadLettered(Box::new(failed)));
                    self.audit.record(*id, Some(*enqueued_at), step);
                    if expired {
                        let ids = IdSet::of(&[*id]);
                        let entry = AuditEntry::new(at, STORE_ACTOR, AuditAction::TtlExpiry, ids);
                        self.audit.add_entry(entry, false);
                    }
                }
                Effects::of(false, true)
            }
            Op::Replay {
                id,
                queue,
                at,
                visible_at,
                attempts,
                generation,
            } => {
                let moved =
                    self.replay_entry(*id, *queue, *at, *visible_at, *attempts, *generation);
                Effects::of(moved, moved)
            }
            Op::Delete { ids, expired, at } => {
                let mut dlq_changed = false;
                let (mut retention, mut ttl) = (Vec::new(), Vec::new());
                for id in ids {
                    let was_dead = self.delete_one(*id, *expired, *at);
                    dlq_changed |= was_dead;
                    if *expired {
                        if was_dead { &mut retention } else { &mut ttl }.push(*id);
                    }
                }
                // The store's own removals are their own audit entries.
                for (action, ids) in [
                    (AuditAction::Retention, retention),
                    (AuditAction::TtlExpiry, ttl),
                ] {
                    if !ids.is_empty() {
                        let entry = AuditEntry::new(*at, STORE_ACTOR, action, IdSet::of(&ids));
                        self.audit.add_entry(entry, false);
                    }
                }
                Effects::of(false, dlq_changed)
            }
            Op::Audit(entry) => {
                self.audit.add_entry(entry.clone(), true);
                Effects::default()
            }
            Op::MarkReprocessed { id, success, at } => {
                let Some(info) = self.dead.get_mut(id) else {
                    return Effects::default();
                };
                let was_pending = info.status == DeadStatus::Pending;
                info.status = DeadStatus::Reprocessed(*success, *at);
                let key = (info.dead_at, *id);
                let q = self.msgs.get(id).map(|m| m.queue()).unwrap_or(0);
                let qs = self.queue_mut(q);
                if let Some(s) = qs.dlq_order.get_mut(&key) {
                    s.pending = false;
                }
                let d = &mut qs.dlq;
                if was_pending {
                    d.pending = d.pending.saturating_sub(1);
                    d.reprocessed_kept += 1;
                }
                d.reprocessed_ok += u64::from(*success);
                d.reprocessed_failed += u64::from(!*success);
                self.record_step(*id, *at, Event::Marked { success: *success });
                Effects::of(false, true)
            }
            Op::Guard { guard, at, event } => {
                self.apply_guard(*guard, *at, event);
                let release = matches!(event, GuardEvent::Release { .. });
                Effects::of(release, release)
            }
        }
    }

    /// Message `id`, if it is in the index and its place passes `place`.
    fn msg_in(&self, id: MessageId, place: impl Fn(Place) -> bool) -> Option<Msg> {
        self.msgs.get(&id).copied().filter(|m| place(m.place()))
    }

    /// Moves DLQ entry `id` back to `queue` at time `at`, visible at `visible_at`, with
    /// `attempts` and `generation`: a replay, a step of its lineage. False (and nothing
    /// changes) if it is not a DLQ entry.
    pub(super) fn replay_entry(
        &mut self,
        id: MessageId,
        queue: QueueId,
        at: u64,
        visible_at: u64,
        attempts: u32,
        generation: u32,
    ) -> bool {
        let Some(m) = self.msg_in(id, |p| p == Place::Dead) else {
            return false;
        };
        let from = m.queue();
        let history = self.replay_history(id, m.payload_pos, attempts, false);
        self.leave_dlq(id, Leave::Replayed);
        let extra = self.extras.entry(id).or_default();
        extra.generation = generation;
        extra.from_dlq = Some(from);
        extra.history_pos = history;
        self.msgs.insert(
            id,
            Msg::new(m.payload_pos, visible_at, queue, attempts, Place::Ready),
        );
        self.queue_mut(queue).counters.ready += 1;
        self.push_ready(queue, visible_at, id, false);
        let replayed = Event::Replayed {
            from,
            to: queue,
            generation,
            corrected: false,
        };
        self.record_step(id, at, replayed);
        true
    }

    fn lease_one(&mut self, id: MessageId, at: u64, deadline: u64) {
        let Some(m) = self.msgs.get_mut(&id) else {
            return;
        };
        // A live lease only takes ready messages. A replayed one may find the message still
        // leased: its earlier lease ended by expiry or by a restart, neither of which is
        // logged, so the new delivery counts on top of it.
        let was_leased = match m.place() {
            Place::Ready | Place::ReadyAfterLostLease => false,
            Place::Leased => true,
            Place::Dead => return,
        };
        if was_leased && self.extras.get(&id).is_some_and(|e| e.awaiting_start) {
            // A reservation that expired before its start (not logged): it was no delivery,
            // as the live process decided when it expired it.
            self.end_reservation(id, deadline);
            return self.lease_one(id, at, deadline);
        }
        let Some(m) = self.msgs.get_mut(&id) else {
            return;
        };
        m.set_place(Place::Leased);
        m.attempts += 1;
        m.visible_at = deadline;
        let q = m.queue();
        let extra = self.extras.entry(id).or_default();
        extra.first_received_at.get_or_insert(at);
        extra.lease_cut_by_restart = false;
        extra.awaiting_start = false;
        let qs = self.queue_mut(q);
        if !was_leased {
            qs.counters.ready -= 1;
            qs.counters.in_flight += 1;
        }
        self.push_lease(q, deadline, id);
    }

    /// The handler of `id` starts. A reserved message's delivery stands from now. A message
    /// found ready is one a checkpoint wrote back as ready while it was reserved (the
    /// checkpoint took its delivery back): the start delivers it again.
    fn start_one(&mut self, id: MessageId, at: u64) {
        let Some(m) = self.msgs.get(&id).copied() else {
            return;
        };
        if m.place().is_ready() {
            self.lease_one(id, at, at);
        }
        if let Some(e) = self.extras.get_mut(&id) {
            e.awaiting_start = false;
        }
    }

    /// If `id` is reserved and its handler has not started, ends the reservation as if it
    /// had not been made: the delivery is taken back and the message is ready at
    /// `visible_at`, not a suspect. Returns false (and changes nothing) otherwise.
    pub(super) fn end_reservation(&mut self, id: MessageId, visible_at: u64) -> bool {
        let Some(m) = self.msgs.get(&id).copied() else {
            return false;
        };
        let Some(e) = self.extras.get_mut(&id) else {
            return false;
        };
        if m.place() != Place::Leased || !e.awaiting_start {
            return false;
        }
        e.awaiting_start = false;
        self.suspects.remove(&id);
        self.make_ready(id, m, visible_at, Place::Ready);
        if let Some(x) = self.msgs.get_mut(&id) {
            x.attempts = x.attempts.saturating_sub(1);
        }
        true
    }

    pub(super) fn make_ready(&mut self, id: MessageId, m: Msg, visible_at: u64, place: Place) {
        let qs = self.queue_mut(m.queue());
        if m.place() == Place::Leased {
            qs.counters.in_flight -= 1;
            qs.counters.ready += 1;
        }
        self.push_ready(m.queue(), visible_at, id, false);
        if let Some(x) = self.msgs.get_mut(&id) {
            x.set_place(place);
            x.visible_at = visible_at;
        }
    }

    fn ack_one(&mut self, id: MessageId, at: u64) {
        self.suspects.remove(&id);
        let Some(m) = self.msg_in(id, |p| p != Place::Dead) else {
            return;
        };
        self.msgs.remove(&id);
        let extra = self.remove_extra(id);
        let now = self.latest_time;
        let qs = self.queue_mut(m.queue());
        uncount(qs, m.place());
        qs.counters.acked += 1;
        qs.activity.add(Activity::Acked, 1, now);
        if let Some(from) = extra.and_then(|e| e.from_dlq) {
            self.queue_mut(from).dlq.reprocessed_ok += 1;
        }
        self.audit.remove(id, at, Removal::Processed, None);
        self.guard_outcome(id, Outcome::Succeeded);
    }

    fn remove_extra(&mut self, id: MessageId) -> Option<Extra> {
        let extra = self.extras.remove(&id);
        if let Some(exp) = extra.as_ref().and_then(|e| e.expires_at) {
            self.ttl.remove(&(exp, id));
        }
        extra
    }

    /// Moves `id` to its queue's DLQ; false (and nothing changed) when it is not in a
    /// queue.
    fn dead_letter_one(
        &mut self,
        id: MessageId,
        pos: u64,
        failure: &FailureInfo,
        dlq: &DlqMetadata,
    ) -> bool {
        self.suspects.remove(&id);
        let Some(m) = self.msg_in(id, |p| p != Place::Dead) else {
            return false;
        };
        let kind = self.strings.intern(&failure.error_kind);
        let worker = dlq
            .worker
            .as_deref()
            .map(|w| self.strings.intern(w))
            .unwrap_or(0);
        let dead_at = dlq.dead_lettered_at_ms;
        let mut from_dlq = None;
        if let Some(e) = self.extras.get_mut(&id) {
            from_dlq = e.from_dlq;
            if let Some(exp) = e.expires_at.take() {
                self.ttl.remove(&(exp, id));
            }
            // The envelope holds the whole history now.
            e.history_pos = None;
        }
        let info = DeadInfo {
            envelope_pos: pos,
            dead_at,
            kind,
            worker,
            status: DeadStatus::Pending,
            expires_at: dlq.expires_at_ms,
        };
        self.dead.insert(id, info);
        // Through `insert`: the index keeps DLQ entries apart from the dense pages.
        self.msgs.insert(
            id,
            Msg {
                visible_at: dead_at,
                ..m.with_place(Place::Dead)
            },
        );
        if let Some(from) = from_dlq {
            self.queue_mut(from).dlq.reprocessed_failed += 1;
        }
        let now = self.latest_time;
        let qs = self.queue_mut(m.queue());
        uncount(qs, m.place());
        qs.counters.dead_lettered += 1;
        qs.activity.add(Activity::DeadLettered, 1, now);
        if failure.error_kind == EXPIRED_KIND {
            qs.counters.expired += 1;
        }
        let summary = EntrySummary::of(&info, m.attempts, NO_FINGERPRINT);
        qs.dlq_order.insert((dead_at, id), summary);
        qs.history.record(dead_at, kind);
        qs.dlq.pending += 1;
        self.add_fingerprint(m.queue(), id, dead_at, failure);
        let qs = self.queue_mut(m.queue());
        *qs.dlq.by_kind.entry(kind).or_default() += 1;
        *qs.dlq.by_worker.entry(worker).or_default() += 1;
        self.guard_outcome(id, Outcome::FailedAgain);
        true
    }

    /// What the lineage keeps of DLQ entry `id`'s failure, just dead-lettered.
    fn failed(
        &self,
        id: MessageId,
        failure: &FailureInfo,
        dlq: &DlqMetadata,
        first_received_at: Option<u64>,
    ) -> Failed {
        let m = self.msgs.get(&id);
        let fingerprint = match self.fingerprints.of(id) {
            Some(def) => def.id,
            None => Fingerprint::of_failure(failure, self.audit_frames),
        };
        Failed {
            queue: m.map(|m| m.queue()).unwrap_or(0),
            generation: self.extras.get(&id).map(|e| e.generation).unwrap_or(0),
            attempts: m.map(|m| m.attempts).unwrap_or(0),
            first_received_at,
            error_kind: failure.error_kind.clone(),
            message: clip(&failure.error_message),
            fingerprint,
            worker: dlq.worker.clone(),
            dead_at: dlq.dead_lettered_at_ms,
        }
    }

    /// Adds a step to the lineage of `id`, if it has one (every DLQ entry has).
    fn record_step(&mut self, id: MessageId, at: u64, event: Event) {
        self.audit.record_if_known(id, Step::new(at, None, event));
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

    /// Records the fingerprint of DLQ entry `id` (of `queue`'s DLQ, dead-lettered at
    /// `dead_at`) from its failure, in the fingerprint index and in the entry's summary.
    pub fn add_fingerprint(
        &mut self,
        queue: QueueId,
        id: MessageId,
        dead_at: u64,
        failure: &FailureInfo,
    ) {
        let Some(dense) = self.fingerprints.add(queue, id, failure) else {
            return;
        };
        if let Some(s) = self.queue_mut(queue).dlq_order.get_mut(&(dead_at, id)) {
            s.fingerprint = dense;
        }
    }

    /// Removes a DLQ entry's index and counts (the message itself is handled by the caller).
    fn leave_dlq(&mut self, id: MessageId, why: Leave) -> bool {
        let Some(info) = self.dead.remove(&id) else {
            return false;
        };
        let q = self.msgs.get(&id).map(|m| m.queue()).unwrap_or(0);
        self.fingerprints.remove(q, id);
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
    /// A delete is only written for a message that is not leased (a DLQ entry, a ready
    /// message past its TTL, or a waiting message an operator deletes). Replaying the log
    /// may still find the message leased: its lease ended by expiry, which is not logged,
    /// before the delete was written.
    fn delete_one(&mut self, id: MessageId, expired: bool, at: u64) -> bool {
        self.suspects.remove(&id);
        let Some(m) = self.msgs.get(&id).copied() else {
            return false;
        };
        let was_dead = m.place() == Place::Dead;
        let (how, actor, why) = match (was_dead, expired) {
            (_, false) => (Removal::Deleted, None, Leave::Deleted),
            (true, true) => (Removal::Retention, Some(STORE_ACTOR), Leave::Expired),
            (false, true) => (Removal::Ttl, Some(STORE_ACTOR), Leave::Expired),
        };
        self.audit.remove(id, at, how, actor);
        if was_dead {
            self.leave_dlq(id, why);
        } else {
            let qs = self.queue_mut(m.queue());
            uncount(qs, m.place());
            qs.counters.expired += u64::from(expired);
            qs.counters.deleted += u64::from(!expired);
            self.guard_outcome(id, Outcome::Removed);
        }
        self.msgs.remove(&id);
        self.remove_extra(id);
        was_dead
    }
}

/// Why an entry leaves a DLQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leave {
    Replayed,
    Deleted,
    Expired,
}

/// A message leaves its queue's counts of `place` (leased, or ready).
fn uncount(qs: &mut QueueState, place: Place) {
    if place == Place::Leased {
        qs.counters.in_flight -= 1;
    } else {
        qs.counters.ready -= 1;
    }
}

fn decrement(map: &mut IdMap<u32, u64>, key: u32) {
    if let Some(n) = map.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            map.remove(&key);
        }
    }
}

/// The time a record carries, if any.
fn record_time(rec: &Decoded<'_>) -> Option<u64> {
    match rec {
        Decoded::Put(p) => Some(p.meta.enqueued_at),
        Decoded::Op(op) => match op {
            Op::Lease { at, .. }
            | Op::Reserve { at, .. }
            | Op::Start { at, .. }
            | Op::Ack { at, .. }
            | Op::Replay { at, .. }
            | Op::Delete { at, .. }
            | Op::MarkReprocessed { at, .. }
            | Op::Guard { at, .. } => Some(*at),
            Op::DeadLetter { dlq, .. } => Some(dlq.dead_lettered_at_ms),
            Op::Audit(entry) => Some(entry.at_ms),
            _ => None,
        },
        Decoded::Relocated(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::record::PutMeta;

    const T0: u64 = 1_700_000_000_000;

    /// Bug 7 (seed 123375): under quarantine a damaged range can hold a message's
    /// dead-lettering; the corrected replay after it then met a leased message and moved
    /// it to ready without uncounting its lease (in-flight 1, no message leased).
    /// [`State::apply`] now ignores a corrected replay of a message that is not in its DLQ,
    /// as it does a plain replay.
    #[test]
    fn a_corrected_replay_of_a_message_not_in_the_dlq_changes_nothing() {
        let mut st = State::default();
        st.apply(
            &Decoded::Op(Op::DeclareQueue {
                queue: 0,
                name: "q".into(),
            }),
            0,
        );
        let meta = |cause| PutMeta {
            id: 0,
            queue: 0,
            enqueued_at: T0,
            visible_at: T0,
            expires_at: None,
            attributes: Default::default(),
            idempotency_key: None,
            cause,
        };
        let enqueue = Put {
            meta: meta(PutCause::Enqueue),
            payload: b"old",
        };
        st.apply(&Decoded::Put(enqueue), 10);
        let lease = Op::Lease {
            at: T0,
            deadline: T0 + 1000,
            ids: vec![0],
        };
        st.apply(&Decoded::Op(lease), 20);
        let corrected = Put {
            meta: meta(PutCause::CorrectedReplay {
                previous_payload: b"old".to_vec(),
                attempts: 0,
                generation: 1,
                from_dlq: 0,
            }),
            payload: b"new",
        };
        st.apply(&Decoded::Put(corrected), 30);
        let c = st.queues[0].counters;
        assert_eq!((c.ready, c.in_flight), (0, 1));
        assert_eq!(st.msgs.get(&0).unwrap().payload_pos, 10);
    }
}
