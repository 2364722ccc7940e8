//! Recovery of the segmented log from torn writes, flipped bits, and bad directory contents;
//! the directory lock; group commit; segment rolling and deletion; poisoning after a failed
//! fsync.

use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use deadletter::sim::{LockGuard, Log, LogOptions, LogStats, MappedView, RealFs, Vfs, VfsFile};
use deadletter::{
    CorruptionKind, CorruptionLocation, Durability, Error, RecoveryMode, RecoveryReport,
};

const HEADER: u64 = 32;
const FRAME: u64 = 16;

fn opts(segment_size: u64, max_record_size: usize) -> LogOptions {
    LogOptions {
        segment_size,
        max_record_size,
        durability: Durability::Always,
        ..LogOptions::default()
    }
}

fn quarantine(o: LogOptions) -> LogOptions {
    LogOptions {
        recovery: RecoveryMode::Quarantine,
        ..o
    }
}

/// A deterministic body with no zero byte, so "last non-zero byte" arithmetic is exact.
fn body(i: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| ((i * 31 + j as u64 * 7) % 251) as u8 + 1)
        .collect()
}

fn seg_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}.seg"))
}

fn read_all(log: &Log) -> Vec<(u64, Vec<u8>)> {
    log.iter_from(0)
        .expect("iter_from")
        .map(|r| {
            let (p, rec) = r.expect("record");
            (p, rec.to_vec())
        })
        .collect()
}

/// Writes `bodies` one append at a time under `Always` into a fresh log in `dir`.
fn write_log(dir: &Path, o: &LogOptions, bodies: &[Vec<u8>]) -> Vec<u64> {
    let (log, _) = Log::open(dir, o.clone()).expect("open");
    let positions = bodies
        .iter()
        .map(|b| log.append(b).expect("append"))
        .collect();
    log.close().expect("close");
    positions
}

/// A fresh directory under `root` holding one segment file with the given bytes.
fn case_dir(root: &Path, n: usize, base: u64, bytes: &[u8]) -> PathBuf {
    let dir = root.join(format!("case-{n}"));
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(seg_path(&dir, base), bytes).unwrap();
    dir
}

fn last_nonzero(bytes: &[u8]) -> Option<usize> {
    bytes.iter().rposition(|&b| b != 0)
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn nonzero_byte(&mut self) -> u8 {
        (self.next() % 255) as u8 + 1
    }
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
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut cases = 0usize;
    let mut torn_seen = 0usize;
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
                        *b = rng.nonzero_byte();
                    }
                }
                Cut::GarbageToEnd => {
                    for b in &mut bytes[cut..] {
                        *b = rng.nonzero_byte();
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
    assert!(torn_seen > cases / 2);
}

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

/// Fills several segments of 512 bytes; returns the records written.
fn multi_segment_log(dir: &Path, o: &LogOptions, count: u64) -> Vec<(u64, Vec<u8>)> {
    let bodies: Vec<Vec<u8>> = (0..count).map(|i| body(i, 50)).collect();
    let positions = write_log(dir, o, &bodies);
    positions.into_iter().zip(bodies).collect()
}

fn segment_bases(dir: &Path) -> Vec<u64> {
    let mut bases: Vec<u64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".seg")?.parse().ok()
        })
        .collect();
    bases.sort_unstable();
    bases
}

#[test]
fn missing_middle_segment_is_reported() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("log");
    let o = opts(512, 100);
    let written = multi_segment_log(&dir, &o, 30);
    let bases = segment_bases(&dir);
    assert!(bases.len() >= 4, "{bases:?}");
    std::fs::remove_file(seg_path(&dir, bases[1])).unwrap();
    match Log::open(&dir, o.clone()) {
        Err(Error::Corruption {
            kind: CorruptionKind::MissingSegment,
            location: CorruptionLocation::File { path, offset },
        }) => {
            assert_eq!(path, seg_path(&dir, bases[0]));
            assert_eq!(offset, HEADER + (bases[1] - bases[0]));
        }
        other => panic!("expected MissingSegment, got {other:?}"),
    }
    // Quarantine mode opens, lists the gap, and returns the records around it.
    let (log, report) = Log::open(&dir, quarantine(o)).unwrap();
    assert_eq!(report.quarantined.len(), 1, "{report:?}");
    let q = &report.quarantined[0];
    assert_eq!(q.kind, CorruptionKind::MissingSegment);
    assert_eq!((q.start, q.end), (bases[1], bases[2]));
    let want: Vec<_> = written
        .iter()
        .filter(|(p, _)| *p < bases[1] || *p >= bases[2])
        .cloned()
        .collect();
    assert_eq!(read_all(&log), want);
    assert!(matches!(log.read(bases[1]), Err(Error::Corruption { .. })));
}

