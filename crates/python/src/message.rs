//! What Python reads: a delivered message ([`PyMessage`], `deadletter.Message`) and a DLQ
//! entry ([`PyDeadLetter`], `deadletter.DeadLetter`), each an immutable copy of the
//! engine's value (a listed entry's envelope decoded on first use from the bytes the
//! listing copied: [`deadletter::dlq::LazyDeadLetter`]), and the plain dictionaries of the
//! engine's counts and reports.
//!
//! Invariant: these objects hold no lock and no handle on the store, so keeping one alive
//! keeps nothing open, and reading one never touches the disk.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use deadletter::dlq::{DeadLetter, DlqStats, EntryStatus, FingerprintStats, LazyDeadLetter};
use deadletter::pool::PoolCounters;
use deadletter::queue::QueueStats;
use deadletter::replay::ReplayReport;
use deadletter::Message;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::errors::to_py;
use crate::payload;

/// A delivered message: its id, attempt number, payload and attributes. Ack, retry or
/// dead-letter it through the queue it came from.
#[pyclass(name = "Message", module = "deadletter", frozen)]
pub struct PyMessage {
    pub(crate) inner: Message,
}

#[pymethods]
impl PyMessage {
    /// The message id (unique in its store).
    #[getter]
    fn id(&self) -> u64 {
        self.inner.id()
    }

    /// The queue it was delivered from.
    #[getter]
    fn queue(&self) -> &str {
        self.inner.queue()
    }

    /// This delivery's attempt number, from 1.
    #[getter]
    fn attempt(&self) -> u32 {
        self.inner.attempt()
    }

    /// The payload, byte for byte.
    #[getter]
    fn payload<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.inner.payload())
    }

    /// The payload as text, or None when it is not UTF-8.
    #[getter]
    fn text(&self) -> Option<&str> {
        self.inner.text()
    }

    /// The payload parsed as JSON (what `enqueue(value, codec="json")` wrote).
    fn json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        payload::decode(
            py,
            self.inner.payload(),
            pyo3::types::PyString::new(py, "json").as_any(),
        )
    }

    /// The payload decoded with `codec` (`"json"`, or an object with `decode(bytes)`).
    fn decode<'py>(
        &self,
        py: Python<'py>,
        codec: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        payload::decode(py, self.inner.payload(), codec)
    }

    /// The attributes given at enqueue.
    #[getter]
    fn attributes(&self) -> BTreeMap<String, String> {
        self.inner.attributes().clone()
    }

    /// When it was enqueued (ms since the epoch).
    #[getter]
    fn enqueued_at_ms(&self) -> u64 {
        self.inner.enqueued_at_ms()
    }

    /// When this delivery was leased (ms since the epoch).
    #[getter]
    fn leased_at_ms(&self) -> u64 {
        self.inner.leased_at_ms()
    }

    fn __repr__(&self) -> String {
        format!(
            "Message(id={}, queue={:?}, attempt={}, {} bytes)",
            self.inner.id(),
            self.inner.queue(),
            self.inner.attempt(),
            self.inner.payload().len()
        )
    }
}

/// A DLQ entry: the original payload byte for byte and everything known about its failure
/// (kind, message, every attempt, the worker, timestamps, its fingerprint). Reading it
/// changes nothing and never touches the store: an entry of a listing decodes the rest of
/// its envelope (attempts, details, attributes, tags, ...) from the bytes the listing read
/// the first time one of those is read.
#[pyclass(name = "DeadLetter", module = "deadletter", frozen)]
pub struct PyDeadLetter {
    /// The entry: decoded already (`Dlq.get`), or as a listing read it (`Dlq.list`).
    entry: LazyDeadLetter,
    /// A listed entry's whole envelope, once decoded.
    whole: OnceLock<Box<DeadLetter>>,
}

impl PyDeadLetter {
    /// A whole entry.
    pub(crate) fn whole(entry: DeadLetter) -> Self {
        Self::listed(LazyDeadLetter::from(entry))
    }

    /// An entry of a listing, decoded on demand.
    pub(crate) fn listed(entry: LazyDeadLetter) -> Self {
        PyDeadLetter {
            entry,
            whole: OnceLock::new(),
        }
    }

    /// The whole entry, decoded (once) if it was listed.
    fn envelope(&self, py: Python<'_>) -> PyResult<&DeadLetter> {
        if let Some(e) = self.entry.decoded() {
            return Ok(e);
        }
        if let Some(e) = self.whole.get() {
            return Ok(e);
        }
        let e = self.entry.decode().map_err(|e| to_py(py, e))?;
        Ok(self.whole.get_or_init(|| Box::new(e)))
    }
}

