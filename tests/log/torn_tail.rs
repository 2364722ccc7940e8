//! A torn last record, at every byte offset: recovery cuts the log at the first bad frame
//! of the last segment, reports how much it dropped, keeps every earlier record, and the
//! log appends after it and reopens again. A file cut at the same offset is no torn write
//! (writes never shorten a segment): it is refused with the sizes.

use deadletter::recovery::CorruptionKind;
use deadletter::sim::{Log, SimRng};
use deadletter::Error;

use crate::helpers::{body, case_dir, opts, read_all, seg_path, write_log, FRAME, HEADER};

/// The index of the last non-zero byte.
fn last_nonzero(bytes: &[u8]) -> Option<usize> {
    bytes.iter().rposition(|&b| b != 0)
}

#[derive(Clone, Copy, Debug)]
enum Cut {
    /// The file ends at the cut.
    Truncate,
    /// Bytes from the cut to the end of the record are zero.
    ZeroRecord,
    /// Bytes from the cut to the end of the record are garbage.
    GarbageRecord,
    /// Bytes from the cut to the end of the file are garbage.
    GarbageToEnd,
}

#[test]
fn torn_last_record_at_every_byte_offset() {
    let root = tempfile::tempdir().unwrap();
    let o = opts(4096, 1000);
    let lens = [40usize, 61, 100, 33, 80];
    let bodies: Vec<Vec<u8>> = lens
        .iter()
        .enumerate()
        .map(|(i, &l)| body(i as u64, l))
        .collect();
    let src = root.path().join("source");
    let positions = write_log(&src, &o, &bodies);
    let pristine = std::fs::read(seg_path(&src, 0)).unwrap();
    assert_eq!(pristine.len(), 4096, "segments are preallocated");
    let last = bodies.len() - 1;
    let rec_start = (HEADER + positions[last]) as usize;
    let rec_end = rec_start + FRAME as usize + bodies[last].len();
    let mut rng = SimRng::new(0x9e37_79b9_7f4a_7c15);
    // Garbage never contains a zero byte, so "the last non-zero byte" is exact.
    let mut nonzero_byte = || rng.below(255) as u8 + 1;
    let mut cases = 0usize;
    let mut torn_seen = 0usize;
    let mut cut_files = 0usize;
    for cut in rec_start..rec_end {
        for mode in [
            Cut::Truncate,
            Cut::ZeroRecord,
            Cut::GarbageRecord,
            Cut::GarbageToEnd,
        ] {
            let mut bytes = pristine.clone();
            match mode {
                Cut::Truncate => bytes.truncate(cut),
                Cut::ZeroRecord => bytes[cut..rec_end].fill(0),
                Cut::GarbageRecord => {
                    for b in &mut bytes[cut..rec_end] {
                        *b = nonzero_byte();
                    }
                }
                Cut::GarbageToEnd => {
                    for b in &mut bytes[cut..] {
                        *b = nonzero_byte();
                    }
                }
            }
            // What recovery must drop: the record's bytes up to the last non-zero one.
            let region_end = match mode {
                Cut::Truncate => cut,
                Cut::GarbageToEnd => bytes.len(),
                _ => rec_end,
            };
            let expected_drop = last_nonzero(&bytes[rec_start..region_end]).map(|i| (i + 1) as u64);
            let ctx = format!("cut at file offset {cut}, {mode:?}");
            let dir = case_dir(root.path(), cases, 0, &bytes);
            cases += 1;
            if let Cut::Truncate = mode {
                match Log::open(&dir, o.clone()) {
                    Err(Error::Corruption {
                        kind: CorruptionKind::ShortSegment { expected, actual },
                        ..
                    }) => assert_eq!((expected, actual), (4096, cut as u64), "{ctx}"),
                    other => panic!("{ctx}: expected ShortSegment, got {other:?}"),
                }
                assert_eq!(std::fs::read(seg_path(&dir, 0)).unwrap(), bytes, "{ctx}");
                std::fs::remove_dir_all(&dir).unwrap();
                cut_files += 1;
                continue;
            }
            let (log, report) =
                Log::open(&dir, o.clone()).unwrap_or_else(|e| panic!("{ctx}: open failed: {e}"));
            match expected_drop {
                None => assert_eq!(report.torn_tail, None, "{ctx}"),
                Some(dropped) => {
                    torn_seen += 1;
                    let torn = report
                        .torn_tail
                        .as_ref()
                        .unwrap_or_else(|| panic!("{ctx}: no torn tail reported"));
                    assert_eq!(torn.path, seg_path(&dir, 0), "{ctx}");
                    assert_eq!(torn.offset, rec_start as u64, "{ctx}");
                    assert_eq!(torn.dropped_bytes, dropped, "{ctx}");
                }
            }
            assert!(report.quarantined.is_empty(), "{ctx}");
            assert_eq!(report.records, last as u64, "{ctx}");
            let got = read_all(&log);
            let want: Vec<(u64, Vec<u8>)> = positions[..last]
                .iter()
                .copied()
                .zip(bodies[..last].iter().cloned())
                .collect();
            assert_eq!(got, want, "{ctx}: earlier records changed");
            // Appending after recovery works and survives another reopen.
            let fresh = body(1000 + cases as u64, 57);
            let p = log.append(&fresh).unwrap();
            assert_eq!(
                p, positions[last],
                "{ctx}: the torn record's position is reused"
            );
            drop(log);
            let (log, report) = Log::open(&dir, o.clone()).unwrap();
            assert_eq!(report.torn_tail, None, "{ctx}");
            let mut want = want;
            want.push((p, fresh));
            assert_eq!(read_all(&log), want, "{ctx}: after the second reopen");
            drop(log);
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
    println!("torn-write cases: {cases}, with a torn tail reported: {torn_seen}");
    assert!(torn_seen > (cases - cut_files) / 2);
}
