//! The store directory's entries sorted by what they are: segments (by base, with their
//! sizes as listed), checkpoint slots, temporary files (a segment or checkpoint being
//! written, the spare next segment) and anything else. The lock file is none of these.

use std::path::{Path, PathBuf};

use crate::engine::checkpoint;
use crate::error::{Error, Result};
use crate::storage::log::LOCK_FILE;
use crate::storage::segment;

/// A store directory's entries, each list sorted.
#[derive(Debug, Default)]
pub(super) struct Listing {
    /// Entries named like segments: base and size as listed, by base.
    pub segments: Vec<(u64, u64)>,
    /// Checkpoint slot files, by name.
    pub checkpoints: Vec<(String, PathBuf)>,
    /// Temporary files.
    pub temp_files: Vec<String>,
    /// Files that are not the log's.
    pub other_files: Vec<String>,
}

/// Lists `dir` and sorts its entries.
pub(super) fn list(dir: &Path) -> Result<Listing> {
    let mut out = Listing::default();
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(base) = segment::parse_segment_name(&name) {
            let len = entry
                .metadata()
                .map_err(|e| Error::io("stat", entry.path(), e))?
                .len();
            out.segments.push((base, len));
        } else if checkpoint::SLOTS.contains(&name.as_str()) {
            out.checkpoints.push((name, entry.path()));
        } else if segment::parse_temp_name(&name).is_some()
            || name == segment::SPARE_NAME
            || name == checkpoint::TEMP
        {
            out.temp_files.push(name);
        } else if name != LOCK_FILE {
            out.other_files.push(name);
        }
    }
    out.segments.sort_unstable();
    out.checkpoints.sort();
    out.temp_files.sort();
    out.other_files.sort();
    Ok(out)
}