#[test]
fn truncated_sealed_segment_is_reported() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("log");
    let o = opts(512, 100);
    multi_segment_log(&dir, &o, 30);
    let bases = segment_bases(&dir);
    let victim = seg_path(&dir, bases[1]);
    // Mid-record first, then at a record boundary (set_len only shrinks here).
    for cut in [HEADER + 66 * 3 + 20, HEADER + 66 * 3] {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&victim)
            .unwrap();
        f.set_len(cut).unwrap();
        drop(f);
        match Log::open(&dir, o.clone()) {
            Err(Error::Corruption {
                kind: CorruptionKind::TruncatedSegment,
                location: CorruptionLocation::File { path, offset },
            }) => {
                assert_eq!(path, victim);
                assert_eq!(offset, HEADER + 66 * 3, "ends after the last whole record");
            }
            other => panic!("cut at {cut}: expected TruncatedSegment, got {other:?}"),
        }
    }
    let (log, report) = Log::open(&dir, quarantine(o)).unwrap();
    assert_eq!(report.quarantined.len(), 1);
    assert_eq!(report.quarantined[0].kind, CorruptionKind::TruncatedSegment);
    assert!(log.iter_from(0).unwrap().all(|r| r.is_ok()));
}

#[test]
fn zero_filled_or_empty_last_segment_is_removed_and_reported() {
    for empty in [false, true] {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("log");
        let o = opts(512, 100);
        let written = multi_segment_log(&dir, &o, 4);
        let end = written
            .last()
            .map(|(p, b)| p + FRAME + b.len() as u64)
            .unwrap();
        let name = format!("{end:020}.seg");
        let content = if empty { Vec::new() } else { vec![0u8; 512] };
        std::fs::write(dir.join(&name), content).unwrap();
        let (log, report) = Log::open(&dir, o.clone()).unwrap();
        assert_eq!(report.removed_empty_segments, vec![name.clone()]);
        assert_eq!(read_all(&log), written);
        let p = log.append(b"after").unwrap();
        assert_eq!(p, end);
        drop(log);
        let (log, report) = Log::open(&dir, o).unwrap();
        assert!(report.removed_empty_segments.is_empty());
        assert_eq!(&*log.read(p).unwrap(), b"after");
    }
}

#[test]
fn leftover_temp_file_is_removed_and_foreign_files_are_left_alone() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("log");
    let o = opts(4096, 100);
    let written = multi_segment_log(&dir, &o, 5);
    let temp = format!("{:020}.tmp", 99_999);
    std::fs::write(dir.join(&temp), [1u8; 100]).unwrap();
    let foreign = [
        ("notes.txt", &b"an operator's notes"[..]),
        ("backup.tmp", &b"not ours either"[..]),
        ("123.seg", &b"a short name is not a segment name"[..]),
    ];
    for (name, content) in foreign {
        std::fs::write(dir.join(name), content).unwrap();
    }
    let (log, report) = Log::open(&dir, o).unwrap();
    assert_eq!(report.removed_temp_files, vec![temp.clone()]);
    assert!(!dir.join(&temp).exists());
    let mut ignored = report.ignored_files.clone();
    ignored.sort();
    assert_eq!(ignored, vec!["123.seg", "backup.tmp", "notes.txt"]);
    for (name, content) in foreign {
        assert_eq!(
            std::fs::read(dir.join(name)).unwrap(),
            content,
            "{name} touched"
        );
    }
    assert_eq!(read_all(&log), written);
}

