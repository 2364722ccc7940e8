//! Listing DLQ entries with their envelopes decoded on demand ([`Dlq::list_lazy`]).
//!
//! A [`LazyDeadLetter`] is read like a [`DeadLetterSummary`](super::DeadLetterSummary):
//! what the index knows (id, error kind, attempts, times, status, generation, fingerprint)
//! is copied out of it, the payload and the error message are found in the entry's two
//! records without decoding them, and both record bodies are kept as read (their checksums
//! checked) so that [`LazyDeadLetter::decode`] builds the whole [`DeadLetter`] later,
//! without the store. A program that shows a page and opens few of its entries then pays
//! for the envelopes it opens only.
//!
//! Invariants: a lazy entry holds no handle on the store and no lock, only bytes copied
//! out of the log; its accessors equal the fields of the whole entry [`Dlq::list`] returns
//! for the same entry at the same time, and `decode` returns that entry (the same decoding
//! code, `browse::assemble`). An imported entry, whose envelope is its payload record, and
//! a listing whose filter reads envelopes are decoded at once.

use std::ops::Range;
use std::sync::Arc;

use super::browse::{assemble, dead_letter_part, put_part, status};
use super::{Dlq, EntryRef, Filter, Page};
use crate::api::core::types::{DeadLetter, EntryStatus, MessageId};
use crate::engine::fingerprint::Fingerprint;
use crate::engine::wire;
use crate::engine::{bad_content, RecordReader};
use crate::error::Result;

/// One DLQ entry of a listing, its envelope decoded only when asked ([`Dlq::list_lazy`]):
/// the index's fields, the payload and the error message at once, the whole
/// [`DeadLetter`] from [`decode`](Self::decode).
///
/// ```
/// use deadletter::{Config, Failure, Filter, Page, Store};
/// use deadletter::queue::FailureReport;
///
/// # let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(&dir, Config::fast())?;
/// let orders = store.queue("orders")?;
/// orders.enqueue_batch(&["a", "b"])?;
/// for msg in orders.lease(2)? {
///     let failure = Failure::permanent("InvalidPayload", format!("message {} failed", msg.id()));
///     orders.dead_letter(&msg, &FailureReport::new(&failure))?;
/// }
/// let dlq = orders.dlq();
/// let page = dlq.list_lazy(&Filter::error_kind("InvalidPayload"), Page::first(10))?;
/// assert_eq!((page.len(), page[1].payload(), page[1].error_kind()), (2, &b"b"[..], "InvalidPayload"));
/// // The whole entry, decoded from the bytes the listing read: what `list` returns.
/// let whole = page[1].decode()?;
/// assert_eq!(whole, dlq.list(&Filter::all(), Page::first(10))?[1]);
/// # Ok::<(), deadletter::Error>(())
/// ```
#[derive(Clone)]
pub struct LazyDeadLetter {
    inner: Inner,
}

impl std::fmt::Debug for LazyDeadLetter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyDeadLetter")
            .field("id", &self.id())
            .field("error_kind", &self.error_kind())
            .field("error_message", &self.error_message())
            .field("decoded", &matches!(self.inner, Inner::Whole(_)))
            .finish_non_exhaustive()
    }
}

// `Raw` is what a listing makes of nearly every entry: boxed, each would cost one more
// allocation; the rare `Whole` is the one boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
enum Inner {
    /// Decoded when read: an imported entry, or a listing whose filter reads envelopes.
    Whole(Box<DeadLetter>),
    /// The index's fields and the two records' bodies.
    Raw(Raw),
}

/// A record body as read from the log: its position, its format version, its bytes.
#[derive(Clone)]
struct Body {
    pos: u64,
    version: u16,
    bytes: Vec<u8>,
}

