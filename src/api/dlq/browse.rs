//! Browsing a DLQ: listing, peeking, getting one entry, and the envelope loads behind
//! them. Nothing here writes or changes a counter.
//!
//! A listing picks its entries from the DLQ's browse order and the compact summary kept
//! with each entry (`DlqOrder`), so choosing a page touches no log bytes and no per-id
//! table; only the entries of the page are looked up and their envelopes read. The index
//! is read in chunks no larger than what the page still needs, so writers are not held up
//! while envelopes are read from the log.

use std::ops::Bound::{Excluded, Included, Unbounded};

use super::{Cursor, Dlq, EntryRef, Filter, Page};
use crate::api::types::{DeadLetter, EntryStatus, MessageId, OriginalMetadata};
use crate::engine::record::{Decoded, Op, PutCause, PutMeta};
use crate::engine::state::{DeadStatus, State};
use crate::engine::wire;
use crate::error::{Error, Result};

/// Most entries picked under one hold of the index lock.
const CHUNK: usize = 256;
/// Fewest entries picked at once when the filter checks envelopes too (some picked entries
/// may then be rejected, so picking exactly what the page needs would take many rounds).
const MIN_ENVELOPE_CHUNK: usize = 16;

impl Dlq {
    /// Entries matching `filter`, oldest first, one page at a time. No side effects.
    pub fn list(&self, filter: &Filter, page: Page) -> Result<Vec<DeadLetter>> {
        if page.limit == 0 {
            return Ok(Vec::new());
        }
        if let Some(before) = page.before_cursor {
            return self.list_before(filter, before, page.limit);
        }
        let start = match (page.after_cursor, page.after) {
            (Some(c), _) => Some(c),
            (None, Some(id)) => Some(self.cursor_of(id)?),
            (None, None) => None,
        };
        let mut out = Vec::with_capacity(page.limit.min(CHUNK));
        self.scan_from(filter, start, page.limit, |entry| {
            out.push(entry);
            true
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

    /// How many entries to pick next when `remaining` more are wanted.
    fn chunk_size(filter: &Filter, remaining: usize) -> usize {
        if filter.needs_envelope() {
            remaining.clamp(MIN_ENVELOPE_CHUNK, CHUNK)
        } else {
            remaining.min(CHUNK)
        }
    }

    /// The `limit` matching entries just before `before`, oldest first. The index is read
    /// backwards in chunks, like `scan_from` reads it forwards.
    fn list_before(
        &self,
        filter: &Filter,
        before: Cursor,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        let dlq_name = self.name();
        let mut out = Vec::with_capacity(limit.min(CHUNK));
        let mut cursor = (before.dead_lettered_at_ms, before.id);
        loop {
            let want = Self::chunk_size(filter, limit - out.len());
            let (chunk, exhausted) = {
                let st = self.store.engine().lock();
                let query = filter.index_query(&st);
                if query.never() {
                    break;
                }
                let order = &st.queues[self.queue as usize].dlq_order;
                let mut chunk = Vec::with_capacity(want);
                let mut exhausted = true;
                for (&key, summary) in order.range(..cursor).rev() {
                    if query.before_start(key.0) {
                        break;
                    }
                    cursor = key;
                    if query.matches(key.0, summary) {
                        if let Ok(r) = self.entry_ref(&st, key.1) {
                            chunk.push(r);
                        }
                        if chunk.len() >= want {
                            exhausted = false;
                            break;
                        }
                    }
                }
                (chunk, exhausted)
            };
            for r in chunk {
                let entry = self.load(r, &dlq_name)?;
                if filter.matches_envelope(&entry) {
                    out.push(entry);
                    if out.len() >= limit {
                        out.reverse();
                        return Ok(out);
                    }
                }
            }
            if exhausted {
                break;
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
        self.load(r, &self.name())
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
            let query = filter.index_query(&st);
            if query.never() {
                return Ok(ids);
            }
            let order = &st.queues[self.queue as usize].dlq_order;
            for (&(at, id), summary) in order.range(query.start()..) {
                if query.past_end(at) {
                    break;
                }
                if query.matches(at, summary) {
                    ids.push(id);
                    if ids.len() >= limit {
                        break;
                    }
                }
            }
            return Ok(ids);
        }
        self.scan_from(filter, None, limit, |e| {
            ids.push(e.id());
            true
        })?;
        Ok(ids)
    }

    /// Calls `visit` with each matching entry after `after`, oldest first, until `limit`
    /// entries were visited or it returns false. The index is read in chunks so writers are
    /// not held up while envelopes are loaded, and only as many entries are picked as the
    /// visit still wants.
    pub(super) fn scan_from(
        &self,
        filter: &Filter,
        after: Option<Cursor>,
        limit: usize,
        mut visit: impl FnMut(DeadLetter) -> bool,
    ) -> Result<()> {
        let dlq_name = self.name();
        let mut cursor: Option<(u64, MessageId)> = after.map(|c| (c.dead_lettered_at_ms, c.id));
        let mut visited = 0;
        while visited < limit {
            let want = Self::chunk_size(filter, limit - visited);
            let (chunk, exhausted) = {
                let st = self.store.engine().lock();
                let query = filter.index_query(&st);
                if query.never() {
                    return Ok(());
                }
                let order = &st.queues[self.queue as usize].dlq_order;
                // From the cursor, or from the filter's start time if that is later.
                let start = match cursor {
                    Some(c) if c >= query.start() => Excluded(c),
                    _ => Included(query.start()),
                };
                let mut chunk = Vec::with_capacity(want);
                let mut exhausted = true;
                for (&key, summary) in order.range((start, Unbounded)) {
                    if query.past_end(key.0) {
                        break;
                    }
                    cursor = Some(key);
                    if query.matches(key.0, summary) {
                        if let Ok(r) = self.entry_ref(&st, key.1) {
                            chunk.push(r);
                        }
                        if chunk.len() >= want {
                            exhausted = false;
                            break;
                        }
                    }
                }
                (chunk, exhausted)
            };
            for r in chunk {
                let entry = self.load(r, &dlq_name)?;
                if filter.matches_envelope(&entry) {
                    visited += 1;
                    if !visit(entry) || visited >= limit {
                        return Ok(());
                    }
                }
            }
            if exhausted {
                return Ok(());
            }
        }
        Ok(())
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

    /// Loads a whole envelope from the log; `dlq_name` is this DLQ's name.
    fn load(&self, r: EntryRef, dlq_name: &str) -> Result<DeadLetter> {
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
            dlq_name: dlq_name.to_string(),
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
