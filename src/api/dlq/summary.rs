//! Summaries of DLQ entries: what a listing shows of each entry (id, error kind and
//! message, attempts, when, status, payload), read without building whole envelopes.
//!
//! A summary's kind, attempts, time and status come from the index; its payload and error
//! message are read from the entry's two records in the log (the payload straight from
//! its place in the payload record, the message from the first fields of the dead-letter
//! record, so neither the message's metadata nor the failure history is decoded). An
//! imported entry's envelope is in its payload record, which is then decoded whole. A
//! summary always equals the one [`DeadLetterSummary::from`] makes of the whole entry.

use super::browse::status;
use super::{Dlq, EntryRef, Filter, Page};
use crate::api::core::types::{DeadLetter, EntryStatus, MessageId};
use crate::engine::record::PutCause;
use crate::engine::state::State;
use crate::engine::wire;
use crate::engine::{bad_content, RecordReader};
use crate::error::Result;

/// What a listing shows of one DLQ entry: enough for a table a person pages through, and
/// the payload. [`Dlq::list_summaries`] and [`Dlq::summary`] read it without the failure
/// history, the message's attributes and the DLQ metadata, which [`Dlq::list`] and
/// [`Dlq::get`] decode for every entry; fetch the whole entry with [`Dlq::get`] when it
/// is opened.
///
/// ```
/// use deadletter::{Config, Failure, Filter, Page, Store};
/// use deadletter::queue::FailureReport;
///
/// # let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(&dir, Config::fast())?;
/// let orders = store.queue("orders")?;
/// orders.enqueue_batch(&["a", "b", "c"])?;
/// for (i, msg) in orders.lease(3)?.iter().enumerate() {
///     let kind = if i == 1 { "Timeout" } else { "InvalidPayload" };
///     let failure = Failure::permanent(kind, format!("message {i} failed"));
///     orders.dead_letter(msg, &FailureReport::new(&failure))?;
/// }
/// let dlq = orders.dlq();
/// let page = dlq.list_summaries(&Filter::error_kind("InvalidPayload"), Page::first(10))?;
/// assert_eq!(page.len(), 2);
/// assert_eq!((page[1].payload.as_slice(), page[1].error_message.as_str()), (&b"c"[..], "message 2 failed"));
/// // The whole entry when someone opens it.
/// let whole = dlq.get(page[1].id)?;
/// assert_eq!(whole.failure.error_message, page[1].error_message);
/// # Ok::<(), deadletter::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadLetterSummary {
    /// The message id.
    pub id: MessageId,
    /// Kind of the final error.
    pub error_kind: String,
    /// Message of the final error.
    pub error_message: String,
    /// Deliveries the message had when it was dead-lettered.
    pub attempts: u32,
    /// When it was moved to the DLQ (its place in the browse order, with its id: see
    /// [`crate::dlq::Cursor`]).
    pub dead_lettered_at_ms: u64,
    /// Pending or reprocessed.
    pub status: EntryStatus,
    /// The original payload.
    pub payload: Vec<u8>,
}

impl From<DeadLetter> for DeadLetterSummary {
    fn from(e: DeadLetter) -> Self {
        DeadLetterSummary {
            id: e.id(),
            error_kind: e.failure.error_kind,
            error_message: e.failure.error_message,
            attempts: e.metadata.delivery_count,
            dead_lettered_at_ms: e.dlq.dead_lettered_at_ms,
            status: e.status,
            payload: e.payload,
        }
    }
}

/// What is needed to read one summary, copied out of the index: the entry's place and
/// its error kind.
struct SummaryRef(EntryRef, String);

impl Dlq {
    /// Summaries of the entries matching `filter`, oldest first, one page at a time: the
    /// entries [`Dlq::list`] returns, each as [`DeadLetterSummary::from`] makes it, at a
    /// fraction of the cost. No side effects.
    pub fn list_summaries(&self, filter: &Filter, page: Page) -> Result<Vec<DeadLetterSummary>> {
        if filter.needs_envelope() {
            // The filter reads whole envelopes anyway.
            let entries = self.list(filter, page)?;
            return Ok(entries.into_iter().map(DeadLetterSummary::from).collect());
        }
        let mut reader = self.store.engine().reader();
        self.page_of(
            filter,
            page,
            |st, id| self.summary_ref(st, id).ok(),
            |r| self.load_summary(&mut reader, r).map(Some),
        )
    }

    /// The summary of one entry by id (see [`DeadLetterSummary`]);
    /// [`Error::NotFound`](crate::Error::NotFound) when it is not in this DLQ.
    pub fn summary(&self, id: MessageId) -> Result<DeadLetterSummary> {
        // The index lock is held for this statement only.
        let r = self.summary_ref(&self.store.engine().lock(), id)?;
        self.load_summary(&mut self.store.engine().reader(), r)
    }

    fn summary_ref(&self, st: &State, id: MessageId) -> Result<SummaryRef> {
        let r = self.entry_ref(st, id)?;
        Ok(SummaryRef(r, st.strings.name(r.info.kind).to_owned()))
    }

    /// Reads the summary of `r` through `reader`.
    fn load_summary(
        &self,
        reader: &mut RecordReader<'_>,
        SummaryRef(r, error_kind): SummaryRef,
    ) -> Result<DeadLetterSummary> {
        let (envelope_pos, payload_pos) = (r.info.envelope_pos, r.msg.payload_pos);
        let (payload, error_message) = if envelope_pos == payload_pos {
            // An imported entry: its envelope is in its payload record.
            let (meta, payload, _) = self.load_put(reader, payload_pos)?;
            match meta.cause {
                PutCause::Imported(entry) => (payload, entry.failure.error_message),
                _ => return Err(bad_content(envelope_pos)),
            }
        } else {
            let (version, body) = reader.read(payload_pos)?;
            let payload = wire::put_payload(version, body)
                .ok()
                .and_then(|range| body.get(range))
                .ok_or_else(|| bad_content(payload_pos))?
                .to_vec();
            let (version, body) = reader.read(envelope_pos)?;
            let message = match wire::dead_letter_error(version, body) {
                Ok(Some((id, message))) if id == r.id => message.to_owned(),
                _ => return Err(bad_content(envelope_pos)),
            };
            (payload, message)
        };
        Ok(DeadLetterSummary {
            id: r.id,
            error_kind,
            error_message,
            attempts: r.msg.attempts,
            dead_lettered_at_ms: r.info.dead_at,
            status: status(r.info.status),
            payload,
        })
    }
}
