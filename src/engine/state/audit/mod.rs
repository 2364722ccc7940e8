//! The audit trail, message lineage and tombstones: what the index remembers of changes to
//! DLQs after the records that made them are compacted away.
//!
//! - **Lineage**: for every message that ever entered a DLQ (dead-lettered or imported),
//!   the steps of its life from then on: each dead-lettering (a replay generation's end,
//!   with its failure), each replay, marks, and its removal. At most
//!   [`AuditLimits::steps`] steps per message (at least 2), the oldest dropped first (and
//!   counted), except the step that put the message in the DLQ it is still in and its
//!   latest mark: they say where it is.
//! - **Tombstones**: when such a message leaves the store (deleted, purged, removed by
//!   retention or TTL, or handled after a replay), its lineage moves here with the time
//!   and way it was removed. At most [`AuditLimits::tombstones`], and none older than
//!   [`AuditLimits::retention_ms`] (by the removal time of the newest removal).
//! - **Trail**: one [`AuditEntry`] per change an operator or the store made to a DLQ, or
//!   an operator to the messages waiting in a queue: what, when, who, which ids (an
//!   [`IdSet`]) and a detail when there is more to say (a replay's transform). Operators' entries come from
//!   `Op::Audit` records, written after the change they describe in the same batch; the
//!   store's own (retention, TTL) are made from the delete records themselves. At most
//!   [`AuditLimits::trail`] entries, under the same retention.
//!
//! Invariants:
//! - everything here is changed only by [`crate::engine::state::State::apply`] (through
//!   the methods below), from the times records carry, so a reopen and compaction's own
//!   index rebuild exactly what the live index holds, given the same limits;
//! - `horizon` is the earliest time from which every DLQ entry is still known: whatever
//!   was dropped (a tombstone, a lineage step) describes only times before it.

mod idset;

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

pub use idset::IdSet;

use super::IdMap;
use crate::engine::envelope::MessageId;
use crate::engine::fingerprint::Fingerprint;
use crate::engine::record::QueueId;

/// Error messages kept in lineage and tombstones are cut to this many bytes (at a
/// character boundary): evidence, not the envelope.
pub const MESSAGE_BYTES: usize = 512;

/// The actor of the store's own changes (retention, TTL).
pub const STORE_ACTOR: &str = "store";

/// How much of the past the index keeps (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditLimits {
    /// Tombstones kept at most.
    pub tombstones: usize,
    /// Tombstones and trail entries older than this (milliseconds, behind the newest
    /// removal or entry) are dropped.
    pub retention_ms: u64,
    /// Audit trail entries kept at most.
    pub trail: usize,
    /// Lineage steps kept per message (at least 2: the dead-lettering that put it in the
    /// DLQ it is in, and its latest mark, are kept while older steps are dropped).
    pub steps: usize,
}

impl Default for AuditLimits {
    fn default() -> Self {
        AuditLimits {
            tombstones: 100_000,
            retention_ms: 30 * 24 * 3_600_000,
            trail: 10_000,
            steps: 64,
        }
    }
}

/// What an [`AuditEntry`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AuditAction {
    /// Entries replayed to a queue (with their payload, or a corrected one).
    Replay,
    /// Entries deleted.
    Delete,
    /// Entries purged (deleted by age).
    Purge,
    /// Entries imported from an export.
    Import,
    /// Entries marked reprocessed.
    MarkReprocessed,
    /// Entries removed by the DLQ's retention (by the store).
    Retention,
    /// Messages whose time to live passed, deleted or moved to the DLQ (by the store).
    TtlExpiry,
    /// Messages waiting in a queue (delayed, or waiting for their next attempt) made
    /// visible now by an operator. (Format version 2 on, as the three below.)
    RetryNow,
    /// Messages waiting in a queue given a later visibility time by an operator.
    Delay,
    /// Messages moved from their queue to its DLQ by an operator.
    MoveToDlq,
    /// Messages deleted from their queue (not from a DLQ) by an operator.
    DeleteMessage,
}

/// One change to a DLQ or to the messages of a queue: what, when, who, which entries, and
/// what more it was ([`AuditEntry::detail`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AuditEntry {
    /// When (ms).
    pub at_ms: u64,
    /// Who: `user@host` for the command line, a token's name for the dashboard, what the
    /// library caller set (`library` by default), `store` for retention and TTL.
    pub actor: String,
    /// What.
    pub action: AuditAction,
    /// The entries.
    pub ids: IdSet,
    /// What the change was beyond its action, when that says more: the jq expression a
    /// replay transformed the payloads with, the file a corrected payload came from, an
    /// operator's reason. `None` for entries of format version 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl AuditEntry {
    /// An entry.
    pub fn new(at_ms: u64, actor: impl Into<String>, action: AuditAction, ids: IdSet) -> Self {
        AuditEntry {
            at_ms,
            actor: actor.into(),
            action,
            ids,
            detail: None,
        }
    }

    /// The entry with `detail` (see [`AuditEntry::detail`]).
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }
}