#[test]
fn segment_named_file_with_foreign_content_is_a_bad_header() {
    let root = tempfile::tempdir().unwrap();
    // As the only segment.
    let dir = root.path().join("only");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        seg_path(&dir, 0),
        b"{\"hello\": \"this is JSON, not a segment\"}",
    )
    .unwrap();
    match Log::open(&dir, opts(4096, 100)) {
        Err(Error::Corruption {
            kind: CorruptionKind::BadHeader,
            location: CorruptionLocation::File { path, offset: 0 },
        }) => assert_eq!(path, seg_path(&dir, 0)),
        other => panic!("expected BadHeader, got {other:?}"),
    }
    // Following a real segment, at the position where the next segment would start.
    let dir = root.path().join("after");
    let o = opts(4096, 100);
    let written = multi_segment_log(&dir, &o, 3);
    let end = written
        .last()
        .map(|(p, b)| p + FRAME + b.len() as u64)
        .unwrap();
    let mut foreign = b"PK\x03\x04 a zip archive, say".to_vec();
    foreign.resize(4096, 0x55);
    std::fs::write(seg_path(&dir, end), &foreign).unwrap();
    match Log::open(&dir, o.clone()) {
        Err(Error::Corruption {
            kind: CorruptionKind::BadHeader,
            location: CorruptionLocation::File { path, offset: 0 },
        }) => assert_eq!(path, seg_path(&dir, end)),
        other => panic!("expected BadHeader, got {other:?}"),
    }
    // A valid header naming a different base than the file name is also a bad header.
    let mut moved = std::fs::read(seg_path(&dir, 0)).unwrap();
    moved.truncate(4096);
    std::fs::write(seg_path(&dir, end), &moved).unwrap();
    assert!(matches!(
        Log::open(&dir, o.clone()),
        Err(Error::Corruption {
            kind: CorruptionKind::BadHeader,
            ..
        })
    ));
    // Quarantine opens, keeps the file, and lists it.
    let (log, report) = Log::open(&dir, quarantine(o)).unwrap();
    assert_eq!(report.quarantined[0].kind, CorruptionKind::BadHeader);
    assert_eq!(read_all(&log), written);
    assert_eq!(std::fs::read(seg_path(&dir, end)).unwrap(), moved);
    log.append(b"still writable").unwrap();
}

#[test]
fn bad_appends_reads_and_options() {
    let root = tempfile::tempdir().unwrap();
    let o = opts(4096, 100);
    let (log, _) = Log::open(root.path(), o.clone()).unwrap();
    let p0 = log.append(b"first").unwrap();
    let p1 = log.append(&[7u8; 100]).unwrap();
    let end = log.end_position();

    // Too large, alone or in a batch: nothing is appended.
    match log.append(&[1u8; 101]) {
        Err(Error::TooLarge {
            size: 101,
            max: 100,
        }) => {}
        other => panic!("expected TooLarge, got {other:?}"),
    }
    let batch: Vec<Vec<u8>> = vec![vec![1; 10], vec![2; 101]];
    assert!(matches!(
        log.append_batch(&batch),
        Err(Error::TooLarge { .. })
    ));
    // Empty, alone or in a batch: nothing is appended.
    assert!(matches!(log.append(b""), Err(Error::EmptyRecord)));
    let batch: Vec<&[u8]> = vec![b"ok", b""];
    assert!(matches!(log.append_batch(&batch), Err(Error::EmptyRecord)));
    assert_eq!(log.end_position(), end, "a rejected append wrote nothing");

    // Invalid positions: past the end, inside a record, far away.
    for bad in [end, end + 1, p0 + 1, p1 + 3, p1 + FRAME, u64::MAX] {
        match log.read(bad) {
            Err(Error::InvalidPosition(p)) => assert_eq!(p, bad),
            other => panic!("read({bad}): expected InvalidPosition, got {other:?}"),
        }
    }
    assert!(matches!(
        log.iter_from(end + 1),
        Err(Error::InvalidPosition(_))
    ));
    assert_eq!(log.iter_from(end).unwrap().count(), 0);
    let mut it = log.iter_from(p1 + 5).unwrap();
    assert!(matches!(it.next(), Some(Err(Error::InvalidPosition(_)))));
    assert!(it.next().is_none());
    assert_eq!(&*log.read(p1).unwrap(), &[7u8; 100][..]);
    drop(log);

    // Invalid options.
    let bad_options = [
        LogOptions {
            max_record_size: 0,
            ..o.clone()
        },
        LogOptions {
            max_record_size: 4096 - 48 + 1,
            ..o.clone()
        },
        LogOptions {
            segment_size: 10,
            ..o.clone()
        },
        LogOptions {
            durability: Durability::Interval(std::time::Duration::ZERO),
            ..o.clone()
        },
    ];
    for bad in bad_options {
        match Log::open(root.path().join("never"), bad.clone()) {
            Err(Error::InvalidConfig(msg)) => assert!(!msg.is_empty()),
            other => panic!("{bad:?}: expected InvalidConfig, got {other:?}"),
        }
    }
    assert!(
        !root.path().join("never").exists(),
        "bad options create nothing"
    );
    // The largest record the options allow fits in one segment.
    let (log, _) = Log::open(
        root.path().join("max"),
        LogOptions {
            max_record_size: 4096 - 48,
            ..o
        },
    )
    .unwrap();
    log.append(&[3u8; 4096 - 48]).unwrap();
    log.append(&[4u8; 4096 - 48]).unwrap();
    assert_eq!(log.stats().segments, 2);
}

