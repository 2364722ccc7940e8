//! deadletter's Python bindings, the extension module `deadletter._deadletter` (its Python
//! side, the package `deadletter`, is in `python/deadletter/`).
//!
//! The modules: `store` (the Store, Queue and Dlq handles), `pool` (the worker pool with a
//! Python handler), `message` (messages, DLQ entries and the dicts of counts), `filter`
//! (DLQ filters), `payload` (bytes, codecs, durations) and `errors` (the exceptions).
//! Invariant: nothing reachable from Python panics on bad input or blocks other Python
//! threads while the engine works: arguments are checked into typed exceptions, and every
//! engine call is made with the GIL released.

// A Python method's keyword arguments are its Rust function's parameters.
#![allow(clippy::too_many_arguments)]

mod errors;
mod filter;
mod message;
mod payload;
mod pool;
mod store;

use pyo3::prelude::*;

/// The native module; `import deadletter` re-exports everything in it.
#[pymodule]
fn _deadletter(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<store::PyStore>()?;
    m.add_class::<store::PyQueue>()?;
    m.add_class::<store::PyDlq>()?;
    m.add_class::<pool::PyWorkerPool>()?;
    m.add_class::<message::PyMessage>()?;
    m.add_class::<message::PyDeadLetter>()?;
    m.add_class::<filter::PyFilter>()?;
    m.add("FORMAT_VERSION", deadletter::store::FORMAT_VERSION)?;
    errors::register(m)?;
    Ok(())
}
