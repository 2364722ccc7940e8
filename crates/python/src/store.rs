//! `deadletter.Store`, `deadletter.Queue` and `deadletter.Dlq`: the engine's handles behind
//! Python objects, every engine call made with the GIL released.
//!
//! Ownership: a Python `Store` owns the engine's [`Store`]; every `Queue`, `Dlq` and
//! `WorkerPool` made from it holds its engine handle in a cell the store keeps a weak
//! reference to, so `Store.close()` (or leaving its `with` block) stops the store's pools,
//! empties every cell and closes the engine, and the directory's lock is released even
//! while Python objects of its queues are still alive; they then raise `StoreClosed`.
//!
//! Invariants: no engine call runs while this thread holds the GIL (`Python::detach`), so
//! other Python threads and the pool's handlers run meanwhile and concurrent enqueues share
//! one fsync; a cell's lock is only ever taken with the GIL released, so a thread waiting
//! for it cannot hold up one that needs the GIL to finish; an engine error becomes its
//! typed exception (`errors::to_py`).

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use deadletter::pool::RunningPool;
use deadletter::queue::{EnqueueOptions, FailureOutcome, FailureReport, QueueOptions};
use deadletter::store::Durability;
use deadletter::{
    Config, Dlq, Error, Failure, Filter, MessageQueue, Page, Queue, ReplayOptions, Store,
};
use parking_lot::{Mutex, RwLock};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyType};

use crate::errors::to_py;
use crate::filter::{self, PyFilter};
use crate::message::{self, PyDeadLetter, PyMessage};
use crate::payload::{self, opt_seconds, seconds};

/// An engine handle that the store can take away when it closes.
pub type Cell<T> = RwLock<Option<T>>;

/// A running pool's cell: `None` once it was shut down, by itself or by the store.
pub type PoolCell = RwLock<Option<RunningPool>>;

/// What a Python store and everything made from it share.
pub struct Shared {
    store: Cell<Store>,
    queues: Mutex<Vec<Weak<Cell<Queue>>>>,
    dlqs: Mutex<Vec<Weak<Cell<Dlq>>>>,
    pools: Mutex<Vec<Weak<PoolCell>>>,
}

/// Remembers `cell` in `cells` (dropping the entries whose objects are gone), so that
/// closing the store reaches it.
fn remember<T>(cells: &Mutex<Vec<Weak<T>>>, cell: &Arc<T>) {
    let mut cells = cells.lock();
    cells.retain(|w| w.strong_count() > 0);
    cells.push(Arc::downgrade(cell));
}

impl Shared {
    /// Remembers a pool's cell, so that closing the store stops the pool first.
    pub fn register_pool(&self, cell: &Arc<PoolCell>) {
        remember(&self.pools, cell);
    }

    fn queue_cell(&self, queue: Queue) -> Arc<Cell<Queue>> {
        let cell = Arc::new(RwLock::new(Some(queue)));
        remember(&self.queues, &cell);
        cell
    }

    fn dlq_cell(&self, dlq: Dlq) -> Arc<Cell<Dlq>> {
        let cell = Arc::new(RwLock::new(Some(dlq)));
        remember(&self.dlqs, &cell);
        cell
    }

    /// Stops the pools, empties every cell and closes the engine's store (once).
    fn close(&self) -> deadletter::Result<()> {
        let pools: Vec<_> = self.pools.lock().drain(..).collect();
        for pool in pools.iter().filter_map(Weak::upgrade) {
            drop(pool.write().take()); // stops and joins its threads
        }
        for q in self.queues.lock().drain(..).filter_map(|w| w.upgrade()) {
            q.write().take();
        }
        for d in self.dlqs.lock().drain(..).filter_map(|w| w.upgrade()) {
            d.write().take();
        }
        match self.store.write().take() {
            Some(store) => store.close(),
            None => Ok(()),
        }
    }
}

