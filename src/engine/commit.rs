//! The write path. Every change follows the same steps under the state lock: validate
//! against the index, encode the records, append them to the log's buffer (which assigns
//! positions in log order), apply them to the index; then, outside the lock, wait until
//! they are durable (group commit: concurrent writers share one fsync) and wake the
//! consumers a write made work for. Because records are applied in log order, replaying the
//! log at open rebuilds the same index.

use super::record::{Decoded, Op};
use super::state::{Effects, State};
use super::wire;
use super::Engine;
use crate::error::Result;
use crate::storage::log::AppendRules;

/// Records to append in one batch, with their decoded form for the index.
pub(crate) type Batch<'a> = Vec<(Vec<u8>, Decoded<'a>)>;

/// Builds the batch entry of an [`Op`].
pub(crate) fn op_entry<'a>(op: Op) -> Result<(Vec<u8>, Decoded<'a>)> {
    Ok((wire::encode_op(&op)?, Decoded::Op(op)))
}

/// How a write is settled once it is in the log and the index, when the engine waits for
/// durability (under the other settings both return once the write is applied).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settle {
    /// It returns once an fsync covers it.
    Durable,
    /// It returns once it is handed to the operating system (written, not fsynced): it
    /// survives the process dying, not a power cut, until a later fsync covers it (any
    /// durable write after it, or [`Log::sync_to`](crate::storage::log::Log::sync_to) its
    /// position: the log is made durable as a prefix). The worker pool's start records and
    /// failure reports.
    Written,
}

impl Engine {
    /// The write path of one call: under the state lock, `build` validates and returns the
    /// records to write and the call's result; the records are appended and applied; then,
    /// outside the lock, the call waits for durability, wakes consumers, and hands the
    /// effects to `react` (the store's alert hooks).
    pub(crate) fn commit_with<'a, T>(
        &self,
        build: impl FnOnce(&mut State) -> Result<(Batch<'a>, T)>,
        react: impl FnOnce(Effects),
    ) -> Result<T> {
        Ok(self.commit_as(Settle::Durable, build, react)?.0)
    }

    /// Like [`Engine::commit_with`], settled as `mode` says. Also returns the log position
    /// to pass to [`Log::sync_to`](crate::storage::log::Log::sync_to) to make the write
    /// durable: 0 when nothing is left to wait for (nothing was written, the write was
    /// settled durably, or the engine does not wait for durability).
    pub(crate) fn commit_as<'a, T>(
        &self,
        mode: Settle,
        build: impl FnOnce(&mut State) -> Result<(Batch<'a>, T)>,
        react: impl FnOnce(Effects),
    ) -> Result<(T, u64)> {
        let mut st = self.state.lock();
        let (batch, out) = build(&mut st)?;
        if batch.is_empty() {
            return Ok((out, 0));
        }
        let effects = self.write_locked(&mut st, batch)?;
        // The end of the log now: at least this write's end.
        let pending = if mode == Settle::Written && self.wait_for_sync {
            self.log.end_position()
        } else {
            0
        };
        drop(st);
        self.settle(mode, effects, react)?;
        Ok((out, pending))
    }

    /// Appends `batch` and applies it to the index; the caller holds the state lock and
    /// calls [`Engine::settle`] once it released it.
    pub(crate) fn write_locked(&self, st: &mut State, batch: Batch<'_>) -> Result<Effects> {
        let mut positions = Vec::with_capacity(batch.len());
        // Payloads (new, corrected, imported, relocated) stay out of the segment's reserve.
        let consumer = !batch
            .iter()
            .any(|(_, d)| matches!(d, Decoded::Put(_) | Decoded::Relocated(_)));
        // Compaction's batches (its relocated copies, and its own records with them) are
        // bounded by what a segment holds: a record a process with a larger message limit
        // wrote is carried forward by this one. New records keep the record limit.
        let copies = batch
            .iter()
            .any(|(_, d)| matches!(d, Decoded::Relocated(_)));
        let rules = AppendRules {
            may_use_reserve: consumer,
            copies,
        };
        self.log.append_each_with(
            batch.iter().map(|(b, _)| b.as_slice()),
            |p| positions.push(p),
            rules,
        )?;
        let mut effects = Effects::default();
        for ((_, decoded), pos) in batch.iter().zip(positions) {
            let e = st.apply(decoded, pos);
            effects.ready |= e.ready;
            effects.dlq_changed |= e.dlq_changed;
        }
        effects.guard = std::mem::take(&mut st.guards.due);
        Ok(effects)
    }

    /// What follows a write once the lock is released: wait for durability or only hand
    /// the write to the operating system, as `mode` says (when the engine waits for
    /// durability), wake the consumers if something became ready, and hand the effects to
    /// `react` (whether or not the wait succeeded: the index holds the change either way).
    pub(crate) fn settle(
        &self,
        mode: Settle,
        effects: Effects,
        react: impl FnOnce(Effects),
    ) -> Result<()> {
        let settled = match mode {
            Settle::Durable => self.wait_durable(),
            Settle::Written if self.wait_for_sync => self.log.flush(),
            Settle::Written => Ok(()),
        };
        if effects.ready {
            self.wake();
        }
        react(effects);
        settled
    }

    /// Returns once everything appended so far is durable, when the engine waits for
    /// durability; at once otherwise.
    /// Inside [`Engine::deferring`] it only notes the position to wait for.
    pub(crate) fn wait_durable(&self) -> Result<()> {
        #[cfg(feature = "async")]
        if self.wait_for_sync && self.defer_durable_wait() {
            return Ok(());
        }
        if self.wait_for_sync {
            self.log.sync()?;
        }
        Ok(())
    }
}
