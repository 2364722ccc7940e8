//! Opening a small store: three messages in a store whose segments are 8 MiB, 64 MiB (the
//! default) and 1 GiB (preallocated, the defaults otherwise). The open must cost the same whatever the
//! segment size (issue 14, goal 6: under 10 ms and under 10 MB of RSS).
//!
//! - `open/{8,64,1024}MiB`: `Store::open` (the lock, recovery, the engine's replay), the store
//!   closed cleanly before, as a command-line call finds it;
//! - `open_read_only/{8,64,1024}MiB`: `Store::open_read_only`, the snapshot the command line's
//!   read commands take;
//! - `open_without_hint/{8,64,1024}MiB`, `open_read_only_without_hint/...`: the same stores
//!   with their tail hints removed before each open: the open reads the whole active
//!   segment, as every open did before the hint (the baseline, side by side; a writable one
//!   then writes a hint, which costs an fsync more than before the hint);
//! - `open_after_kill/{8,64}MiB`: `Store::open` of a store whose owner never closed it (a
//!   child process that enqueued three messages and was killed with SIGKILL), so nothing a
//!   clean close writes helps it.
//!
//! Only the open is timed; the close after it is not. After the benchmarks, a process that
//! does nothing but one such open (this binary run again as a child, `DEADLETTER_OPEN_CHILD`)
//! reports its peak resident set size (`VmHWM`), the CPU time of its open (every thread;
//! steadier than wall time on a loaded machine) and the open's wall time: medians of 11 runs.
//!
//! `cargo bench --bench open`. Stores live under `target/bench-data/open` (on disk).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode};
use deadletter::{Config, Store};

const SEGMENT_SIZES: [u64; 3] = [8 << 20, 64 << 20, 1 << 30];
/// Sizes for the opens after a kill, each of which needs a fresh copy of the store: not
/// 1 GiB, whose copy per open would dominate the run.
const KILLED_SIZES: [u64; 2] = [8 << 20, 64 << 20];
const CHILD_ENV: &str = "DEADLETTER_OPEN_CHILD";

fn config(segment_size: u64) -> Config {
    Config::default().segment_size(segment_size)
}

fn name(segment_size: u64) -> String {
    format!("{}MiB", segment_size >> 20)
}

/// Three messages, then a clean close.
fn small_store(segment_size: u64) -> PathBuf {
    let dir = common::fresh_dir("open", &format!("closed-{}", name(segment_size)));
    let store = Store::open(&dir, config(segment_size)).expect("create the store");
    let queue = store.queue("orders").expect("queue");
    for i in 0..3u8 {
        queue.enqueue(vec![i; 100]).expect("enqueue");
    }
    store.close().expect("close");
    dir
}

/// Three messages enqueued by a child process killed with SIGKILL before it closed.
fn killed_store(segment_size: u64) -> PathBuf {
    let dir = common::fresh_dir("open", &format!("killed-{}", name(segment_size)));
    let mut child = Command::new(std::env::current_exe().expect("this binary"))
        .env(CHILD_ENV, format!("fill:{segment_size}:{}", dir.display()))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let mut out = String::new();
    use std::io::Read;
    let mut stdout = child.stdout.take().expect("child stdout");
    let mut buf = [0u8; 64];
    while !out.contains("filled") {
        let n = stdout.read(&mut buf).expect("read the child");
        assert!(n > 0, "the child stopped before filling the store");
        out.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    child.kill().expect("SIGKILL the child");
    let _ = child.wait();
    dir
}

/// Makes `to` a copy of the store directory `from` (its files; the lock file too).
fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).expect("create the copy");
    for entry in std::fs::read_dir(from).expect("list the store") {
        let entry = entry.expect("list the store");
        let target = to.join(entry.file_name());
        std::fs::copy(entry.path(), &target).expect("copy a file");
        // Written back before the timing starts: the open's own fsyncs must not pay for it.
        std::fs::File::open(&target)
            .and_then(|f| f.sync_all())
            .expect("sync the copy");
    }
}

