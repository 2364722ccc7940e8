//! The head of the log: whether the store needs records below its first segment (the
//! segments that held them are gone, a first segment deleted, say). Segment files alone
//! cannot tell: compaction deletes old segments too. What the store still refers to can:
//! this runs the read-only open a snapshot reader runs (no lock taken, nothing written),
//! which rebuilds the index and refuses one that refers to a position no segment holds
//! ([`CorruptionKind::MissingRange`]).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::api::core::config::Config;
use crate::api::core::store::Store;
use crate::error::{CorruptionKind, CorruptionLocation, Error};

/// Log positions the store needs that no segment holds (see
/// [`VerifyReport::missing_range`](super::VerifyReport::missing_range)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MissingRangeReport {
    /// The lowest position needed.
    pub start: u64,
    /// The first position the log holds.
    pub end: u64,
    /// The segment the missing range comes before (the first one that is there).
    pub file: String,
}

/// The missing range at the head of the store in `dir`, if its open finds one. Any other
/// outcome of the open is left to the checks of the files themselves.
pub(super) fn missing_head(dir: &Path) -> Option<MissingRangeReport> {
    match Store::open_read_only(dir, Config::for_existing_store(dir)) {
        Err(Error::Corruption {
            kind: CorruptionKind::MissingRange { start, end },
            location,
        }) => {
            let file = match location {
                CorruptionLocation::File { path, .. } => path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                _ => String::new(),
            };
            Some(MissingRangeReport { start, end, file })
        }
        _ => None,
    }
}
