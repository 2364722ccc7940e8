//! The Python exceptions of the crate's errors, and the one conversion from
//! [`deadletter::Error`] to a Python exception.
//!
//! Every exception derives from `deadletter.DeadletterError`; each error variant a program
//! may want to catch by itself has its own class (a locked store, a full disk, corruption,
//! an unknown id, ...), the rest are `DeadletterError` with the crate's message. Invariant:
//! every error of the engine reaches Python as one of these classes with the crate's own
//! message (its `Display`), never as a panic.

use deadletter::Error;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    deadletter,
    DeadletterError,
    PyException,
    "Base class of every error the deadletter engine reports."
);
create_exception!(
    deadletter,
    StorageError,
    DeadletterError,
    "An operating-system I/O call on the store's files failed."
);
create_exception!(
    deadletter,
    DiskFull,
    StorageError,
    "The disk is full: the store stays readable, writes resume once there is space."
);
create_exception!(
    deadletter,
    StoreLocked,
    DeadletterError,
    "Another handle, in this process or another one, holds the store directory."
);
create_exception!(
    deadletter,
    ReadOnlyStore,
    DeadletterError,
    "A change was asked of a store opened read-only."
);
create_exception!(
    deadletter,
    CorruptionError,
    DeadletterError,
    "Stored data failed verification; nothing from the damaged range is returned."
);
create_exception!(
    deadletter,
    UnsupportedFormat,
    DeadletterError,
    "The store is in an on-disk format this build does not read; nothing was changed."
);
create_exception!(
    deadletter,
    StorePoisoned,
    StorageError,
    "An fsync failed earlier: the store refuses writes until it is reopened."
);
create_exception!(
    deadletter,
    TooLarge,
    DeadletterError,
    "A message is larger than the store's maximum message size."
);
create_exception!(
    deadletter,
    InvalidQueueName,
    DeadletterError,
    "A queue name that is empty, too long or holds control characters."
);
create_exception!(
    deadletter,
    NameClash,
    DeadletterError,
    "A new queue's name, or its DLQ's, is taken by an existing queue or DLQ."
);
create_exception!(
    deadletter,
    UnknownQueue,
    DeadletterError,
    "The queue does not exist."
);
create_exception!(
    deadletter,
    NotFound,
    DeadletterError,
    "No message or DLQ entry with this id exists where the operation expected it."
);
create_exception!(
    deadletter,
    InvalidState,
    DeadletterError,
    "The message exists but its state does not allow the operation (such as an ack of a lost lease)."
);
create_exception!(
    deadletter,
    AlreadyReprocessed,
    DeadletterError,
    "A DLQ entry already marked reprocessed is replayed again without force=True."
);
create_exception!(
    deadletter,
    QueueFull,
    DeadletterError,
    "The queue holds its limit of pending messages (max_pending); nothing was written."
);
create_exception!(
    deadletter,
    InvalidConfig,
    DeadletterError,
    "A configuration value is out of range."
);
create_exception!(
    deadletter,
    CodecError,
    DeadletterError,
    "Encoding or decoding a payload failed."
);
create_exception!(
    deadletter,
    StoreClosed,
    DeadletterError,
    "The store (or the pool) was closed."
);

/// The Python exception of an engine error: its class, the crate's message, and the
/// variant's fields a handler may want (`id`, `path`, `pid`) as attributes.
pub fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let message = e.to_string();
    let (err, id, path, pid) = match &e {
        Error::Io { path, .. } => (StorageError::new_err(message), None, Some(path), None),
        Error::DiskFull { path } => (DiskFull::new_err(message), None, Some(path), None),
        Error::Locked { path, pid, .. } => (StoreLocked::new_err(message), None, Some(path), *pid),
        Error::ReadOnly { path } => (ReadOnlyStore::new_err(message), None, Some(path), None),
        Error::Corruption { .. } => (CorruptionError::new_err(message), None, None, None),
        Error::UnsupportedFormat { path, .. } => {
            (UnsupportedFormat::new_err(message), None, Some(path), None)
        }
        Error::Poisoned => (StorePoisoned::new_err(message), None, None, None),
        Error::TooLarge { .. } => (TooLarge::new_err(message), None, None, None),
        Error::InvalidQueueName { .. } => (InvalidQueueName::new_err(message), None, None, None),
        Error::NameClash { .. } => (NameClash::new_err(message), None, None, None),
        Error::UnknownQueue(_) => (UnknownQueue::new_err(message), None, None, None),
        Error::NotFound(id) => (NotFound::new_err(message), Some(*id), None, None),
        Error::InvalidState { id, .. } => (InvalidState::new_err(message), Some(*id), None, None),
        Error::AlreadyReprocessed(id) => {
            (AlreadyReprocessed::new_err(message), Some(*id), None, None)
        }
        Error::QueueFull { .. } => (QueueFull::new_err(message), None, None, None),
        Error::InvalidConfig(_) => (InvalidConfig::new_err(message), None, None, None),
        Error::Codec(_) => (CodecError::new_err(message), None, None, None),
        Error::Closed => (StoreClosed::new_err(message), None, None, None),
        _ => (DeadletterError::new_err(message), None, None, None),
    };
    let value = err.value(py);
    // Attributes are a convenience: an exception that refuses them keeps its message.
    if let Some(id) = id {
        let _ = value.setattr("id", id);
    }
    if let Some(path) = path {
        let _ = value.setattr("path", path.display().to_string());
    }
    if let Some(pid) = pid {
        let _ = value.setattr("pid", pid);
    }
    err
}

/// Adds every exception class to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("DeadletterError", py.get_type::<DeadletterError>())?;
    m.add("StorageError", py.get_type::<StorageError>())?;
    m.add("DiskFull", py.get_type::<DiskFull>())?;
    m.add("StoreLocked", py.get_type::<StoreLocked>())?;
    m.add("ReadOnlyStore", py.get_type::<ReadOnlyStore>())?;
    m.add("CorruptionError", py.get_type::<CorruptionError>())?;
    m.add("UnsupportedFormat", py.get_type::<UnsupportedFormat>())?;
    m.add("StorePoisoned", py.get_type::<StorePoisoned>())?;
    m.add("TooLarge", py.get_type::<TooLarge>())?;
    m.add("InvalidQueueName", py.get_type::<InvalidQueueName>())?;
    m.add("NameClash", py.get_type::<NameClash>())?;
    m.add("UnknownQueue", py.get_type::<UnknownQueue>())?;
    m.add("NotFound", py.get_type::<NotFound>())?;
    m.add("InvalidState", py.get_type::<InvalidState>())?;
    m.add("AlreadyReprocessed", py.get_type::<AlreadyReprocessed>())?;
    m.add("QueueFull", py.get_type::<QueueFull>())?;
    m.add("InvalidConfig", py.get_type::<InvalidConfig>())?;
    m.add("CodecError", py.get_type::<CodecError>())?;
    m.add("StoreClosed", py.get_type::<StoreClosed>())?;
    Ok(())
}