#[derive(Clone)]
struct Raw {
    r: EntryRef,
    error_kind: String,
    /// The queue's name and the DLQ's, shared by the entries of one listing.
    names: Arc<(String, String)>,
    put: Body,
    /// Where the payload lies in `put`.
    payload: Range<usize>,
    dead: Body,
    /// Where the error message (UTF-8, checked when read) lies in `dead`.
    message: Range<usize>,
}

/// A whole entry as a lazy one, already decoded.
impl From<DeadLetter> for LazyDeadLetter {
    fn from(entry: DeadLetter) -> Self {
        LazyDeadLetter {
            inner: Inner::Whole(Box::new(entry)),
        }
    }
}

impl LazyDeadLetter {
    /// The entry's id (the message's).
    pub fn id(&self) -> MessageId {
        match &self.inner {
            Inner::Whole(e) => e.id(),
            Inner::Raw(raw) => raw.r.id,
        }
    }

    /// The queue the message failed in.
    pub fn queue(&self) -> &str {
        match &self.inner {
            Inner::Whole(e) => &e.metadata.queue,
            Inner::Raw(raw) => &raw.names.0,
        }
    }

    /// The DLQ's name.
    pub fn dlq_name(&self) -> &str {
        match &self.inner {
            Inner::Whole(e) => &e.dlq_name,
            Inner::Raw(raw) => &raw.names.1,
        }
    }

    /// The original payload.
    pub fn payload(&self) -> &[u8] {
        match &self.inner {
            Inner::Whole(e) => &e.payload,
            Inner::Raw(raw) => raw.put.bytes.get(raw.payload.clone()).unwrap_or_default(),
        }
    }

    /// Kind of the final error.
    pub fn error_kind(&self) -> &str {
        match &self.inner {
            Inner::Whole(e) => &e.failure.error_kind,
            Inner::Raw(raw) => &raw.error_kind,
        }
    }

    /// Message of the final error.
    pub fn error_message(&self) -> &str {
        match &self.inner {
            Inner::Whole(e) => &e.failure.error_message,
            // Checked as UTF-8 when the listing read it.
            Inner::Raw(raw) => raw
                .dead
                .bytes
                .get(raw.message.clone())
                .and_then(|m| std::str::from_utf8(m).ok())
                .unwrap_or_default(),
        }
    }

    /// Deliveries the message had when it was dead-lettered.
    pub fn delivery_count(&self) -> u32 {
        match &self.inner {
            Inner::Whole(e) => e.metadata.delivery_count,
            Inner::Raw(raw) => raw.r.msg.attempts,
        }
    }

    /// When it was moved to the DLQ (ms since the epoch).
    pub fn dead_lettered_at_ms(&self) -> u64 {
        match &self.inner {
            Inner::Whole(e) => e.dlq.dead_lettered_at_ms,
            Inner::Raw(raw) => raw.r.info.dead_at,
        }
    }

    /// Pending or reprocessed.
    pub fn status(&self) -> EntryStatus {
        match &self.inner {
            Inner::Whole(e) => e.status,
            Inner::Raw(raw) => status(raw.r.info.status),
        }
    }

    /// How many times the message was replayed from a DLQ before this failure.
    pub fn generation(&self) -> u32 {
        match &self.inner {
            Inner::Whole(e) => e.generation,
            Inner::Raw(raw) => raw.r.generation,
        }
    }

    /// Its failure fingerprint.
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        match &self.inner {
            Inner::Whole(e) => e.fingerprint,
            Inner::Raw(raw) => raw.r.fingerprint,
        }
    }

    /// The whole entry if the listing decoded it already (an imported entry, or a listing
    /// whose filter reads envelopes); `None` until [`decode`](Self::decode) otherwise.
    pub fn decoded(&self) -> Option<&DeadLetter> {
        match &self.inner {
            Inner::Whole(e) => Some(e),
            Inner::Raw(_) => None,
        }
    }

    /// The whole entry, decoded from the bytes the listing read (the store is not
    /// touched): what [`Dlq::list`] returned for it at that time. Bytes whose checksum
    /// held but that do not decode are [`Error::Corruption`](crate::Error::Corruption).
    pub fn decode(&self) -> Result<DeadLetter> {
        match &self.inner {
            Inner::Whole(e) => Ok((**e).clone()),
            Inner::Raw(raw) => raw.decode(),
        }
    }

    /// [`decode`](Self::decode), consuming the entry.
    pub fn into_whole(self) -> Result<DeadLetter> {
        match self.inner {
            Inner::Whole(e) => Ok(*e),
            Inner::Raw(raw) => raw.decode(),
        }
    }
}

