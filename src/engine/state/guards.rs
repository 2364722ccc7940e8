//! Guarded replays in the index: each one's plan and progress, and which replayed messages
//! it waits for.
//!
//! A guarded replay releases its selected DLQ entries in waves: the canary, then waves each
//! `growth` times the one before. A wave is *handled* when every message it released has
//! had its first outcome since the release:
//! - **succeeded**: acked;
//! - **failed again**: back in the DLQ (dead-lettered) or scheduled for a retry (a retry
//!   record: the handler failed, with attempts left);
//! - **removed**: deleted (or dropped by its TTL) while in the queue: neither.
//!
//! A delivery that ends without an outcome (a release, an expired lease, a restart) is no
//! outcome: the message is delivered again and still waited for. When a wave is handled,
//! its failed-again share decides: above the plan's threshold the replay **stops** (and
//! releases nothing more); otherwise the next wave may be released, or, when no selected
//! entry is left, the replay is **completed**. All of this happens here, in
//! [`State::apply`], from the records alone: a replay's state after a reopen is the state
//! it had. What is released when (the rate limit, the wave's size) is decided by the store
//! (`api::guarded`), which writes the release records.
//!
//! Invariants:
//! - a message is waited for by at most one guarded replay (`guarded` maps it to that one),
//!   and it is in that replay's `outstanding` set exactly then;
//! - a replay's outstanding messages all belong to its current wave: the next wave starts
//!   only once the set is empty;
//! - the counters only grow; `replayed = succeeded + failed_again + removed +
//!   outstanding`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::State;
use crate::engine::envelope::MessageId;
use crate::engine::record::{GuardEvent, GuardId, GuardPlan};

/// Where a guarded replay is (public as `deadletter::replay::GuardedReplayState`: the one type for
/// the index and the reports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardedReplayState {
    /// Releasing waves (where every guarded replay starts: the default).
    #[default]
    Running,
    /// Paused by the operator: nothing is released until it resumes.
    Paused,
    /// Every selected entry was released and handled.
    Completed,
    /// Stopped by itself: in wave `wave` (0: the canary), `failed` of `handled` messages
    /// failed again, more than the plan allows.
    Stopped {
        /// The wave.
        wave: u32,
        /// Its messages that failed again.
        failed: u64,
        /// Its messages handled.
        handled: u64,
    },
    /// Cancelled by the operator.
    Cancelled,
}

impl GuardedReplayState {
    /// True while it may still release entries (running or paused).
    pub fn is_active(self) -> bool {
        matches!(self, Self::Running | Self::Paused)
    }

    /// Its name: `running`, `paused`, `completed`, `stopped` or `cancelled`.
    pub fn name(&self) -> &'static str {
        match self {
            GuardedReplayState::Running => "running",
            GuardedReplayState::Paused => "paused",
            GuardedReplayState::Completed => "completed",
            GuardedReplayState::Stopped { .. } => "stopped",
            GuardedReplayState::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for GuardedReplayState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GuardedReplayState::Stopped {
                wave,
                failed,
                handled,
            } => {
                let name = if *wave == 0 {
                    "the canary".to_string()
                } else {
                    format!("wave {wave}")
                };
                write!(f, "stopped: {failed} of {handled} in {name} failed again")
            }
            other => f.write_str(other.name()),
        }
    }
}

/// The first outcome of a message a guarded replay released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Acked.
    Succeeded,
    /// Dead-lettered or scheduled for a retry.
    FailedAgain,
    /// Deleted or expired while in the queue.
    Removed,
}

/// One guarded replay.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Guard {
    /// What it was asked to do.
    pub plan: GuardPlan,
    /// When it started.
    pub started_at: u64,
    /// The time of its latest record.
    pub updated_at: u64,
    /// Where it is.
    pub status: GuardedReplayState,
    /// Selected entries passed over (released or skipped), from the front of the plan's.
    pub next: u64,
    /// The current wave (0: the canary).
    pub wave: u32,
    /// The current wave's size.
    pub wave_size: u64,
    /// Released in the current wave.
    pub wave_released: u64,
    /// Of those, handled.
    pub wave_handled: u64,
    /// Of those, failed again.
    pub wave_failed: u64,
    /// Released messages with no outcome yet (all of the current wave).
    pub outstanding: BTreeSet<MessageId>,
    /// The rate limit's reference: the time of the first release since the wave started
    /// or the replay resumed, and `wave_released` before it.
    pub rate_anchor: Option<(u64, u64)>,
    /// Entries released so far.
    pub replayed: u64,
    /// Released and acked.
    pub succeeded: u64,
    /// Released and dead-lettered or retried.
    pub failed_again: u64,
    /// Released and deleted or expired in the queue.
    pub removed: u64,
    /// Selected entries not released because they had left the DLQ (or were marked
    /// reprocessed, without `force`) by the time their turn came.
    pub skipped: u64,
}

impl Guard {
    /// A new running replay of `plan`.
    pub fn new(plan: GuardPlan, at: u64) -> Guard {
        Guard {
            wave_size: u64::from(plan.canary.max(1)),
            plan,
            started_at: at,
            updated_at: at,
            ..Guard::default()
        }
    }

    /// Selected entries not passed over yet.
    pub fn left(&self) -> u64 {
        (self.plan.ids.len() as u64).saturating_sub(self.next)
    }