/// How a message left the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Removal {
    /// Deleted by an operator.
    Deleted,
    /// Purged (deleted by age) by an operator.
    Purged,
    /// Removed from the DLQ by its retention.
    Retention,
    /// Its time to live passed while it waited in a queue.
    Ttl,
    /// Handled successfully after a replay.
    Processed,
}

/// A failure that ended a generation: what the DLQ entry said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failed {
    /// The queue whose DLQ took it.
    pub queue: QueueId,
    /// The replay generation that failed (0: the first).
    pub generation: u32,
    /// Deliveries counted.
    pub attempts: u32,
    /// First delivery.
    pub first_received_at: Option<u64>,
    /// Error kind.
    pub error_kind: String,
    /// Error message (at most [`MESSAGE_BYTES`]).
    pub message: String,
    /// Failure fingerprint.
    pub fingerprint: Fingerprint,
    /// The worker that reported it.
    pub worker: Option<String>,
    /// Its dead-lettering time, which orders its DLQ (an imported entry keeps the one it
    /// had where it was exported from; the step's time is when it arrived).
    pub dead_at: u64,
}

/// One step in a message's lineage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// Moved to its queue's DLQ.
    DeadLettered(Box<Failed>),
    /// Arrived in a DLQ from an export (its id there was `original_id`).
    Imported {
        /// The entry.
        failed: Box<Failed>,
        /// Its id in the store it was exported from.
        original_id: MessageId,
    },
    /// Replayed out of the DLQ of `from` into queue `to`, starting generation `generation`.
    Replayed {
        /// The DLQ it left.
        from: QueueId,
        /// The queue it went to.
        to: QueueId,
        /// The generation it starts.
        generation: u32,
        /// With a corrected payload.
        corrected: bool,
    },
    /// Marked reprocessed outside the queue.
    Marked {
        /// The outcome.
        success: bool,
    },
    /// Left the store.
    Removed(Removal),
}

/// A lineage step: when, who (where known), what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// When (ms).
    pub at: u64,
    /// Who, where known.
    pub actor: Option<String>,
    /// What.
    pub event: Event,
}

impl Step {
    /// A step at `at`, by `actor` where known.
    pub fn new(at: u64, actor: Option<&str>, event: Event) -> Step {
        let actor = actor.map(str::to_string);
        Step { at, actor, event }
    }
}

/// A message's life from its first dead-lettering on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lineage {
    /// When it was first enqueued, where known.
    pub enqueued_at: Option<u64>,
    /// Steps, oldest first.
    pub steps: Vec<Step>,
    /// Older steps dropped to keep [`AuditLimits::steps`].
    pub dropped: u32,
}

impl Lineage {
    /// The removal step, if the message left the store.
    pub fn removal(&self) -> Option<(&Step, Removal)> {
        self.steps.iter().rev().find_map(|s| match s.event {
            Event::Removed(how) => Some((s, how)),
            _ => None,
        })
    }

    /// Replays in the lineage.
    pub fn replays(&self) -> u32 {
        self.steps
            .iter()
            .filter(|s| matches!(s.event, Event::Replayed { .. }))
            .count() as u32
    }
}

/// The evidence of a message that left the store after it had been in a DLQ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tombstone {
    /// Its id.
    pub id: MessageId,
    /// When it was removed.
    pub removed_at: u64,
    /// Its life, ending with the removal.
    pub lineage: Lineage,
}

/// The persistent part of an [`AuditLog`], for checkpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditSnapshot {
    /// Lineage of messages still in the store.
    pub lineage: Vec<(MessageId, Lineage)>,
    /// Tombstones, oldest removal first.
    pub tombstones: Vec<Tombstone>,
    /// The trail, oldest first.
    pub trail: Vec<AuditEntry>,
    /// Earliest time from which every DLQ entry is known.
    pub horizon: u64,
}

/// Lineage, tombstones and the trail (see the module documentation).
#[derive(Debug, Default)]
pub struct AuditLog {
    limits: AuditLimits,
    lineage: IdMap<MessageId, Lineage>,
    tombstones: VecDeque<Tombstone>,
    /// Sequence number of `tombstones[0]`; `by_id` maps ids to sequence numbers.
    first_seq: u64,
    by_id: IdMap<MessageId, u64>,
    trail: VecDeque<AuditEntry>,
    horizon: u64,
}

