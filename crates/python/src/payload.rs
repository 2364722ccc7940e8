//! What crosses the boundary as data: payloads (bytes, str, or any object through an
//! explicit codec), their decoding, and durations given in seconds.
//!
//! Invariants: a payload is bytes as the caller gave them (a `str` is its UTF-8); an
//! object that is neither is refused with `TypeError` unless a codec is named, so nothing
//! is serialised behind the caller's back; a duration that is negative, not a number or
//! absurdly large is a `ValueError`, never a panic.

use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView, PyString};
use pyo3::PyTypeInfo;

use crate::errors::CodecError;

/// The largest duration accepted, in seconds (about 31,700 years).
const MAX_SECONDS: f64 = 1e12;

/// A payload's bytes: borrowed from a `bytes` object, or copied.
pub enum Payload<'py> {
    /// A `bytes` object's own buffer (immutable, kept alive by the reference).
    Bytes(Bound<'py, PyBytes>),
    /// Bytes made by a codec or copied (from a `str`, a `bytearray`).
    Other(Vec<u8>),
}

impl Payload<'_> {
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Payload::Bytes(b) => b.as_bytes(),
            Payload::Other(c) => c,
        }
    }
}

/// The bytes of `value`: `bytes`, `bytearray`, `memoryview` and `str` as they are (a `str`
/// as UTF-8); any other object only through `codec`: `"json"` (compact `json.dumps`,
/// UTF-8) or an object with an `encode(value) -> bytes` method.
pub fn encode<'py>(
    value: &Bound<'py, PyAny>,
    codec: Option<&Bound<'py, PyAny>>,
) -> PyResult<Payload<'py>> {
    if let Some(codec) = codec {
        if let Ok(name) = codec.cast::<PyString>() {
            if name.to_str()? != "json" {
                return Err(PyValueError::new_err(format!(
                    "unknown codec {:?}: use \"json\" or an object with encode() and decode()",
                    name.to_str()?
                )));
            }
            return json_dumps(value);
        }
        let out = codec
            .call_method1("encode", (value,))
            .map_err(|e| CodecError::new_err(format!("the codec's encode() failed: {e}")))?;
        return raw(&out).map_err(|_| {
            CodecError::new_err(format!(
                "the codec's encode() returned {}, not bytes",
                type_name(&out)
            ))
        });
    }
    raw(value).map_err(|_| {
        PyTypeError::new_err(format!(
            "a payload is bytes or str, not {}: pass codec=\"json\" (or a codec object) to \
             enqueue other objects",
            type_name(value)
        ))
    })
}

/// `bytes`, `bytearray`, `memoryview` or `str` as bytes; an error for anything else.
fn raw<'py>(value: &Bound<'py, PyAny>) -> PyResult<Payload<'py>> {
    if let Ok(b) = value.cast::<PyBytes>() {
        return Ok(Payload::Bytes(b.clone()));
    }
    if let Ok(s) = value.cast::<PyString>() {
        // Copied: a str's UTF-8 form is borrowed only as long as this reference.
        return Ok(Payload::Other(s.to_str()?.as_bytes().to_vec()));
    }
    if let Ok(b) = value.cast::<PyByteArray>() {
        return Ok(Payload::Other(b.to_vec()));
    }
    if value.is_instance_of::<PyMemoryView>() {
        let bytes = PyBytes::type_object(value.py()).call1((value,))?;
        return Ok(Payload::Bytes(bytes.cast_into::<PyBytes>()?));
    }
    Err(PyTypeError::new_err("not bytes"))
}

/// The compact JSON encoder, made once: `json.dumps` with any keyword argument builds a
/// new encoder per call, which costs more than the enqueue itself.
static JSON_ENCODE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `json.loads`, looked up once.
static JSON_LOADS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn json_dumps<'py>(value: &Bound<'py, PyAny>) -> PyResult<Payload<'py>> {
    let py = value.py();
    let encode = JSON_ENCODE.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("separators", (",", ":"))?;
        kwargs.set_item("ensure_ascii", false)?;
        let encoder = py
            .import("json")?
            .getattr("JSONEncoder")?
            .call((), Some(&kwargs))?;
        Ok(encoder.getattr("encode")?.unbind())
    })?;
    let text = encode
        .bind(py)
        .call1((value,))
        .map_err(|e| CodecError::new_err(format!("not JSON-serialisable: {e}")))?;
    let text = text.cast_into::<PyString>()?;
    Ok(Payload::Other(text.to_str()?.as_bytes().to_vec()))
}

/// Decodes `payload` with `codec` (`"json"` or an object with `decode(bytes)`).
pub fn decode<'py>(
    py: Python<'py>,
    payload: &[u8],
    codec: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let bytes = PyBytes::new(py, payload);
    if let Ok(name) = codec.cast::<PyString>() {
        if name.to_str()? != "json" {
            return Err(PyValueError::new_err(format!(
                "unknown codec {:?}: use \"json\" or an object with encode() and decode()",
                name.to_str()?
            )));
        }
        let loads = JSON_LOADS.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            Ok(py.import("json")?.getattr("loads")?.unbind())
        })?;
        return loads
            .bind(py)
            .call1((bytes,))
            .map_err(|e| CodecError::new_err(format!("the payload is not JSON: {e}")));
    }
    codec
        .call_method1("decode", (bytes,))
        .map_err(|e| CodecError::new_err(format!("the codec's decode() failed: {e}")))
}

/// A duration given in seconds (`name` says which argument, for the error).
pub fn seconds(name: &str, value: f64) -> PyResult<Duration> {
    if !value.is_finite() || !(0.0..=MAX_SECONDS).contains(&value) {
        return Err(PyValueError::new_err(format!(
            "{name} must be a number of seconds between 0 and {MAX_SECONDS:e}, not {value}"
        )));
    }
    Ok(Duration::from_secs_f64(value))
}

/// An optional duration in seconds.
pub fn opt_seconds(name: &str, value: Option<f64>) -> PyResult<Option<Duration>> {
    value.map(|v| seconds(name, v)).transpose()
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an object".into())
}
