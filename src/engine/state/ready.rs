//! The ready lists, leases and suspects: which message a lease takes next.
//!
//! A reservation (a worker pool's batch) whose handler has not started when its lease ends,
//! by expiry or by a restart, is taken back (`State::end_reservation`): ready, its delivery
//! uncounted, not a suspect. Only a started delivery can have killed the process.
//!
//! Per queue, `fresh` holds messages visible at enqueue in enqueue order and `delayed` a
//! heap of the others by (visible-at, id); `leases` is a heap of lease deadlines. Entries
//! are hints: one is valid only while its message is still ready (or leased) in that queue
//! with the same time, so a message that moved is never searched for and removed.
//! `fresh` is sorted by (visible-at, id) (a lease takes the smaller of its head and the
//! heap's). It is held as runs of consecutive ids ready at the same time ([`Fresh`]): a
//! batch enqueued at once, or the messages enqueued within one millisecond, is one 24-byte
//! run, so a backlog of pending messages costs next to nothing here (16 bytes each as a
//! list of entries). Each id of a run is a hint like any other entry.
//!
//! A replay-only index ([`State::replay_only`], compaction's) keeps none of these lists:
//! only live operations drain them, so there they would only grow.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::{Msg, Place, State};
use crate::engine::envelope::MessageId;
use crate::engine::record::QueueId;

impl State {
    /// Makes this an index that only ever replays records (compaction's own): it keeps no
    /// ready lists and no lease deadlines from now on (and drops those it has), which
    /// saves their memory.
    pub fn set_replay_only(&mut self) {
        self.replay_only = true;
        for q in &mut self.queues {
            q.leases = BinaryHeap::new();
        }
        self.rebuild_ready_lists();
    }

    /// Adds the ready-list entry of `id`, ready at `at` in queue `q`: to `fresh` when
    /// `fresh` (visible at its enqueue, which comes after every message in that list) and
    /// it sorts after the list's last entry, to the heap otherwise.
    pub(super) fn push_ready(&mut self, q: QueueId, at: u64, id: MessageId, fresh: bool) {
        if self.replay_only {
            return;
        }
        let qs = self.queue_mut(q);
        if !(fresh && qs.fresh.push_after_last(at, id)) {
            qs.delayed.push(Reverse((at, id)));
        }
    }

    /// Adds the lease-deadline entry of `id` in queue `q`.
    pub(super) fn push_lease(&mut self, q: QueueId, deadline: u64, id: MessageId) {
        if !self.replay_only {
            self.queue_mut(q).leases.push(Reverse((deadline, id)));
        }
    }

    /// Releases every lease as a reopen does: the process that held them is gone. Called
    /// once, after the log has been replayed; it also rebuilds the ready lists (see
    /// [`State::rebuild_ready_lists`]).
    pub fn release_all_leases(&mut self) {
        let leased: Vec<(MessageId, Msg)> = self
            .msgs
            .iter()
            .filter(|(_, m)| m.place() == Place::Leased)
            .map(|(id, m)| (id, *m))
            .collect();
        self.leases_lost_at = self.latest_time;
        for (id, m) in leased {
            if self.end_reservation(id, 0) {
                // Reserved but not started: not what killed the process.
                continue;
            }
            self.make_ready(id, m, 0, Place::ReadyAfterLostLease);
            self.extras.entry(id).or_default().lease_cut_by_restart = true;
            self.suspects.insert(id);
        }
        self.reset_replay_lists();
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
    ///
    /// The messages come in id order (most of them: the index's pages first), which is
    /// mostly the order of their visible-at times too: each one that sorts after the last
    /// goes to `fresh`, a list, and only the others to the heap. A store of a million
    /// pending messages reopens without building a heap of a million entries, and its
    /// leases pop a list.
    pub fn rebuild_ready_lists(&mut self) {
        for qs in &mut self.queues {
            qs.fresh = Fresh::default();
            qs.delayed = BinaryHeap::new();
        }
        if self.replay_only {
            return;
        }
        let mut delayed: Vec<Vec<Reverse<(u64, MessageId)>>> =
            (0..self.queues.len()).map(|_| Vec::new()).collect();
        for (id, m) in self.msgs.iter() {
            if !m.place().is_ready() {
                continue;
            }
            let Some(qs) = self.queues.get_mut(m.queue() as usize) else {
                continue;
            };
            // Ready at 0: a lease a restart cut. `oldest_waiting_since` looks for those in
            // the heap.
            if m.visible_at > 0 && qs.fresh.push_after_last(m.visible_at, id) {
                continue;
            }
            if let Some(list) = delayed.get_mut(m.queue() as usize) {
                list.push(Reverse((m.visible_at, id)));
            }
        }
        for (qs, list) in self.queues.iter_mut().zip(delayed) {
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
                if m.place() == Place::Leased
                    && m.visible_at == deadline
                    && m.queue() == q
                    && !self.end_reservation(id, deadline)
                {
                    self.make_ready(id, m, deadline, Place::ReadyAfterLostLease);
                }
            }
        }
    }

