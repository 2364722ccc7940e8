//! The fixture stores (`tests/fixtures/v*/store`, written by every format version) read at
//! the byte level: every record and checkpoint decodes with its version's decoder, and
//! what is in the current version is encoded back to the very same bytes. This is what
//! proves the wire structs are the format rather than a description of it.
//! (`tests/format_compat.rs` opens the same stores as a user would and checks their
//! contents.)

use std::path::{Path, PathBuf};

use super::*;
use crate::storage::format::{self, FrameError, SEGMENT_HEADER_LEN};
use crate::storage::segment;

/// Every fixture store, with the format version its directory is named after.
pub(super) fn fixture_stores() -> Vec<(u16, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&root).expect("tests/fixtures") {
        let entry = entry.expect("a fixture directory");
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(version) = name.strip_prefix('v').and_then(|v| v.parse().ok()) {
            out.push((version, entry.path().join("store")));
        }
    }
    out.sort();
    assert!(!out.is_empty(), "no fixture store under {}", root.display());
    out
}

/// The files of a store whose names `keep` accepts, sorted.
pub(super) fn files(store: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(store)
        .expect("a fixture store")
        .map(|e| e.expect("an entry").path())
        .filter(|p| keep(&p.file_name().unwrap_or_default().to_string_lossy()))
        .collect();
    out.sort();
    out
}

/// The format version and record bodies of one segment file, read with the frame codec.
pub(super) fn segment_records(path: &Path) -> (u16, Vec<Vec<u8>>) {
    let bytes = std::fs::read(path).expect("a segment");
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let base = segment::parse_segment_name(&name).expect("a segment name");
    let header = format::decode_segment_header(&bytes, FORMAT_VERSION).expect("a header");
    assert_eq!(header.base, base);
    let data = &bytes[SEGMENT_HEADER_LEN..];
    let mut bodies = Vec::new();
    let mut d = 0;
    loop {
        match format::decode_frame(&data[d..], base + d as u64, usize::MAX) {
            Ok(frame) => {
                bodies.push(frame.body.to_vec());
                d += frame.len();
            }
            Err(FrameError::Zero) => break,
            Err(e) => panic!("{}: {e:?} at data offset {d}", path.display()),
        }
    }
    (header.version, bodies)
}

#[test]
fn every_fixture_record_decodes_and_current_ones_encode_back_exactly() {
    for (dir_version, store) in fixture_stores() {
        let segments = files(&store, |n| segment::parse_segment_name(n).is_some());
        assert!(
            segments.len() >= 2,
            "{}: a sealed and an active segment",
            store.display()
        );
        let mut records = 0;
        for path in segments {
            let (version, bodies) = segment_records(&path);
            assert!(version <= dir_version, "{}", path.display());
            for body in bodies {
                records += 1;
                let applied = decode_for_apply(version, &body)
                    .unwrap_or_else(|_| panic!("{}: a record does not decode", path.display()));
                if version != FORMAT_VERSION {
                    continue;
                }
                let encoded = match &applied {
                    Decoded::Put(put) => {
                        let mut out = Vec::new();
                        encode_put(&mut out, &put.meta, put.payload).unwrap();
                        assert_eq!(&body[put_payload(version, &body).unwrap()], put.payload);
                        out
                    }
                    Decoded::Op(op) => encode_op(op).unwrap(),
                    Decoded::Relocated(original) => encode_relocated(original).unwrap(),
                };
                assert_eq!(encoded, body, "{}: re-encoded differently", path.display());
            }
        }
        assert!(records > 50, "{}: {records} records", store.display());
    }
}

#[test]
fn every_fixture_checkpoint_decodes_and_current_ones_encode_back() {
    for (_, store) in fixture_stores() {
        let checkpoints = files(&store, |n| n.starts_with("checkpoint-"));
        assert_eq!(checkpoints.len(), 2, "{}", store.display());
        for path in checkpoints {
            let bytes = std::fs::read(&path).unwrap();
            let file = decode_checkpoint(&bytes).expect("a checkpoint");
            if file.version != FORMAT_VERSION {
                continue;
            }
            // The index's hash maps may list their entries in another order than the file
            // (a map is written in the order the writer's map held it): the encoding is
            // compared through a decode, and byte for byte by each version's own test.
            let again = encode_checkpoint(file.position, file.snapshot.clone()).unwrap();
            assert_eq!(again.len(), bytes.len(), "{}", path.display());
            assert_eq!(decode_checkpoint(&again), Ok(file));
        }
    }
}
