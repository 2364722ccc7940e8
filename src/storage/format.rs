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
/// 0.1.0, frozen since; what changes after a release goes into the next release's version
/// (see "The format rule" in `docs/FORMAT.md`). Versions 1 to this one are read, and a
/// newer one is refused with [`crate::Error::UnsupportedFormat`].
pub const FORMAT_VERSION: u16 = 1;

/// Magic number at the start of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"DLTRSEGM";
/// The magic number the development builds before release 0.1.0 wrote instead (their
/// headers also say versions 1 to 6, in another format): such a segment is recognised,
/// never read, and never taken for damage (see [`decode_segment_header`]).
pub const PRE_RELEASE_SEGMENT_MAGIC: [u8; 8] = *b"DLTRSEG\0";
/// Length of the segment header in bytes; the first record starts here.
pub const SEGMENT_HEADER_LEN: usize = 32;
/// Length of a record frame header; the body starts this many bytes after the frame.
pub const FRAME_HEADER_LEN: usize = 16;
/// The largest body a frame can describe (the length field is a u32).
pub const MAX_FRAME_BODY: usize = u32::MAX as usize;
/// The longest header a later version may declare and still be recognised as intact (see
/// [`decode_segment_header`]).
const MAX_FUTURE_HEADER_LEN: usize = 4096;

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
}