    /// The next ready message of queue `q` visible at `now`, removed from the ready lists
    /// (the caller leases or dead-letters it).
    pub fn pop_visible(&mut self, q: QueueId, now: u64) -> Option<MessageId> {
        let qs = self.queues.get_mut(q as usize)?;
        let msgs = &self.msgs;
        let valid = |(at, id): (u64, MessageId)| {
            msgs.get(&id)
                .is_some_and(|m| m.place().is_ready() && m.queue() == q && m.visible_at == at)
        };
        // Stale entries at the head of either list go.
        while qs.fresh.front().is_some_and(|e| !valid(e)) {
            qs.fresh.pop_front();
        }
        while qs.delayed.peek().is_some_and(|r| !valid(r.0)) {
            qs.delayed.pop();
        }
        let ((at, id), from_fresh) = match (qs.fresh.front(), qs.delayed.peek().map(|r| r.0)) {
            (Some(f), d) if d.is_none_or(|d| f <= d) => (f, true),
            (_, Some(d)) => (d, false),
            _ => return None,
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
            let (q, at) = (m.queue(), m.visible_at);
            self.queue_mut(q).delayed.push(Reverse((at, id)));
        }
    }

    /// The earliest time a ready message of `q` becomes visible (stale entries included, so
    /// this can be early but never late).
    pub fn next_visible_at(&self, q: QueueId) -> Option<u64> {
        let qs = self.queues.get(q as usize)?;
        let fresh = qs.fresh.front().map(|(at, _)| at);
        let delayed = qs.delayed.peek().map(|Reverse((at, _))| *at);
        let lease = qs.leases.peek().map(|Reverse((at, _))| *at);
        [fresh, delayed, lease].into_iter().flatten().min()
    }

    /// Since when the oldest waiting message of `q` has been visible (stale entries
    /// included, so this can be early but never late). A message whose lease a restart cut
    /// is visible at 0 (ready at once) but has waited only since the restart
    /// ([`State::leases_lost_at`]); while such messages wait, the other delayed messages
    /// are looked through for one that waited longer (a walk of that list, only then).
    pub fn oldest_waiting_since(&self, q: QueueId) -> Option<u64> {
        let qs = self.queues.get(q as usize)?;
        let fresh = qs.fresh.front().map(|(at, _)| at);
        let lease = qs.leases.peek().map(|Reverse((at, _))| *at);
        let delayed = match qs.delayed.peek() {
            Some(Reverse((0, _))) => {
                let older = qs
                    .delayed
                    .iter()
                    .map(|Reverse((at, _))| *at)
                    .filter(|&at| at > 0)
                    .min();
                // No time at all (0) is never an answer: an age from 1970 says nothing.
                let lost = (self.leases_lost_at > 0).then_some(self.leases_lost_at);
                [older, lost].into_iter().flatten().min()
            }
            other => other.map(|Reverse((at, _))| *at),
        };
        [fresh, delayed, lease].into_iter().flatten().min()
    }

