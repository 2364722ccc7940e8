//! The on-disk byte layout: the segment header and the record frame.
//!
//! This module owns encoding and decoding only; it does no I/O. `docs/FORMAT.md` documents the
//! same layout byte by byte. Invariants:
//! - every integer is little-endian;
//! - a record's checksum covers its length and its header fields as well as its body, so a
//!   damaged length is caught, and also the record's own log position (not stored), so a
//!   frame is valid only at the position it was written for: frame bytes carried inside a
//!   payload, or left over from another place, never decode as a record where they lie;
//! - a record body is never empty, so an all-zero frame header (a preallocated, never-written
//!   region) never decodes as a record;
//! - [`decode_frame`] never returns a body whose checksum failed;
//! - a segment header of a newer format version, or of a development build before release
//!   0.1.0, is recognised as such, never mistaken for damage, and a damaged one never for
//!   either (see [`decode_segment_header`]).

/// The store's on-disk format version: the version this build writes, and the newest it
/// reads. Every segment header and every checkpoint carries the version it was written in.
/// It covers everything a store holds: the segment header and record frame (here), the
/// record bodies and checkpoints (`engine::wire`). Version 1 is the format of release
/// 0.1.0, frozen since; version 2 is the next release's: its segment headers and
/// checkpoints carry the store's identity (see "The format rule" in `docs/FORMAT.md`).
/// Versions 1 to this one are read, and a newer one is refused with
/// [`crate::Error::UnsupportedFormat`].
pub const FORMAT_VERSION: u16 = 2;

/// Magic number at the start of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"DLTRSEGM";
/// The magic number the development builds before release 0.1.0 wrote instead (their
/// headers also say versions 1 to 6, in another format): such a segment is recognised,
/// never read, and never taken for damage (see [`decode_segment_header`]).
pub const PRE_RELEASE_SEGMENT_MAGIC: [u8; 8] = *b"DLTRSEG\0";
/// Length of a version-1 segment header (release 0.1.0), and of a development build's.
pub const V1_HEADER_LEN: usize = 32;
/// Length of a version-2 segment header: version 1's fields, the store's id and the
/// segment's sequence number in the store, then the checksum.
pub const V2_HEADER_LEN: usize = 56;
/// The longest segment header of a version this build reads.
pub const MAX_HEADER_LEN: usize = V2_HEADER_LEN;
/// Length of a record frame header; the body starts this many bytes after the frame.
pub const FRAME_HEADER_LEN: usize = 16;
/// The largest body a frame can describe (the length field is a u32).
pub const MAX_FRAME_BODY: usize = u32::MAX as usize;
/// The longest header a later version may declare and still be recognised as intact (see
/// [`decode_segment_header`]).
const MAX_FUTURE_HEADER_LEN: usize = 4096;

/// The length of the header of a segment of format `version`: where its first record
/// starts. Version 1 (and 0, which is no version) has 32 bytes, version 2 on 56 (a build
/// that plays a later version in the log's tests writes version 2's layout).
pub const fn header_len(version: u16) -> usize {
    if version >= 2 {
        V2_HEADER_LEN
    } else {
        V1_HEADER_LEN
    }
}

/// A decoded segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Log position of the first record in the segment.
    pub base: u64,
    /// The format version its records are written in.
    pub version: u16,
    /// The file's size when it was created, header included. A segment file is never
    /// shorter than this for as long as it exists: one that is was cut.
    pub size: u64,
    /// The id of the store that wrote it (random, chosen when the store was created);
    /// 0 in a version-1 header, which has none.
    pub store_id: u128,
    /// Its sequence number in the store: 0 for the store's first segment of version 2 or
    /// later, one more for each next segment. 0 in a version-1 header, which has none.
    pub seq: u64,
}

impl SegmentHeader {
    /// The header of a new segment of `size` bytes at `base`, in format `version`, with no
    /// identity (store id 0, sequence 0: see [`SegmentHeader::identified`]).
    pub fn new(base: u64, version: u16, size: u64) -> SegmentHeader {
        SegmentHeader {
            base,
            version,
            size,
            store_id: 0,
            seq: 0,
        }
    }

    /// The same header, for the store `store_id`, as its segment number `seq` (written
    /// from version 2 on).
    pub fn identified(self, store_id: u128, seq: u64) -> SegmentHeader {
        SegmentHeader {
            store_id,
            seq,
            ..self
        }
    }

    /// The length of this header on disk: where the segment's records start.
    pub fn len(&self) -> usize {
        header_len(self.version)
    }