/// `f(builder, value)` when a value was given, the builder as it is otherwise.
fn set<B, T>(builder: B, value: Option<T>, f: impl FnOnce(B, T) -> B) -> B {
    match value {
        Some(v) => f(builder, v),
        None => builder,
    }
}

/// Runs `f` on the engine handle in `cell` with the GIL released; a closed cell is
/// `Error::Closed`, and an engine error its Python exception.
pub fn with<T: Send + Sync, R: Send>(
    py: Python<'_>,
    cell: &Cell<T>,
    f: impl FnOnce(&T) -> deadletter::Result<R> + Send,
) -> PyResult<R> {
    py.detach(|| {
        let guard = cell.read();
        let handle = guard.as_ref().ok_or(Error::Closed)?;
        f(handle)
    })
    .map_err(|e| to_py(py, e))
}

/// A store: one directory holding any number of queues and their DLQs. By default every
/// write is on disk (fsync) before the call returns. Use it as a context manager, or call
/// `close()`: the directory stays locked until then.
#[pyclass(name = "Store", module = "deadletter", frozen)]
pub struct PyStore {
    shared: Arc<Shared>,
    path: String,
}

#[pymethods]
impl PyStore {
    /// Opens (or creates) the store in directory `path`.
    ///
    /// durable: fsync before every call returns (the default; concurrent calls share one
    /// fsync). durable=False never fsyncs (a crash may lose recent writes, a process exit
    /// loses nothing). sync_interval: fsync in the background every this many seconds
    /// instead. read_only: a snapshot that takes no lock and writes nothing. The other
    /// arguments are the engine's `Config` (sizes in bytes, durations in seconds) and the
    /// defaults of new queues (max_attempts, visibility_timeout).
    #[new]
    #[pyo3(signature = (path, *, durable=true, sync_interval=None, read_only=false,
        max_message_size=None, segment_size=None, dlq_name_pattern=None, environment=None,
        code_version=None, include_stack_traces=None, max_attempts=None,
        visibility_timeout=None, control_socket=false))]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        durable: bool,
        sync_interval: Option<f64>,
        read_only: bool,
        max_message_size: Option<usize>,
        segment_size: Option<u64>,
        dlq_name_pattern: Option<String>,
        environment: Option<String>,
        code_version: Option<String>,
        include_stack_traces: Option<bool>,
        max_attempts: Option<u32>,
        visibility_timeout: Option<f64>,
        control_socket: bool,
    ) -> PyResult<Self> {
        let mut config = if read_only {
            Config::for_existing_store(&path)
        } else if durable {
            Config::default()
        } else {
            Config::fast()
        };
        if let Some(every) = opt_seconds("sync_interval", sync_interval)? {
            config = config.durability(Durability::Interval(every));
        }
        config = set(config, max_message_size, Config::max_message_size);
        config = set(config, segment_size, Config::segment_size);
        config = set(config, dlq_name_pattern, |c, p| c.dlq_name_pattern(p));
        config = set(config, environment, |c, e| c.environment(e));
        config = set(config, code_version, |c, v| c.code_version(v));
        config = set(config, include_stack_traces, Config::include_stack_traces);
        let visibility = opt_seconds("visibility_timeout", visibility_timeout)?;
        let defaults = config.queue_defaults.clone();
        let defaults = set(defaults, max_attempts, QueueOptions::max_attempts);
        let defaults = set(defaults, visibility, QueueOptions::visibility_timeout);
        config = config
            .queue_defaults(defaults)
            .control_socket(control_socket);
        let dir = path.clone();
        let store = py
            .detach(move || {
                if read_only {
                    Store::open_read_only(&dir, config)
                } else {
                    Store::open(&dir, config)
                }
            })
            .map_err(|e| to_py(py, e))?;
        Ok(PyStore {
            shared: Arc::new(Shared {
                store: RwLock::new(Some(store)),
                queues: Mutex::new(Vec::new()),
                dlqs: Mutex::new(Vec::new()),
                pools: Mutex::new(Vec::new()),
            }),
            path: path.display().to_string(),
        })
    }

    /// Opens the store in `path` (the same as `Store(path, ...)`).
    #[classmethod]
    #[pyo3(signature = (path, **kwargs))]
    fn open<'py>(
        cls: &Bound<'py, PyType>,
        path: &Bound<'py, PyAny>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        cls.call((path,), kwargs)
    }

    /// The queue `name`, created on first use (its DLQ: `name-dlq` by default). With
    /// create=False, an existing queue only (`UnknownQueue` otherwise). The options apply
    /// to this handle: max_attempts, visibility_timeout and default_ttl (seconds),
    /// max_pending (messages waiting or in flight before enqueues get `QueueFull`).
    #[pyo3(signature = (name, *, create=true, max_attempts=None, visibility_timeout=None,
        default_ttl=None, max_pending=None))]
    fn queue(
        &self,
        py: Python<'_>,
        name: &str,
        create: bool,
        max_attempts: Option<u32>,
        visibility_timeout: Option<f64>,
        default_ttl: Option<f64>,
        max_pending: Option<u64>,
    ) -> PyResult<PyQueue> {
        let visibility = opt_seconds("visibility_timeout", visibility_timeout)?;
        let ttl = opt_seconds("default_ttl", default_ttl)?;
        let custom = max_attempts.is_some()
            || visibility.is_some()
            || ttl.is_some()
            || max_pending.is_some();
        let queue = with(py, &self.shared.store, |store| {
            let queue = if create {
                store.queue(name)?
            } else {
                store.existing_queue(name)?
            };
            if !custom {
                return Ok(queue);
            }
            let options = set(queue.options(), max_attempts, QueueOptions::max_attempts);
            let options = set(options, visibility, QueueOptions::visibility_timeout);
            let options = set(options, ttl, QueueOptions::default_ttl);
            let options = set(options, max_pending, QueueOptions::max_pending);
            store.queue_with(name, options)
        })?;
        Ok(self.wrap_queue(queue))
    }

    /// The DLQ named `name` (such as "orders-dlq").
    fn dlq(&self, py: Python<'_>, name: &str) -> PyResult<PyDlq> {
        let dlq = with(py, &self.shared.store, |store| store.dlq(name))?;
        Ok(PyDlq {
            name: dlq.name(),
            cell: self.shared.dlq_cell(dlq),
        })
    }

    /// The names of the store's queues.
    fn queue_names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        with(py, &self.shared.store, |store| Ok(store.queue_names()))
    }

    /// Writes and fsyncs everything (for a store opened with durable=False).
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        with(py, &self.shared.store, |store| store.sync())
    }

    /// Stops the store's worker pools, syncs, and releases the directory. Every queue, DLQ
    /// and pool of this store raises `StoreClosed` afterwards. Closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let shared = &self.shared;
        py.detach(|| shared.close()).map_err(|e| to_py(py, e))
    }

    /// True once the store was closed.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        py.detach(|| self.shared.store.read().is_none())
    }

    /// The store directory.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("Store({:?})", self.path)
    }
}

