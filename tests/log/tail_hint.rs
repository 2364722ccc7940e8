//! The tail hint (`src/storage/tail_hint.rs`): the active segment's bytes at or past the
//! hint's bound were never written, so an open reads the segment only up to it. Checked
//! here: the claim holds after every write; an open with a hint reads no further (shown by
//! bytes planted past the bound, which only a full read would find); a missing or damaged
//! hint means a full read; the hint's name is one every build removes as a leftover; a
//! hint that cannot be raised is removed before anything is written past it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use deadletter::sim::{
    parse_temp_name, temp_name, Fault, FaultyFs, Log, LogOptions, OpKinds, PowerCutOptions, RealFs,
    SimDisk, SimRng,
};
use deadletter::store::Durability;

use crate::helpers::{body, opts, read_all, seg_path, FRAME, HEADER};

/// The hint file of the segment at `base`.
fn hint_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(temp_name(base))
}

/// The bound the hint of segment `base` states, read and checked independently of the
/// library (magic, base, CRC-32 of the first 28 bytes).
fn hint_bound(dir: &Path, base: u64) -> Option<u64> {
    let b = std::fs::read(hint_path(dir, base)).ok()?;
    assert_eq!(b.len(), 32, "a hint is 32 bytes");
    assert_eq!(&b[0..8], b"DLTRTAIL");
    assert_eq!(u64::from_le_bytes(b[8..16].try_into().unwrap()), base);
    let crc = u32::from_le_bytes(b[28..32].try_into().unwrap());
    assert_eq!(crc, crc32fast::hash(&b[..28]), "the hint's checksum");
    Some(u64::from_le_bytes(b[16..24].try_into().unwrap()))
}

/// The active segment: its base and data end (relative to its first record).
fn active(log: &Log) -> (u64, u64) {
    let s = log.segments().into_iter().next_back().expect("a segment");
    (s.base, s.end - s.base)
}

/// Puts a non-zero byte at data offset `d` of the segment at `base`: a byte no write of the
/// log could have put there if `d` is at or past the hint's bound.
fn plant(dir: &Path, base: u64, d: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(seg_path(dir, base))
        .unwrap();
    f.write_all_at(&[0xEE], HEADER + d).unwrap();
}

fn hint_opts() -> LogOptions {
    // 256 KiB segments: steps of 32 KiB, bounds 32 KiB, then doubling.
    opts(256 << 10, 8 << 10)
}

#[test]
fn no_byte_past_the_bound_is_ever_written() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let o = hint_opts();
    let (log, _) = Log::open(dir, o.clone()).unwrap();
    let mut bounds = Vec::new();
    let mut rolls = 0;
    let mut last_base = 0;
    for i in 0..400u64 {
        let len = 1 + (i * 2654435761 % 3000) as usize;
        log.append(&body(i, len)).unwrap();
        let (base, end) = active(&log);
        if base != last_base {
            rolls += 1;
            assert!(
                !hint_path(dir, last_base).exists(),
                "the sealed segment's hint is removed at the roll"
            );
            last_base = base;
        }
        let bound = hint_bound(dir, base).expect("the active segment has a hint");
        assert!(
            bound >= end,
            "record {i}: bound {bound} below the end {end}"
        );
        let seg = std::fs::read(seg_path(dir, base)).unwrap();
        let past = (HEADER + bound) as usize;
        assert!(
            seg[past.min(seg.len())..].iter().all(|&b| b == 0),
            "record {i}: a non-zero byte past the bound {bound}"
        );
        if bounds.last() != Some(&(base, bound)) {
            bounds.push((base, bound));
        }
    }
    assert!(rolls >= 2, "the test covers rolls ({rolls})");
    // Few raises per segment: the bound doubles.
    assert!(
        bounds.len() <= (rolls + 1) * 5,
        "{} raises for {} segments",
        bounds.len(),
        rolls + 1
    );
}

