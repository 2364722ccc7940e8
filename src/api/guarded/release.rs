//! What a guarded replay releases when: the next entries of each running replay's wave, as
//! far as the wave's room and the rate limit allow.
//!
//! [`release_due`] writes one round of release records; who calls it, and when, is the
//! guarded-replay driver's business (`api::services::replay_driver`, which a store opened
//! with [`Config::guarded_replay_driver`](crate::Config::guarded_replay_driver) runs): after
//! each write that completes a wave, and on its own thread for rate-limited releases.
//! [`Store::drive_guarded_replays`] asks for it by hand.
//!
//! Invariants:
//! - a release never exceeds its wave's room nor the rate limit: the `k`-th release of a
//!   wave since its rate anchor (its first release, or the first after a resume) happens
//!   no earlier than `anchor + k * 1000 / rate` ms, and an anchor comes at least
//!   `1000 / rate` ms after the release (or resume) before it;
//! - each round is computed and written under the store's lock, so rounds on several
//!   threads never release an entry twice or past a wave's room;
//! - nothing here decides what a release means: the records do, in the state machine;
//! - a release that moves entries is followed, in its batch, by an audit record: a replay
//!   of those entries by the actor who started the guarded replay.

use crate::api::core::store::Store;
use crate::engine::envelope::MessageId;
use crate::engine::record::{GuardEvent, GuardRelease, Op};
use crate::engine::state::{
    AuditAction, AuditEntry, DeadStatus, Guard, GuardedReplayState, IdSet, Place, State,
};
use crate::engine::{op_entry, Batch};
use crate::error::Result;

/// At most this many entries in one release record.
const MAX_RELEASE: u64 = 1000;
/// At most this many selected entries looked at past the ones released, per release (the
/// rest of a long run of skipped entries waits for the next round, so the lock is held
/// briefly).
const MAX_SKIP: u64 = 10_000;

/// What the replays wait for after a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// No replay is running.
    Idle,
    /// Running replays wait for outcomes of released messages only.
    Outcomes,
    /// A release is due at this time on the store's clock.
    At(u64),
}

/// One round: writes the releases due now (one batch), and says whether it released
/// anything and what the replays wait for after it. A caller goes round again while
/// something was released (a round releases at most [`MAX_RELEASE`] entries per replay).
pub(crate) fn release_due(store: &Store) -> Result<(bool, Next)> {
    let now = store.now();
    store.commit_with(|st| {
        let (batch, next) = releases(st, now)?;
        let released = !batch.is_empty();
        Ok((batch, (released, next)))
    })
}

impl Store {
    /// Releases what the store's guarded replays may release now: the next entries of a
    /// wave, as far as the wave's room and the rate limit allow. A store's guarded-replay
    /// driver does this by itself (after each write that completes a wave, and on its own
    /// thread for rate-limited releases); calling it is useful to act on a
    /// [`crate::clock::ManualClock`] that was just moved without waiting for that thread, or on a
    /// store that runs no driver. When it returns, everything due at the clock's time when
    /// it was called has been released (it waits for a drive that runs on another thread).
    pub fn drive_guarded_replays(&self) -> Result<()> {
        if self.is_read_only() {
            return Ok(());
        }
        if let Some(driver) = self.replay_hook() {
            return driver.drive_now(self);
        }
        while release_due(self)?.0 {}
        Ok(())
    }
}

/// The release records due at `now`, and what the replays wait for after them.
fn releases<'a>(st: &State, now: u64) -> Result<(Batch<'a>, Next)> {
    let mut batch = Vec::new();
    let mut next = Next::Idle;
    let mut wait = |n: Next| {
        next = match (next, n) {
            (Next::At(a), Next::At(b)) => Next::At(a.min(b)),
            (Next::At(a), _) | (_, Next::At(a)) => Next::At(a),
            _ => Next::Outcomes,
        }
    };
    for (&id, g) in &st.guards.all {
        if g.status != GuardedReplayState::Running {
            continue;
        }
        let room = g.wave_room();
        if room == 0 {
            wait(Next::Outcomes);
            continue;
        }
        let allowed = match (g.plan.rate_per_sec, g.rate_anchor) {
            (None, _) => room,
            // The first release since the wave started or the replay resumed: one
            // interval after the release before it (at once for the very first).
            (Some(rate), None) => {
                let due = g.updated_at + 1000u64.div_ceil(u64::from(rate));
                if g.next > 0 && now < due {
                    wait(Next::At(due));
                    continue;
                }
                1
            }
            (Some(rate), Some((at, before))) => {
                let rate = u64::from(rate);
                let since = g.wave_released - before;
                let total = now.saturating_sub(at).saturating_mul(rate) / 1000 + 1;
                let allowed = total.saturating_sub(since);
                if allowed == 0 {
                    wait(Next::At(at + (since * 1000).div_ceil(rate)));
                    continue;
                }
                allowed
            }
        };
        let n = room.min(allowed).min(MAX_RELEASE);
        if let Some((consumed, released)) = release(st, g, n) {
            let ids: Vec<MessageId> = released.iter().map(|r| r.id).collect();
            let event = GuardEvent::Release { consumed, released };
            batch.push(op_entry(Op::Guard {
                guard: id,
                at: now,
                event,
            })?);
            if !ids.is_empty() {
                // In the audit trail like any replay, as made by who started it (the
                // record follows the change it describes, in the same batch).
                let ids = IdSet::of(&ids);
                let entry = AuditEntry::new(now, g.plan.actor.as_str(), AuditAction::Replay, ids);
                batch.push(op_entry(Op::Audit(entry))?);
            }
        }
        // The state after this release decides what comes next (the caller goes round).
        wait(Next::Outcomes);
    }
    Ok((batch, next))
}

/// The release of up to `n` of `g`'s next selected entries that are still in its DLQ: how many
/// selected entries it consumed, and those it releases.
fn release(st: &State, g: &Guard, n: u64) -> Option<(u32, Vec<GuardRelease>)> {
    let plan = &g.plan;
    let mut released = Vec::new();
    let mut consumed = 0u64;
    let rest = plan.ids.iter().skip(g.next as usize);
    for &id in rest.take((n + MAX_SKIP) as usize) {
        if released.len() as u64 == n {
            break;
        }
        consumed += 1;
        let Some(m) = st.msgs.get(&id) else { continue };
        let Some(info) = st.dead.get(&id) else {
            continue;
        };
        let pending = info.status == DeadStatus::Pending;
        if m.place() != Place::Dead || m.queue() != plan.dlq || !(pending || plan.force) {
            continue;
        }
        released.push(GuardRelease {
            id,
            queue: plan.target.unwrap_or(m.queue()),
            attempts: if plan.reset_attempts { 0 } else { m.attempts },
            generation: st.extras.get(&id).map_or(0, |e| e.generation) + 1,
        });
    }
    (consumed > 0).then_some((consumed as u32, released))
}
