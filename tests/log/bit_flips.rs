//! Every bit of a small segment flipped in turn: in strict mode the log refuses to open,
//! naming the damaged record's file and offset (or opens with only the records written,
//! when the flip hit the last record or the zeros after the data: a torn tail); in
//! quarantine mode it opens, lists the damaged range and returns only intact records.

use deadletter::recovery::{CorruptionKind, CorruptionLocation};
use deadletter::sim::Log;
use deadletter::Error;

use crate::helpers::{
    body, case_dir, opts, quarantine, read_all, seg_path, write_log, FRAME, HEADER,
};

/// What a flipped bit hit.
#[derive(Debug, PartialEq, Eq)]
enum Hit {
    Header,
    Record(usize),
    AfterData,
}

#[test]
fn every_bit_flip_is_caught_or_harmless() {
    let root = tempfile::tempdir().unwrap();
    let o = opts(512, 100);
    let lens = [12usize, 25, 7, 30, 18, 22];
    let bodies: Vec<Vec<u8>> = lens
        .iter()
        .enumerate()
        .map(|(i, &l)| body(i as u64 + 7, l))
        .collect();
    let src = root.path().join("source");
    let positions = write_log(&src, &o, &bodies);
    let pristine = std::fs::read(seg_path(&src, 0)).unwrap();
    let starts: Vec<usize> = positions.iter().map(|&p| (HEADER + p) as usize).collect();
    let data_end = starts[lens.len() - 1] + FRAME as usize + lens[lens.len() - 1];
    let flip_end = data_end + 32; // the used region plus some of the zeros after it
    let hit = |byte: usize| -> Hit {
        if byte < HEADER as usize {
            return Hit::Header;
        }
        match starts.iter().rposition(|&s| s <= byte) {
            Some(j) if byte < starts[j] + FRAME as usize + lens[j] => Hit::Record(j),
            _ => Hit::AfterData,
        }
    };
    let written: Vec<(u64, Vec<u8>)> = positions.iter().copied().zip(bodies.clone()).collect();
    let (mut strict_errors, mut strict_opens, mut quarantined) = (0, 0, 0);
    let mut n = 0usize;
    for byte in 0..flip_end {
        for bit in 0..8 {
            let mut bytes = pristine.clone();
            bytes[byte] ^= 1 << bit;
            let h = hit(byte);
            let ctx = format!("flip byte {byte} bit {bit} ({h:?})");

            // Strict: refuse to open, naming the place, or open with only written records.
            let dir = case_dir(root.path(), n, 0, &bytes);
            n += 1;
            match Log::open(&dir, o.clone()) {
                Err(Error::Corruption {
                    kind,
                    location: CorruptionLocation::File { path, offset },
                }) => {
                    strict_errors += 1;
                    assert_eq!(path, seg_path(&dir, 0), "{ctx}");
                    match h {
                        Hit::Header => {
                            assert_eq!(kind, CorruptionKind::BadHeader, "{ctx}");
                            assert_eq!(offset, 0, "{ctx}");
                        }
                        Hit::Record(j) => {
                            assert!(j + 1 < lens.len(), "{ctx}: the last record is a torn tail");
                            assert_eq!(kind, CorruptionKind::BadRecord, "{ctx}");
                            assert_eq!(offset, starts[j] as u64, "{ctx}");
                        }
                        Hit::AfterData => panic!("{ctx}: zeros after the data are not data"),
                    }
                }
                Err(e) => panic!("{ctx}: unexpected error {e}"),
                Ok((log, report)) => {
                    strict_opens += 1;
                    let got = read_all(&log);
                    match h {
                        Hit::Record(j) if j + 1 == lens.len() => {
                            assert_eq!(got, written[..j], "{ctx}");
                            let torn = report.torn_tail.expect("torn tail reported");
                            assert_eq!(torn.offset, starts[j] as u64, "{ctx}");
                        }
                        Hit::AfterData => {
                            assert_eq!(got, written, "{ctx}");
                            let torn = report.torn_tail.expect("stray byte reported");
                            assert_eq!(torn.offset, data_end as u64, "{ctx}");
                        }
                        _ => panic!("{ctx}: damaged committed data opened in strict mode"),
                    }
                }
            }
            std::fs::remove_dir_all(&dir).unwrap();

            // Quarantine: opens, lists the damage, returns only intact records.
            let dir = case_dir(root.path(), n, 0, &bytes);
            n += 1;
            let (log, report) = Log::open(&dir, quarantine(o.clone()))
                .unwrap_or_else(|e| panic!("{ctx}: quarantine open failed: {e}"));
            let got = read_all(&log);
            for rec in &got {
                assert!(
                    written.contains(rec),
                    "{ctx}: returned a record never written"
                );
            }
            match h {
                Hit::Header => {
                    quarantined += 1;
                    assert!(got.is_empty(), "{ctx}");
                    assert_eq!(report.quarantined.len(), 1, "{ctx}");
                    assert_eq!(report.quarantined[0].kind, CorruptionKind::BadHeader);
                }
                Hit::Record(j) if j + 1 < lens.len() => {
                    quarantined += 1;
                    assert_eq!(report.quarantined.len(), 1, "{ctx}: {report:?}");
                    let q = &report.quarantined[0];
                    assert_eq!(q.kind, CorruptionKind::BadRecord, "{ctx}");
                    assert_eq!((q.start, q.end), (positions[j], positions[j + 1]), "{ctx}");
                    let mut want = written.clone();
                    want.remove(j);
                    assert_eq!(got, want, "{ctx}");
                }
                Hit::Record(j) => {
                    assert!(report.quarantined.is_empty(), "{ctx}");
                    assert_eq!(got, written[..j], "{ctx}");
                }
                Hit::AfterData => {
                    assert!(report.quarantined.is_empty(), "{ctx}");
                    assert_eq!(got, written, "{ctx}");
                }
            }
            drop(log);
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
    println!(
        "bit flips: {} (strict: {strict_errors} refused, {strict_opens} opened; \
         quarantine: {quarantined} with a quarantined range)",
        flip_end * 8
    );
    assert!(strict_errors > 0 && strict_opens > 0);
}