/// Lineage steps kept at least, whatever [`AuditLimits::steps`] says: the step that put a
/// message in a DLQ and its latest mark outlive the steps dropped before them.
const MIN_STEPS: usize = 2;

/// Cuts `lineage` to `limit` steps (at least [`MIN_STEPS`]), oldest first, and counts what
/// it drops; returns the time from which its message's place is still known (the newest
/// step folded away), or `None` when nothing was cut.
///
/// Of the oldest steps, those that still say where the message is stay: the
/// dead-lettering or import that put it in the DLQ it is still in, and its latest mark
/// since. Without them the lineage of a message marked many times in a DLQ would no longer
/// say it is there.
fn trim(lineage: &mut Lineage, limit: usize) -> Option<u64> {
    let len = lineage.steps.len();
    if len <= limit {
        return None;
    }
    let (mut entered, mut mark) = (None, None);
    for n in 1..=len {
        let i = n - 1;
        match lineage.steps[i].event {
            Event::DeadLettered(_) | Event::Imported { .. } => (entered, mark) = (Some(i), None),
            Event::Replayed { .. } | Event::Removed(_) => (entered, mark) = (None, None),
            Event::Marked { .. } => {
                if entered.is_some() {
                    mark = Some(i);
                }
            }
        }
        let kept = usize::from(entered.is_some()) + usize::from(mark.is_some());
        if n + limit < len || kept + (len - n) > limit {
            continue;
        }
        let known_from = lineage.steps[i].at;
        let rest = lineage.steps.split_off(n);
        let folded = std::mem::take(&mut lineage.steps);
        let keep = |j: &usize| entered == Some(*j) || mark == Some(*j);
        lineage.steps = folded
            .into_iter()
            .enumerate()
            .filter(|(j, _)| keep(j))
            .map(|(_, step)| step)
            .chain(rest)
            .collect();
        lineage.dropped += (n - kept) as u32;
        return Some(known_from);
    }
    None
}

/// `message` cut to at most [`MESSAGE_BYTES`] at a character boundary.
pub fn clip(message: &str) -> String {
    let mut end = message.len().min(MESSAGE_BYTES);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message[..end].to_string()
}

impl AuditLog {
    /// Sets the limits (the engine does at open; they apply from the next change on).
    pub fn set_limits(&mut self, limits: AuditLimits) {
        self.limits = limits;
    }

    /// The earliest time from which every DLQ entry is known.
    pub fn horizon(&self) -> u64 {
        self.horizon
    }