#[pymethods]
impl PyDeadLetter {
    /// The entry's id (the message's id).
    #[getter]
    fn id(&self) -> u64 {
        self.entry.id()
    }

    /// The queue the message failed in.
    #[getter]
    fn queue(&self) -> &str {
        self.entry.queue()
    }

    /// The DLQ that holds it.
    #[getter]
    fn dlq_name(&self) -> &str {
        self.entry.dlq_name()
    }

    /// The original payload, byte for byte.
    #[getter]
    fn payload<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.entry.payload())
    }

    /// The payload as text, or None when it is not UTF-8.
    #[getter]
    fn text(&self) -> Option<&str> {
        std::str::from_utf8(self.entry.payload()).ok()
    }

    /// The payload parsed as JSON.
    fn json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        payload::decode(
            py,
            self.entry.payload(),
            pyo3::types::PyString::new(py, "json").as_any(),
        )
    }

    /// The payload decoded with `codec` (`"json"`, or an object with `decode(bytes)`).
    fn decode<'py>(
        &self,
        py: Python<'py>,
        codec: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        payload::decode(py, self.entry.payload(), codec)
    }

    /// The payload before a corrected replay replaced it, if one did.
    #[getter]
    fn replaced_payload<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        Ok(self
            .envelope(py)?
            .replaced_payload
            .as_deref()
            .map(|p| PyBytes::new(py, p)))
    }

    /// The error kind of the last failure (an exception's class name by default).
    #[getter]
    fn error_kind(&self) -> &str {
        self.entry.error_kind()
    }

    /// The error message of the last failure.
    #[getter]
    fn error_message(&self) -> &str {
        self.entry.error_message()
    }

    /// The last failure's details, if any.
    #[getter]
    fn details(&self, py: Python<'_>) -> PyResult<Option<&str>> {
        Ok(self.envelope(py)?.failure.details.as_deref())
    }

    /// The last failure's stack trace (a Python traceback), when the store keeps them.
    #[getter]
    fn stack_trace(&self, py: Python<'_>) -> PyResult<Option<&str>> {
        Ok(self.envelope(py)?.failure.stack_trace.as_deref())
    }

    /// Every attempt kept: dicts of number, at_ms, error_kind, error_message, details,
    /// duration_ms, worker.
    #[getter]
    fn attempts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for a in &self.envelope(py)?.failure.attempts {
            let d = PyDict::new(py);
            d.set_item("number", a.number)?;
            d.set_item("at_ms", a.at_ms)?;
            d.set_item("error_kind", &a.error_kind)?;
            d.set_item("error_message", &a.error_message)?;
            d.set_item("details", a.details.as_deref())?;
            d.set_item("duration_ms", a.duration_ms)?;
            d.set_item("worker", a.worker.as_deref())?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// Deliveries counted before it was dead-lettered.
    #[getter]
    fn delivery_count(&self) -> u32 {
        self.entry.delivery_count()
    }

    /// When it was enqueued (ms since the epoch).
    #[getter]
    fn enqueued_at_ms(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.envelope(py)?.metadata.enqueued_at_ms)
    }

    /// When the last failure happened (ms since the epoch).
    #[getter]
    fn failed_at_ms(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.envelope(py)?.failure.failed_at_ms)
    }

    /// When it was moved to the DLQ (ms since the epoch).
    #[getter]
    fn dead_lettered_at_ms(&self) -> u64 {
        self.entry.dead_lettered_at_ms()
    }

    /// The worker whose failure dead-lettered it, if a worker did.
    #[getter]
    fn worker(&self, py: Python<'_>) -> PyResult<Option<&str>> {
        Ok(self.envelope(py)?.dlq.worker.as_deref())
    }

    /// The message's attributes.
    #[getter]
    fn attributes(&self, py: Python<'_>) -> PyResult<BTreeMap<String, String>> {
        Ok(self.envelope(py)?.metadata.attributes.clone())
    }

    /// The entry's tags.
    #[getter]
    fn tags(&self, py: Python<'_>) -> PyResult<BTreeMap<String, String>> {
        Ok(self.envelope(py)?.dlq.tags.clone())
    }

    /// The failure's context (key-value pairs).
    #[getter]
    fn context(&self, py: Python<'_>) -> PyResult<BTreeMap<String, String>> {
        Ok(self.envelope(py)?.failure.context.clone())
    }

    /// `"pending"`, or `"reprocessed"` once marked (see `reprocess_success`).
    #[getter]
    fn status(&self) -> &'static str {
        match self.entry.status() {
            EntryStatus::Pending => "pending",
            EntryStatus::Reprocessed { .. } => "reprocessed",
        }
    }

    /// The outcome given to `mark_reprocessed`, or None while pending.
    #[getter]
    fn reprocess_success(&self) -> Option<bool> {
        match self.entry.status() {
            EntryStatus::Pending => None,
            EntryStatus::Reprocessed { success, .. } => Some(success),
        }
    }

    /// How many times the message was replayed before this failure.
    #[getter]
    fn generation(&self) -> u32 {
        self.entry.generation()
    }

    /// The failure fingerprint (error kind and message template), as text.
    #[getter]
    fn fingerprint(&self) -> Option<String> {
        self.entry.fingerprint().map(|f| f.to_string())
    }

    fn __repr__(&self) -> String {
        format!(
            "DeadLetter(id={}, queue={:?}, error_kind={:?}, error_message={:?})",
            self.entry.id(),
            self.entry.queue(),
            self.entry.error_kind(),
            self.entry.error_message()
        )
    }
}

