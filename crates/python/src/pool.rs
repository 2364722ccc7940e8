//! `deadletter.WorkerPool`: the engine's worker pool running a Python callable.
//!
//! The pool's threads are the engine's; each takes the GIL only to call the handler with
//! one message (`Python::attach`) and lets go of it before the outcome is written, so
//! leasing, acks, retries and fsyncs run in parallel with Python code. A handler that
//! returns acks its message; one that raises `deadletter.Permanent` (or a subclass) sends
//! it to the DLQ at once; any other exception (and `deadletter.Transient`) is a transient
//! failure, retried with the pool's backoff and dead-lettered after the last attempt. The
//! error kind is the exception's `kind` (Permanent, Transient) or its class name, the
//! message is `str(exception)`, and the traceback is kept as the failure's stack trace
//! when the store keeps stack traces (`Store(..., include_stack_traces=True)`).
//!
//! Invariants: the pool is stopped (its threads joined) with the GIL released, from
//! `shutdown`, the `with` block's end, the store's `close` or the object's deallocation,
//! so a stopping worker that needs the GIL to finish its handler can always get it.

use std::sync::Arc;

use deadletter::pool::{PoolCounters, Retry};
use deadletter::{Failure, Message, WorkerPool};
use parking_lot::{Mutex, RwLock};
use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::errors::{to_py, StoreClosed};
use crate::message::{self, PyMessage};
use crate::payload::seconds;
use crate::store::{PoolCell, PyQueue, Shared};

/// The Python classes a handler raises to say what kind of failure it is.
struct Classes {
    permanent: Py<PyType>,
    transient: Py<PyType>,
    /// The store keeps stack traces (`include_stack_traces`): only then is the traceback
    /// formatted, which costs more than the rest of a failure together.
    traces: bool,
}

/// A running worker pool over one queue, calling `handler(message)` on `workers` threads.
/// Use it as a context manager (leaving the block shuts it down) or call `shutdown()`.
#[pyclass(name = "WorkerPool", module = "deadletter", frozen, subclass, weakref)]
pub struct PyWorkerPool {
    cell: Arc<PoolCell>,
    /// Keeps the store's shared state alive as long as the pool object.
    _shared: Arc<Shared>,
    last: Mutex<Option<PoolCounters>>,
}

fn failure(py: Python<'_>, err: PyErr, classes: &Classes) -> Failure {
    let value = err.value(py);
    let permanent = value
        .is_instance(classes.permanent.bind(py))
        .unwrap_or(false);
    let typed = permanent
        || value
            .is_instance(classes.transient.bind(py))
            .unwrap_or(false);
    let kind = typed
        .then(|| {
            value
                .getattr("kind")
                .and_then(|k| k.extract::<String>())
                .ok()
        })
        .flatten()
        .or_else(|| err.get_type(py).name().ok().map(|n| n.to_string()))
        .unwrap_or_else(|| "Exception".to_string());
    let text = value
        .str()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let f = if permanent {
        Failure::permanent(kind, text)
    } else {
        Failure::transient(kind, text)
    };
    if !classes.traces {
        return f;
    }
    match err.traceback(py).and_then(|tb| tb.format().ok()) {
        Some(trace) => f.with_stack_trace(trace),
        None => f,
    }
}

/// A pool thread's Python thread state, kept from its first handler call to the thread's
/// end. Without it every `Python::attach` on a thread Python did not start creates a
/// thread state and deletes it again on release (with its frame stack: an allocation and
/// page faults per handler call, measured as most of a trivial handler's cost).
struct KeptThreadState {
    gil: ffi::PyGILState_STATE,
    saved: *mut ffi::PyThreadState,
}

impl KeptThreadState {
    fn new() -> Self {
        // SAFETY: called on a pool thread outside any `Python::attach` (the first thing a
        // handler call does, and the pool's threads run nothing else of Python), with the
        // interpreter initialised (this module is loaded in it). PyGILState_Ensure makes
        // the thread's state and takes the GIL; PyEval_SaveThread releases the GIL and
        // keeps the state, so each later PyGILState_Ensure (Python::attach) finds it and
        // only takes the GIL, and each PyGILState_Release only lets go of the GIL.
        unsafe {
            let gil = ffi::PyGILState_Ensure();
            let saved = ffi::PyEval_SaveThread();
            KeptThreadState { gil, saved }
        }
    }
}

impl Drop for KeptThreadState {
    fn drop(&mut self) {
        // SAFETY: runs when the thread ends, outside any `Python::attach` (the pool's
        // threads end between handler calls), on the state `new` saved. The pools are
        // stopped before the interpreter finalises (the package's atexit hook), so the
        // interpreter is running; if it is not, the state is left to the interpreter's
        // own cleanup rather than touched.
        unsafe {
            if ffi::Py_IsInitialized() != 0 {
                ffi::PyEval_RestoreThread(self.saved);
                ffi::PyGILState_Release(self.gil);
            }
        }
    }
}

thread_local! {
    static THREAD_STATE: KeptThreadState = KeptThreadState::new();
}

fn call(handler: &Py<PyAny>, classes: &Classes, msg: &Message) -> Result<(), Failure> {
    THREAD_STATE.with(|_| ());
    Python::attach(|py| {
        let message = match Py::new(py, PyMessage { inner: msg.clone() }) {
            Ok(m) => m,
            Err(e) => return Err(failure(py, e, classes)),
        };
        match handler.bind(py).call1((message,)) {
            Ok(_) => Ok(()),
            Err(e) => Err(failure(py, e, classes)),
        }
    })
}