/// Removes the tail hint (`{base:020}.tmp`) of a store directory.
fn remove_hints(dir: &Path) {
    for entry in std::fs::read_dir(dir).expect("list the store") {
        let path = entry.expect("list the store").path();
        if path.extension().is_some_and(|e| e == "tmp") {
            std::fs::remove_file(&path).expect("remove the hint");
        }
    }
}

/// What the child process does: fill a store and wait to be killed, or open one once and
/// print its peak resident set size.
fn child(task: &str) {
    let mut parts = task.splitn(3, ':');
    let (what, size, dir) = (
        parts.next().unwrap_or_default(),
        parts
            .next()
            .and_then(|s| s.parse::<u64>().ok())
            .expect("size"),
        Path::new(parts.next().expect("dir")),
    );
    match what {
        "fill" => {
            let store = Store::open(dir, config(size)).expect("create the store");
            let queue = store.queue("orders").expect("queue");
            for i in 0..3u8 {
                queue.enqueue(vec![i; 100]).expect("enqueue");
            }
            println!("filled");
            std::thread::sleep(Duration::from_secs(600));
        }
        "open" | "open_read_only" => {
            let (cpu, wall) = (process_cpu(), Instant::now());
            let store = if what == "open" {
                Store::open(dir, config(size))
            } else {
                Store::open_read_only(dir, config(size))
            }
            .expect("open");
            let (cpu, wall) = (process_cpu() - cpu, wall.elapsed());
            let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
            let hwm_kb: u64 = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0);
            println!("{hwm_kb} {} {}", cpu.as_micros(), wall.as_micros());
            drop(store);
        }
        other => panic!("unknown child task {other}"),
    }
}

/// `strip`: remove the store's tail hint before each open (outside the timing), since a
/// writable open that finds none writes one.
fn bench_open(
    c: &mut Criterion,
    group: &str,
    dirs: &[(u64, PathBuf)],
    read_only: bool,
    strip: bool,
) {
    let mut g = c.benchmark_group(group);
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for (size, dir) in dirs {
        g.bench_function(BenchmarkId::from_parameter(name(*size)), |b| {
            b.iter_custom(|iters| {
                let mut took = Duration::ZERO;
                for _ in 0..iters {
                    if strip {
                        remove_hints(dir);
                    }
                    let start = Instant::now();
                    let store = if read_only {
                        Store::open_read_only(dir, config(*size))
                    } else {
                        Store::open(dir, config(*size))
                    }
                    .expect("open");
                    took += start.elapsed();
                    drop(store);
                }
                took
            })
        });
    }
    g.finish();
}