    /// Always false: a header has fields. (Present for clippy's `len_without_is_empty`.)
    #[cfg(feature = "sim")]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// True when the header carries the store's identity (version 2 on).
    pub fn has_identity(&self) -> bool {
        self.version >= 2
    }
}

/// Why a segment header did not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderError {
    /// Fewer bytes than a header.
    Short,
    /// The magic number is not ours: a foreign file.
    Magic,
    /// The header checksum fails.
    Checksum,
    /// An intact header of a version newer than the reader's: the data is fine, the reader
    /// is too old.
    Newer(u16),
    /// An intact header of a development build before release 0.1.0 (the pre-release
    /// magic), naming that build's format version: no release reads it.
    PreRelease(u16),
    /// A checksummed header no version writes: version 0, a header length its version
    /// does not have, or a size smaller than a header.
    Invalid,
}

/// Encodes a segment header in the layout of its version: 32 bytes for version 1, 56 from
/// version 2 on (with the store's id and the segment's sequence number).
pub fn encode_segment_header(header: &SegmentHeader) -> Vec<u8> {
    let len = header.len();
    let mut b = vec![0u8; len];
    b[0..8].copy_from_slice(&SEGMENT_MAGIC);
    b[8..10].copy_from_slice(&header.version.to_le_bytes());
    b[10..12].copy_from_slice(&(len as u16).to_le_bytes());
    b[12..20].copy_from_slice(&header.size.to_le_bytes());
    b[20..28].copy_from_slice(&header.base.to_le_bytes());
    if header.has_identity() {
        b[28..44].copy_from_slice(&header.store_id.to_le_bytes());
        b[44..52].copy_from_slice(&header.seq.to_le_bytes());
    }
    let crc = crc32fast::hash(&b[..len - 4]);
    b[len - 4..].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Decodes a segment header from the start of `bytes`, for a reader of versions 1 to
/// `max_version`.
///
/// Every version keeps the first 12 bytes (magic, version, header length) and ends its
/// header with the CRC-32 of the header's other bytes; that is how a header of a newer
/// version is told apart from a damaged one without knowing its layout: intact, it is
/// [`HeaderError::Newer`]; damaged, [`HeaderError::Checksum`]. A development build's
/// header (the pre-release magic; 32 bytes, the CRC-32 of the first 28 at 28) is
/// [`HeaderError::PreRelease`] when intact, damage otherwise. A version this build reads
/// is decoded in its own layout ([`header_len`]): its header length field must say so.
pub fn decode_segment_header(bytes: &[u8], max_version: u16) -> Result<SegmentHeader, HeaderError> {
    if bytes.len() < 12 {
        return Err(HeaderError::Short);
    }
    let pre_release = bytes[0..8] == PRE_RELEASE_SEGMENT_MAGIC;
    if bytes[0..8] != SEGMENT_MAGIC && !pre_release {
        return Err(HeaderError::Magic);
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    let declared_len = u16::from_le_bytes([bytes[10], bytes[11]]) as usize;
    if version > max_version && !pre_release {
        if !(16..=MAX_FUTURE_HEADER_LEN).contains(&declared_len) {
            return Err(HeaderError::Checksum);
        }
        let head = bytes.get(..declared_len).ok_or(HeaderError::Short)?;
        let stored = u32_at(head, declared_len - 4);
        if crc32fast::hash(&head[..declared_len - 4]) != stored {
            return Err(HeaderError::Checksum);
        }
        return Err(HeaderError::Newer(version));
    }
    let len = if pre_release {
        V1_HEADER_LEN
    } else {
        header_len(version)
    };
    if bytes.len() < len {
        return Err(HeaderError::Short);
    }
    let stored = u32_at(bytes, len - 4);
    if crc32fast::hash(&bytes[..len - 4]) != stored {
        return Err(HeaderError::Checksum);
    }
    if pre_release {
        return Err(HeaderError::PreRelease(version));
    }
    let size = u64_at(bytes, 12);
    if version == 0 || declared_len != len || size < len as u64 {
        return Err(HeaderError::Invalid);
    }
    let mut header = SegmentHeader::new(u64_at(bytes, 20), version, size);
    if header.has_identity() {
        let id = u128::from_le_bytes(std::array::from_fn(|i| bytes[28 + i]));
        header = header.identified(id, u64_at(bytes, 44));
    }
    Ok(header)
}

/// The little-endian u32 at `at` (the caller checked the length).
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The little-endian u64 at `at` (the caller checked the length).
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(std::array::from_fn(|i| b[at + i]))
}

/// The largest body a frame in a segment of `size` bytes (its header's `size`) with a
/// header of `header_len` bytes can hold: the segment's data room less one frame header,
/// at most [`MAX_FRAME_BODY`].
///
/// This, and not the limit of the process that opens the store, is what bounds a frame's
/// length at recovery, in `verify` and on reads: the segment's size is recorded in its
/// header when it is created, so a record any writer could put in it is judged by its
/// framing alone (length, checksum over its position), whatever `max_message_size` the
/// reader was configured with.
pub fn max_body_in(size: u64, header_len: usize) -> usize {
    let room = size.saturating_sub((header_len + FRAME_HEADER_LEN) as u64);
    room.min(MAX_FRAME_BODY as u64) as usize
}

/// Total bytes a frame with a body of `body_len` bytes occupies.
pub const fn frame_len(body_len: usize) -> usize {
    FRAME_HEADER_LEN + body_len
}

/// CRC32 of `pos (8) | length (4) | synced_through (8) | body`, the first three little-endian.
fn frame_crc(pos: u64, len_bytes: &[u8], synced_bytes: &[u8], body: &[u8]) -> u32 {
    // One update for the 20 fixed bytes: small updates cost more than their size.
    let mut fixed = [0u8; 20];
    fixed[0..8].copy_from_slice(&pos.to_le_bytes());
    fixed[8..12].copy_from_slice(len_bytes);
    fixed[12..20].copy_from_slice(synced_bytes);
    let mut h = crc32fast::Hasher::new();
    h.update(&fixed);
    h.update(body);
    h.finalize()
}

/// Appends one frame for `body`, to be stored at log position `pos`, to `out`.
/// `synced_through` is the log position up to which the log was known durable when this frame
/// was written (recovery uses it to tell a torn tail from damaged committed data).
///
/// # Panics
/// If `body` is empty or longer than `MAX_FRAME_BODY` (4 GiB); the log checks both before calling.
pub fn encode_frame(out: &mut Vec<u8>, pos: u64, body: &[u8], synced_through: u64) {
    assert!(!body.is_empty() && body.len() <= MAX_FRAME_BODY);
    let len_bytes = (body.len() as u32).to_le_bytes();
    let synced_bytes = synced_through.to_le_bytes();
    let crc = frame_crc(pos, &len_bytes, &synced_bytes, body);
    let mut head = [0u8; FRAME_HEADER_LEN];
    head[0..4].copy_from_slice(&len_bytes);
    head[4..8].copy_from_slice(&crc.to_le_bytes());
    head[8..16].copy_from_slice(&synced_bytes);
    out.reserve(FRAME_HEADER_LEN + body.len());
    out.extend_from_slice(&head);
    out.extend_from_slice(body);
}

/// A frame that decoded and passed its checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The record body.
    pub body: &'a [u8],
    /// The durable position recorded when the frame was written.
    pub synced_through: u64,
}

