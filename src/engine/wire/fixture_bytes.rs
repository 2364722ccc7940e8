//! The fixture stores (`tests/fixtures/vN/store`, one per released format version, and the
//! next version's while it grows) read at the byte level: every record and checkpoint
//! decodes with its version's decoder and is exactly the bytes of its version's wire
//! structs, and what is in the current version is encoded back to the very same bytes.
//! This is what proves the wire structs are the format rather than a description of it.
//! (`tests/format_compat.rs` opens the same stores as a user would and checks their
//! contents.)

use std::path::{Path, PathBuf};

use super::*;
use crate::engine::record::{GuardEvent, Op, PutCause};
use crate::storage::format::{self, FrameError};
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
    let data = &bytes[header.len()..];
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
                if version == 1 {
                    let wire = v1::tests::reencode_wire(&body);
                    assert_eq!(wire, body, "{}: not version 1's bytes", path.display());
                }
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
            if file.version == 1 {
                let wire = v1::snapshot::tests::reencode_wire(&bytes[32..]);
                assert_eq!(
                    wire,
                    bytes[32..],
                    "{}: not version 1's bytes",
                    path.display()
                );
            }
            if file.version != FORMAT_VERSION {
                continue;
            }
            // The index's hash maps may list their entries in another order than the file
            // (a map is written in the order the writer's map held it): the encoding is
            // compared through a decode, and byte for byte by each version's own test.
            let id = file.store_id.expect("a current checkpoint names its store");
            let seq = file.seq.expect("a current checkpoint names its segment");
            let again = encode_checkpoint(file.position, id, seq, file.snapshot.clone()).unwrap();
            assert_eq!(again.len(), bytes.len(), "{}", path.display());
            assert_eq!(decode_checkpoint(&again), Ok(file));
        }
    }
}

/// What kind of record a decoded body is, by name: the cause of a payload record, the
/// variant of an op, or a relocated copy.
fn kind(rec: &Decoded<'_>) -> &'static str {
    match rec {
        Decoded::Relocated(_) => "Relocated",
        Decoded::Put(put) => match put.meta.cause {
            PutCause::Enqueue => "Put/Enqueue",
            PutCause::CorrectedReplay { .. } => "Put/CorrectedReplay",
            PutCause::Imported(_) => "Put/Imported",
        },
        Decoded::Op(op) => match op {
            Op::DeclareQueue { .. } => "DeclareQueue",
            Op::Lease { .. } => "Lease",
            Op::Extend { .. } => "Extend",
            Op::Ack { .. } => "Ack",
            Op::Retry { .. } => "Retry",
            Op::Release { .. } => "Release",
            Op::DeadLetter { .. } => "DeadLetter",
            Op::Replay { .. } => "Replay",
            Op::Delete { .. } => "Delete",
            Op::MarkReprocessed { .. } => "MarkReprocessed",
            Op::Reserve { .. } => "Reserve",
            Op::Start { .. } => "Start",
            Op::Audit(_) => "Audit",
            Op::Guard { event, .. } => match event {
                GuardEvent::Start(_) => "Guard/Start",
                GuardEvent::Release { .. } => "Guard/Release",
                GuardEvent::Pause => "Guard/Pause",
                GuardEvent::Resume => "Guard/Resume",
                GuardEvent::Cancel => "Guard/Cancel",
            },
        },
    }
}

/// The current version's fixture holds every kind of record the format has, each of them
/// also as a relocated copy or not, and checkpoints with every part of the index filled.
#[test]
fn the_current_fixture_holds_everything_the_format_can() {
    let store = fixture_stores()
        .into_iter()
        .find(|(v, _)| *v == FORMAT_VERSION)
        .map(|(_, store)| store)
        .expect("the current version's fixture");
    let mut kinds = std::collections::BTreeSet::new();
    for path in files(&store, |n| segment::parse_segment_name(n).is_some()) {
        for body in segment_records(&path).1 {
            let rec = decode_for_apply(FORMAT_VERSION, &body).unwrap();
            kinds.insert(kind(&rec));
            if let Decoded::Relocated(original) = &rec {
                kinds.insert(kind(original));
            }
        }
    }
    let every: std::collections::BTreeSet<&str> = [
        "Relocated",
        "Put/Enqueue",
        "Put/CorrectedReplay",
        "Put/Imported",
        "DeclareQueue",
        "Lease",
        "Extend",
        "Ack",
        "Retry",
        "Release",
        "DeadLetter",
        "Replay",
        "Delete",
        "MarkReprocessed",
        "Reserve",
        "Start",
        "Audit",
        "Guard/Start",
        "Guard/Release",
        "Guard/Pause",
        "Guard/Resume",
        "Guard/Cancel",
    ]
    .into();
    let missing: Vec<_> = every.difference(&kinds).collect();
    assert!(missing.is_empty(), "the fixture holds no {missing:?}");

    // The newer checkpoint holds every part of the index.
    let newest = files(&store, |n| n.starts_with("checkpoint-"))
        .iter()
        .map(|path| decode_checkpoint(&std::fs::read(path).unwrap()).unwrap())
        .max_by_key(|c| c.position)
        .unwrap();
    let s = &newest.snapshot;
    use crate::engine::state::{DeadStatus, GuardedReplayState, Place};
    for place in [Place::Ready, Place::Leased, Place::Dead] {
        assert!(s.msgs.iter().any(|(_, m)| m.place() == place), "{place:?}");
    }
    assert!(s.queues.iter().all(|q| !q.name.is_empty()));
    assert!(s.queues.iter().any(|q| q.history.counts().next().is_some()));
    assert!(s.queues.iter().any(|q| !q.dlq.by_kind.is_empty()));
    assert!(s
        .extras
        .iter()
        .any(|(_, e)| e.generation > 0 && e.expires_at.is_none()));
    assert!(s.extras.iter().any(|(_, e)| e.expires_at.is_some()));
    assert!(s.extras.iter().any(|(_, e)| e.from_dlq.is_some()));
    let reprocessed = |ok| {
        s.dead
            .iter()
            .any(|(_, d)| matches!(d.status, DeadStatus::Reprocessed(o, _) if o == ok))
    };
    assert!(reprocessed(true) && !s.dead.is_empty());
    assert!(s.dead.iter().any(|(_, d)| d.worker != 0));
    assert!(!s.idempotency.is_empty() && s.strings.len() > 1);
    assert!(!s.audit.lineage.is_empty() && !s.audit.tombstones.is_empty());
    assert!(!s.audit.trail.is_empty());
    let statuses: Vec<_> = s.guards.values().map(|g| g.status).collect();
    assert!(
        matches!(
            statuses[..],
            [
                GuardedReplayState::Stopped { .. },
                GuardedReplayState::Paused
            ]
        ),
        "{statuses:?}"
    );
    assert!(s
        .guards
        .values()
        .any(|g| !g.outstanding.is_empty() && g.rate_anchor.is_some()));
}