    /// Every lineage of a message still in the store.
    pub fn lineages(&self) -> impl Iterator<Item = (MessageId, &Lineage)> + '_ {
        self.lineage.iter().map(|(&id, l)| (id, l))
    }

    /// Every tombstone, oldest removal first.
    pub fn tombstones(&self) -> impl Iterator<Item = &Tombstone> + '_ {
        self.tombstones.iter()
    }

    /// The lineage of a message still in the store.
    pub fn lineage(&self, id: MessageId) -> Option<&Lineage> {
        self.lineage.get(&id)
    }

    /// The tombstone of a removed message.
    pub fn tombstone(&self, id: MessageId) -> Option<&Tombstone> {
        let seq = *self.by_id.get(&id)?;
        self.tombstones.get((seq - self.first_seq) as usize)
    }

    /// The trail, oldest first.
    pub fn trail(&self) -> impl DoubleEndedIterator<Item = &AuditEntry> + '_ {
        self.trail.iter()
    }

    /// Starts (or continues) the lineage of `id` with `step`; `enqueued_at` fills in the
    /// enqueue time when the lineage does not know it yet.
    pub fn record(&mut self, id: MessageId, enqueued_at: Option<u64>, step: Step) {
        let limit = self.limits.steps.max(MIN_STEPS);
        let lineage = self.lineage.entry(id).or_default();
        if lineage.enqueued_at.is_none() {
            lineage.enqueued_at = enqueued_at;
        }
        lineage.steps.push(step);
        if let Some(known_from) = trim(lineage, limit) {
            self.horizon = self.horizon.max(known_from);
        }
    }

    /// Adds `step` to the lineage of `id` only if it has one (a message that was in a DLQ).
    pub fn record_if_known(&mut self, id: MessageId, step: Step) -> bool {
        if !self.lineage.contains_key(&id) {
            return false;
        }
        self.record(id, None, step);
        true
    }

    /// `id` left the store at `at` (`how`): if it has a lineage, the lineage ends with the
    /// removal and becomes a tombstone.
    pub fn remove(&mut self, id: MessageId, at: u64, how: Removal, actor: Option<&str>) {
        if !self.record_if_known(id, Step::new(at, actor, Event::Removed(how))) {
            return;
        }
        let Some(lineage) = self.lineage.remove(&id) else {
            return;
        };
        self.push_tombstone(Tombstone {
            id,
            removed_at: at,
            lineage,
        });
        self.evict(at);
    }

    /// Adds the newest tombstone.
    fn push_tombstone(&mut self, t: Tombstone) {
        let seq = self.first_seq + self.tombstones.len() as u64;
        self.by_id.insert(t.id, seq);
        self.tombstones.push_back(t);
    }

    /// Adds an entry to the trail. An operator's entry (from an `Op::Audit` record, which
    /// follows the change it describes) also names its actor on the steps that change
    /// made: the newest step of each of its ids of the matching kind without an actor.
    pub fn add_entry(&mut self, entry: AuditEntry, from_record: bool) {
        if from_record {
            for id in entry.ids.iter() {
                self.name_actor(id, &entry);
            }
        }
        let at = entry.at_ms;
        self.trail.push_back(entry);
        self.evict(at);
    }

    fn name_actor(&mut self, id: MessageId, entry: &AuditEntry) {
        let Some(lineage) = self.lineage.get_mut(&id).or_else(|| {
            let seq = *self.by_id.get(&id)?;
            let t = self.tombstones.get_mut((seq - self.first_seq) as usize)?;
            Some(&mut t.lineage)
        }) else {
            return;
        };
        let Some(step) = lineage.steps.iter_mut().rev().find(|s| {
            s.actor.is_none()
                && matches!(
                    (&s.event, entry.action),
                    (Event::Replayed { .. }, AuditAction::Replay)
                        | (Event::Imported { .. }, AuditAction::Import)
                        | (Event::Marked { .. }, AuditAction::MarkReprocessed)
                        | (
                            Event::Removed(Removal::Deleted),
                            AuditAction::Delete | AuditAction::Purge
                        )
                )
        }) else {
            return;
        };
        step.actor = Some(entry.actor.clone());
        // A corrected replay's record carries no time of its own: the audit entry's is it.
        step.at = entry.at_ms;
        if entry.action == AuditAction::Purge {
            step.event = Event::Removed(Removal::Purged);
        }
    }

    /// Drops tombstones and trail entries past the limits, as of time `now`.
    fn evict(&mut self, now: u64) {
        let cutoff = now.saturating_sub(self.limits.retention_ms);
        while let Some(t) = self.tombstones.front() {
            if self.tombstones.len() <= self.limits.tombstones && t.removed_at >= cutoff {
                break;
            }
            self.horizon = self.horizon.max(t.removed_at);
            if let Some(t) = self.tombstones.pop_front() {
                self.by_id.remove(&t.id);
            }
            self.first_seq += 1;
        }
        while let Some(e) = self.trail.front() {
            if self.trail.len() <= self.limits.trail && e.at_ms >= cutoff {
                break;
            }
            self.trail.pop_front();
        }
    }

    /// The persistent part.
    pub fn snapshot(&self) -> AuditSnapshot {
        AuditSnapshot {
            lineage: self
                .lineage
                .iter()
                .map(|(&id, l)| (id, l.clone()))
                .collect(),
            tombstones: self.tombstones.iter().cloned().collect(),
            trail: self.trail.iter().cloned().collect(),
            horizon: self.horizon,
        }
    }

    /// Rebuilds from a snapshot (limits default until set).
    pub fn restore(snap: AuditSnapshot) -> AuditLog {
        let mut log = AuditLog {
            horizon: snap.horizon,
            lineage: snap.lineage.into_iter().collect(),
            trail: snap.trail.into(),
            ..AuditLog::default()
        };
        for t in snap.tombstones {
            log.push_tombstone(t);
        }
        log
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(at: u64, event: Event) -> Step {
        Step::new(at, None, event)
    }

    fn marked(at: u64) -> Step {
        step(at, Event::Marked { success: true })
    }

    fn dead(at: u64) -> Step {
        let failed = Failed {
            queue: 0,
            generation: 0,
            attempts: 1,
            first_received_at: None,
            error_kind: "Timeout".into(),
            message: String::new(),
            fingerprint: Fingerprint::compute("Timeout", "", None, 0),
            worker: None,
            dead_at: at,
        };
        step(at, Event::DeadLettered(Box::new(failed)))
    }

    fn replayed(at: u64) -> Step {
        let event = Event::Replayed {
            from: 0,
            to: 0,
            generation: 1,
            corrected: false,
        };
        step(at, event)
    }

    /// A message marked over and over in its DLQ keeps the step that put it there and its
    /// latest mark; once it has left, the oldest steps go whatever they were.
    #[test]
    fn trimming_keeps_what_says_where_a_message_is() {
        let mut log = AuditLog::default();
        log.set_limits(AuditLimits {
            steps: 3,
            ..AuditLimits::default()
        });
        log.record(1, None, dead(1));
        for at in 2..=6 {
            log.record(1, None, marked(at));
        }
        let at = |log: &AuditLog| -> Vec<u64> {
            log.lineage(1).unwrap().steps.iter().map(|s| s.at).collect()
        };
        assert_eq!(at(&log), [1, 5, 6]);
        assert_eq!(log.lineage(1).unwrap().dropped, 3);
        assert_eq!(log.horizon(), 5);
        // Replayed: the steps before no longer say where it is, but they still fit.
        log.record(1, None, replayed(7));
        assert_eq!(at(&log), [1, 6, 7]);
        assert_eq!(log.horizon(), 6);
        // Back in the DLQ: what it left is folded away whole.
        log.record(1, None, dead(8));
        assert_eq!(at(&log), [8]);
        assert_eq!(log.lineage(1).unwrap().dropped, 7);
        assert_eq!(log.horizon(), 7);
        // Limits below 2 keep 2.
        log.set_limits(AuditLimits {
            steps: 0,
            ..AuditLimits::default()
        });
        log.record(1, None, marked(9));
        assert_eq!(at(&log), [8, 9]);
    }

    #[test]
    fn steps_tombstones_and_trail_stay_bounded_and_move_the_horizon() {
        let mut log = AuditLog::default();
        log.set_limits(AuditLimits {
            tombstones: 2,
            retention_ms: 1_000,
            trail: 2,
            steps: 3,
        });
        for at in 1..=5 {
            log.record(1, Some(0), marked(at));
        }
        let l = log.lineage(1).unwrap();
        assert_eq!((l.steps.len(), l.dropped, l.steps[0].at), (3, 2, 3));
        // Known from the newest step dropped on.
        assert_eq!(log.horizon(), 2);
        // Removing a message without a lineage leaves no tombstone.
        log.remove(9, 10, Removal::Ttl, None);
        assert!(log.tombstone(9).is_none());
        for id in 1..=3 {
            log.record(id, None, marked(10));
            log.remove(id, 10 + id, Removal::Deleted, None);
        }
        assert!(log.tombstone(1).is_none(), "over the count cap");
        assert_eq!(log.tombstone(3).unwrap().removed_at, 13);
        assert_eq!(log.horizon(), 11);
        // Retention: a removal 1,000 ms later drops the older ones.
        log.record(4, None, marked(2_000));
        log.remove(4, 2_012, Removal::Deleted, None);
        assert!(log.tombstone(2).is_none() && log.tombstone(3).is_none());
        assert_eq!(log.horizon(), 13);
        for at in [1, 2, 3] {
            log.add_entry(
                AuditEntry::new(at, "a", AuditAction::Delete, IdSet::of(&[at])),
                false,
            );
        }
        assert_eq!(log.trail().map(|e| e.at_ms).collect::<Vec<_>>(), [2, 3]);
        let again = AuditLog::restore(log.snapshot());
        assert_eq!(again.snapshot(), log.snapshot());
        assert_eq!(again.tombstone(4), log.tombstone(4));
    }

    #[test]
    fn an_audit_record_names_the_actor_of_the_change_before_it() {
        let mut log = AuditLog::default();
        log.record(7, Some(1), marked(5));
        log.remove(7, 9, Removal::Deleted, None);
        let entry = AuditEntry::new(9, "ana@box", AuditAction::Purge, IdSet::of(&[7]));
        log.add_entry(entry, true);
        let (step, how) = log.tombstone(7).unwrap().lineage.removal().unwrap();
        assert_eq!(
            (step.actor.as_deref(), how),
            (Some("ana@box"), Removal::Purged)
        );
        assert_eq!(log.trail().count(), 1);
    }

    #[test]
    fn clip_cuts_at_a_character_boundary() {
        let long = "é".repeat(MESSAGE_BYTES);
        let cut = clip(&long);
        assert!(cut.len() <= MESSAGE_BYTES && cut.len() >= MESSAGE_BYTES - 1);
        assert_eq!(clip("short"), "short");
    }
}
