//! Machine-limit reference rows, measured in the same run as the contestants:
//! sequential write bandwidth, one-fsync-per-append rate (with the latency
//! percentiles of each write + `fdatasync`) and memcpy bandwidth. Each rate is
//! the median of `Plan::runs` runs; the percentiles pool the samples of all
//! runs. Measured in a scratch dir beside the stores (same file system).

use std::fs::File;
use std::hint::black_box;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::time::Instant;

use serde::Serialize;

use crate::latency::Percentiles;
use crate::measure::{median, scratch_dir};
use crate::plan::Plan;

/// The reference numbers, as written to the JSON report.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Machine {
    /// Sequential write of `Plan::seq_write_bytes` in 1 MiB chunks + fsync,
    /// in MB/s (10^6 bytes).
    pub seq_write_mb_s: f64,
    /// 100-byte `pwrite` + `fdatasync` pairs per second on a preallocated,
    /// already written and synced file.
    pub fsync_per_s: f64,
    /// Latency of one 100-byte `pwrite` + `fdatasync` (the loop of `fsync_per_s`).
    pub fdatasync_latency: Percentiles,
    /// `copy_from_slice` bandwidth between two 64 MiB buffers, in GB/s.
    pub memcpy_gb_s: f64,
}

const CHUNK: usize = 1 << 20;

fn seq_write(bytes: usize) -> io::Result<f64> {
    let dir = scratch_dir("machine-seq")?;
    let chunk = vec![0x5au8; CHUNK];
    let mut f = File::create(dir.path().join("seq"))?;
    let start = Instant::now();
    for _ in 0..bytes / CHUNK {
        f.write_all(&chunk)?;
    }
    f.sync_all()?;
    Ok(bytes as f64 / start.elapsed().as_secs_f64() / 1e6)
}

/// The rate of 100 B write + fdatasync pairs; each pair's latency goes to `latencies`.
fn fsync_rate(plan: &Plan, latencies: &mut Vec<u64>) -> io::Result<f64> {
    const RECORD: usize = 100;
    let dir = scratch_dir("machine-fsync")?;
    let mut f = File::create(dir.path().join("log"))?;
    // Preallocate by writing the whole file once, then make it durable.
    let size = 16 * CHUNK;
    let chunk = vec![0u8; CHUNK];
    for _ in 0..size / CHUNK {
        f.write_all(&chunk)?;
    }
    f.sync_all()?;
    let record = [0xa5u8; RECORD];
    let start = Instant::now();
    let mut done = 0u64;
    let mut offset = 0u64;
    while start.elapsed() < plan.budget {
        let t = Instant::now();
        f.write_all_at(&record, offset)?;
        f.sync_data()?;
        latencies.push(t.elapsed().as_nanos() as u64);
        offset = (offset + RECORD as u64) % (size - RECORD) as u64;
        done += 1;
    }
    Ok(done as f64 / start.elapsed().as_secs_f64())
}

fn memcpy(bytes: usize) -> f64 {
    const BUF: usize = 64 << 20;
    let src = vec![0x3cu8; BUF];
    let mut dst = vec![0u8; BUF];
    dst.copy_from_slice(&src); // fault the pages in first
    let rounds = (bytes / BUF).max(1);
    let start = Instant::now();
    for _ in 0..rounds {
        dst.copy_from_slice(black_box(&src));
        black_box(&mut dst);
    }
    (rounds * BUF) as f64 / start.elapsed().as_secs_f64() / 1e9
}

/// Measures the three reference numbers.
pub fn measure(plan: &Plan) -> io::Result<Machine> {
    let mut seq = Vec::new();
    let mut fsync = Vec::new();
    let mut copy = Vec::new();
    let mut latencies = Vec::new();
    for _ in 0..plan.runs {
        seq.push(seq_write(plan.seq_write_bytes)?);
        fsync.push(fsync_rate(plan, &mut latencies)?);
        copy.push(memcpy(plan.memcpy_bytes));
    }
    Ok(Machine {
        seq_write_mb_s: median(&seq),
        fsync_per_s: median(&fsync),
        fdatasync_latency: Percentiles::of(&mut latencies).unwrap_or_default(),
        memcpy_gb_s: median(&copy),
    })
}