impl Raw {
    fn decode(&self) -> Result<DeadLetter> {
        let (put, dead) = (&self.put, &self.dead);
        let put = put_part(put.pos, put.version, &put.bytes)?;
        let dead = dead_letter_part(dead.pos, dead.version, &dead.bytes)?;
        let (queue_name, dlq_name) = &*self.names;
        assemble(self.r, queue_name, dlq_name, put, Some(dead))
    }
}

impl Dlq {
    /// Entries matching `filter`, oldest first, one page at a time, each with its envelope
    /// decoded only when asked ([`LazyDeadLetter`]); [`Dlq::list`] decodes every one. A
    /// filter on the envelope (message, payload, worker, tags, attributes) decodes them
    /// while choosing, so its entries come decoded. No side effects.
    pub fn list_lazy(&self, filter: &Filter, page: Page) -> Result<Vec<LazyDeadLetter>> {
        if filter.needs_envelope() {
            let entries = self.list(filter, page)?;
            return Ok(entries.into_iter().map(LazyDeadLetter::from).collect());
        }
        let names = Arc::new((self.queue_name.clone(), self.name()));
        let mut reader = self.store.engine().reader();
        self.page_of(
            filter,
            page,
            |st, id| {
                let r = self.entry_ref(st, id).ok()?;
                Some((r, st.strings.name(r.info.kind).to_owned()))
            },
            |(r, kind)| self.load_lazy(&mut reader, r, kind, &names).map(Some),
        )
    }

    /// Reads entry `r` (whose error kind is `error_kind`) for a lazy listing.
    fn load_lazy(
        &self,
        reader: &mut RecordReader<'_>,
        r: EntryRef,
        error_kind: String,
        names: &Arc<(String, String)>,
    ) -> Result<LazyDeadLetter> {
        let (payload_pos, envelope_pos) = (r.msg.payload_pos, r.info.envelope_pos);
        if payload_pos == envelope_pos {
            // An imported entry: its envelope is its payload record, decoded whole.
            return self.load(reader, r, &names.1).map(LazyDeadLetter::from);
        }
        let (version, bytes) = reader.read(payload_pos)?;
        let payload = wire::put_payload(version, bytes)
            .ok()
            .filter(|range| bytes.get(range.clone()).is_some())
            .ok_or_else(|| bad_content(payload_pos))?;
        let put = Body {
            pos: payload_pos,
            version,
            bytes: bytes.to_vec(),
        };
        let (version, bytes) = reader.read(envelope_pos)?;
        let message = match wire::dead_letter_error(version, bytes) {
            // `message` borrows from `bytes`: its place in them.
            Ok(Some((id, message))) if id == r.id => (message.as_ptr() as usize)
                .checked_sub(bytes.as_ptr() as usize)
                .map(|start| start..start + message.len())
                .filter(|range| bytes.get(range.clone()) == Some(message.as_bytes()))
                .ok_or_else(|| bad_content(envelope_pos))?,
            _ => return Err(bad_content(envelope_pos)),
        };
        let dead = Body {
            pos: envelope_pos,
            version,
            bytes: bytes.to_vec(),
        };
        Ok(LazyDeadLetter {
            inner: Inner::Raw(Raw {
                r,
                error_kind,
                names: Arc::clone(names),
                put,
                payload,
                dead,
                message,
            }),
        })
    }
}