#[test]
fn an_open_reads_only_up_to_the_hint_and_all_of_the_segment_without_one() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let o = hint_opts();
    let bodies: Vec<Vec<u8>> = (0..5).map(|i| body(i, 200)).collect();
    let (log, _) = Log::open(dir, o.clone()).unwrap();
    let positions: Vec<u64> = bodies.iter().map(|b| log.append(b).unwrap()).collect();
    let (base, end) = active(&log);
    log.close().unwrap();
    drop(log);
    let bound = hint_bound(dir, base).expect("a hint");
    assert!(bound > end && bound < (256 << 10) - HEADER);
    let verified = deadletter::verify::verify(dir).unwrap();
    assert_eq!(verified.tail_hint, Some(bound));
    assert!(verified.temp_files.is_empty(), "the hint is no leftover");
    // An open reads past the bound by a frame header, then to the end of that 4 KiB page of
    // the file (a power cut may garble a written sector whole).
    let limit = (HEADER + bound + FRAME).div_ceil(4096) * 4096 - HEADER;
    // A byte past that (which the log never writes there) is not seen: the open does not
    // read that far, and keeps the hint. Verify reads everything and calls it damage.
    plant(dir, base, limit + 100);
    let verified = deadletter::verify::verify(dir).unwrap();
    assert!(verified.torn_tail().is_some(), "verify reads everything");
    assert_eq!(
        verified.written_past_hint(),
        Some((HEADER + limit, 101)),
        "bytes past the bound are damage"
    );
    assert_eq!(verified.problems(), 1);
    let (log, report) = Log::open(dir, o.clone()).unwrap();
    assert_eq!(report.torn_tail, None);
    assert!(report.removed_temp_files.is_empty(), "{report:?}");
    let expected: Vec<(u64, Vec<u8>)> = positions.iter().copied().zip(bodies.clone()).collect();
    assert_eq!(read_all(&log), expected);
    drop(log);
    assert_eq!(hint_bound(dir, base), Some(bound), "the hint is kept");
    // Without the hint the open reads the whole segment, finds the byte, and zeroes it.
    std::fs::remove_file(hint_path(dir, base)).unwrap();
    let (log, report) = Log::open(dir, o.clone()).unwrap();
    let torn = report.torn_tail.expect("the planted byte is found");
    assert_eq!(torn.offset, HEADER + end);
    assert_eq!(torn.dropped_bytes, limit + 100 - end + 1);
    assert_eq!(read_all(&log), expected);
    drop(log);
    let seg = std::fs::read(seg_path(dir, base)).unwrap();
    assert!(seg[(HEADER + end) as usize..].iter().all(|&b| b == 0));
    // A byte inside the page past the bound is seen with the hint too.
    let bound = hint_bound(dir, base).expect("a new hint");
    plant(dir, base, bound + FRAME);
    let (log, report) = Log::open(dir, o.clone()).unwrap();
    assert!(report.removed_temp_files.is_empty(), "{report:?}");
    let torn = report.torn_tail.expect("the byte past the bound is found");
    assert_eq!(torn.dropped_bytes, bound + FRAME - end + 1);
    drop(log);
}

#[test]
fn a_damaged_or_foreign_hint_is_not_used_and_is_removed() {
    let root = tempfile::tempdir().unwrap();
    let o = hint_opts();
    let bodies: Vec<Vec<u8>> = (0..3).map(|i| body(i, 100)).collect();
    for case in 0..6 {
        let dir = root.path().join(format!("case-{case}"));
        let (log, _) = Log::open(&dir, o.clone()).unwrap();
        for b in &bodies {
            log.append(b).unwrap();
        }
        let (base, end) = active(&log);
        drop(log);
        let bound = hint_bound(&dir, base).unwrap();
        let mut hint = std::fs::read(hint_path(&dir, base)).unwrap();
        match case {
            // A bit flipped in the bound (the checksum no longer matches).
            0 => hint[16] ^= 0x40,
            // Another segment's hint under this name.
            1 => {
                hint[8] ^= 1;
                let crc = crc32fast::hash(&hint[..28]);
                hint[28..32].copy_from_slice(&crc.to_le_bytes());
            }
            // Cut short.
            2 => hint.truncate(20),
            // Empty (created, its write lost).
            3 => hint.clear(),
            // Garbage of the right length.
            4 => {
                let mut rng = SimRng::new(4);
                rng.fill(&mut hint);
            }
            // An intact hint with a byte after it.
            _ => hint.push(0),
        }
        std::fs::write(hint_path(&dir, base), &hint).unwrap();
        // Past what an open with the hint would read: only a full read finds it.
        plant(&dir, base, bound + 8192);
        let (log, report) = Log::open(&dir, o.clone()).unwrap();
        let torn = report
            .torn_tail
            .expect("a full read finds the planted byte");
        assert_eq!(torn.offset, HEADER + end, "case {case}");
        assert_eq!(
            report.removed_temp_files,
            vec![temp_name(base)],
            "case {case}"
        );
        assert_eq!(read_all(&log).len(), 3);
        drop(log);
    }
}

