//! Version-5 checkpoint body: version 4's body, byte for byte, followed by the audit part
//! ([`super::audit::AuditPart`]): the lineage of every message in the store that was in a
//! DLQ, the tombstones (oldest removal first), the audit trail (oldest first) and the
//! horizon. bincode writes a struct as its fields one after the other, so a struct that
//! holds version 4's body and then the new part is exactly those bytes.

use serde::{Deserialize, Serialize};

use super::audit::AuditPart;
use super::config;
use crate::engine::state as engine;
use crate::engine::wire::checkpoint::CheckpointError;
use crate::engine::wire::v4::snapshot::Snapshot as V4Snapshot;
#[cfg(test)]
use crate::error::{Error, Result};

/// The whole body.
#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
struct Snapshot<'a> {
    v4: V4Snapshot,
    audit: AuditPart<'a>,
}

/// Encodes a snapshot as a version-5 checkpoint body (appended to `out`). Version 6 writes
/// checkpoints now: this is for tests that need a version-5 body.
#[cfg(test)]
pub(in crate::engine::wire) fn encode(
    mut snapshot: engine::Snapshot,
    out: &mut Vec<u8>,
) -> Result<()> {
    let audit = std::mem::take(&mut snapshot.audit);
    let body = Snapshot {
        v4: snapshot.into(),
        audit: (&audit).into(),
    };
    bincode::serde::encode_into_std_write(body, out, config())
        .map_err(|e| Error::Codec(e.to_string()))?;
    Ok(())
}

/// Decodes a version-5 checkpoint body that starts at file offset `at`.
pub(in crate::engine::wire) fn decode(
    body: &[u8],
    at: u64,
) -> std::result::Result<engine::Snapshot, CheckpointError> {
    let (snapshot, used): (Snapshot<'_>, usize) =
        bincode::serde::borrow_decode_from_slice(body, config())
            .map_err(|_| CheckpointError::Damaged(at))?;
    if used != body.len() {
        return Err(CheckpointError::Damaged(at + used as u64));
    }
    if !snapshot.v4.queues_fit() {
        return Err(CheckpointError::Damaged(at));
    }
    let audit = snapshot
        .audit
        .into_engine()
        .ok_or(CheckpointError::Damaged(at))?;
    let mut engine: engine::Snapshot = snapshot.v4.into();
    engine.audit = audit;
    Ok(engine)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::wire::fixture_bytes::{files, fixture_stores};

    /// Every version-5 checkpoint of the fixture stores is exactly its wire structs' bytes.
    #[test]
    fn fixture_checkpoints_are_these_wire_structs() {
        let mut seen = 0;
        for (_, store) in fixture_stores() {
            for path in files(&store, |n| n.starts_with("checkpoint-")) {
                let bytes = std::fs::read(&path).unwrap();
                if bytes[8..10] != [5, 0] {
                    continue;
                }
                let body = &bytes[32..];
                let (snapshot, used): (Snapshot<'_>, usize) =
                    bincode::serde::borrow_decode_from_slice(body, config()).unwrap();
                assert_eq!(used, body.len());
                let again = bincode::serde::encode_to_vec(snapshot, config()).unwrap();
                assert_eq!(again, body, "{}", path.display());
                seen += 1;
            }
        }
        assert!(seen > 0);
    }
}
