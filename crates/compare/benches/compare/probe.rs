//! deadletter's open and memory, measured in a process of their own (the
//! goals "cheap opens" and "memory per pending message" of issue 14).
//!
//! In-process peak RSS is blurred by everything the harness ran before, so
//! the parent writes a store, flushes it (`sync -f`), then runs this bench
//! binary again as a child (`--probe-open=DIR,SEGMENT_BYTES,COMPACT`). The child
//! notes its RSS, opens the store (durable, the owner's open, not a read-only
//! snapshot), reads the queue's stats, and prints one JSON line
//! ([`ChildReport`]): the open's wall time, its peak RSS (`VmHWM`, the
//! whole process) and anonymous memory (`RssAnon`, the heap: the index)
//! before and after. With COMPACT it then runs one compaction while a thread
//! samples `RssAnon` every millisecond, for the peak of the index and
//! compaction's own copy of it.
//!
//! Two probes: a store of [`FEW`] messages, once per segment size
//! (`Plan::probe_segment_sizes`), and a store of `Plan::probe_pending`
//! pending messages with the compaction. Each probe runs `Plan::runs` times:
//! the median time, the largest memory figures.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use deadletter::{Config, MessageQueue, Store};
use serde::{Deserialize, Serialize};

use crate::contestant::BenchResult;
use crate::deadletter_queue::{bench_queue, config as harness_config};
use crate::measure::{median, payload, scratch_dir, settle};
use crate::plan::Plan;

/// The argument that makes the bench binary a probe child.
pub const CHILD_ARG: &str = "--probe-open=";

/// Messages in the "few messages" store.
pub const FEW: usize = 3;

/// What a child measured (one JSON line on its stdout).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct ChildReport {
    /// Wall time of `Store::open` + the queue's stats, in seconds.
    pub open_secs: f64,
    /// Pending messages the stats counted.
    pub pending: u64,
    /// `VmRSS` before the open (the process's own baseline), bytes.
    pub rss_before: u64,
    /// `VmHWM` after the open and stats (peak of the whole process), bytes.
    pub hwm_after_open: u64,
    /// `RssAnon` before the open, bytes.
    pub anon_before: u64,
    /// `RssAnon` after the open and stats, bytes.
    pub anon_after_open: u64,
    /// Largest `RssAnon` sampled during the compaction (0 without one), bytes.
    pub anon_peak_compaction: u64,
}

fn status_bytes(field: &str) -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// The child's side: `spec` is what follows [`CHILD_ARG`]. Prints its report.
pub fn child_main(spec: &str) -> BenchResult<()> {
    let mut parts = spec.split(',');
    let dir = parts.next().ok_or("probe: no directory")?;
    let segment: u64 = parts.next().ok_or("probe: no segment size")?.parse()?;
    let compact = parts.next() == Some("1");
    let rss_before = status_bytes("VmRSS:");
    let anon_before = status_bytes("RssAnon:");
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let start = Instant::now();
    let store = Store::open(dir, config(segment))?;
    let queue = bench_queue(&store)?;
    let stats = MessageQueue::stats(&queue)?;
    let open_secs = start.elapsed().as_secs_f64();
    let mut report = ChildReport {
        open_secs,
        pending: stats.counts.ready + stats.counts.in_flight,
        rss_before,
        hwm_after_open: status_bytes("VmHWM:"),
        anon_before,
        anon_after_open: status_bytes("RssAnon:"),
        anon_peak_compaction: 0,
    };
    if compact {
        let peak = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        thread::scope(|s| -> BenchResult<()> {
            s.spawn(|| {
                while !stop.load(Ordering::Acquire) {
                    peak.fetch_max(status_bytes("RssAnon:"), Ordering::AcqRel);
                    thread::sleep(Duration::from_millis(1));
                }
            });
            let compacted = store.compact_now();
            stop.store(true, Ordering::Release);
            compacted?;
            Ok(())
        })?;
        report.anon_peak_compaction = peak.load(Ordering::Acquire).max(status_bytes("RssAnon:"));
    }
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

/// The harness's durable configuration with segments of `segment` bytes.
fn config(segment: u64) -> Config {
    harness_config(true).segment_size(segment)
}

fn run_child(dir: &Path, segment: u64, compact: bool) -> BenchResult<ChildReport> {
    let exe = std::env::current_exe()?;
    let out = Command::new(exe)
        .arg(format!(
            "{CHILD_ARG}{},{segment},{}",
            dir.display(),
            u8::from(compact)
        ))
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "probe child failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    let line = String::from_utf8_lossy(&out.stdout);
    Ok(serde_json::from_str(line.trim())?)
}

/// One probe's result over its runs.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct OpenProbe {
    /// Messages in the store.
    pub messages: usize,
    /// Segment size, bytes.
    pub segment_bytes: u64,
    /// Median wall time of open + stats, seconds.
    pub open_secs: f64,
    /// Largest growth of the process's peak RSS over the open
    /// (`VmHWM` after − `VmRSS` before), bytes.
    pub open_rss_growth_bytes: u64,
    /// Largest peak RSS of the whole child process, bytes (its baseline
    /// included: the bench binary itself).
    pub process_peak_rss_bytes: u64,
    /// Anonymous memory the open store holds, per message
    /// (`RssAnon` after − before, over `messages`), bytes.
    pub anon_bytes_per_msg: f64,
    /// Peak anonymous memory during a compaction, per message (0 when not
    /// compacted), bytes.
    pub anon_peak_compaction_per_msg: f64,
}

