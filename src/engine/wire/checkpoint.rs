//! The checkpoint file: a header, then the index snapshot in the version the header names.
//!
//! ```text
//! version 1 (release 0.1.0):
//! 0      8        10       12       16         24          32
//! +------+--------+--------+--------+----------+-----------+------------------+
//! | magic| version| flags  | crc32  | position | body len  | body (bincode)   |
//! +------+--------+--------+--------+----------+-----------+------------------+
//! version 2: the store's id and the active segment's number after the body length
//! 0      8        10       12       16         24          32         48      56
//! +------+--------+--------+--------+----------+-----------+----------+-------+-------+
//! | magic| version| flags  | crc32  | position | body len  | store id | seq   | body  |
//! +------+--------+--------+--------+----------+-----------+----------+-------+-------+
//! ```
//!
//! Little-endian. The CRC-32 covers the whole file with its own four bytes zeroed. Every
//! version keeps the magic, the version and the CRC where they are, and the CRC's rule:
//! that is how a checkpoint of a newer version is told apart from a damaged one without
//! knowing its layout ([`CheckpointError::Newer`] when intact, [`CheckpointError::Damaged`]
//! otherwise). The rest of the header and the body are the version's own. The development
//! builds before release 0.1.0 wrote another magic (with the same CRC's rule): such a
//! checkpoint, intact, is [`CheckpointError::PreRelease`], never damage.

use super::{current, v1, v2, FORMAT_VERSION};
use crate::engine::state::Snapshot;
use crate::error::Result;

const MAGIC: [u8; 8] = *b"DLTRCHKP";
/// The magic of the development builds' checkpoints (their versions 1 to 6).
const PRE_RELEASE_MAGIC: [u8; 8] = *b"DLTRCKPT";
/// Bytes of the version-1 header; its body starts here.
const V1_HEADER_LEN: usize = 32;
/// Bytes of the version-2 header (version 1's, the store's id and the active segment's
/// sequence number); its body starts here.
const V2_HEADER_LEN: usize = 56;
/// Where the CRC is, in every version.
const CRC_AT: usize = 12;

/// A decoded checkpoint file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CheckpointFile {
    /// The format version it was written in.
    pub version: u16,
    /// The log position it covers: it reflects exactly the records before it.
    pub position: u64,
    /// The id of the store that wrote it (version 2 on; `None` in version 1's).
    pub store_id: Option<u128>,
    /// The sequence number of the log's active segment when it was written (version 2 on;
    /// `None` in version 1's).
    pub seq: Option<u64>,
    /// The index.
    pub snapshot: Snapshot,
}

/// Why a checkpoint file's bytes do not give a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CheckpointError {
    /// Damaged (or not a checkpoint): the byte offset where that shows.
    Damaged(u64),
    /// An intact checkpoint of a newer format version than this build reads.
    Newer(u16),
    /// An intact checkpoint of a development build before release 0.1.0, with that
    /// build's format version.
    PreRelease(u16),
}

/// The CRC of a checkpoint file: every byte, with the CRC's own four taken as zero.
fn crc(bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&bytes[..CRC_AT]);
    h.update(&[0; 4]);
    h.update(&bytes[CRC_AT + 4..]);
    h.finalize()
}

/// Writes the CRC of a checkpoint file into it.
fn seal(bytes: &mut [u8]) {
    let c = crc(bytes);
    bytes[CRC_AT..CRC_AT + 4].copy_from_slice(&c.to_le_bytes());
}