#[pymethods]
impl PyWorkerPool {
    /// Starts `workers` threads on `queue`, each calling `handler(message)`.
    ///
    /// max_attempts: deliveries before a transient failure is dead-lettered; backoff:
    /// "exponential", "linear" or "fixed", from `delay` seconds up to `max_delay`, with
    /// full jitter unless jitter=False; lease: seconds a delivery is held (extended while
    /// the handler runs); name: the prefix of worker names recorded with failures.
    #[new]
    #[pyo3(signature = (queue, handler, *, workers=1, max_attempts=5, backoff="exponential",
        delay=0.1, max_delay=300.0, jitter=true, lease=30.0, name="worker"))]
    fn new(
        py: Python<'_>,
        queue: &PyQueue,
        handler: Py<PyAny>,
        workers: usize,
        max_attempts: u32,
        backoff: &str,
        delay: f64,
        max_delay: f64,
        jitter: bool,
        lease: f64,
        name: &str,
    ) -> PyResult<Self> {
        if !handler.bind(py).is_callable() {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "handler must be callable: handler(message) -> None",
            ));
        }
        if workers == 0 || workers > 1024 {
            return Err(PyValueError::new_err("workers must be between 1 and 1024"));
        }
        if max_attempts == 0 {
            return Err(PyValueError::new_err("max_attempts must be at least 1"));
        }
        let base = seconds("delay", delay)?;
        let mut retry = match backoff {
            "exponential" => Retry::exponential(base),
            "linear" => Retry::linear(base),
            "fixed" => Retry::fixed(base),
            other => {
                return Err(PyValueError::new_err(format!(
                    "backoff must be \"exponential\", \"linear\" or \"fixed\", not {other:?}"
                )))
            }
        }
        .max_attempts(max_attempts)
        .cap(seconds("max_delay", max_delay)?);
        if !jitter {
            retry = retry.no_jitter();
        }
        let lease = seconds("lease", lease)?;
        let module = py.import("deadletter")?;
        let permanent = module.getattr("Permanent")?.cast_into::<PyType>()?.unbind();
        let transient = module.getattr("Transient")?.cast_into::<PyType>()?.unbind();
        let name = name.to_string();
        let cell = &queue.cell;
        let pool = py
            .detach(move || {
                let guard = cell.read();
                let q = guard.as_ref().ok_or(deadletter::Error::Closed)?;
                let classes = Classes {
                    permanent,
                    transient,
                    traces: q.store().config().include_stack_traces,
                };
                WorkerPool::new(q)
                    .workers(workers)
                    .retry(retry)
                    .lease(lease)
                    .name(name)
                    .start(move |msg: &Message| call(&handler, &classes, msg))
            })
            .map_err(|e| to_py(py, e))?;
        let cell = Arc::new(RwLock::new(Some(pool)));
        queue.shared.register_pool(&cell);
        Ok(PyWorkerPool {
            cell,
            _shared: Arc::clone(&queue.shared),
            last: Mutex::new(None),
        })
    }

    /// Blocks until the queue holds nothing waiting (messages in a backoff included) and
    /// no handler runs. Raises the engine error that stopped the pool, if one did.
    fn run_until_idle(&self, py: Python<'_>) -> PyResult<()> {
        let cell = &self.cell;
        py.detach(|| match cell.read().as_ref() {
            Some(pool) => pool.run_until_idle().map_err(Some),
            None => Err(None),
        })
        .map_err(|e| match e {
            Some(e) => to_py(py, e),
            None => StoreClosed::new_err("the pool was shut down"),
        })
    }

    /// The counters: processed, retried, dead_lettered, in_flight, panics, lost_leases.
    #[getter]
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let cell = &self.cell;
        let now = py.detach(|| cell.read().as_ref().map(|p| p.counters()));
        let c = now.or(*self.last.lock()).unwrap_or_default();
        message::pool_counters(py, &c)
    }

    /// Stops leasing, waits up to `timeout` seconds for running handlers, and returns the
    /// final counters with `drained` (True when every handler finished in time). A second
    /// call returns the same counters.
    #[pyo3(signature = (timeout=5.0))]
    fn shutdown<'py>(&self, py: Python<'py>, timeout: f64) -> PyResult<Bound<'py, PyDict>> {
        let deadline = seconds("timeout", timeout)?;
        let cell = &self.cell;
        let report = py
            .detach(|| cell.write().take().map(|p| p.shutdown(deadline)))
            .transpose()
            .map_err(|e| to_py(py, e))?;
        let (counters, drained) = match report {
            Some(r) => {
                *self.last.lock() = Some(r.counters);
                (r.counters, r.drained)
            }
            None => (self.last.lock().unwrap_or_default(), true),
        };
        let d = message::pool_counters(py, &counters)?;
        d.set_item("drained", drained)?;
        Ok(d)
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.shutdown(py, 30.0)?;
        Ok(false)
    }
}

impl Drop for PyWorkerPool {
    fn drop(&mut self) {
        // A pool dropped while still running stops here; its workers may be waiting for
        // the GIL to finish a handler, so it is joined with the GIL released.
        let cell = &self.cell;
        Python::attach(|py| py.detach(|| drop(cell.write().take())));
    }
}