impl PyStore {
    fn wrap_queue(&self, queue: Queue) -> PyQueue {
        PyQueue {
            name: queue.name().to_string(),
            dlq_name: queue.dlq().name(),
            shared: Arc::clone(&self.shared),
            cell: self.shared.queue_cell(queue),
        }
    }
}

/// A queue: enqueue, lease, ack, retry, dead-letter. Thread-safe: one queue object may be
/// used from any number of threads.
#[pyclass(name = "Queue", module = "deadletter", frozen)]
pub struct PyQueue {
    name: String,
    dlq_name: String,
    pub(crate) shared: Arc<Shared>,
    pub(crate) cell: Arc<Cell<Queue>>,
}

fn enqueue_options(
    attributes: Option<BTreeMap<String, String>>,
    ttl: Option<f64>,
    delay: Option<f64>,
    idempotency_key: Option<String>,
) -> PyResult<Option<EnqueueOptions>> {
    if attributes.is_none() && ttl.is_none() && delay.is_none() && idempotency_key.is_none() {
        return Ok(None);
    }
    let mut o = EnqueueOptions::new();
    for (k, v) in attributes.unwrap_or_default() {
        o = o.attribute(k, v);
    }
    if let Some(t) = opt_seconds("ttl", ttl)? {
        o = o.ttl(t);
    }
    if let Some(d) = opt_seconds("delay", delay)? {
        o = o.delay(d);
    }
    if let Some(k) = idempotency_key {
        o = o.idempotency_key(k);
    }
    Ok(Some(o))
}