const LOCK_CHILD_ENV: &str = "DEADLETTER_LOCK_TEST_DIR";

/// Not a test on its own: when re-executed with `DEADLETTER_LOCK_TEST_DIR`, opens the log
/// there, says so, and holds it until its standard input closes.
#[test]
fn lock_child_process() {
    let Ok(dir) = std::env::var(LOCK_CHILD_ENV) else {
        return;
    };
    let (_log, _) = Log::open(&dir, opts(4096, 100)).expect("child open");
    let mut out = io::stdout();
    writeln!(out, "CHILD-HOLDS-LOCK").unwrap();
    out.flush().unwrap();
    let mut line = String::new();
    while io::stdin().read_line(&mut line).unwrap_or(0) > 0 {}
}

#[test]
fn second_open_is_locked_in_process_and_across_processes() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("log");
    let o = opts(4096, 100);
    {
        let (_log, _) = Log::open(&dir, o.clone()).unwrap();
        match Log::open(&dir, o.clone()) {
            Err(Error::Locked { path }) => assert_eq!(path, dir),
            other => panic!("expected Locked, got {other:?}"),
        }
    }
    // Released on drop.
    drop(Log::open(&dir, o.clone()).unwrap());

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "lock_child_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(LOCK_CHILD_ENV, &dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains("CHILD-HOLDS-LOCK") => break,
            Some(Ok(_)) => continue,
            other => panic!("child ended before taking the lock: {other:?}"),
        }
    }
    match Log::open(&dir, o.clone()) {
        Err(Error::Locked { path }) => assert_eq!(path, dir),
        other => panic!("expected Locked while the child holds it, got {other:?}"),
    }
    drop(child.stdin.take());
    let status = child.wait().unwrap();
    assert!(status.success());
    drop(Log::open(&dir, o).unwrap());
}

#[test]
fn group_commit_shares_fsyncs() {
    const THREADS: u64 = 8;
    const PER_THREAD: u64 = 200;
    let root = tempfile::tempdir().unwrap();
    let o = opts(64 << 10, 1000);
    let (log, _) = Log::open(root.path(), o.clone()).unwrap();
    let log = Arc::new(log);
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                (0..PER_THREAD)
                    .map(|i| {
                        let b = body(t * 10_000 + i, 20 + (i % 50) as usize);
                        (log.append(&b).unwrap(), b)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut written: Vec<(u64, Vec<u8>)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    written.sort();
    let LogStats {
        fsyncs, appends, ..
    } = log.stats();
    println!("group commit: {appends} appends from {THREADS} threads, {fsyncs} fsyncs");
    assert_eq!(appends, THREADS * PER_THREAD);
    assert!(fsyncs < appends, "{fsyncs} fsyncs for {appends} appends");
    drop(log);
    let (log, report) = Log::open(root.path(), o).unwrap();
    assert_eq!(report.records, THREADS * PER_THREAD);
    assert_eq!(read_all(&log), written);
}

#[test]
fn segments_roll_at_the_configured_size_and_delete_whole() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("log");
    let o = opts(1024, 200);
    let (log, _) = Log::open(&dir, o.clone()).unwrap();
    let mut written = Vec::new();
    for i in 0..100u64 {
        let b = body(i, 100);
        written.push((log.append(&b).unwrap(), b));
    }
    let segs = log.segments();
    assert!(segs.len() >= 10, "{} segments", segs.len());
    for pair in segs.windows(2) {
        assert_eq!(pair[0].end, pair[1].base, "segments are contiguous");
        assert!(!pair[0].active);
    }
    assert!(segs.last().unwrap().active);
    for s in &segs {
        assert_eq!(std::fs::metadata(&s.path).unwrap().len(), 1024);
        assert!(s.end - s.base <= 1024 - HEADER);
    }
    for (p, b) in &written {
        let s = segs.iter().find(|s| s.base <= *p && *p < s.end).unwrap();
        assert!(
            p + FRAME + b.len() as u64 <= s.end,
            "a record never spans segments"
        );
    }

    let cut = written[50].0;
    let doomed: Vec<_> = segs.iter().filter(|s| s.end <= cut).cloned().collect();
    assert_eq!(log.delete_below(cut).unwrap(), doomed.len());
    for s in &doomed {
        assert!(!s.path.exists());
    }
    let first = log.first_position();
    assert!(first <= cut && first > 0);
    for (p, b) in &written {
        if *p < first {
            assert!(matches!(log.read(*p), Err(Error::InvalidPosition(_))));
        } else {
            assert_eq!(&*log.read(*p).unwrap(), &b[..]);
        }
    }
    let remaining: Vec<_> = written
        .iter()
        .filter(|(p, _)| *p >= first)
        .cloned()
        .collect();
    assert_eq!(read_all(&log), remaining);
    // The active segment is never deleted.
    let n = log.segments().len();
    assert_eq!(log.delete_below(u64::MAX).unwrap(), n - 1);
    assert_eq!(log.segments().len(), 1);
    let first = log.first_position();
    drop(log);

    let (log, report) = Log::open(&dir, o).unwrap();
    assert_eq!(report.segments, 1);
    let remaining: Vec<_> = written
        .iter()
        .filter(|(p, _)| *p >= first)
        .cloned()
        .collect();
    assert_eq!(read_all(&log), remaining);
    let p = log.append(b"after deletion").unwrap();
    assert_eq!(&*log.read(p).unwrap(), b"after deletion");
}

/// A file system that fails `sync` of files while `fail` is set.
struct FaultyFs {
    real: RealFs,
    fail: Arc<AtomicBool>,
}

struct FaultyFile {
    real: Arc<dyn VfsFile>,
    fail: Arc<AtomicBool>,
}

impl VfsFile for FaultyFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.real.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.real.write_at(buf, offset)
    }
    fn sync(&self) -> io::Result<()> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected fsync failure"));
        }
        self.real.sync()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.real.set_len(len)
    }
    fn len(&self) -> io::Result<u64> {
        self.real.len()
    }
    fn map(&self) -> io::Result<Arc<dyn MappedView>> {
        self.real.map()
    }
}