/// A DLQ's statistics as a dict (the keys of `DlqStats` in `_deadletter.pyi`).
pub fn dlq_stats<'py>(py: Python<'py>, s: &DlqStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &s.name)?;
    d.set_item("total", s.total)?;
    d.set_item("pending", s.pending)?;
    d.set_item("reprocessed", s.reprocessed)?;
    d.set_item("reprocessed_ok", s.reprocessed_ok)?;
    d.set_item("reprocessed_failed", s.reprocessed_failed)?;
    d.set_item("replayed", s.replayed)?;
    d.set_item("deleted", s.deleted)?;
    d.set_item("expired", s.expired)?;
    d.set_item("oldest_age_ms", s.oldest_age_ms)?;
    d.set_item("newest_age_ms", s.newest_age_ms)?;
    d.set_item("by_error_kind", &s.by_error_kind)?;
    d.set_item("by_worker", &s.by_worker)?;
    let by_fp: BTreeMap<String, u64> = s
        .by_fingerprint
        .iter()
        .map(|(f, n)| (f.to_string(), *n))
        .collect();
    d.set_item("by_fingerprint", by_fp)?;
    Ok(d)
}

/// One fingerprint's group as a dict (`Fingerprint` in `_deadletter.pyi`).
pub fn fingerprint<'py>(py: Python<'py>, f: &FingerprintStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("fingerprint", f.fingerprint.to_string())?;
    d.set_item("error_kind", &f.error_kind)?;
    d.set_item("template", &f.template)?;
    d.set_item("count", f.count)?;
    d.set_item("first_seen_ms", f.first_seen_ms)?;
    d.set_item("last_seen_ms", f.last_seen_ms)?;
    d.set_item("example_id", f.example_id)?;
    d.set_item("last_day_by_hour", f.last_day_by_hour.to_vec())?;
    Ok(d)
}

/// What a replay did, as a dict: `replayed` (ids), `failed` ((id, reason) pairs), `dry_run`.
pub fn replay_report<'py>(py: Python<'py>, r: &ReplayReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("replayed", &r.replayed)?;
    d.set_item("failed", &r.failed)?;
    d.set_item("dry_run", r.dry_run)?;
    Ok(d)
}

/// A queue's counts as a dict (`QueueStats` in `_deadletter.pyi`).
pub fn queue_stats<'py>(py: Python<'py>, s: &QueueStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &s.name)?;
    d.set_item("dlq_name", &s.dlq_name)?;
    d.set_item("ready", s.counts.ready)?;
    d.set_item("in_flight", s.counts.in_flight)?;
    d.set_item("enqueued", s.counts.enqueued)?;
    d.set_item("acked", s.counts.acked)?;
    d.set_item("retried", s.counts.retried)?;
    d.set_item("dead_lettered", s.counts.dead_lettered)?;
    d.set_item("expired", s.counts.expired)?;
    d.set_item("deleted", s.counts.deleted)?;
    d.set_item("dlq_size", s.dlq_size)?;
    d.set_item("oldest_ready_at_ms", s.oldest_ready_at_ms)?;
    d.set_item("refused", s.refused)?;
    Ok(d)
}

/// A pool's counters as a dict (`PoolCounters` in `_deadletter.pyi`).
pub fn pool_counters<'py>(py: Python<'py>, c: &PoolCounters) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("processed", c.processed)?;
    d.set_item("retried", c.retried)?;
    d.set_item("dead_lettered", c.dead_lettered)?;
    d.set_item("in_flight", c.in_flight)?;
    d.set_item("panics", c.panics)?;
    d.set_item("lost_leases", c.lost_leases)?;
    Ok(d)
}
