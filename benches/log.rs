//! Log throughput: appends under `Never` and `Always` (one at a time and in batches of
//! 1,000), the bare `write` + `fdatasync` loop the durable appends are measured against,
//! sequential reads through the memory map with checksum checks, and the open (recovery) of
//! a log of three records with 1 MiB and 64 MiB segments (it must not cost more with the
//! larger one).
//!
//! `cargo bench --features sim --bench log` (the log is reached through `deadletter::sim`)
//! prints criterion's report and, at the end, a summary in records/s and MB/s (1 MB = 10^6
//! bytes) for every case, with the targets beside them. Data goes under
//! `target/bench-data/log/` (a real disk: /tmp may be a tmpfs, where fsync costs nothing).

mod common;

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use deadletter::sim::{Log, LogOptions};
use deadletter::store::Durability;

const SIZES: [usize; 3] = [100, 1024, 64 << 10];

/// Per case: (records, bytes, time) summed over every timed run, warm-up included.
static TOTALS: Mutex<BTreeMap<String, (u64, u64, Duration)>> = Mutex::new(BTreeMap::new());

fn record(case: &str, records: u64, bytes: u64, took: Duration) {
    let mut t = TOTALS.lock().unwrap();
    let e = t.entry(case.to_string()).or_default();
    e.0 += records;
    e.1 += bytes;
    e.2 += took;
}

fn data_dir(name: &str) -> PathBuf {
    common::fresh_dir("log", name)
}

fn size_name(size: usize) -> String {
    if size >= 1024 {
        format!("{}KiB", size / 1024)
    } else {
        format!("{size}B")
    }
}

fn throughput(size: usize, records: u64) -> Throughput {
    // Small records are counted in records, large ones in bytes.
    if size >= 64 << 10 {
        Throughput::BytesDecimal(size as u64 * records)
    } else {
        Throughput::Elements(records)
    }
}

fn open(name: &str, durability: Durability) -> Log {
    let opts = LogOptions {
        durability,
        max_record_size: 1 << 20,
        ..LogOptions::default()
    };
    Log::open(data_dir(name), opts).unwrap().0
}

fn bench_append_never(c: &mut Criterion) {
    let mut g = c.benchmark_group("append_never");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for size in SIZES {
        let case = format!("append_never/{}", size_name(size));
        let log = open("never", Durability::Never);
        let body = vec![0xa5u8; size];
        g.throughput(throughput(size, 1));
        g.bench_function(BenchmarkId::from_parameter(size_name(size)), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    log.append(&body).unwrap();
                }
                log.flush().unwrap();
                let took = start.elapsed();
                record(&case, iters, iters * size as u64, took);
                // Keep the disk use bounded, outside the timed part.
                log.delete_below(log.end_position()).unwrap();
                took
            })
        });
    }
    g.finish();
}

/// A file of `len` bytes written in full (zeros) and synced: the bare loop's playground.
fn preallocated_file(name: &str, len: u64) -> File {
    let path = data_dir(name).join("prealloc");
    let file: File = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let zeros = vec![0u8; 1 << 20];
    for i in 0..len / (1 << 20) {
        file.write_all_at(&zeros, i << 20).unwrap();
    }
    file.sync_all().unwrap();
    file
}

const BARE_LEN: u64 = 64 << 20;

/// One `pwrite` + `fdatasync` at `*offset`, wrapping around the preallocated file.
fn bare_write(file: &File, buf: &[u8], offset: &mut u64) {
    if *offset + buf.len() as u64 > BARE_LEN {
        *offset = 0;
    }
    file.write_all_at(buf, *offset).unwrap();
    file.sync_data().unwrap();
    *offset += buf.len() as u64;
}

fn bench_append_always(c: &mut Criterion) {
    let mut g = c.benchmark_group("append_always");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for batch in [1usize, 1000] {
        for size in SIZES {
            let id = format!("batch{batch}/{}", size_name(size));
            let case = format!("append_always/{id}");
            let log = open("always", Durability::Always);
            let bodies = vec![vec![0x5au8; size]; batch];
            // One at a time, the bare loop runs interleaved with the log's appends, in chunks
            // of 16, so that both see the same disk at the same moment (this machine's fsync
            // latency drifts with other load); it is recorded as `paired_bare/...`.
            let bare = (batch == 1).then(|| preallocated_file("paired-bare", BARE_LEN));
            let mut bare_offset = 0u64;
            let paired = format!("paired_bare_write_fdatasync/{}", size_name(size));
            g.throughput(throughput(size, batch as u64));
            g.bench_function(BenchmarkId::from_parameter(&id), |b| {
                b.iter_custom(|iters| {
                    let mut took = Duration::ZERO;
                    let mut bare_took = Duration::ZERO;
                    let mut done = 0;
                    while done < iters {
                        let n = (iters - done).min(16);
                        if let Some(file) = &bare {
                            let start = Instant::now();
                            for _ in 0..n {
                                bare_write(file, &bodies[0], &mut bare_offset);
                            }
                            bare_took += start.elapsed();
                        }
                        let start = Instant::now();
                        for _ in 0..n {
                            if batch == 1 {
                                log.append(&bodies[0]).unwrap();
                            } else {
                                log.append_batch(&bodies).unwrap();
                            }
                        }
                        took += start.elapsed();
                        done += n;
                    }
                    if bare.is_some() {
                        record(&paired, iters, iters * size as u64, bare_took);
                    }
                    let n = iters * batch as u64;
                    record(&case, n, n * size as u64, took);
                    log.delete_below(log.end_position()).unwrap();
                    took
                })
            });
        }
    }
    g.finish();
}

