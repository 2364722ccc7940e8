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

/// Records to append in one batch, with their decoded form for the index.
pub(crate) type Batch<'a> = Vec<(Vec<u8>, Decoded<'a>)>;

/// Builds the batch entry of an [`Op`].
pub(crate) fn op_entry<'a>(op: Op) -> Result<(Vec<u8>, Decoded<'a>)> {
    Ok((wire::encode_op(&op)?, Decoded::Op(op)))
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
        let mut st = self.state.lock();
        let (batch, out) = build(&mut st)?;
        if batch.is_empty() {
            return Ok(out);
        }
        let effects = self.write_locked(&mut st, batch)?;
        drop(st);
        self.settle(effects, react)?;
        Ok(out)
    }

    /// Appends `batch` and applies it to the index; the caller holds the state lock and
    /// calls [`Engine::settle`] once it released it.
    pub(crate) fn write_locked(&self, st: &mut State, batch: Batch<'_>) -> Result<Effects> {
        let mut positions = Vec::with_capacity(batch.len());
        // Payloads (new, corrected, imported, relocated) stay out of the segment's reserve.
        let consumer = !batch
            .iter()
            .any(|(_, d)| matches!(d, Decoded::Put(_) | Decoded::Relocated(_)));
        self.log.append_each_with(
            batch.iter().map(|(b, _)| b.as_slice()),
            |p| positions.push(p),
            consumer,
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

    /// What follows a write once the lock is released: wait for durability, wake the
    /// consumers if something became ready, and hand the effects to `react` (whether or
    /// not the wait succeeded: the index holds the change either way).
    pub(crate) fn settle(&self, effects: Effects, react: impl FnOnce(Effects)) -> Result<()> {
        let durable = self.wait_durable();
        if effects.ready {
            self.ready.notify_all();
        }
        react(effects);
        durable
    }

    /// Like [`Engine::settle`], but when the engine waits for durability the write is only
    /// handed to the operating system (written, not fsynced): it survives the process
    /// dying, not a power cut. The worker pool's start records take this path.
    pub(crate) fn settle_written(
        &self,
        effects: Effects,
        react: impl FnOnce(Effects),
    ) -> Result<()> {
        let written = if self.wait_for_sync {
            self.log.flush()
        } else {
            Ok(())
        };
        if effects.ready {
            self.ready.notify_all();
        }
        react(effects);
        written
    }

    /// Returns once everything appended so far is durable, when the engine waits for
    /// durability; at once otherwise.
    pub(crate) fn wait_durable(&self) -> Result<()> {
        if self.wait_for_sync {
            self.log.sync()?;
        }
        Ok(())
    }
}