fn summarize(messages: usize, segment: u64, runs: &[ChildReport]) -> OpenProbe {
    let secs: Vec<f64> = runs.iter().map(|r| r.open_secs).collect();
    let per = |bytes: u64| bytes as f64 / messages.max(1) as f64;
    OpenProbe {
        messages,
        segment_bytes: segment,
        open_secs: median(&secs),
        open_rss_growth_bytes: runs
            .iter()
            .map(|r| r.hwm_after_open.saturating_sub(r.rss_before))
            .max()
            .unwrap_or(0),
        process_peak_rss_bytes: runs.iter().map(|r| r.hwm_after_open).max().unwrap_or(0),
        anon_bytes_per_msg: runs
            .iter()
            .map(|r| per(r.anon_after_open.saturating_sub(r.anon_before)))
            .fold(0.0, f64::max),
        anon_peak_compaction_per_msg: runs
            .iter()
            .map(|r| per(r.anon_peak_compaction.saturating_sub(r.anon_before)))
            .fold(0.0, f64::max),
    }
}

/// Writes a store of `n` pending messages of `size` bytes with `segment`-byte
/// segments (durable, so its segments are preallocated as a user's are),
/// flushed to disk.
fn write_store(dir: &Path, n: usize, size: usize, segment: u64) -> BenchResult<()> {
    let store = Store::open(dir, config(segment))?;
    let queue = bench_queue(&store)?;
    let batch: Vec<Vec<u8>> = (0..n.min(1000) as u64).map(|i| payload(size, i)).collect();
    let mut left = n;
    while left > 0 {
        let k = left.min(batch.len());
        queue.enqueue_batch(&batch[..k])?;
        left -= k;
    }
    drop((queue, store));
    settle(dir);
    Ok(())
}

/// Runs every probe of the plan.
pub fn measure(plan: &Plan) -> BenchResult<Vec<OpenProbe>> {
    let mut out = Vec::new();
    let mut probe = |messages: usize, segment: u64, compact: bool| -> BenchResult<()> {
        let dir = scratch_dir("probe-open")?;
        write_store(dir.path(), messages, 100, segment)?;
        let mut runs = Vec::new();
        for _ in 0..plan.runs {
            let r = run_child(dir.path(), segment, compact)?;
            if r.pending != messages as u64 {
                return Err(format!("probe counted {} pending of {messages}", r.pending).into());
            }
            runs.push(r);
        }
        out.push(summarize(messages, segment, &runs));
        Ok(())
    };
    for &segment in &plan.probe_segment_sizes {
        probe(FEW, segment, false)?;
    }
    probe(plan.probe_pending, plan.probe_segment_sizes[0], true)?;
    Ok(out)
}