#[test]
fn the_hint_carries_a_name_every_build_removes_as_a_leftover() {
    // Builds that do not know the hint (every earlier one) remove a file of this name at
    // open, and sync the directory before they append: they never write past a hint they
    // leave behind.
    let root = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(root.path(), hint_opts()).unwrap();
    log.append(b"one").unwrap();
    let (base, _) = active(&log);
    let names: Vec<String> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert_eq!(names, vec![temp_name(base)]);
    assert_eq!(parse_temp_name(&names[0]), Some(base));
}

#[test]
fn a_hint_that_cannot_be_raised_is_removed_before_the_write_past_it() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let fs = FaultyFs::new(Arc::new(RealFs), 7);
    let o = hint_opts();
    let (log, _) = Log::open_with(Arc::new(fs.clone()), dir, o.clone()).unwrap();
    let first = log.append(&body(0, 100)).unwrap();
    let (base, _) = active(&log);
    let bound = hint_bound(dir, base).unwrap();
    let mut acked = vec![(first, body(0, 100))];
    for i in 1.. {
        let b = body(i, 8000);
        let passes = active(&log).1 + 16 + 8000 > bound;
        if passes {
            // The next write is the hint's raise (this record passes the bound): it fails.
            fs.fail_nth(0, OpKinds::WRITE, Fault::Eio);
        }
        acked.push((log.append(&b).unwrap(), b));
        if passes {
            break;
        }
    }
    assert_eq!(fs.injected(), 1, "the raise failed");
    assert!(!log.is_poisoned());
    assert!(
        !hint_path(dir, base).exists(),
        "the hint is gone before anything was written past it"
    );
    drop(log);
    // With no hint the open reads it all, and finds every record.
    let (log, report) = Log::open(dir, o).unwrap();
    assert_eq!(report.torn_tail, None);
    assert_eq!(read_all(&log), acked);
}