    /// How many more the current wave may release (0 while it waits for outcomes).
    pub fn wave_room(&self) -> u64 {
        if self.left() == 0 {
            return 0;
        }
        self.wave_size.saturating_sub(self.wave_released)
    }

    /// The size of the wave after one of `size`.
    fn grown(&self, size: u64) -> u64 {
        let permille = u64::from(self.plan.growth_permille.max(1000));
        size.saturating_mul(permille).div_ceil(1000).max(size)
    }

    /// After a change: if the current wave is handled, stops, completes or moves to the
    /// next wave. Returns true when the store has something to release now.
    fn settle(&mut self) -> bool {
        if !self.status.is_active() || !self.outstanding.is_empty() {
            return false;
        }
        if self.wave_room() > 0 {
            return self.status == GuardedReplayState::Running;
        }
        let limit = u64::from(self.plan.max_failure_permille);
        if self.wave_handled > 0 && self.wave_failed * 1000 > limit * self.wave_handled {
            self.status = GuardedReplayState::Stopped {
                wave: self.wave,
                failed: self.wave_failed,
                handled: self.wave_handled,
            };
            return false;
        }
        if self.left() == 0 {
            self.status = GuardedReplayState::Completed;
            return false;
        }
        self.wave += 1;
        self.wave_size = self.grown(self.wave_size);
        self.wave_released = 0;
        self.wave_handled = 0;
        self.wave_failed = 0;
        self.rate_anchor = None;
        self.status == GuardedReplayState::Running
    }
}

/// Every guarded replay of a store, and the messages they wait for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Guards {
    /// By id.
    pub all: BTreeMap<GuardId, Guard>,
    /// Released messages with no outcome yet, and the replay that waits for each.
    pub waiting: BTreeMap<MessageId, GuardId>,
    /// Set when a replay has something to release now (taken by the write path).
    pub due: bool,
}

impl Guards {
    /// The id the next guarded replay gets.
    pub fn next_id(&self) -> GuardId {
        self.all.keys().next_back().map_or(1, |id| id + 1)
    }

    /// Rebuilds the set of awaited messages from the replays (after a checkpoint).
    pub fn from_replays(all: BTreeMap<GuardId, Guard>) -> Guards {
        let waiting = all
            .iter()
            .flat_map(|(&g, guard)| guard.outstanding.iter().map(move |&id| (id, g)))
            .collect();
        Guards {
            all,
            waiting,
            due: false,
        }
    }
}

impl State {
    /// Applies a guarded replay's event. A release moves its entries out of the DLQ as
    /// [`crate::engine::record::Op::Replay`] does, one by one.
    pub(super) fn apply_guard(&mut self, guard: GuardId, at: u64, event: &GuardEvent) {
        if let GuardEvent::Start(plan) = event {
            if let std::collections::btree_map::Entry::Vacant(slot) = self.guards.all.entry(guard) {
                slot.insert(Guard::new((**plan).clone(), at));
                self.guards.due = true;
            }
            return;
        }
        let moved: Vec<MessageId> = match event {
            GuardEvent::Release { released, .. } => released
                .iter()
                .filter(|r| self.replay_entry(r.id, r.queue, at, at, r.attempts, r.generation))
                .map(|r| r.id)
                .collect(),
            _ => Vec::new(),
        };
        let Some(g) = self.guards.all.get_mut(&guard) else {
            return;
        };
        g.updated_at = g.updated_at.max(at);
        match event {
            GuardEvent::Release { consumed, .. } => {
                g.rate_anchor.get_or_insert((at, g.wave_released));
                let n = moved.len() as u64;
                g.next += u64::from(*consumed);
                g.skipped += u64::from(*consumed).saturating_sub(n);
                g.wave_released += n;
                g.replayed += n;
                for id in moved {
                    g.outstanding.insert(id);
                    self.guards.waiting.insert(id, guard);
                }
            }
            GuardEvent::Pause if g.status == GuardedReplayState::Running => {
                g.status = GuardedReplayState::Paused;
            }
            GuardEvent::Resume if g.status == GuardedReplayState::Paused => {
                g.status = GuardedReplayState::Running;
                g.rate_anchor = None;
            }
            GuardEvent::Cancel if g.status.is_active() => g.status = GuardedReplayState::Cancelled,
            // A start is applied above; a step the replay's state does not allow is none.
            _ => {}
        }
        let due = g.settle();
        self.guards.due |= due;
    }

    /// The first outcome of `id` since a guarded replay released it, if one waits for it.
    pub(super) fn guard_outcome(&mut self, id: MessageId, outcome: Outcome) {
        if self.guards.waiting.is_empty() {
            return;
        }
        let waiting = self.guards.waiting.remove(&id);
        let Some(g) = waiting.and_then(|guard| self.guards.all.get_mut(&guard)) else {
            return;
        };
        if !g.outstanding.remove(&id) {
            return;
        }
        g.wave_handled += 1;
        match outcome {
            Outcome::Succeeded => g.succeeded += 1,
            Outcome::FailedAgain => {
                g.failed_again += 1;
                g.wave_failed += 1;
            }
            Outcome::Removed => g.removed += 1,
        }
        let due = g.settle();
        self.guards.due |= due;
    }
}
