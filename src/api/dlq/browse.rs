//! Browsing a DLQ: listing, peeking, getting one entry, and the envelope loads behind
//! them. Nothing here writes or changes a counter. The index is read in chunks, so writers
//! are not held up while envelopes are read from the log.

use super::{Cursor, Dlq, EntryRef, Filter, Page};
use crate::api::types::{DeadLetter, EntryStatus, MessageId, OriginalMetadata};
use crate::engine::record::{Decoded, Op, PutCause, PutMeta};
use crate::engine::state::{DeadStatus, State};
use crate::engine::wire;
use crate::error::{Error, Result};

impl Dlq {
    /// Entries matching `filter`, oldest first, one page at a time. No side effects.
    pub fn list(&self, filter: &Filter, page: Page) -> Result<Vec<DeadLetter>> {
        let mut out = Vec::new();
        if page.limit == 0 {
            return Ok(out);
        }
        if let Some(before) = page.before_cursor {
            return self.list_before(filter, before, page.limit);
        }
        let start = match (page.after_cursor, page.after) {
            (Some(c), _) => Some(c),
            (None, Some(id)) => Some(self.cursor_of(id)?),
            (None, None) => None,
        };
        self.scan_from(filter, start, |entry| {
            out.push(entry);
            out.len() < page.limit
        })?;
        Ok(out)
    }

    /// The place of entry `id` in the browse order.
    fn cursor_of(&self, id: MessageId) -> Result<Cursor> {
        let st = self.store.engine().lock();
        let r = self.entry_ref(&st, id)?;
        Ok(Cursor {
            dead_lettered_at_ms: r.info.dead_at,
            id,
        })
    }

