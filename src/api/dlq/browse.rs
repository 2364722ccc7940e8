//! Browsing a DLQ: listing, peeking, getting one entry, and the envelope loads behind
//! them. Nothing here writes or changes a counter.
//!
//! A listing picks its entries from the DLQ's browse order and the compact summary kept
//! with each entry (`DlqOrder`), so choosing a page touches no log bytes and no per-id
//! table; only the entries of the page are looked up and their envelopes read. The index
//! is read in chunks no larger than what the page still needs, so writers are not held up
//! while envelopes are read from the log, all through one `RecordReader` (which keeps the
//! segments and maps of the records before). What is copied out of the index per entry and
//! how it is loaded is the caller's (`Dlq::page_of`): whole envelopes here, summaries in
//! `summary`.

use std::ops::Bound::{Excluded, Included, Unbounded};

use super::{Cursor, Dlq, EntryRef, Filter, Page};
use crate::api::core::types::{DeadLetter, EntryStatus, MessageId, OriginalMetadata};
use crate::engine::envelope::{DlqMetadata, FailureInfo};
use crate::engine::record::{Decoded, Op, PutCause, PutMeta};
use crate::engine::state::{DeadStatus, State};
use crate::engine::wire;
use crate::engine::{bad_content, RecordReader};
use crate::error::{Error, Result};

/// Most entries picked under one hold of the index lock.
const CHUNK: usize = 256;
/// Fewest entries picked at once when the filter checks envelopes too (some picked entries
/// may then be rejected, so picking exactly what the page needs would take many rounds).
const MIN_ENVELOPE_CHUNK: usize = 16;

/// Where a walk over the browse order starts.
#[derive(Clone, Copy)]
enum Start {
    /// After this place (or from the oldest entry), forwards.
    After(Option<(u64, MessageId)>),
    /// Just before this place, backwards.
    Before((u64, MessageId)),
}

impl Dlq {
    /// Entries matching `filter`, oldest first, one page at a time. No side effects.
    pub fn list(&self, filter: &Filter, page: Page) -> Result<Vec<DeadLetter>> {
        let dlq_name = self.name();
        let mut reader = self.store.engine().reader();
        self.page_of(
            filter,
            page,
            |st, id| self.entry_ref(st, id).ok(),
            |r| self.load_matching(&mut reader, filter, r, &dlq_name),
        )
    }

    /// The entries of `page` that match `filter`, oldest first: `pick` copies what loading
    /// an entry needs out of the index (under its lock), `load` reads it (without the lock)
    /// and returns `None` when the envelope part of the filter rejects it.
    pub(super) fn page_of<R, T>(
        &self,
        filter: &Filter,
        page: Page,
        pick: impl Fn(&State, MessageId) -> Option<R>,
        load: impl FnMut(R) -> Result<Option<T>>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::with_capacity(page.limit.min(CHUNK));
        if page.limit == 0 {
            return Ok(out);
        }
        let from = match (page.before_cursor, page.after_cursor, page.after) {
            (Some(c), _, _) => Start::Before((c.dead_lettered_at_ms, c.id)),
            (None, Some(c), _) => Start::After(Some((c.dead_lettered_at_ms, c.id))),
            (None, None, Some(id)) => Start::After(Some(self.key_of(id)?)),
            (None, None, None) => Start::After(None),
        };
        self.walk(filter, from, page.limit, pick, load, |entry| {
            out.push(entry);
            true
        })?;
        if matches!(from, Start::Before(_)) {
            out.reverse();
        }
        Ok(out)
    }

    /// The place of entry `id` in the browse order.
    fn key_of(&self, id: MessageId) -> Result<(u64, MessageId)> {
        let st = self.store.engine().lock();
        Ok((self.entry_ref(&st, id)?.info.dead_at, id))
    }

    /// How many entries to pick next when `remaining` more are wanted.
    fn chunk_size(filter: &Filter, remaining: usize) -> usize {
        if filter.needs_envelope() {
            remaining.clamp(MIN_ENVELOPE_CHUNK, CHUNK)
        } else {
            remaining.min(CHUNK)
        }
    }