fn messages(py: Python<'_>, msgs: Vec<deadletter::Message>) -> PyResult<Bound<'_, PyList>> {
    PyList::new(py, msgs.into_iter().map(|inner| PyMessage { inner }))
}

#[pymethods]
impl PyQueue {
    /// The queue's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The queue's DLQ.
    #[getter]
    fn dlq(&self, py: Python<'_>) -> PyResult<PyDlq> {
        let dlq = with(py, &self.cell, |q| Ok(q.dlq()))?;
        Ok(PyDlq {
            name: self.dlq_name.clone(),
            cell: self.shared.dlq_cell(dlq),
        })
    }

    /// Enqueues one message and returns its id (once it is durable, on a durable store).
    /// `payload` is bytes or str; other objects need a codec (`codec="json"`, or an object
    /// with encode/decode). attributes: string pairs kept with the message; ttl and delay
    /// in seconds; idempotency_key: a second enqueue with the same key within the store's
    /// window returns the first one's id and writes nothing.
    #[pyo3(signature = (payload, *, codec=None, attributes=None, ttl=None, delay=None,
        idempotency_key=None))]
    fn enqueue(
        &self,
        py: Python<'_>,
        payload: &Bound<'_, PyAny>,
        codec: Option<&Bound<'_, PyAny>>,
        attributes: Option<BTreeMap<String, String>>,
        ttl: Option<f64>,
        delay: Option<f64>,
        idempotency_key: Option<String>,
    ) -> PyResult<u64> {
        let bytes = payload::encode(payload, codec)?;
        let bytes = bytes.as_slice();
        match enqueue_options(attributes, ttl, delay, idempotency_key)? {
            None => with(py, &self.cell, |q| q.enqueue(bytes)),
            Some(o) => with(py, &self.cell, |q| q.enqueue_with(bytes, &o)),
        }
    }

    /// Enqueues a list of messages in one write and one fsync; returns their ids.
    #[pyo3(signature = (payloads, *, codec=None))]
    fn enqueue_batch(
        &self,
        py: Python<'_>,
        payloads: &Bound<'_, PyAny>,
        codec: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<u64>> {
        let encoded = payloads
            .try_iter()?
            .map(|p| payload::encode(&p?, codec))
            .collect::<PyResult<Vec<_>>>()?;
        let slices: Vec<&[u8]> = encoded.iter().map(|p| p.as_slice()).collect();
        with(py, &self.cell, |q| q.enqueue_batch(&slices))
    }

    /// Leases up to `max` visible messages (each delivery counted before it is returned),
    /// for `visibility` seconds (the queue's visibility timeout by default). Returns at once.
    #[pyo3(signature = (max=1, *, visibility=None))]
    fn lease<'py>(
        &self,
        py: Python<'py>,
        max: usize,
        visibility: Option<f64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let msgs = match opt_seconds("visibility", visibility)? {
            None => with(py, &self.cell, |q| q.lease(max))?,
            Some(v) => with(py, &self.cell, |q| q.lease_for(max, v))?,
        };
        messages(py, msgs)
    }

    /// Like `lease`, but waits up to `timeout` seconds for a message to become visible.
    #[pyo3(signature = (max=1, *, timeout=1.0))]
    fn lease_wait<'py>(
        &self,
        py: Python<'py>,
        max: usize,
        timeout: f64,
    ) -> PyResult<Bound<'py, PyList>> {
        let timeout = seconds("timeout", timeout)?;
        let msgs = with(py, &self.cell, |q| q.lease_wait(max, timeout))?;
        messages(py, msgs)
    }

    /// Acknowledges a delivered message: it is done and leaves the queue.
    fn ack(&self, py: Python<'_>, message: &PyMessage) -> PyResult<()> {
        with(py, &self.cell, |q| q.ack(&message.inner))
    }

    /// Acknowledges several delivered messages in one write.
    fn ack_all(&self, py: Python<'_>, messages: Vec<PyRef<'_, PyMessage>>) -> PyResult<()> {
        let msgs: Vec<deadletter::Message> = messages.iter().map(|m| m.inner.clone()).collect();
        with(py, &self.cell, |q| q.ack_all(&msgs))
    }

    /// Reports a transient failure: the message comes back after `delay` seconds, or goes
    /// to the DLQ if this was its last attempt. Returns "retried" or "dead_lettered".
    #[pyo3(signature = (message, error_kind, error_message="", *, delay=0.0))]
    fn retry(
        &self,
        py: Python<'_>,
        message: &PyMessage,
        error_kind: &str,
        error_message: &str,
        delay: f64,
    ) -> PyResult<&'static str> {
        let delay = seconds("delay", delay)?;
        let failure = Failure::transient(error_kind, error_message);
        let outcome = with(py, &self.cell, |q| {
            let at = q.now_ms().saturating_add(delay.as_millis() as u64);
            q.retry(&message.inner, &FailureReport::new(&failure), at)
        })?;
        Ok(match outcome {
            FailureOutcome::Retried { .. } => "retried",
            FailureOutcome::DeadLettered => "dead_lettered",
        })
    }

    /// Moves a delivered message to the DLQ at once (a permanent failure).
    #[pyo3(signature = (message, error_kind, error_message=""))]
    fn dead_letter(
        &self,
        py: Python<'_>,
        message: &PyMessage,
        error_kind: &str,
        error_message: &str,
    ) -> PyResult<()> {
        let failure = Failure::permanent(error_kind, error_message);
        with(py, &self.cell, |q| {
            q.dead_letter(&message.inner, &FailureReport::new(&failure))
        })
    }

    /// Gives a delivered message back without counting a failure; visible after `delay`.
    #[pyo3(signature = (message, *, delay=0.0))]
    fn release(&self, py: Python<'_>, message: &PyMessage, delay: f64) -> PyResult<()> {
        let delay = seconds("delay", delay)?;
        with(py, &self.cell, |q| q.release(&message.inner, delay))
    }

    /// Extends a delivered message's lease by `visibility` seconds from now.
    fn extend(&self, py: Python<'_>, message: &PyMessage, visibility: f64) -> PyResult<()> {
        let visibility = seconds("visibility", visibility)?;
        with(py, &self.cell, |q| q.extend(&message.inner, visibility))
    }

    /// The queue's counts: ready, in_flight, enqueued, acked, retried, dead_lettered, ...
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = with(py, &self.cell, |q| Ok(Queue::stats(q)))?;
        message::queue_stats(py, &s)
    }

    /// Messages waiting or in flight.
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        with(py, &self.cell, |q| Ok(Queue::len(q) as usize))
    }

    fn __repr__(&self) -> String {
        format!("Queue({:?})", self.name)
    }
}