/// Encodes a checkpoint of `snapshot` of the store `store_id`, covering the log up to
/// `position` and written while the segment numbered `seq` was the active one, in the
/// current format version.
pub(crate) fn encode_checkpoint(
    position: u64,
    store_id: u128,
    seq: u64,
    snapshot: Snapshot,
) -> Result<Vec<u8>> {
    let mut out = vec![0u8; V2_HEADER_LEN];
    current::snapshot::encode(&snapshot, &mut out)?;
    let body_len = (out.len() - V2_HEADER_LEN) as u64;
    out[0..8].copy_from_slice(&MAGIC);
    out[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    // 10..12: flags, zero.
    out[16..24].copy_from_slice(&position.to_le_bytes());
    out[24..32].copy_from_slice(&body_len.to_le_bytes());
    out[32..48].copy_from_slice(&store_id.to_le_bytes());
    out[48..56].copy_from_slice(&seq.to_le_bytes());
    seal(&mut out);
    Ok(out)
}

/// Decodes a checkpoint file's bytes.
pub(crate) fn decode_checkpoint(
    bytes: &[u8],
) -> std::result::Result<CheckpointFile, CheckpointError> {
    let pre_release = bytes.get(0..8) == Some(&PRE_RELEASE_MAGIC[..]);
    if bytes.len() < CRC_AT + 4 || (bytes[0..8] != MAGIC && !pre_release) {
        return Err(CheckpointError::Damaged(0));
    }
    let stored = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
    if crc(bytes) != stored {
        return Err(CheckpointError::Damaged(CRC_AT as u64));
    }
    match u16::from_le_bytes([bytes[8], bytes[9]]) {
        v if pre_release => Err(CheckpointError::PreRelease(v)),
        1 => decode_layout(bytes, 1, V1_HEADER_LEN),
        2 => decode_layout(bytes, 2, V2_HEADER_LEN),
        v if v > FORMAT_VERSION => Err(CheckpointError::Newer(v)),
        _ => Err(CheckpointError::Damaged(8)),
    }
}

/// Versions 1 and 2: position and body length, in version 2 the store's id and the active
/// segment's number, then the body (each version's own snapshot).
fn decode_layout(
    bytes: &[u8],
    version: u16,
    header_len: usize,
) -> std::result::Result<CheckpointFile, CheckpointError> {
    let u64_at = |at: usize| {
        bytes
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or(CheckpointError::Damaged(at as u64))
    };
    let position = u64_at(16)?;
    let body_len = u64_at(24)?;
    if bytes.len() < header_len || body_len != (bytes.len() - header_len) as u64 {
        return Err(CheckpointError::Damaged(24));
    }
    let store_id =
        (version >= 2).then(|| u128::from_le_bytes(std::array::from_fn(|i| bytes[32 + i])));
    let seq = (version >= 2).then(|| u64_at(48)).transpose()?;
    let body = &bytes[header_len..];
    let snapshot = match version {
        1 => v1::snapshot::decode(body, header_len as u64)?,
        _ => v2::snapshot::decode(body, header_len as u64)?,
    };
    Ok(CheckpointFile {
        version,
        position,
        store_id,
        seq,
        snapshot,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::state::State;

    fn sample() -> Vec<u8> {
        encode_checkpoint(1234, 0xABCD_0123, 7, State::default().snapshot()).unwrap()
    }

    #[test]
    fn round_trip() {
        let bytes = sample();
        assert_eq!(&bytes[0..8], b"DLTRCHKP");
        assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), FORMAT_VERSION);
        let file = decode_checkpoint(&bytes).unwrap();
        assert_eq!((file.version, file.position), (FORMAT_VERSION, 1234));
        assert_eq!((file.store_id, file.seq), (Some(0xABCD_0123), Some(7)));
        assert_eq!(file.snapshot, State::default().snapshot());
    }

    #[test]
    fn every_bit_flip_is_damage_never_a_newer_version() {
        let bytes = sample();
        for bit in 0..bytes.len() * 8 {
            let mut c = bytes.clone();
            c[bit / 8] ^= 1 << (bit % 8);
            assert!(
                matches!(decode_checkpoint(&c), Err(CheckpointError::Damaged(_))),
                "bit {bit}"
            );
        }
        assert_eq!(
            decode_checkpoint(&bytes[..10]),
            Err(CheckpointError::Damaged(0))
        );
        assert!(matches!(
            decode_checkpoint(&bytes[..bytes.len() - 1]),
            Err(CheckpointError::Damaged(_))
        ));
    }

    /// An intact checkpoint naming a newer version is newer, and one with a development
    /// build's magic (versions 1 to 6) pre-release whatever version it names; version 0, or
    /// either of them with a byte changed, is damage.
    #[test]
    fn intact_newer_and_pre_release_checkpoints_are_told_from_damage() {
        use CheckpointError::{Damaged, Newer, PreRelease};
        let newer = FORMAT_VERSION + 1;
        for (magic, version, want) in [
            (MAGIC, newer, Newer(newer)),
            (MAGIC, 0, Damaged(8)),
            (PRE_RELEASE_MAGIC, 1, PreRelease(1)),
            (PRE_RELEASE_MAGIC, 4, PreRelease(4)),
            (PRE_RELEASE_MAGIC, 6, PreRelease(6)),
        ] {
            let mut bytes = sample();
            bytes[0..8].copy_from_slice(&magic);
            bytes[8..10].copy_from_slice(&version.to_le_bytes());
            seal(&mut bytes);
            assert_eq!(decode_checkpoint(&bytes), Err(want));
            bytes[20] ^= 1;
            assert_eq!(decode_checkpoint(&bytes), Err(Damaged(CRC_AT as u64)));
        }
    }
}