    /// The oldest `n` entries.
    pub fn peek(&self, n: usize) -> Result<Vec<DeadLetter>> {
        self.list(&Filter::all(), Page::first(n))
    }

    /// One entry by id.
    pub fn get(&self, id: MessageId) -> Result<DeadLetter> {
        // The index lock is held for this statement only.
        let r = self.entry_ref(&self.store.engine().lock(), id)?;
        self.load(&mut self.store.engine().reader(), r, &self.name())
    }

    /// Ids of the entries matching `filter` (up to `limit`), oldest first. A filter the
    /// index answers alone reads no envelope.
    pub fn ids(&self, filter: &Filter, limit: Option<usize>) -> Result<Vec<MessageId>> {
        let limit = limit.unwrap_or(usize::MAX);
        let mut ids = Vec::new();
        let mut visit = |id| {
            ids.push(id);
            true
        };
        if filter.needs_envelope() {
            self.scan_from(filter, None, limit, |e| visit(e.id()))?;
        } else {
            let from = Start::After(None);
            self.walk(
                filter,
                from,
                limit,
                |_, id| Some(id),
                |id| Ok(Some(id)),
                visit,
            )?;
        }
        Ok(ids)
    }

    /// Calls `visit` with each matching entry after `after`, oldest first, until `limit`
    /// entries were visited or it returns false (see [`Dlq::walk`]).
    pub(super) fn scan_from(
        &self,
        filter: &Filter,
        after: Option<Cursor>,
        limit: usize,
        visit: impl FnMut(DeadLetter) -> bool,
    ) -> Result<()> {
        let dlq_name = self.name();
        let mut reader = self.store.engine().reader();
        self.walk(
            filter,
            Start::After(after.map(|c| (c.dead_lettered_at_ms, c.id))),
            limit,
            |st, id| self.entry_ref(st, id).ok(),
            |r| self.load_matching(&mut reader, filter, r, &dlq_name),
            visit,
        )
    }

