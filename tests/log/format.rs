//! The segment header and the record frame byte by byte (`docs/FORMAT.md`): round trips,
//! the documented layout, a development build's header and a newer version's told apart
//! from damage, every bit flip of a frame caught, zero and short inputs; segment names and
//! the scan of a segment's frames (damage before a proving record, a torn tail).

use deadletter::sim::{
    decode_frame, decode_segment_header, encode_frame, encode_segment_header, parse_segment_name,
    scan, segment_name, FrameError, HeaderError, SegmentHeader,
};
use deadletter::store::FORMAT_VERSION;

fn u64_le(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().unwrap())
}

#[test]
fn header_round_trip_and_rejections() {
    let h = SegmentHeader::new(12345, FORMAT_VERSION, 1 << 20);
    let b = encode_segment_header(&h);
    assert_eq!(decode_segment_header(&b, FORMAT_VERSION), Ok(h));
    assert_eq!(
        decode_segment_header(&b[..10], FORMAT_VERSION),
        Err(HeaderError::Short)
    );
    let mut bad = b.clone();
    bad[0] = b'X';
    assert_eq!(
        decode_segment_header(&bad, FORMAT_VERSION),
        Err(HeaderError::Magic)
    );
    let mut bad = b.clone();
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
    // Version 2: 56 bytes, the store's id and the segment's number before the checksum.
    let id = 0x0123_4567_89AB_CDEF_FEDC_BA98_7654_3210u128;
    let h = SegmentHeader::new(77, 2, 4096).identified(id, 9);
    let b = encode_segment_header(&h);
    assert_eq!(b.len(), 56);
    assert_eq!(&b[0..8], b"DLTRSEGM");
    assert_eq!(u16::from_le_bytes([b[8], b[9]]), 2);
    assert_eq!(u16::from_le_bytes([b[10], b[11]]), 56);
    assert_eq!((u64_le(&b[12..20]), u64_le(&b[20..28])), (4096, 77));
    assert_eq!(u128::from_le_bytes(b[28..44].try_into().unwrap()), id);
    assert_eq!(u64_le(&b[44..52]), 9);
    let crc = crc32fast::hash(&b[..52]);
    assert_eq!(u32::from_le_bytes(b[52..56].try_into().unwrap()), crc);
    assert_eq!(decode_segment_header(&b, 2), Ok(h));
    // Every bit flip is damage, never another header, a newer or a development one.
    for bit in 0..56 * 8 {
        let mut c = b.clone();
        c[bit / 8] ^= 1 << (bit % 8);
        assert!(
            !matches!(
                decode_segment_header(&c, 2),
                Ok(_) | Err(HeaderError::PreRelease(_) | HeaderError::Newer(_))
            ),
            "bit {bit}"
        );
    }
    // Version 1 (release 0.1.0): 32 bytes, no identity, still read as it is.
    let b = encode_segment_header(&SegmentHeader::new(77, 1, 4096).identified(id, 9));
    assert_eq!(b.len(), 32);
    assert_eq!(u16::from_le_bytes([b[10], b[11]]), 32);
    assert_eq!((u64_le(&b[12..20]), u64_le(&b[20..28])), (4096, 77));
    assert_eq!(
        decode_segment_header(&b, 2),
        Ok(SegmentHeader::new(77, 1, 4096))
    );
    // A version-2 header that claims version 1's length (or the reverse) is no header.
    let mut short = encode_segment_header(&h);
    short[10..12].copy_from_slice(&32u16.to_le_bytes());
    let crc = crc32fast::hash(&short[..52]);
    short[52..56].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(decode_segment_header(&short, 2), Err(HeaderError::Invalid));
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
                0x44, 0x4c, 0x54, 0x52, 0x53, 0x45, 0x47, 0x00, 0x01, 0x00, 0x20, 0x00, 0x00, 0x00,
                0x00, 0x00, 0xbe, 0xf4, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                0x7a, 0x9c, 0xc7, 0x71,
            ],
        ),
        (
            6,
            [
                0x44, 0x4c, 0x54, 0x52, 0x53, 0x45, 0x47, 0x00, 0x06, 0x00, 0x20, 0x00, 0x00, 0x20,
                0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0xd2, 0xf4, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                0xbe, 0x14, 0x85, 0xf5,
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
    long[0..8].copy_from_slice(b"DLTRSEGM");
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

/// The frames of `records` (body, synced-through) from data offset 0, then 100 zero bytes.
fn frames(records: &[(&[u8], u64)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (body, synced) in records {
        let pos = out.len() as u64;
        encode_frame(&mut out, pos, body, *synced);
    }
    out.resize(out.len() + 100, 0);
    out
}

#[test]
fn names_round_trip() {
    assert_eq!(parse_segment_name(&segment_name(42)), Some(42));
    assert_eq!(parse_segment_name("42.seg"), None);
    assert_eq!(parse_segment_name("notes.txt"), None);
}

#[test]
fn clean_scan_counts_records() {
    let data = frames(&[(b"a", 0), (b"bb", 0)]);
    let r = scan(&data, 0, 100, false);
    assert_eq!(r.records, 2);
    assert_eq!(r.end, (17 + 18) as u64);
    assert_eq!(r.torn_at, None);
}

#[test]
fn damage_before_a_proving_record_is_reported() {
    let mut data = frames(&[(b"aaaa", 0), (b"bbbb", 20), (b"cccc", 40)]);
    data[20] ^= 0xff; // inside the second record
    let r = scan(&data, 0, 100, false);
    assert_eq!(r.damaged, vec![(20, 40)]);
    assert_eq!(r.records, 2);
}

#[test]
fn damage_before_unproven_records_is_a_torn_tail() {
    let mut data = frames(&[(b"aaaa", 0), (b"bbbb", 0), (b"cccc", 0)]);
    data[20] ^= 0xff;
    let r = scan(&data, 0, 100, false);
    assert_eq!(r.torn_at, Some(20));
    assert_eq!(
        r.torn_records, 1,
        "the third record goes with the torn second"
    );
    assert_eq!(r.torn_bytes, 40);
    assert_eq!(r.records, 1);
    assert!(r.damaged.is_empty());
}
