//! Measuring helpers: peak RSS, bytes on disk, scratch directories, payloads,
//! medians.
//!
//! Peak RSS: every contestant runs in this one process, so the absolute
//! high-water mark would carry over from run to run. Before each measured
//! part the harness resets the kernel's peak (`5` into `/proc/self/clear_refs`)
//! and notes the current RSS; afterwards it reports `VmHWM - that RSS`, i.e.
//! how much resident memory the contestant added at its peak during the run.
//! Memory the allocator kept from earlier runs can hide part of it, so this is
//! a lower bound. Where `/proc` is missing or not writable it is `None`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

static TRACE: AtomicBool = AtomicBool::new(false);

/// Turns on phase timing on stderr (`--trace`).
pub fn enable_trace() {
    TRACE.store(true, Ordering::Relaxed);
}

/// With `--trace`, prints how long an untimed phase (fill, settle, cleanup) took.
pub fn trace(phase: &str, since: Instant) {
    if TRACE.load(Ordering::Relaxed) {
        eprintln!("    {phase}: {:.3}s", since.elapsed().as_secs_f64());
    }
}

/// A peak-RSS measurement window (see the module doc).
pub struct RssWindow {
    start: Option<u64>,
}

fn status_kib(field: &str) -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

impl RssWindow {
    /// Resets the kernel's peak-RSS counter and notes the current RSS.
    pub fn start() -> Self {
        let reset = fs::write("/proc/self/clear_refs", "5").is_ok();
        let start = if reset { status_kib("VmRSS:") } else { None };
        RssWindow { start }
    }

    /// Peak RSS growth since `start`, in bytes.
    pub fn peak_delta(&self) -> Option<u64> {
        let start = self.start?;
        let peak = status_kib("VmHWM:")?;
        Some(peak.saturating_sub(start) * 1024)
    }
}

/// Sum of the sizes (`st_size`) of all files and directories under `path`.
pub fn disk_bytes(path: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(path) else {
        return 0;
    };
    let mut total = 0;
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        total += meta.len();
        if meta.is_dir() {
            total += disk_bytes(&entry.path());
        }
    }
    total
}

/// Flushes the file system holding `path` (`sync -f`), so that writes of a
/// non-durable prefill are not paid for by the next measured fsync.
pub fn settle(path: &Path) {
    let _ = Command::new("sync").arg("-f").arg(path).status();
}

/// Root of the scratch stores: `tmp` beside the report (`target/compare/tmp`).
pub fn scratch_root() -> PathBuf {
    crate::report::out_dir().join("tmp")
}

/// A fresh empty directory under [`scratch_root`], removed on drop.
///
/// The root gets the ext4 "top directory" attribute (`chattr +T`, best
/// effort), so that each store directory is placed in a fresh block group.
/// Without it every store lands in the same group, and on ext4 without a
/// journal (as on this project's machines) inode allocation skips inodes
/// deleted in the last minute or so, scanning past them one by one: file
/// creation in a new store then slowed down up to tenfold depending on how
/// many files the previous run had just deleted.
pub fn scratch_dir(label: &str) -> std::io::Result<tempfile::TempDir> {
    let root = scratch_root();
    if !root.exists() {
        fs::create_dir_all(&root)?;
        let _ = Command::new("chattr")
            .arg("+T")
            .arg(&root)
            .stderr(std::process::Stdio::null())
            .status();
    }
    tempfile::Builder::new()
        .prefix(&format!("{label}-"))
        .tempdir_in(root)
}

/// Digits of the sequence number at the start of every payload.
const SEQ_DIGITS: usize = 12;

/// A printable ASCII payload of `size` bytes starting with `seq` in decimal.
pub fn payload(size: usize, seq: u64) -> Vec<u8> {
    let mut out = format!("{seq:0width$}", width = SEQ_DIGITS).into_bytes();
    let mut x = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while out.len() < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push(b'a' + (x % 26) as u8);
    }
    out.truncate(size.max(SEQ_DIGITS));
    out
}

/// The sequence number a [`payload`] starts with.
pub fn payload_seq(payload: &[u8]) -> Option<u64> {
    std::str::from_utf8(payload.get(..SEQ_DIGITS)?)
        .ok()?
        .parse()
        .ok()
}

/// Median of a non-empty sample (mean of the middle two for even sizes).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let mid = v.len() / 2;
    if v.is_empty() {
        0.0
    } else if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}