/// The bar for durable appends: `pwrite` + `fdatasync` of one record at a time on a file
/// that was written in full (zeros) and synced beforehand, so no block allocation or size
/// change is involved.
fn bench_bare_fdatasync(c: &mut Criterion) {
    let mut g = c.benchmark_group("baseline_write_fdatasync");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let file = preallocated_file("bare", BARE_LEN);
    for size in SIZES {
        let case = format!("baseline_write_fdatasync/{}", size_name(size));
        let buf = vec![0x77u8; size];
        let mut offset = 0u64;
        g.throughput(throughput(size, 1));
        g.bench_function(BenchmarkId::from_parameter(size_name(size)), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    bare_write(&file, &buf, &mut offset);
                }
                let took = start.elapsed();
                record(&case, iters, iters * size as u64, took);
                took
            })
        });
    }
    g.finish();
}

/// Sequential reads through the memory map: every record's checksum is verified by the
/// iterator, and the body is touched.
fn bench_read_mmap(c: &mut Criterion) {
    let mut g = c.benchmark_group("read_mmap_iter");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for size in SIZES {
        let case = format!("read_mmap_iter/{}", size_name(size));
        let log = open(&format!("read-{size}"), Durability::Never);
        let count = ((256u64 << 20) / (size as u64 + 16)).min(1_000_000);
        let bodies = vec![vec![0x3cu8; size]; 1000];
        let mut left = count;
        while left > 0 {
            let n = left.min(1000) as usize;
            log.append_batch(&bodies[..n]).unwrap();
            left -= n as u64;
        }
        log.sync().unwrap();
        g.throughput(throughput(size, 1));
        g.bench_function(BenchmarkId::from_parameter(size_name(size)), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                let mut done = 0u64;
                let mut sum = 0u64;
                while done < iters {
                    for r in log.iter_from(0).unwrap().take((iters - done) as usize) {
                        let (_, rec) = r.unwrap();
                        sum = sum.wrapping_add(rec[rec.len() - 1] as u64);
                        done += 1;
                    }
                }
                std::hint::black_box(sum);
                let took = start.elapsed();
                record(&case, iters, iters * size as u64, took);
                took
            })
        });
    }
    g.finish();
}

fn print_summary() {
    let t = TOTALS.lock().unwrap();
    let rate = |case: &str| -> Option<(f64, f64)> {
        let &(records, bytes, took) = t.get(case)?;
        let s = took.as_secs_f64();
        Some((records as f64 / s, bytes as f64 / s / 1e6))
    };
    println!("\n== summary (mean over every timed run; MB = 10^6 bytes)");
    println!("{:<42} {:>14} {:>12}", "case", "records/s", "MB/s");
    for case in t.keys() {
        if let Some((r, m)) = rate(case) {
            println!("{case:<42} {r:>14.0} {m:>12.1}");
        }
    }
    println!("\n== targets");
    let check = |what: &str, ok: Option<bool>| {
        let verdict = match ok {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "not measured",
        };
        println!("{what:<66} {verdict}");
    };
    check(
        "Never, 100 B: >= 5,000,000 records/s",
        rate("append_never/100B").map(|(r, _)| r >= 5e6),
    );
    check(
        "Never, 64 KiB: >= 1 GB/s",
        rate("append_never/64KiB").map(|(_, m)| m >= 1000.0),
    );
    for size in SIZES {
        let name = size_name(size);
        let log = rate(&format!("append_always/batch1/{name}"));
        let bare = rate(&format!("paired_bare_write_fdatasync/{name}"));
        if let (Some((l, _)), Some((b, _))) = (log, bare) {
            println!(
                "Always one at a time, {name}: {:.0}/s = {:.1}% of the interleaved bare \
                 write+fdatasync loop ({b:.0}/s)",
                l,
                100.0 * l / b
            );
        }
        check(
            &format!("Always one at a time, {name}: >= 90% of the bare loop"),
            log.zip(bare).map(|((l, _), (b, _))| l >= 0.9 * b),
        );
    }
    check(
        "Always, batches of 1,000 x 100 B: >= 1,500,000 records/s",
        rate("append_always/batch1000/100B").map(|(r, _)| r >= 1.5e6),
    );
    check(
        "mmap reads with CRC, 100 B: >= 10,000,000 records/s",
        rate("read_mmap_iter/100B").map(|(r, _)| r >= 1e7),
    );
}

fn bench_open_small(c: &mut Criterion) {
    let mut group = c.benchmark_group("open_3_records");
    for segment_size in [1u64 << 20, 64 << 20] {
        let name = format!("{}MiB", segment_size >> 20);
        let dir = data_dir(&format!("open-{name}"));
        let opts = LogOptions {
            segment_size,
            max_record_size: 64 << 10,
            ..LogOptions::default()
        };
        {
            let (log, _) = Log::open(&dir, opts.clone()).unwrap();
            for i in 0..3u8 {
                log.append(&[i + 1; 100]).unwrap();
            }
            log.close().unwrap();
        }
        group.bench_function(BenchmarkId::from_parameter(&name), |b| {
            b.iter(|| {
                let started = Instant::now();
                let (log, report) = Log::open(&dir, opts.clone()).unwrap();
                assert_eq!(report.records, 3);
                drop(log);
                record(&format!("open_3_records/{name}"), 1, 0, started.elapsed());
            })
        });
    }
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench_open_small(&mut c);
    bench_append_never(&mut c);
    bench_append_always(&mut c);
    bench_bare_fdatasync(&mut c);
    bench_read_mmap(&mut c);
    c.final_summary();
    print_summary();
}
