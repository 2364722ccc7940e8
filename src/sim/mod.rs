//! Test machinery, with the `sim` feature only. **Not a stable API**: it changes with the
//! tests that use it, in any release.
//!
//! - [`SimDisk`]: an in-memory [`Vfs`] with a volatile and a durable image of every file
//!   and directory, and [`SimDisk::power_cut`], which keeps, drops, tears or garbles each
//!   unsynced write per 512-byte sector and undoes directory operations that no directory
//!   sync made durable.
//! - [`FaultyFs`]: wraps any `Vfs` and fails chosen operations with ENOSPC, EIO, a short
//!   write or a failed sync; models a full disk.
//! - [`SimRng`]: the seeded generator both use (the crate's one generator, which the
//!   worker pool's retry jitter uses too).
//! - [`inspect::census`]: every message of a store with its payload read back, for checking
//!   a store against a model; [`StoreHooks`]: a store's index as it is, its read counter,
//!   and a crash without a sync.
//! - Failpoints: with this feature, the environment variable `DEADLETTER_FAILPOINT` names a
//!   step of compaction or checkpointing where the process aborts (crash tests use it).
//!   Without it they compile to nothing.
//! - A narrow door to the storage layer, for log-level tests, benches and fuzz targets: the
//!   file-system seam ([`Vfs`], [`RealFs`]), the segmented [`Log`], segment file names,
//!   the frame and header codec and the recovery scan. A store is run on a custom `Vfs`
//!   with [`Config::vfs`](crate::Config::vfs).
//! - For fuzz targets, the record and checkpoint codec checked against itself:
//!   [`check_record_body`], [`check_checkpoint`].
//!
//! `docs/RELIABILITY.md` lists what each test built on them checks.

pub mod disk;
pub mod faulty;
pub mod inspect;

use std::path::Path;

use crate::api::core::store::{queue_name, Store};
use crate::engine::checkpoint::{self, SlotState};
use crate::engine::envelope::MessageId;
use crate::engine::record::Decoded;
use crate::engine::{bad_content, wire};
use crate::error::{Error, Result};

pub use crate::api::core::store::DebugMessage;
pub use crate::engine::state::Place;
pub use crate::rng::SplitMix64 as SimRng;
pub use crate::storage::format::{
    decode_frame, decode_segment_header, encode_frame, encode_segment_header, frame_len,
    header_len, Frame, FrameError, HeaderError, SegmentHeader, FRAME_HEADER_LEN, V1_HEADER_LEN,
    V2_HEADER_LEN,
};
pub use crate::storage::log::{
    CheckpointMark, Log, LogOptions, LogStats, Reader, Record, DEFAULT_SEGMENT_SIZE,
    FIRST_SEGMENT_SIZE, LOCK_FILE,
};
pub use crate::storage::segment::{
    parse_segment_name, parse_temp_name, scan, segment_name, temp_name, ScanResult, SPARE_NAME,
};
pub use crate::storage::vfs::{LockGuard, MappedView, RealFs, Vfs, VfsFile};
pub use disk::{DiskStats, PowerCutOptions, SimDisk};
pub use faulty::{Fault, FaultPlan, FaultyFs, OpKinds, Trigger};

/// Test and debugging hooks on a [`Store`]. None of them writes a record.
pub trait StoreHooks {
    /// Every message the index holds, by id, as the index sees it (no record is read).
    /// Model-based tests compare it with their model.
    fn debug_messages(&self) -> Vec<DebugMessage>;
    /// The payload of message `id` (in a queue or a DLQ), read from the log.
    fn debug_payload(&self, id: MessageId) -> Result<Vec<u8>>;
    /// An estimate of the memory the in-memory index holds, in bytes: hash tables, ready
    /// lists, heaps and ordered sets at their allocated capacity. Payloads are not in it.
    fn index_bytes(&self) -> u64;
    /// The same estimate for compaction's own copy of the index (0 before the first
    /// compaction run builds it).
    fn compaction_index_bytes(&self) -> u64;
    /// How many records the store has read from its log since open (replay excluded):
    /// tests use it to show which calls read nothing.
    fn records_read(&self) -> u64;
    /// Drops the store as a crash would: nothing buffered is written, nothing synced. The
    /// directory lock is released only if this was the last handle.
    fn abandon(self);
}