/// A dead letter queue: browse (changes nothing), stats, fingerprints, replay, mark,
/// delete, purge.
#[pyclass(name = "Dlq", module = "deadletter", frozen)]
pub struct PyDlq {
    name: String,
    cell: Arc<Cell<Dlq>>,
}

/// The entries of a listing as Python `DeadLetter`s (each decoded on first use).
fn entries(
    py: Python<'_>,
    list: Vec<deadletter::dlq::LazyDeadLetter>,
) -> PyResult<Bound<'_, PyList>> {
    PyList::new(py, list.into_iter().map(PyDeadLetter::listed))
}

fn replay_options(
    to: Option<String>,
    reset_attempts: bool,
    force: bool,
    limit: Option<usize>,
    dry_run: bool,
    delay: Option<f64>,
) -> PyResult<ReplayOptions> {
    let mut o = match to {
        Some(queue) => ReplayOptions::to_queue(queue),
        None => ReplayOptions::to_origin(),
    };
    if reset_attempts {
        o = o.reset_attempts();
    }
    if force {
        o = o.force();
    }
    if let Some(n) = limit {
        o = o.limit(n);
    }
    if dry_run {
        o = o.dry_run();
    }
    if let Some(d) = opt_seconds("delay", delay)? {
        o = o.delay(d);
    }
    Ok(o)
}