/// CPU time (user and system, every thread) this process has used.
fn process_cpu() -> Duration {
    // SAFETY: `usage` is a valid, writable rusage for getrusage to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    assert_eq!(rc, 0, "getrusage");
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Runs a child process that opens the store once, `RUNS` times: the medians of its peak
/// RSS (`VmHWM`), of the CPU time its open took (all threads) and of the open's wall time.
fn child_open(what: &str, size: u64, dir: &Path, fresh: impl Fn()) -> (u64, Duration, Duration) {
    const RUNS: usize = 11;
    let mut rows: Vec<(u64, u64, u64)> = (0..RUNS)
        .map(|_| {
            fresh();
            let out = Command::new(std::env::current_exe().expect("this binary"))
                .env(CHILD_ENV, format!("{what}:{size}:{}", dir.display()))
                .output()
                .expect("run the child");
            assert!(out.status.success(), "the child failed: {out:?}");
            let text = String::from_utf8_lossy(&out.stdout);
            let v: Vec<u64> = text
                .split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect();
            assert_eq!(v.len(), 3, "the child printed {text:?}");
            (v[0], v[1], v[2])
        })
        .collect();
    let median = |rows: &mut Vec<(u64, u64, u64)>, key: fn(&(u64, u64, u64)) -> u64| {
        rows.sort_by_key(key);
        key(&rows[RUNS / 2])
    };
    let rss = median(&mut rows, |r| r.0);
    let cpu = Duration::from_micros(median(&mut rows, |r| r.1));
    let wall = Duration::from_micros(median(&mut rows, |r| r.2));
    (rss, cpu, wall)
}

fn main() {
    if let Ok(task) = std::env::var(CHILD_ENV) {
        child(&task);
        return;
    }
    let closed: Vec<(u64, PathBuf)> = SEGMENT_SIZES.iter().map(|&s| (s, small_store(s))).collect();
    let mut c = Criterion::default().configure_from_args();
    bench_open(&mut c, "open", &closed, false, false);
    bench_open(&mut c, "open_read_only", &closed, true, false);
    // The same stores without their tail hints: the open reads the whole active segment,
    // as every open did before the hint (the baseline, measured side by side).
    let unhinted: Vec<(u64, PathBuf)> = closed
        .iter()
        .map(|(size, dir)| {
            let copy = common::data_root("open").join(format!("unhinted-{}", name(*size)));
            copy_dir(dir, &copy);
            remove_hints(&copy);
            (*size, copy)
        })
        .collect();
    bench_open(&mut c, "open_without_hint", &unhinted, false, true);
    bench_open(&mut c, "open_read_only_without_hint", &unhinted, true, true);
    // An open of a killed store finds it as the kill left it only the first time: the open
    // itself (and its close) make it a cleanly closed store again. So each timed open gets
    // a fresh copy of the store the kill left; the copy is outside the timing.
    let killed: Vec<(u64, PathBuf)> = KILLED_SIZES.iter().map(|&s| (s, killed_store(s))).collect();
    let mut g = c.benchmark_group("open_after_kill");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(3));
    for (size, pristine) in &killed {
        let copy = common::data_root("open").join(format!("copy-{}", name(*size)));
        g.bench_function(BenchmarkId::from_parameter(name(*size)), |b| {
            b.iter_custom(|iters| {
                let mut took = Duration::ZERO;
                for _ in 0..iters {
                    copy_dir(pristine, &copy);
                    let start = Instant::now();
                    let store = Store::open(&copy, config(*size)).expect("open");
                    took += start.elapsed();
                    drop(store);
                }
                took
            })
        });
    }
    g.finish();
    c.final_summary();
    println!(
        "\n== a process that opens the store once, medians of 11 runs: peak resident set \
         size (VmHWM), CPU time of the open (every thread), wall time of the open"
    );
    let row = |label: &str, what: &str, size: u64, dir: &Path, fresh: &dyn Fn()| {
        let (rss, cpu, wall) = child_open(what, size, dir, fresh);
        println!(
            "{label:<20} {:>6}: {:>6} kB {:>8.2} ms CPU {:>8.2} ms",
            name(size),
            rss,
            cpu.as_secs_f64() * 1e3,
            wall.as_secs_f64() * 1e3
        );
    };
    for ((size, dir), (_, unhinted)) in closed.iter().zip(&unhinted) {
        row("open", "open", *size, dir, &|| {});
        row("open (no hint)", "open", *size, unhinted, &|| {
            remove_hints(unhinted)
        });
        row("open_read_only", "open_read_only", *size, dir, &|| {});
        row(
            "read_only (no hint)",
            "open_read_only",
            *size,
            unhinted,
            &|| remove_hints(unhinted),
        );
    }
    for (size, pristine) in &killed {
        let copy = common::data_root("open").join(format!("copy-{}", name(*size)));
        row("open_after_kill", "open", *size, &copy, &|| {
            copy_dir(pristine, &copy)
        });
    }
    for size in SEGMENT_SIZES {
        for kind in ["closed", "killed", "copy", "unhinted"] {
            let _ = std::fs::remove_dir_all(
                common::data_root("open").join(format!("{kind}-{}", name(size))),
            );
        }
    }
}