    /// True when a suspect message of queue `q` other than those in `except` (being acked
    /// in the same write) is leased now.
    pub fn suspect_in_flight(&self, q: QueueId, except: impl Fn(MessageId) -> bool) -> bool {
        self.suspects.iter().any(|id| {
            !except(*id)
                && self
                    .msgs
                    .get(id)
                    .is_some_and(|m| m.queue() == q && m.place() == Place::Leased)
        })
    }
}

/// A queue's `fresh` list: entries (visible-at, id) sorted by both, held as runs of
/// consecutive ids with the same visible-at.
///
/// Invariants: every run holds at least one id; runs follow each other in (visible-at, id)
/// order, so the entries they hold, read front to back, are sorted.
#[derive(Debug, Default)]
pub struct Fresh {
    runs: VecDeque<Run>,
}

/// Ids `first` to `first + len - 1`, each visible at `at`.
#[derive(Debug, Clone, Copy)]
struct Run {
    at: u64,
    first: MessageId,
    len: u32,
}

impl Fresh {
    /// The first entry.
    pub fn front(&self) -> Option<(u64, MessageId)> {
        self.runs.front().map(|r| (r.at, r.first))
    }

    /// The last entry.
    pub fn back(&self) -> Option<(u64, MessageId)> {
        self.runs
            .back()
            .map(|r| (r.at, r.first + u64::from(r.len) - 1))
    }

    /// Removes the first entry.
    pub fn pop_front(&mut self) {
        if let Some(r) = self.runs.front_mut() {
            r.first += 1;
            r.len -= 1;
            if r.len == 0 {
                self.runs.pop_front();
            }
        }
    }

    /// Adds the entry (`at`, `id`) if it sorts after the last one; returns false, and
    /// changes nothing, otherwise.
    pub fn push_after_last(&mut self, at: u64, id: MessageId) -> bool {
        if self.back().is_some_and(|last| last >= (at, id)) {
            return false;
        }
        if let Some(r) = self.runs.back_mut() {
            let next = r.first.checked_add(u64::from(r.len));
            if r.at == at && next == Some(id) && r.len < u32::MAX {
                r.len += 1;
                return true;
            }
        }
        self.runs.push_back(Run {
            at,
            first: id,
            len: 1,
        });
        true
    }

    /// The heap memory held, in bytes.
    #[cfg(feature = "sim")]
    pub fn heap_bytes(&self) -> usize {
        self.runs.capacity() * std::mem::size_of::<Run>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random pushes and pops agree with a plain list of entries; a batch is one run.
    #[test]
    fn fresh_runs_agree_with_a_list_of_entries() {
        let mut fresh = Fresh::default();
        let mut model: VecDeque<(u64, MessageId)> = VecDeque::new();
        let mut rng = crate::rng::SplitMix64::new(0x2545_F491_4F6C_DD1D);
        let (mut at, mut id) = (1u64, 0u64);
        for _ in 0..100_000 {
            let x = rng.next_u64();
            match x % 8 {
                // Enqueues: the same millisecond, a later one, or ids skipped (other queues).
                0..=4 => {
                    at += u64::from(x.is_multiple_of(97));
                    id += 1 + u64::from(x.is_multiple_of(89)) * (x >> 60);
                    assert!(fresh.push_after_last(at, id));
                    assert!(!fresh.push_after_last(at, id), "not after the last");
                    model.push_back((at, id));
                }
                _ => {
                    fresh.pop_front();
                    model.pop_front();
                }
            }
            assert_eq!(fresh.front(), model.front().copied());
            assert_eq!(fresh.back(), model.back().copied());
        }
        while let Some(e) = model.pop_front() {
            assert_eq!(fresh.front(), Some(e));
            fresh.pop_front();
        }
        assert_eq!((fresh.front(), fresh.back()), (None, None));
        assert!(fresh.runs.is_empty());
        // A batch of a thousand consecutive ids at one time is one run.
        for id in 5000..6000 {
            assert!(fresh.push_after_last(9, id));
        }
        assert_eq!(fresh.runs.len(), 1);
        assert_eq!(
            (fresh.front(), fresh.back()),
            (Some((9, 5000)), Some((9, 5999)))
        );
    }
}