impl SegmentHeader {
    /// The header of a new segment of `size` bytes at `base`, in format `version`.
    pub fn new(base: u64, version: u16, size: u64) -> SegmentHeader {
        SegmentHeader {
            base,
            version,
            size,
        }
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

/// Encodes a segment header.
pub fn encode_segment_header(header: &SegmentHeader) -> [u8; SEGMENT_HEADER_LEN] {
    let mut b = [0u8; SEGMENT_HEADER_LEN];
    b[0..8].copy_from_slice(&SEGMENT_MAGIC);
    b[8..10].copy_from_slice(&header.version.to_le_bytes());
    b[10..12].copy_from_slice(&(SEGMENT_HEADER_LEN as u16).to_le_bytes());
    b[12..20].copy_from_slice(&header.size.to_le_bytes());
    b[20..28].copy_from_slice(&header.base.to_le_bytes());
    let crc = crc32fast::hash(&b[0..28]);
    b[28..32].copy_from_slice(&crc.to_le_bytes());
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
/// [`HeaderError::PreRelease`] when intact, damage otherwise.
pub fn decode_segment_header(bytes: &[u8], max_version: u16) -> Result<SegmentHeader, HeaderError> {
    if bytes.len() < 12 {
        return Err(HeaderError::Short);
    }
    let pre_release = bytes[0..8] == PRE_RELEASE_SEGMENT_MAGIC;
    if bytes[0..8] != SEGMENT_MAGIC && !pre_release {
        return Err(HeaderError::Magic);
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    let header_len = u16::from_le_bytes([bytes[10], bytes[11]]) as usize;
    if version > max_version && !pre_release {
        if !(16..=MAX_FUTURE_HEADER_LEN).contains(&header_len) {
            return Err(HeaderError::Checksum);
        }
        let head = bytes.get(..header_len).ok_or(HeaderError::Short)?;
        let stored = u32_at(head, header_len - 4);
        if crc32fast::hash(&head[..header_len - 4]) != stored {
            return Err(HeaderError::Checksum);
        }
        return Err(HeaderError::Newer(version));
    }
    if bytes.len() < SEGMENT_HEADER_LEN {
        return Err(HeaderError::Short);
    }
    let stored = u32_at(bytes, 28);
    if crc32fast::hash(&bytes[0..28]) != stored {
        return Err(HeaderError::Checksum);
    }
    if pre_release {
        return Err(HeaderError::PreRelease(version));
    }
    let size = u64_at(bytes, 12);
    if version == 0 || header_len != SEGMENT_HEADER_LEN || size < SEGMENT_HEADER_LEN as u64 {
        return Err(HeaderError::Invalid);
    }
    Ok(SegmentHeader {
        base: u64_at(bytes, 20),
        version,
        size,
    })
}

/// The little-endian u32 at `at` (the caller checked the length).
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The little-endian u64 at `at` (the caller checked the length).
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_rejections() {
        let h = SegmentHeader::new(12345, FORMAT_VERSION, 1 << 20);
        let b = encode_segment_header(&h);
        assert_eq!(decode_segment_header(&b, FORMAT_VERSION), Ok(h));
        assert_eq!(
            decode_segment_header(&b[..10], FORMAT_VERSION),
            Err(HeaderError::Short)
        );
        let mut bad = b;
        bad[0] = b'X';
        assert_eq!(
            decode_segment_header(&bad, FORMAT_VERSION),
            Err(HeaderError::Magic)
        );
        let mut bad = b;
        bad[17] ^= 1;
        assert_eq!(
            decode_segment_header(&bad, FORMAT_VERSION),
            Err(HeaderError::Checksum)
        );
        let zero = encode_segment_header(&SegmentHeader::new(0, 0, 4096));
        assert_eq!(
            decode_segment_header(&zero, FORMAT_VERSION),
            Err(HeaderError::Invalid)
        );
    }

    #[test]
    fn the_layout_is_the_documented_one() {
        let b = encode_segment_header(&SegmentHeader::new(77, FORMAT_VERSION, 4096));
        assert_eq!(&b[0..8], b"DLTRSEGM");
        assert_eq!((u64_at(&b, 12), u64_at(&b, 20)), (4096, 77));
        // A header declaring less than a header is one no version writes.
        let b = encode_segment_header(&SegmentHeader::new(77, FORMAT_VERSION, 8));
        assert_eq!(
            decode_segment_header(&b, FORMAT_VERSION),
            Err(HeaderError::Invalid)
        );
    }

    /// A development build's header (before release 0.1.0: another magic, versions 1 to 6,
    /// two layouts) is recognised when intact, whatever version it names, and is damage
    /// otherwise. These are the first bytes of segments such builds wrote: format 1 (flags,
    /// base, reserved) and format 6 (size, base).
    #[test]
    fn a_pre_release_header_is_told_from_ours_and_from_damage() {
        let development: [(u16, [u8; 32]); 2] = [
            (
                1,
                [
                    0x44, 0x4c, 0x54, 0x52, 0x53, 0x45, 0x47, 0x00, 0x01, 0x00, 0x20, 0x00, 0x00,
                    0x00, 0x00, 0x00, 0xbe, 0xf4, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                    0x00, 0x00, 0x7a, 0x9c, 0xc7, 0x71,
                ],
            ),
            (
                6,
                [
                    0x44, 0x4c, 0x54, 0x52, 0x53, 0x45, 0x47, 0x00, 0x06, 0x00, 0x20, 0x00, 0x00,
                    0x20, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0xd2, 0xf4, 0x00, 0x00, 0x00, 0x00,
                    0x00, 0x00, 0xbe, 0x14, 0x85, 0xf5,
                ],
            ),
        ];
        for (version, header) in development {
            assert_eq!(
                decode_segment_header(&header, FORMAT_VERSION),
                Err(HeaderError::PreRelease(version))
            );
            for bit in 0..32 * 8 {
                let mut b = header;
                b[bit / 8] ^= 1 << (bit % 8);
                assert!(
                    !matches!(
                        decode_segment_header(&b, FORMAT_VERSION),
                        Ok(_) | Err(HeaderError::PreRelease(_) | HeaderError::Newer(_))
                    ),
                    "bit {bit} of version {version}"
                );
            }
        }
    }

    #[test]
    fn a_newer_header_is_told_from_a_damaged_one() {
        let newer = encode_segment_header(&SegmentHeader::new(64, FORMAT_VERSION + 1, 4096));
        assert_eq!(
            decode_segment_header(&newer, FORMAT_VERSION),
            Err(HeaderError::Newer(FORMAT_VERSION + 1))
        );
        // Read by a reader of that version, it is a header like any other.
        assert_eq!(
            decode_segment_header(&newer, FORMAT_VERSION + 1).map(|h| h.base),
            Ok(64)
        );
        // A bit flip that turns a header's version into a higher one is damage.
        let mut flipped = encode_segment_header(&SegmentHeader::new(64, FORMAT_VERSION, 4096));
        flipped[9] ^= 0x40;
        assert_eq!(
            decode_segment_header(&flipped, FORMAT_VERSION),
            Err(HeaderError::Checksum)
        );
        // A later version with a longer header: its CRC closes its own length.
        let mut long = vec![0u8; 48];
        long[0..8].copy_from_slice(&SEGMENT_MAGIC);
        long[8..10].copy_from_slice(&(FORMAT_VERSION + 2).to_le_bytes());
        long[10..12].copy_from_slice(&48u16.to_le_bytes());
        let crc = crc32fast::hash(&long[..44]);
        long[44..48].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            decode_segment_header(&long, FORMAT_VERSION),
            Err(HeaderError::Newer(FORMAT_VERSION + 2))
        );
        assert_eq!(
            decode_segment_header(&long[..40], FORMAT_VERSION),
            Err(HeaderError::Short)
        );
    }

    #[test]
    fn frame_round_trip_and_every_bit_flip_is_caught() {
        let mut out = Vec::new();
        encode_frame(&mut out, 500, b"hello world", 77);
        let f = decode_frame(&out, 500, 1 << 20).expect("valid frame");
        assert_eq!(f.body, b"hello world");
        assert_eq!(f.synced_through, 77);
        assert_eq!(f.len(), out.len());
        for bit in 0..out.len() * 8 {
            let mut c = out.clone();
            c[bit / 8] ^= 1 << (bit % 8);
            assert!(
                decode_frame(&c, 500, 1 << 20).is_err(),
                "bit {bit} not caught"
            );
        }
        // The same bytes at another position are not a record.
        assert_eq!(decode_frame(&out, 501, 1 << 20), Err(FrameError::Checksum));
    }

    #[test]
    fn zero_and_short_inputs() {
        assert_eq!(decode_frame(&[0u8; 40], 0, 100), Err(FrameError::Zero));
        assert_eq!(decode_frame(&[0u8; 3], 0, 100), Err(FrameError::Zero));
        assert_eq!(decode_frame(&[1u8; 3], 0, 100), Err(FrameError::Short));
        let mut out = Vec::new();
        encode_frame(&mut out, 0, &[9u8; 50], 0);
        assert_eq!(decode_frame(&out[..30], 0, 100), Err(FrameError::Short));
        assert_eq!(decode_frame(&out, 0, 10), Err(FrameError::BadLength));
    }
}