impl FaultyFs {
    fn wrap(&self, real: Arc<dyn VfsFile>) -> Arc<dyn VfsFile> {
        Arc::new(FaultyFile {
            real,
            fail: Arc::clone(&self.fail),
        })
    }
}

impl Vfs for FaultyFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.real.create_dir_all(dir)
    }
    fn create(&self, path: &Path) -> io::Result<Arc<dyn VfsFile>> {
        Ok(self.wrap(self.real.create(path)?))
    }
    fn open(&self, path: &Path, read_only: bool) -> io::Result<Arc<dyn VfsFile>> {
        Ok(self.wrap(self.real.open(path, read_only)?))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.real.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.real.remove(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.real.list(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.real.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn LockGuard>> {
        self.real.lock(path)
    }
}

#[test]
fn failed_fsync_poisons_until_reopen() {
    let root = tempfile::tempdir().unwrap();
    let fail = Arc::new(AtomicBool::new(false));
    let fs = Arc::new(FaultyFs {
        real: RealFs,
        fail: Arc::clone(&fail),
    });
    let o = opts(4096, 100);
    let (log, _) = Log::open_with(fs, root.path(), o.clone()).unwrap();
    let mut acked = Vec::new();
    for i in 0..5 {
        let b = body(i, 30);
        acked.push((log.append(&b).unwrap(), b));
    }
    fail.store(true, Ordering::SeqCst);
    match log.append(b"this fsync fails") {
        Err(Error::Io { op: "fsync", .. }) => {}
        other => panic!("expected the fsync error, got {other:?}"),
    }
    assert!(log.is_poisoned());
    // The failure is not retried: even with a healthy disk again, writes are refused.
    fail.store(false, Ordering::SeqCst);
    for _ in 0..3 {
        assert!(matches!(log.append(b"later"), Err(Error::Poisoned)));
    }
    assert!(matches!(
        log.append_batch(&[b"a".as_slice(), b"b"]),
        Err(Error::Poisoned)
    ));
    assert!(matches!(log.sync(), Err(Error::Poisoned)));
    assert!(matches!(log.close(), Err(Error::Poisoned)));
    // Records acknowledged before the failure are still readable.
    assert_eq!(&*log.read(acked[0].0).unwrap(), &acked[0].1[..]);
    drop(log);

    let (log, report): (Log, RecoveryReport) = Log::open(root.path(), o).unwrap();
    assert!(!log.is_poisoned());
    let got = read_all(&log);
    assert!(got.len() >= acked.len());
    assert_eq!(got[..acked.len()], acked[..]);
    assert!(report.quarantined.is_empty());
    let p = log.append(b"after reopen").unwrap();
    assert_eq!(&*log.read(p).unwrap(), b"after reopen");
}
