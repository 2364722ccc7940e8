//! Checkpoint files checked: each slot is read and decoded (checksum, version, position); a
//! newer version, or a development build's, is reported as such, never as damage.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::engine::checkpoint;
use crate::error::Error;

/// What verification found in one checkpoint file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CheckpointReport {
    /// The file's name.
    pub file: String,
    /// The format version it was written in, when it is intact (a newer version than this
    /// build reads, or a development build's, included: then it is not decoded, and
    /// neither `position` nor `error` is set).
    pub version: Option<u16>,
    /// Written by a development build before release 0.1.0 (`version` is that build's
    /// format version), which no release reads.
    #[serde(default)]
    pub pre_release: bool,
    /// The log position it covers, when it is valid.
    pub position: Option<u64>,
    /// The id of the store it names (format version 2 on), as 32 hex digits.
    #[serde(default)]
    pub store_id: Option<String>,
    /// The sequence number of the log's active segment when it was written (format
    /// version 2 on): the log must still hold a segment numbered that or higher.
    #[serde(default)]
    pub seq: Option<u64>,
    /// True when it names another store than the store's segments do: a problem, never
    /// restored by an open.
    #[serde(default)]
    pub foreign: bool,
    /// Why it is not valid, when it is damaged.
    pub error: Option<String>,
}

/// Reads and decodes one checkpoint file; a read error is reported as its error too (the
/// segments are what an open cannot do without).
pub(super) fn check_checkpoint(path: &Path, file: String) -> CheckpointReport {
    let mut report = CheckpointReport {
        file,
        ..CheckpointReport::default()
    };
    match std::fs::read(path)
        .map_err(|e| Error::io("read", path, e))
        .and_then(|bytes| checkpoint::decode(&bytes, path))
    {
        Ok(checkpoint) => {
            report.version = Some(checkpoint.version);
            report.position = Some(checkpoint.position);
            report.store_id = checkpoint.store_id.map(|id| format!("{id:032x}"));
            report.seq = checkpoint.seq;
        }
        Err(Error::UnsupportedFormat {
            found, pre_release, ..
        }) => {
            report.version = Some(found);
            report.pre_release = pre_release;
        }
        Err(e) => report.error = Some(e.to_string()),
    }
    report
}
