//! Guarded replay: DLQ entries go back to a queue in waves, a canary first, each wave
//! released only once the one before was handled, and the replay stops by itself when a
//! wave fails again too often.
//!
//! This module owns what users see: the options ([`GuardedReplayOptions`]), the report
//! ([`GuardedReplay`]), starting one ([`Dlq::replay_guarded`]) and the operator's pause,
//! resume and cancel ([`Store::pause_guarded_replay`], ...). What counts as handled, and
//! the decision to stop or complete, is the state machine's (`engine::state::guards`), from
//! the records alone, so a replay resumes (or stays stopped) across a restart. What is
//! released when is [`release`]'s; who releases it is the guarded-replay driver's, a
//! service (`api::services`) that a store opened with the default [`crate::Config`] runs.
//!
//! Invariants:
//! - a DLQ has at most one active (running or paused) guarded replay;
//! - the selection is fixed when the replay starts (the ids matching then, in order);
//!   entries that left the DLQ by the time their turn comes are skipped, never waited for.

pub(crate) mod release;

use serde::{Deserialize, Serialize};

use crate::api::core::store::{queue_name, Store};
use crate::api::core::types::MessageId;
use crate::api::dlq::{Dlq, Filter, ReplayOptions};
use crate::engine::op_entry;
use crate::engine::record::{GuardEvent, GuardId, GuardPlan, Op};
use crate::engine::state::{Guard, State};

pub use crate::engine::state::GuardedReplayState;
use crate::error::{require, Error, Result};

/// How to run a guarded replay ([`Dlq::replay_guarded`]): which entries go where, as for
/// any replay (a [`ReplayOptions`]), and the waves.
///
/// ```
/// use deadletter::{Config, Failure, Filter, ReplayOptions, Store};
/// use deadletter::queue::FailureReport;
/// use deadletter::replay::{GuardedReplayOptions, GuardedReplayState};
///
/// # let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(&dir, Config::fast())?;
/// let orders = store.queue("orders")?;
/// orders.enqueue_batch(&["a", "b", "c", "d", "e"])?;
/// for msg in orders.lease(5)? {
///     orders.dead_letter(&msg, &FailureReport::new(&Failure::permanent("Bug", "parser")))?;
/// }
/// // Back where they failed, with fresh attempts: two first; then waves of 4, 8, ...;
/// // stop if more than 10% of a wave fails again.
/// let options = GuardedReplayOptions::new(ReplayOptions::to_origin().reset_attempts())
///     .canary(2)
///     .growth(2.0)
///     .max_failure_ratio(0.1);
/// let replay = orders.dlq().replay_guarded(&Filter::all(), &options)?;
/// assert_eq!((replay.replayed, replay.left), (2, 3)); // the canary is out
/// for msg in orders.lease(2)? {
///     orders.ack(&msg)?; // the fix works: the next wave goes out
/// }
/// assert_eq!(store.guarded_replay(replay.id)?.replayed, 5);
/// for msg in orders.lease(3)? {
///     orders.ack(&msg)?;
/// }
/// let done = store.guarded_replay(replay.id)?;
/// assert_eq!((done.state, done.succeeded), (GuardedReplayState::Completed, 5));
/// # Ok::<(), deadletter::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GuardedReplayOptions {
    /// Where the entries go, their attempts, `force` and `limit`, as for [`Dlq::replay`].
    /// A guarded replay releases entries as their waves come, so it takes no `delay` and
    /// no `dry_run` ([`Error::InvalidConfig`]).
    pub replay: ReplayOptions,
    /// Size of the first wave (default 10).
    pub canary: u32,
    /// Each wave is this many times the one before, rounded up (default 2.0; at least 1).
    pub growth: f64,
    /// A wave whose share of messages that failed again is above this stops the replay
    /// (default 0.1; 0 stops at the first failure, 1 never stops).
    pub max_failure_ratio: f64,
    /// At most this many entries released per second (default: no limit).
    pub rate_per_sec: Option<u32>,
    /// What was selected, in words, for reports (such as a filter's text).
    pub selection: String,
}

impl Default for GuardedReplayOptions {
    /// Back to the queue each entry failed in, keeping the attempt counts, with the
    /// default waves.
    fn default() -> Self {
        GuardedReplayOptions::new(ReplayOptions::to_origin())
    }
}