impl StoreHooks for Store {
    fn debug_messages(&self) -> Vec<DebugMessage> {
        let st = self.engine().lock();
        let mut out: Vec<DebugMessage> = st
            .msgs
            .iter()
            .map(|(id, m)| {
                let extra = st.extras.get(&id);
                DebugMessage {
                    id,
                    queue: queue_name(&st, m.queue()),
                    place: m.place(),
                    attempts: m.attempts,
                    visible_at_ms: m.visible_at,
                    generation: extra.map_or(0, |e| e.generation),
                    suspect: st.suspects.contains(&id),
                }
            })
            .collect();
        out.sort_by_key(|m| m.id);
        out
    }

    fn debug_payload(&self, id: MessageId) -> Result<Vec<u8>> {
        let pos = self
            .engine()
            .lock()
            .msgs
            .get(&id)
            .map(|m| m.payload_pos)
            .ok_or(Error::NotFound(id))?;
        let rec = self.engine().read_record(pos)?;
        let range = wire::put_payload(rec.version(), &rec).map_err(|_| bad_content(pos))?;
        Ok(rec[range].to_vec())
    }

    fn index_bytes(&self) -> u64 {
        self.engine().lock().index_bytes()
    }

    fn compaction_index_bytes(&self) -> u64 {
        self.engine().shadow_index_bytes()
    }

    fn records_read(&self) -> u64 {
        self.engine().records_read()
    }

    fn abandon(self) {
        self.abandon_inner();
    }
}

/// The log position each checkpoint slot of the store in `dir` covers (`None`: missing or
/// damaged), read from the files on the real file system.
pub fn checkpoint_positions(dir: &Path) -> Result<[Option<u64>; 2]> {
    let mut out = [None; 2];
    for (slot, pos) in out.iter_mut().enumerate() {
        if let SlotState::Valid(mark, _) = checkpoint::read(&RealFs, dir, slot)? {
            *pos = Some(mark.position);
        }
    }
    Ok(out)
}

/// Decodes `body` as a record written in format `version`, as the store would: `Ok(false)`
/// when it is not a record. When it is one, re-encodes what it decoded to in the current
/// version and checks that the result decodes to the same record, and that a payload
/// record's payload is where the payload locator says: `Err` says what disagreed.
pub fn check_record_body(version: u16, body: &[u8]) -> std::result::Result<bool, String> {
    let Ok(applied) = wire::decode_for_apply(version, body) else {
        return Ok(false);
    };
    let original = match &applied {
        Decoded::Relocated(inner) => inner.as_ref(),
        other => other,
    };
    if let Decoded::Put(put) = original {
        let range = wire::put_payload(version, body)
            .map_err(|_| "a payload record without a payload".to_string())?;
        if body.get(range) != Some(put.payload) {
            return Err("the payload locator disagrees with the decoder".into());
        }
    }
    let again = match &applied {
        Decoded::Relocated(inner) => wire::encode_relocated(inner),
        Decoded::Put(put) => {
            let mut out = Vec::new();
            wire::encode_put(&mut out, &put.meta, put.payload).map(|()| out)
        }
        Decoded::Op(op) => wire::encode_op(op),
    }
    .map_err(|e| format!("re-encoding failed: {e}"))?;
    match wire::decode_for_apply(wire::FORMAT_VERSION, &again) {
        Ok(decoded) if decoded == applied => Ok(true),
        Ok(_) => Err("re-encoded, it decodes to another record".into()),
        Err(_) => Err("re-encoded, it does not decode".into()),
    }
}

/// Decodes `bytes` as a checkpoint file: `Ok(false)` when it is not a valid one (damaged,
/// or of a newer format version). When it is one, re-encodes it in the current version and
/// checks that the result decodes to the same position and index.
pub fn check_checkpoint(bytes: &[u8]) -> std::result::Result<bool, String> {
    let Ok(file) = wire::decode_checkpoint(bytes) else {
        return Ok(false);
    };
    let id = file.store_id.unwrap_or_default();
    let seq = file.seq.unwrap_or_default();
    let again = wire::encode_checkpoint(file.position, id, seq, file.snapshot.clone())
        .map_err(|e| format!("re-encoding failed: {e}"))?;
    match wire::decode_checkpoint(&again) {
        Ok(back)
            if back.position == file.position
                && back.snapshot == file.snapshot
                && back.store_id.unwrap_or_default() == id
                && back.seq.unwrap_or_default() == seq =>
        {
            Ok(true)
        }
        _ => Err("re-encoded, the checkpoint decodes to another index".into()),
    }
}