    /// Calls `visit` with each entry matching `filter` from `from` (oldest first forwards,
    /// newest first backwards) until `limit` entries were visited or it returns false.
    /// The index is read in chunks, `pick` copying out of it what `load` needs, so writers
    /// are not held up while `load` reads the log; only as many entries are picked as the
    /// visit still wants. `load` returns `None` for an entry the envelope part of the
    /// filter rejects.
    fn walk<R, T>(
        &self,
        filter: &Filter,
        from: Start,
        limit: usize,
        pick: impl Fn(&State, MessageId) -> Option<R>,
        mut load: impl FnMut(R) -> Result<Option<T>>,
        mut visit: impl FnMut(T) -> bool,
    ) -> Result<()> {
        let (mut cursor, backwards) = match from {
            Start::After(c) => (c, false),
            Start::Before(c) => (Some(c), true),
        };
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
                let entries: Box<dyn Iterator<Item = _>> = match cursor {
                    Some(c) if backwards => Box::new(order.range(..c).rev()),
                    // From the cursor, or from the filter's start time if that is later.
                    Some(c) if c >= query.start() => {
                        Box::new(order.range((Excluded(c), Unbounded)))
                    }
                    _ => Box::new(order.range((Included(query.start()), Unbounded))),
                };
                let mut chunk = Vec::with_capacity(want);
                let mut exhausted = true;
                for (&key, summary) in entries {
                    if (backwards && query.before_start(key.0))
                        || (!backwards && query.past_end(key.0))
                    {
                        break;
                    }
                    cursor = Some(key);
                    if query.matches(key.0, summary) {
                        chunk.extend(pick(&st, key.1));
                        if chunk.len() >= want {
                            exhausted = false;
                            break;
                        }
                    }
                }
                (chunk, exhausted)
            };
            for r in chunk {
                if let Some(entry) = load(r)? {
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
        if msg.queue() != self.queue {
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

    /// The whole envelope of `r` if it matches the envelope part of `filter`.
    fn load_matching(
        &self,
        reader: &mut RecordReader<'_>,
        filter: &Filter,
        r: EntryRef,
        dlq_name: &str,
    ) -> Result<Option<DeadLetter>> {
        let entry = self.load(reader, r, dlq_name)?;
        Ok(filter.matches_envelope(&entry).then_some(entry))
    }

    /// Loads a whole envelope from the log; `dlq_name` is this DLQ's name.
    pub(super) fn load(
        &self,
        reader: &mut RecordReader<'_>,
        r: EntryRef,
        dlq_name: &str,
    ) -> Result<DeadLetter> {
        let (meta, payload, replaced) = self.load_put(reader, r.msg.payload_pos)?;
        let dead = match meta.cause {
            PutCause::Imported(_) if r.info.envelope_pos == r.msg.payload_pos => None,
            _ => {
                let (version, body) = reader.read(r.info.envelope_pos)?;
                Some(dead_letter_part(r.info.envelope_pos, version, body)?)
            }
        };
        assemble(
            r,
            &self.queue_name,
            dlq_name,
            (meta, payload, replaced),
            dead,
        )
    }

    /// The payload record at `pos`: its metadata, payload and replaced payload.
    pub(super) fn load_put(
        &self,
        reader: &mut RecordReader<'_>,
        pos: u64,
    ) -> Result<(PutMeta, Vec<u8>, Option<Vec<u8>>)> {
        let (version, body) = reader.read(pos)?;
        put_part(pos, version, body)
    }
}

/// What the dead-letter record of an entry says: the failure, the DLQ metadata and when
/// the message was first received.
pub(super) type DeadPart = (FailureInfo, DlqMetadata, Option<u64>);

/// The metadata, payload and replaced payload of the payload record body `body` (format
/// `version`) at log position `pos`.
pub(crate) fn put_part(
    pos: u64,
    version: u16,
    body: &[u8],
) -> Result<(PutMeta, Vec<u8>, Option<Vec<u8>>)> {
    match wire::decode(version, body) {
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
        _ => Err(bad_content(pos)),
    }
}

/// The failure, DLQ metadata and first receipt of the dead-letter record body `body`
/// (format `version`) at log position `pos`.
pub(super) fn dead_letter_part(pos: u64, version: u16, body: &[u8]) -> Result<DeadPart> {
    match wire::decode(version, body) {
        Ok(Decoded::Op(Op::DeadLetter {
            failure,
            dlq,
            first_received_at,
            ..
        })) => Ok((failure, dlq, first_received_at)),
        _ => Err(bad_content(pos)),
    }
}

/// The whole entry `r` of queue `queue_name`'s DLQ `dlq_name`, from its payload record's
/// parts and its dead-letter record's (`None`: an imported entry, whose envelope is in its
/// payload record).
pub(super) fn assemble(
    r: EntryRef,
    queue_name: &str,
    dlq_name: &str,
    (meta, payload, replaced): (PutMeta, Vec<u8>, Option<Vec<u8>>),
    dead: Option<DeadPart>,
) -> Result<DeadLetter> {
    let original_id = match &meta.cause {
        PutCause::Imported(entry) => Some(entry.original_id),
        _ => None,
    };
    let (failure, dlq, first_received_at) = match (dead, meta.cause) {
        (Some(dead), _) => dead,
        (None, PutCause::Imported(entry)) => (entry.failure, entry.dlq, entry.first_received_at),
        // Only an imported entry comes without a dead-letter record.
        (None, _) => return Err(bad_content(r.info.envelope_pos)),
    };
    Ok(DeadLetter {
        payload,
        replaced_payload: replaced,
        metadata: OriginalMetadata {
            id: r.id,
            queue: queue_name.to_string(),
            enqueued_at_ms: meta.enqueued_at,
            first_received_at_ms: first_received_at,
            delivery_count: r.msg.attempts,
            attributes: meta.attributes,
        },
        failure,
        dlq,
        generation: r.generation,
        status: status(r.info.status),
        dlq_name: dlq_name.to_string(),
        original_id,
        fingerprint: r.fingerprint,
    })
}

/// The public form of an entry's status.
pub(super) fn status(s: DeadStatus) -> EntryStatus {
    match s {
        DeadStatus::Pending => EntryStatus::Pending,
        DeadStatus::Reprocessed(success, at_ms) => EntryStatus::Reprocessed { success, at_ms },
    }
}