impl GuardedReplayOptions {
    /// A guarded replay of what `replay` says, with the default waves: a canary of 10,
    /// doubling, stopping above 10% failed again, no rate limit.
    pub fn new(replay: ReplayOptions) -> Self {
        GuardedReplayOptions {
            replay,
            canary: 10,
            growth: 2.0,
            max_failure_ratio: 0.1,
            rate_per_sec: None,
            selection: String::new(),
        }
    }
    setters! {
        /// The first wave's size.
        canary(n: u32) => canary = n;
        /// Each wave's size over the one before.
        growth(factor: f64) => growth = factor;
        /// The failed-again share of a wave above which the replay stops.
        max_failure_ratio(ratio: f64) => max_failure_ratio = ratio;
        /// At most `per_sec` releases per second.
        rate(per_sec: u32) => rate_per_sec = Some(per_sec);
        /// Describes the selection for reports.
        selection(text: impl Into<String>) => selection = text.into();
    }

    /// The plan's numbers, checked: a canary of at least 1, a growth from 1 to 1000, a
    /// ratio from 0 to 1, a rate of at least 1, and no delay or dry run.
    fn checked(&self) -> Result<(u32, u32, u32)> {
        require(
            self.replay.delay.is_zero() && !self.replay.dry_run,
            "a guarded replay releases entries as their waves come: no delay, no dry run",
        )?;
        require(self.canary > 0, "the canary must be at least 1")?;
        require(
            (1.0..=1000.0).contains(&self.growth),
            format_args!("the growth must be from 1 to 1000, not {}", self.growth),
        )?;
        require(
            (0.0..=1.0).contains(&self.max_failure_ratio),
            format_args!(
                "the maximum failure ratio must be from 0 to 1, not {}",
                self.max_failure_ratio
            ),
        )?;
        require(
            self.rate_per_sec != Some(0),
            "the rate must be at least 1 per second",
        )?;
        let growth = (self.growth * 1000.0).round() as u32;
        let ratio = (self.max_failure_ratio * 1000.0).round() as u32;
        Ok((self.canary, growth, ratio))
    }
}

/// A guarded replay's report: its plan, where it is, and what happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GuardedReplay {
    /// Its id in the store.
    pub id: u64,
    /// The DLQ it replays from.
    pub dlq: String,
    /// The target queue (`None`: each entry's own queue).
    pub target: Option<String>,
    /// What was selected, in words.
    pub selection: String,
    /// Who started it (its releases are this actor's replays in the audit trail).
    pub started_by: String,
    /// Where it is.
    pub state: GuardedReplayState,
    /// Entries selected.
    pub selected: u64,
    /// Entries released back to a queue.
    pub replayed: u64,
    /// Released and acked.
    pub succeeded: u64,
    /// Released and failed again: dead-lettered again, or scheduled for a retry.
    pub failed_again: u64,
    /// Released and deleted or expired in the queue.
    pub removed: u64,
    /// Released, with no outcome yet.
    pub waiting: u64,
    /// Selected entries skipped: gone from the DLQ (or marked reprocessed) when their turn
    /// came.
    pub skipped: u64,
    /// Selected entries not released or skipped yet.
    pub left: u64,
    /// The current wave (0: the canary).
    pub wave: u32,
    /// Its size.
    pub wave_size: u64,
    /// Released in it so far.
    pub wave_released: u64,
    /// The canary's size.
    pub canary: u32,
    /// Each wave over the one before.
    pub growth: f64,
    /// The failed-again share of a wave above which it stops.
    pub max_failure_ratio: f64,
    /// Releases per second at most.
    pub rate_per_sec: Option<u32>,
    /// Attempts reset on release.
    pub reset_attempts: bool,
    /// When it started (ms since the Unix epoch).
    pub started_at_ms: u64,
    /// Its latest step.
    pub updated_at_ms: u64,
}

impl GuardedReplay {
    /// True while it may still release entries (running or paused).
    pub fn is_active(&self) -> bool {
        self.state.is_active()
    }
}

fn report(store: &Store, st: &State, id: GuardId, g: &Guard) -> GuardedReplay {
    let name = |q: u32| queue_name(st, q);
    GuardedReplay {
        id,
        dlq: store.dlq_name(&name(g.plan.dlq)),
        target: g.plan.target.map(name),
        selection: g.plan.selection.clone(),
        started_by: g.plan.actor.clone(),
        state: g.status,
        selected: g.plan.ids.len() as u64,
        replayed: g.replayed,
        succeeded: g.succeeded,
        failed_again: g.failed_again,
        removed: g.removed,
        waiting: g.outstanding.len() as u64,
        skipped: g.skipped,
        left: g.left(),
        wave: g.wave,
        wave_size: g.wave_size,
        wave_released: g.wave_released,
        canary: g.plan.canary,
        growth: f64::from(g.plan.growth_permille) / 1000.0,
        max_failure_ratio: f64::from(g.plan.max_failure_permille) / 1000.0,
        rate_per_sec: g.plan.rate_per_sec,
        reset_attempts: g.plan.reset_attempts,
        started_at_ms: g.started_at,
        updated_at_ms: g.updated_at,
    }
}