/// The bytes of an intact hint for segment `base` stating `bound` (written independently of
/// the library).
fn encode_hint(base: u64, bound: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(32);
    b.extend_from_slice(b"DLTRTAIL");
    b.extend_from_slice(&base.to_le_bytes());
    b.extend_from_slice(&bound.to_le_bytes());
    b.extend_from_slice(&[0; 4]);
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

#[test]
fn an_intact_hint_whose_bound_is_too_low_costs_a_full_read_and_hides_nothing() {
    // A bound below data that was written (a copied, stale or forged hint) is caught by the
    // clean scan itself: a frame runs into the bound, or one starts right at it (the 16
    // bytes checked past the bound). Either way the whole segment is read.
    let root = tempfile::tempdir().unwrap();
    let o = hint_opts();
    let bodies: Vec<Vec<u8>> = (0..6).map(|i| body(i, 300)).collect();
    let frame = FRAME + 300;
    let bounds = [
        0,
        1,
        15,
        16,
        frame - 1,
        frame,
        frame + 1,
        2 * frame,
        6 * frame - 1,
    ];
    for (case, &low) in bounds.iter().enumerate() {
        let dir = root.path().join(format!("case-{case}"));
        let (log, _) = Log::open(&dir, o.clone()).unwrap();
        let positions: Vec<u64> = bodies.iter().map(|b| log.append(b).unwrap()).collect();
        let (base, end) = active(&log);
        drop(log);
        assert_eq!(end, 6 * frame);
        std::fs::write(hint_path(&dir, base), encode_hint(base, low)).unwrap();
        // A byte past the real end, which only a full read finds.
        plant(&dir, base, end + 1000);
        let (log, report) = Log::open(&dir, o.clone()).unwrap();
        let torn = report
            .torn_tail
            .unwrap_or_else(|| panic!("bound {low}: the open read the whole segment"));
        assert_eq!(torn.offset, HEADER + end, "bound {low}");
        assert_eq!(torn.dropped_bytes, 1001, "bound {low}");
        let expected: Vec<(u64, Vec<u8>)> = positions.iter().copied().zip(bodies.clone()).collect();
        assert_eq!(read_all(&log), expected, "bound {low}");
        drop(log);
    }
}

#[test]
fn after_a_power_cut_an_open_with_the_hint_finds_what_a_full_read_finds() {
    // Power cuts at random points of random workloads (unsynced writes land whole, partly,
    // garbled or not at all; unsynced names come and go). Each time the disk is forked: one
    // copy opens with whatever hint survived, the other with its hint removed (a full read,
    // as before the hint). They must find the same records and the same torn tail, and keep
    // every record a sync acknowledged.
    let mut used_hint = 0;
    let mut torn = 0;
    for seed in 0..300u64 {
        let mut rng = SimRng::new(seed);
        let disk = SimDisk::new();
        // 16 KiB segments: hint steps of 2 KiB, rolls every few dozen records.
        let o = LogOptions {
            durability: Durability::Never,
            ..crate::helpers::opts(16 << 10, 2000)
        };
        let (log, _) = Log::open_with(Arc::new(disk.clone()), "/store", o.clone()).unwrap();
        let mut acked = Vec::new();
        let mut pending = Vec::new();
        for i in 0..rng.range(1, 150) {
            let b = body(seed * 1000 + i, rng.range(1, 1500) as usize);
            pending.push((log.append(&b).unwrap(), b));
            if rng.chance(0.2) {
                log.sync().unwrap();
                acked.append(&mut pending);
            }
        }
        log.flush().unwrap();
        let cut = PowerCutOptions::random(&mut rng);
        disk.power_cut_with(&mut rng, &cut);
        drop(log);
        let base = disk
            .durable_list(Path::new("/store"))
            .iter()
            .filter_map(|n| deadletter::sim::parse_segment_name(n))
            .max()
            .expect("a segment");
        let hint = Path::new("/store").join(temp_name(base));
        let full = disk.fork();
        let had_hint = disk.file_bytes(&hint).is_some_and(|h| h.len() == 32);
        if had_hint {
            deadletter::sim::Vfs::remove(&full, &hint).unwrap();
        }
        let ctx = format!("seed {seed} ({cut:?}, hint {had_hint})");
        let (a, ra) = Log::open_with(Arc::new(disk.clone()), "/store", o.clone())
            .unwrap_or_else(|e| panic!("{ctx}: open with the hint: {e}"));
        let (b, rb) = Log::open_with(Arc::new(full.clone()), "/store", o.clone())
            .unwrap_or_else(|e| panic!("{ctx}: open without it: {e}"));
        let got = read_all(&a);
        assert_eq!(got, read_all(&b), "{ctx}: records");
        assert_eq!(ra.torn_tail, rb.torn_tail, "{ctx}: torn tail");
        assert_eq!(ra.records, rb.records, "{ctx}");
        assert!(
            got.starts_with(&acked),
            "{ctx}: an acknowledged record is lost"
        );
        used_hint += usize::from(had_hint && ra.removed_temp_files.is_empty());
        torn += usize::from(ra.torn_tail.is_some());
        drop((a, b));
    }
    assert!(used_hint > 100, "opens that used a hint: {used_hint}");
    assert!(torn > 10, "opens that found a torn tail: {torn}");
}