#[pymethods]
impl PyDlq {
    /// The DLQ's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Entries matching `filter`, oldest first, at most `limit`; `after`: continue after
    /// this entry id (the last one of the previous page).
    #[pyo3(signature = (filter=None, *, limit=100, after=None))]
    fn list<'py>(
        &self,
        py: Python<'py>,
        filter: Option<&PyFilter>,
        limit: usize,
        after: Option<u64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let f = filter::of(filter);
        let page = match after {
            Some(id) => Page::after(id, limit),
            None => Page::first(limit),
        };
        let list = with(py, &self.cell, |d| d.list_lazy(&f, page))?;
        entries(py, list)
    }

    /// The ids of the entries matching `filter` (at most `limit`).
    #[pyo3(signature = (filter=None, *, limit=None))]
    fn ids(
        &self,
        py: Python<'_>,
        filter: Option<&PyFilter>,
        limit: Option<usize>,
    ) -> PyResult<Vec<u64>> {
        let f = filter::of(filter);
        with(py, &self.cell, |d| d.ids(&f, limit))
    }

    /// The first `n` entries.
    #[pyo3(signature = (n=10))]
    fn peek<'py>(&self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyList>> {
        let list = with(py, &self.cell, |d| {
            d.list_lazy(&Filter::all(), Page::first(n))
        })?;
        entries(py, list)
    }

    /// The entry `id` (`NotFound` if the DLQ has none).
    fn get(&self, py: Python<'_>, id: u64) -> PyResult<PyDeadLetter> {
        let entry = with(py, &self.cell, |d| d.get(id))?;
        Ok(PyDeadLetter::whole(entry))
    }

    /// Counts (total, pending, reprocessed, replayed, ...), ages, and counts by error kind,
    /// by worker and by fingerprint; kept up to date, so it costs the same at any size.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = with(py, &self.cell, |d| Ok(d.stats()))?;
        message::dlq_stats(py, &s)
    }

    /// The failure groups (error kind and message template): count, first and last seen,
    /// an example id, counts per hour over the last day; largest first.
    fn fingerprints<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let groups = with(py, &self.cell, |d| Ok(d.fingerprints()))?;
        let list = PyList::empty(py);
        for g in &groups {
            list.append(message::fingerprint(py, g)?)?;
        }
        Ok(list)
    }

    /// Sends the entries matching `filter` back to their queue (or to queue `to`), in one
    /// write. reset_attempts: fresh attempts; force: replay reprocessed entries too;
    /// limit: at most this many; dry_run: report only; delay: visible after this many
    /// seconds. Returns {"replayed": [ids], "failed": [(id, reason)], "dry_run": bool}.
    #[pyo3(signature = (filter=None, *, to=None, reset_attempts=false, force=false, limit=None,
        dry_run=false, delay=None))]
    fn replay<'py>(
        &self,
        py: Python<'py>,
        filter: Option<&PyFilter>,
        to: Option<String>,
        reset_attempts: bool,
        force: bool,
        limit: Option<usize>,
        dry_run: bool,
        delay: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let f = filter::of(filter);
        let o = replay_options(to, reset_attempts, force, limit, dry_run, delay)?;
        let report = with(py, &self.cell, |d| d.replay(&f, &o))?;
        message::replay_report(py, &report)
    }

    /// Replays the entries `ids` (the options of `replay`).
    #[pyo3(signature = (ids, *, to=None, reset_attempts=false, force=false, delay=None))]
    fn replay_ids<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<u64>,
        to: Option<String>,
        reset_attempts: bool,
        force: bool,
        delay: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let o = replay_options(to, reset_attempts, force, None, false, delay)?;
        let report = with(py, &self.cell, |d| d.replay_ids(&ids, &o))?;
        message::replay_report(py, &report)
    }

    /// Replays one entry (`NotFound`, `AlreadyReprocessed` when it cannot be).
    #[pyo3(signature = (id, *, to=None, reset_attempts=false, force=false, delay=None))]
    fn replay_one(
        &self,
        py: Python<'_>,
        id: u64,
        to: Option<String>,
        reset_attempts: bool,
        force: bool,
        delay: Option<f64>,
    ) -> PyResult<()> {
        let o = replay_options(to, reset_attempts, force, None, false, delay)?;
        with(py, &self.cell, |d| d.replay_one(id, &o))
    }

    /// Replays one entry with a corrected payload (bytes, str, or an object with `codec`);
    /// the failed bytes stay in its history if it fails again.
    #[pyo3(signature = (id, payload, *, codec=None, to=None, reset_attempts=false, force=false,
        delay=None))]
    fn replay_corrected(
        &self,
        py: Python<'_>,
        id: u64,
        payload: &Bound<'_, PyAny>,
        codec: Option<&Bound<'_, PyAny>>,
        to: Option<String>,
        reset_attempts: bool,
        force: bool,
        delay: Option<f64>,
    ) -> PyResult<()> {
        let bytes = payload::encode(payload, codec)?;
        let bytes = bytes.as_slice();
        let o = replay_options(to, reset_attempts, force, None, false, delay)?;
        with(py, &self.cell, |d| d.replay_corrected(id, bytes, &o))
    }

    /// Marks an entry reprocessed outside the queue, with its outcome.
    fn mark_reprocessed(&self, py: Python<'_>, id: u64, success: bool) -> PyResult<()> {
        with(py, &self.cell, |d| d.mark_reprocessed(id, success))
    }

    /// Deletes one entry.
    fn delete(&self, py: Python<'_>, id: u64) -> PyResult<()> {
        with(py, &self.cell, |d| d.delete(id))
    }

    /// Deletes every entry matching `filter` (required: `Filter()` deletes all); returns
    /// how many.
    fn delete_matching(&self, py: Python<'_>, filter: &PyFilter) -> PyResult<u64> {
        let f = filter.inner.clone();
        with(py, &self.cell, |d| d.delete_matching(&f))
    }

    /// Removes entries dead-lettered more than `older_than` seconds ago (0: all), only
    /// reprocessed ones unless include_pending=True; returns how many.
    #[pyo3(signature = (older_than=0.0, *, include_pending=false))]
    fn purge(&self, py: Python<'_>, older_than: f64, include_pending: bool) -> PyResult<u64> {
        let older: Duration = seconds("older_than", older_than)?;
        with(py, &self.cell, |d| d.purge(older, include_pending))
    }

    /// Entries in the DLQ.
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        with(py, &self.cell, |d| Ok(d.len() as usize))
    }

    fn __repr__(&self) -> String {
        format!("Dlq({:?})", self.name)
    }
}