impl Dlq {
    /// Starts a guarded replay of the entries matching `filter` now (up to
    /// `options.limit`): the canary is released at once, each next wave once the one before
    /// was handled; the store drives it from here, across restarts, until it completes,
    /// stops by itself, or is cancelled. Returns its report as it starts.
    pub fn replay_guarded(
        &self,
        filter: &Filter,
        options: &GuardedReplayOptions,
    ) -> Result<GuardedReplay> {
        options.checked()?;
        let ids = self.ids(filter, options.replay.limit)?;
        self.replay_guarded_ids(&ids, options)
    }

    /// Starts a guarded replay of the given entries, in this order (ids not in this DLQ
    /// when their turn comes are skipped). `options.replay.limit` is not applied here.
    pub fn replay_guarded_ids(
        &self,
        ids: &[MessageId],
        options: &GuardedReplayOptions,
    ) -> Result<GuardedReplay> {
        let (canary, growth_permille, max_failure_permille) = options.checked()?;
        let store = self.store();
        let target = options.replay.declare_target(store)?;
        let mut seen = std::collections::HashSet::with_capacity(ids.len());
        let ids: Vec<MessageId> = ids.iter().copied().filter(|id| seen.insert(*id)).collect();
        let dlq = self.queue_id();
        let now = store.now();
        let plan = GuardPlan {
            dlq,
            target,
            reset_attempts: options.replay.reset_attempts,
            force: options.replay.force,
            canary,
            growth_permille,
            max_failure_permille,
            rate_per_sec: options.rate_per_sec,
            selection: options.selection.clone(),
            actor: store.actor().name().to_string(),
            ids,
        };
        let id = store.commit_with(|st| {
            if let Some((&active, _)) = st
                .guards
                .all
                .iter()
                .find(|(_, g)| g.plan.dlq == dlq && g.status.is_active())
            {
                return Err(Error::GuardedReplayConflict {
                    id: active,
                    reason: format!("{} has an active guarded replay", self.name()),
                });
            }
            let id = st.guards.next_id();
            let op = Op::Guard {
                guard: id,
                at: now,
                event: GuardEvent::Start(Box::new(plan)),
            };
            Ok((vec![op_entry(op)?], id))
        })?;
        store.guarded_replay(id)
    }
}

impl Store {
    /// Every guarded replay of the store, oldest first (finished ones too).
    pub fn guarded_replays(&self) -> Vec<GuardedReplay> {
        let st = self.engine().lock();
        st.guards
            .all
            .iter()
            .map(|(&id, g)| report(self, &st, id, g))
            .collect()
    }

    /// One guarded replay's report.
    pub fn guarded_replay(&self, id: u64) -> Result<GuardedReplay> {
        let st = self.engine().lock();
        let g = st
            .guards
            .all
            .get(&id)
            .ok_or(Error::UnknownGuardedReplay(id))?;
        Ok(report(self, &st, id, g))
    }

    /// Pauses a running guarded replay: nothing more is released until it resumes (the
    /// messages already released are still counted as they are handled).
    pub fn pause_guarded_replay(&self, id: u64) -> Result<GuardedReplay> {
        self.guard_step(id, GuardEvent::Pause)
    }

    /// Resumes a paused guarded replay.
    pub fn resume_guarded_replay(&self, id: u64) -> Result<GuardedReplay> {
        self.guard_step(id, GuardEvent::Resume)
    }

    /// Cancels a running or paused guarded replay for good: nothing more is released (the
    /// messages already released are still counted as they are handled).
    pub fn cancel_guarded_replay(&self, id: u64) -> Result<GuardedReplay> {
        self.guard_step(id, GuardEvent::Cancel)
    }

    /// Writes operator step `event` (pause, resume or cancel) of guarded replay `id`, if
    /// the replay's state allows it.
    fn guard_step(&self, id: u64, event: GuardEvent) -> Result<GuardedReplay> {
        let (allowed, expected): (fn(GuardedReplayState) -> bool, _) = match event {
            GuardEvent::Pause => (|s| s == GuardedReplayState::Running, "running"),
            GuardEvent::Resume => (|s| s == GuardedReplayState::Paused, "paused"),
            // Cancel (the only other step an operator takes).
            _ => (GuardedReplayState::is_active, "running or paused"),
        };
        let now = self.now();
        self.commit_with(|st| {
            let g = st
                .guards
                .all
                .get(&id)
                .ok_or(Error::UnknownGuardedReplay(id))?;
            if !allowed(g.status) {
                let state = g.status;
                return Err(Error::GuardedReplayConflict {
                    id,
                    reason: format!("it is {state}, not {expected}"),
                });
            }
            let op = Op::Guard {
                guard: id,
                at: now,
                event,
            };
            Ok((vec![op_entry(op)?], ()))
        })?;
        self.guarded_replay(id)
    }
}