    /// The `limit` matching entries just before `before`, oldest first. The index is read
    /// backwards in chunks, like `scan_from` reads it forwards.
    fn list_before(
        &self,
        filter: &Filter,
        before: Cursor,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        const CHUNK: usize = 256;
        let mut out = Vec::new();
        let mut cursor = (before.dead_lettered_at_ms, before.id);
        'chunks: loop {
            let chunk: Vec<EntryRef> = {
                let st = self.store.engine().lock();
                let order = &st.queues[self.queue as usize].dlq_order;
                let mut chunk = Vec::new();
                for &(at, id) in order.range(..cursor).rev() {
                    cursor = (at, id);
                    if let Some(r) = self.index_match(&st, filter, id) {
                        chunk.push(r);
                        if chunk.len() >= CHUNK {
                            break;
                        }
                    }
                }
                chunk
            };
            if chunk.is_empty() {
                break;
            }
            for r in chunk {
                let entry = self.load(r)?;
                if filter.matches_envelope(&entry) {
                    out.push(entry);
                    if out.len() >= limit {
                        break 'chunks;
                    }
                }
            }
        }
        out.reverse();
        Ok(out)
    }

    /// The oldest `n` entries.
    pub fn peek(&self, n: usize) -> Result<Vec<DeadLetter>> {
        self.list(&Filter::all(), Page::first(n))
    }

    /// One entry by id.
    pub fn get(&self, id: MessageId) -> Result<DeadLetter> {
        let r = {
            let st = self.store.engine().lock();
            self.entry_ref(&st, id)?
        };
        self.load(r)
    }

    /// Ids of the entries matching `filter` (up to `limit`), oldest first.
    pub fn ids(&self, filter: &Filter, limit: Option<usize>) -> Result<Vec<MessageId>> {
        let limit = limit.unwrap_or(usize::MAX);
        let mut ids = Vec::new();
        if limit == 0 {
            return Ok(ids);
        }
        if !filter.needs_envelope() {
            let st = self.store.engine().lock();
            for &(_, id) in &st.queues[self.queue as usize].dlq_order {
                if let Some(r) = self.index_match(&st, filter, id) {
                    ids.push(r.id);
                    if ids.len() >= limit {
                        break;
                    }
                }
            }
            return Ok(ids);
        }
        self.scan_from(filter, None, |e| {
            ids.push(e.id());
            ids.len() < limit
        })?;
        Ok(ids)
    }

    /// Calls `visit` with each matching entry, oldest first, until it returns false. The
    /// index is read in chunks so writers are not held up while envelopes are loaded.
    pub(super) fn scan_from(
        &self,
        filter: &Filter,
        after: Option<Cursor>,
        mut visit: impl FnMut(DeadLetter) -> bool,
    ) -> Result<()> {
        const CHUNK: usize = 256;
        let mut cursor: Option<(u64, MessageId)> = after.map(|c| (c.dead_lettered_at_ms, c.id));
        loop {
            let chunk: Vec<EntryRef> = {
                let st = self.store.engine().lock();
                let order = &st.queues[self.queue as usize].dlq_order;
                let range = match cursor {
                    Some(c) => {
                        order.range((std::ops::Bound::Excluded(c), std::ops::Bound::Unbounded))
                    }
                    None => order.range(..),
                };
                let mut chunk = Vec::new();
                for &(at, id) in range {
                    cursor = Some((at, id));
                    if let Some(r) = self.index_match(&st, filter, id) {
                        chunk.push(r);
                        if chunk.len() >= CHUNK {
                            break;
                        }
                    }
                }
                chunk
            };
            if chunk.is_empty() {
                return Ok(());
            }
            for r in chunk {
                let entry = self.load(r)?;
                if filter.matches_envelope(&entry) && !visit(entry) {
                    return Ok(());
                }
            }
        }
    }

    fn index_match(&self, st: &State, filter: &Filter, id: MessageId) -> Option<EntryRef> {
        let r = self.entry_ref(st, id).ok()?;
        filter.matches_index(st, id, &r.msg, &r.info).then_some(r)
    }

    pub(super) fn entry_ref(&self, st: &State, id: MessageId) -> Result<EntryRef> {
        let info = *st.dead.get(&id).ok_or(Error::NotFound(id))?;
        let msg = *st.msgs.get(&id).ok_or(Error::NotFound(id))?;
        if msg.queue != self.queue {
            return Err(Error::NotFound(id));
        }
        Ok(EntryRef {
            id,
            msg,
            info,
            generation: st.extras.get(&id).map(|e| e.generation).unwrap_or(0),
            fingerprint: st.fingerprints.of(id).map(|d| d.id),
        })
    }

    /// Loads a whole envelope from the log.
    fn load(&self, r: EntryRef) -> Result<DeadLetter> {
        let (meta, payload, replaced) = self.load_put(r.msg.payload_pos)?;
        let original_id = match &meta.cause {
            PutCause::Imported(entry) => Some(entry.original_id),
            _ => None,
        };
        let (failure, dlq, first_received_at) = match meta.cause {
            PutCause::Imported(entry) if r.info.envelope_pos == r.msg.payload_pos => {
                (entry.failure, entry.dlq, entry.first_received_at)
            }
            _ => match self.store.engine().read_op(r.info.envelope_pos)? {
                Op::DeadLetter {
                    failure,
                    dlq,
                    first_received_at,
                    ..
                } => (failure, dlq, first_received_at),
                _ => return Err(self.store.engine().bad_content(r.info.envelope_pos)),
            },
        };
        Ok(DeadLetter {
            payload,
            replaced_payload: replaced,
            metadata: OriginalMetadata {
                id: r.id,
                queue: self.queue_name.clone(),
                enqueued_at_ms: meta.enqueued_at,
                first_received_at_ms: first_received_at,
                delivery_count: r.msg.attempts,
                attributes: meta.attributes,
            },
            failure,
            dlq,
            generation: r.generation,
            status: match r.info.status {
                DeadStatus::Pending => EntryStatus::Pending,
                DeadStatus::Reprocessed(success, at_ms) => {
                    EntryStatus::Reprocessed { success, at_ms }
                }
            },
            dlq_name: self.name(),
            original_id,
            fingerprint: r.fingerprint,
        })
    }

    pub(super) fn load_put(&self, pos: u64) -> Result<(PutMeta, Vec<u8>, Option<Vec<u8>>)> {
        let rec = self.store.engine().read_record(pos)?;
        match wire::decode(rec.version(), &rec) {
            Ok(Decoded::Put(put)) => {
                let replaced = match &put.meta.cause {
                    PutCause::CorrectedReplay {
                        previous_payload, ..
                    } => Some(previous_payload.clone()),
                    PutCause::Imported(entry) => entry.replaced_payload.clone(),
                    PutCause::Enqueue => None,
                };
                Ok((put.meta, put.payload.to_vec(), replaced))
            }
            _ => Err(self.store.engine().bad_content(pos)),
        }
    }
}
