//! `deadletter.Filter`: which DLQ entries a list, replay or delete applies to, built from
//! keyword arguments into the engine's [`Filter`].
//!
//! Invariant: a `Filter` is immutable once built and holds only plain data, so one filter
//! can be shared between threads and reused.

use std::collections::BTreeMap;

use deadletter::Filter;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Which DLQ entries an operation applies to; every criterion given must hold (none given:
/// every entry).
#[pyclass(name = "Filter", module = "deadletter", frozen)]
#[derive(Clone)]
pub struct PyFilter {
    pub(crate) inner: Filter,
}

#[pymethods]
impl PyFilter {
    /// error_kind: exactly; message_contains: a substring of the error message;
    /// since_ms/until_ms: dead-lettered in [since, until) (ms since the epoch);
    /// min_attempts/max_attempts: deliveries counted; worker: exactly; tags/attributes:
    /// all present with these values; pending: only pending (True) or only reprocessed
    /// (False) entries; payload_contains: a substring of the payload; fingerprint: a
    /// failure fingerprint as `DeadLetter.fingerprint` gives it.
    #[new]
    #[pyo3(signature = (*, error_kind=None, message_contains=None, since_ms=None, until_ms=None,
        min_attempts=None, max_attempts=None, worker=None, tags=None, attributes=None,
        pending=None, payload_contains=None, fingerprint=None))]
    fn new(
        error_kind: Option<String>,
        message_contains: Option<String>,
        since_ms: Option<u64>,
        until_ms: Option<u64>,
        min_attempts: Option<u32>,
        max_attempts: Option<u32>,
        worker: Option<String>,
        tags: Option<BTreeMap<String, String>>,
        attributes: Option<BTreeMap<String, String>>,
        pending: Option<bool>,
        payload_contains: Option<String>,
        fingerprint: Option<String>,
    ) -> PyResult<Self> {
        let mut f = Filter::all();
        f.error_kind = error_kind;
        f.message_contains = message_contains;
        f.since_ms = since_ms;
        f.until_ms = until_ms;
        f.min_attempts = min_attempts;
        f.max_attempts = max_attempts;
        f.worker = worker;
        f.tags = tags.unwrap_or_default();
        f.attributes = attributes.unwrap_or_default();
        f.pending = pending;
        f.payload_contains = payload_contains;
        f.fingerprint = fingerprint
            .map(|text| {
                text.parse()
                    .map_err(|e| PyValueError::new_err(format!("fingerprint {text:?}: {e}")))
            })
            .transpose()?;
        Ok(PyFilter { inner: f })
    }

    fn __repr__(&self) -> String {
        format!("Filter({:?})", self.inner)
    }
}

/// The engine filter of an optional Python one (none: every entry).
pub fn of(filter: Option<&PyFilter>) -> Filter {
    filter.map(|f| f.inner.clone()).unwrap_or_else(Filter::all)
}
