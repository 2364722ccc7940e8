//! Building, damaging and reading back the logs of these tests.

use std::path::{Path, PathBuf};

use deadletter::recovery::RecoveryMode;
use deadletter::sim::{Log, LogOptions};
use deadletter::store::Durability;

/// Bytes of a segment header of the current format (version 2: 56; version 1's had 32).
pub const HEADER: u64 = deadletter::sim::V2_HEADER_LEN as u64;
/// Bytes of a record frame's header.
pub const FRAME: u64 = 16;

/// Durable log options with these sizes.
pub fn opts(segment_size: u64, max_record_size: usize) -> LogOptions {
    LogOptions {
        segment_size,
        max_record_size,
        durability: Durability::Always,
        ..LogOptions::default()
    }
}

/// The same options, recovering in quarantine mode.
pub fn quarantine(o: LogOptions) -> LogOptions {
    LogOptions {
        recovery: RecoveryMode::Quarantine,
        ..o
    }
}

/// A deterministic body with no zero byte, so "last non-zero byte" arithmetic is exact.
pub fn body(i: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| ((i * 31 + j as u64 * 7) % 251) as u8 + 1)
        .collect()
}

/// The path of the segment that starts at log position `base`.
pub fn seg_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}.seg"))
}

/// Every record of the log, with its position.
pub fn read_all(log: &Log) -> Vec<(u64, Vec<u8>)> {
    log.iter_from(0)
        .expect("iter_from")
        .map(|r| {
            let (p, rec) = r.expect("record");
            (p, rec.to_vec())
        })
        .collect()
}

/// Writes `bodies` one append at a time under `Always` into a fresh log in `dir`.
pub fn write_log(dir: &Path, o: &LogOptions, bodies: &[Vec<u8>]) -> Vec<u64> {
    let (log, _) = Log::open(dir, o.clone()).expect("open");
    let positions = bodies
        .iter()
        .map(|b| log.append(b).expect("append"))
        .collect();
    log.close().expect("close");
    positions
}

/// A fresh directory under `root` holding one segment file with the given bytes.
pub fn case_dir(root: &Path, n: usize, base: u64, bytes: &[u8]) -> PathBuf {
    let dir = root.join(format!("case-{n}"));
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(seg_path(&dir, base), bytes).unwrap();
    dir
}

/// Writes `count` records of 50 bytes (several segments when segments are small); returns
/// them with their positions.
pub fn multi_segment_log(dir: &Path, o: &LogOptions, count: u64) -> Vec<(u64, Vec<u8>)> {
    let bodies: Vec<Vec<u8>> = (0..count).map(|i| body(i, 50)).collect();
    let positions = write_log(dir, o, &bodies);
    positions.into_iter().zip(bodies).collect()
}

/// The first positions of the segment files in `dir`, in order.
pub fn segment_bases(dir: &Path) -> Vec<u64> {
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