impl Frame<'_> {
    /// Bytes the whole frame occupies.
    pub fn len(&self) -> usize {
        frame_len(self.body.len())
    }

    /// Always false: a frame has a header. (Present for clippy's `len_without_is_empty`.)
    #[cfg(feature = "sim")]
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Why bytes did not decode as a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// The frame header is all zero: a region never written (end of data, unless damaged).
    Zero,
    /// Not enough bytes for the header or for the body the length announces.
    Short,
    /// The length is zero or above the caller's limit.
    BadLength,
    /// The checksum does not match.
    Checksum,
}

/// Decodes the frame at the start of `bytes`, which lie at log position `pos`. `max_body`
/// bounds the length field; a length above it is rejected before any checksum is computed.
pub fn decode_frame(bytes: &[u8], pos: u64, max_body: usize) -> Result<Frame<'_>, FrameError> {
    if bytes.len() < FRAME_HEADER_LEN {
        if bytes.iter().all(|&b| b == 0) {
            return Err(FrameError::Zero);
        }
        return Err(FrameError::Short);
    }
    let head = &bytes[..FRAME_HEADER_LEN];
    if head.iter().all(|&b| b == 0) {
        return Err(FrameError::Zero);
    }
    let len = u32_at(head, 0) as usize;
    if len == 0 || len > max_body {
        return Err(FrameError::BadLength);
    }
    let end = FRAME_HEADER_LEN
        .checked_add(len)
        .ok_or(FrameError::BadLength)?;
    if bytes.len() < end {
        return Err(FrameError::Short);
    }
    let stored = u32_at(head, 4);
    let body = &bytes[FRAME_HEADER_LEN..end];
    if frame_crc(pos, &head[0..4], &head[8..16], body) != stored {
        return Err(FrameError::Checksum);
    }
    let synced_through = u64_at(head, 8);
    Ok(Frame {
        body,
        synced_through,
    })
}
