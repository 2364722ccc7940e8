//! Which store the files belong to: the store's id is the one most of its segments name
//! (format version 2 on), a tie going to the newest valid checkpoint's id, then to the
//! later segment's; the rule the log's recovery applies at open. A segment or checkpoint
//! naming another id is marked foreign: a problem, never read as this store's.

use std::collections::BTreeMap;

use super::checkpoint::CheckpointReport;
use super::segment::{HeaderStatus, SegmentReport};

/// The store's id (32 hex digits), with every segment and checkpoint naming another one
/// marked foreign. `None` when no file names one (a store of format version 1).
pub(super) fn mark_foreign(
    segments: &mut [SegmentReport],
    checkpoints: &mut [CheckpointReport],
) -> Option<String> {
    // Votes per id: (segments naming it, index of the latest one).
    let mut votes: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (i, s) in segments.iter().enumerate() {
        if let (HeaderStatus::Ok, Some(id)) = (s.header, s.store_id.as_deref()) {
            let v = votes.entry(id).or_default();
            *v = (v.0 + 1, i);
        }
    }
    let newest_checkpoint = checkpoints
        .iter()
        .filter(|c| c.position.is_some())
        .max_by_key(|c| c.position)
        .and_then(|c| c.store_id.clone());
    let id = match votes.values().map(|v| v.0).max() {
        None => newest_checkpoint?,
        Some(most) => {
            let tied = |id: &str| votes.get(id).is_some_and(|v| v.0 == most);
            match newest_checkpoint.filter(|id| tied(id)) {
                Some(id) => id,
                None => votes
                    .iter()
                    .filter(|(_, v)| v.0 == most)
                    .max_by_key(|(_, v)| v.1)
                    .map(|(id, _)| id.to_string())?,
            }
        }
    };
    for s in segments.iter_mut() {
        s.foreign = s.store_id.as_ref().is_some_and(|other| *other != id);
    }
    for c in checkpoints.iter_mut() {
        c.foreign = c.store_id.as_ref().is_some_and(|other| *other != id);
    }
    Some(id)
}
