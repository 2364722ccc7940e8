//! Queue and DLQ throughput, not durable (`Config::fast()`), 100-byte payloads. Run with
//! `cargo bench --features sim --bench queue` (it counts log reads through
//! `deadletter::sim`).
//!
//! - `enqueue/one`, `enqueue/batch_1000`: producing;
//! - `lease_ack/100`: lease 100 then `ack_all`;
//! - `lease_retry/100`: lease 100 then a transient failure each (back in a later backoff);
//! - `lease_dead_letter/100`: lease 100 then `dead_letter` each;
//! - `dlq_stats`, `dlq_get`, `dlq_list_kind_100` on DLQs of 1,000 and 100,000 entries (the
//!   same cost at both sizes is the constant-time claim);
//! - `dlq/timeline_168h`: the failure history of the last 7 days, one call
//!   (`Dlq::failure_timeline`), beside `dlq/timeline_168h_by_scans`, the same counts as the
//!   dashboard took them before the store kept a history (one index scan per hour);
//! - `dlq_replay/10000`: bulk replay of 10,000 entries; `dlq_replay/transformed_10000`: the
//!   same with each payload through a function that changes its first byte
//!   (`Dlq::replay_transformed`: every payload read, transformed and written again, its
//!   old bytes kept in the new record).
//!
//! Before the benchmarks, the process measures the memory held per pending message: its
//! resident set size before and after enqueuing 1,000,000 messages into a fresh store, and the
//! size of the index those messages need (payloads stay on disk, read through the mmap).
//!
//! Store directories live under `target/bench-data/queue` (on disk, not a tmpfs); each is removed
//! when its benchmark is done. Throughputs are in messages (elements) per second; for the
//! DLQ read calls one element is one call.
//!
//! Time is wall-clock time by default. With `DEADLETTER_BENCH_CPU=1` it is the CPU time of
//! the benchmarking thread instead (groups are then named `cpu/...`): stable on a shared,
//! busy machine, but it leaves out time spent blocked, such as the fsync when a segment is
//! sealed.

mod common;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{black_box, BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use deadletter::queue::{FailureReport, QueueOptions};
use deadletter::sim::StoreHooks;
use deadletter::{Config, Dlq, Failure, Filter, Page, Queue, ReplayOptions, Store};

const PAYLOAD_LEN: usize = 100;

/// True when benchmarks measure thread CPU time (`DEADLETTER_BENCH_CPU=1`).
fn cpu_mode() -> bool {
    static MODE: OnceLock<bool> = OnceLock::new();
    *MODE.get_or_init(|| std::env::var("DEADLETTER_BENCH_CPU").is_ok_and(|v| v == "1"))
}

/// CPU time used by the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A start time in the benchmark's unit (wall or thread CPU time).
#[derive(Clone, Copy)]
enum Stamp {
    Wall(Instant),
    Cpu(Duration),
}

impl Stamp {
    fn now() -> Stamp {
        if cpu_mode() {
            Stamp::Cpu(thread_cpu())
        } else {
            Stamp::Wall(Instant::now())
        }
    }
    fn elapsed(self) -> Duration {
        match self {
            Stamp::Wall(t) => t.elapsed(),
            Stamp::Cpu(t) => thread_cpu().saturating_sub(t),
        }
    }
}

/// Criterion measurement of the thread's CPU time, shown like wall time.
struct ThreadCpu(WallTime);

impl Measurement for ThreadCpu {
    type Intermediate = Duration;
    type Value = Duration;
    fn start(&self) -> Duration {
        thread_cpu()
    }
    fn end(&self, start: Duration) -> Duration {
        thread_cpu().saturating_sub(start)
    }
    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, value: &Duration) -> f64 {
        value.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        self.0.formatter()
    }
}

/// A benchmark group named `name`, or `cpu/name` when measuring CPU time.
fn group<'a, M: Measurement>(c: &'a mut Criterion<M>, name: &str) -> BenchmarkGroup<'a, M> {
    if cpu_mode() {
        c.benchmark_group(format!("cpu/{name}"))
    } else {
        c.benchmark_group(name)
    }
}
const KINDS: [&str; 5] = [
    "ValidationError",
    "TimeoutError",
    "ParseError",
    "AuthError",
    "RateLimited",
];

fn payload() -> Vec<u8> {
    (0..PAYLOAD_LEN).map(|i| b'a' + (i % 26) as u8).collect()
}

/// A store in its own directory under `target/bench-data/queue`, removed on drop.
struct Fixture {
    name: String,
    store: Option<Store>,
    queue: Option<Queue>,
    /// Messages enqueued into this store.
    written: u64,
}

impl Fixture {
    fn new(name: &str) -> Self {
        let mut f = Fixture {
            name: format!("{name}-{}", std::process::id()),
            store: None,
            queue: None,
            written: 0,
        };
        f.reset();
        f
    }

    fn dir(&self) -> PathBuf {
        common::data_root("queue").join(&self.name)
    }

    /// Closes the store, removes its directory and opens a fresh one (not timed).
    fn reset(&mut self) {
        self.queue = None;
        if let Some(s) = self.store.take() {
            s.close().unwrap();
        }
        let dir = self.dir();
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir, Config::fast()).unwrap();
        let options = QueueOptions::default()
            .max_attempts(u32::MAX)
            .visibility_timeout(Duration::from_secs(3600));
        self.queue = Some(store.queue_with("bench", options).unwrap());
        self.store = Some(store);
        self.written = 0;
    }

    /// Starts over once the store holds more than `max` messages, so the log and the index
    /// stay bounded however many iterations criterion asks for.
    fn reset_over(&mut self, max: u64) {
        if self.written > max {
            self.reset();
        }
    }

    fn queue(&self) -> &Queue {
        self.queue.as_ref().unwrap()
    }

    fn dlq(&self) -> Dlq {
        self.queue().dlq()
    }

    /// Enqueues `n` messages in batches of 1,000 (not timed).
    fn fill(&mut self, n: u64) {
        let p = payload();
        let batch: Vec<&[u8]> = vec![&p[..]; 1000];
        let mut left = n;
        while left > 0 {
            let k = left.min(1000) as usize;
            self.queue().enqueue_batch(&batch[..k]).unwrap();
            left -= k as u64;
        }
        self.written += n;
    }

    /// Fills the DLQ with `n` entries: kinds, workers and messages vary (not timed).
    fn fill_dlq(&mut self, n: u64) {
        self.fill(n);
        self.dead_letter_all(n);
    }

    /// Leases `n` ready messages and dead-letters each one.
    fn dead_letter_all(&self, n: u64) {
        let q = self.queue();
        let mut done = 0u64;
        while done < n {
            let msgs = q.lease(1000).unwrap();
            assert!(!msgs.is_empty(), "ran dry after {done} of {n}");
            for m in &msgs {
                let i = m.id() as usize;
                let failure = Failure::permanent(
                    KINDS[i % KINDS.len()],
                    format!("message {i} failed: upstream said no"),
                );
                let worker = format!("worker-{}", i % 4);
                let report = FailureReport::new(&failure).worker(&worker);
                q.dead_letter(m, &report).unwrap();
            }
            done += msgs.len() as u64;
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.queue = None;
        if let Some(s) = self.store.take() {
            let _ = s.close();
        }
        let _ = std::fs::remove_dir_all(self.dir());
    }
}

fn enqueue<M: Measurement<Value = Duration>>(c: &mut Criterion<M>) {
    let mut g = group(c, "enqueue");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    let p = payload();

    g.throughput(Throughput::Elements(1));
    g.bench_function("one", |b| {
        let mut fx = Fixture::new("enqueue-one");
        b.iter_custom(|iters| {
            fx.reset_over(3_000_000);
            let q = fx.queue().clone();
            let start = Stamp::now();
            for _ in 0..iters {
                black_box(q.enqueue(&p).unwrap());
            }
            let t = start.elapsed();
            fx.written += iters;
            t
        })
    });

    let batch: Vec<&[u8]> = vec![&p[..]; 1000];
    g.throughput(Throughput::Elements(1000));
    g.bench_function("batch_1000", |b| {
        let mut fx = Fixture::new("enqueue-batch");
        b.iter_custom(|iters| {
            fx.reset_over(3_000_000);
            let q = fx.queue().clone();
            let start = Stamp::now();
            for _ in 0..iters {
                black_box(q.enqueue_batch(&batch).unwrap());
            }
            let t = start.elapsed();
            fx.written += iters * 1000;
            t
        })
    });
    g.finish();
}

fn consume<M: Measurement<Value = Duration>>(c: &mut Criterion<M>) {
    let mut g = group(c, "consume");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    g.throughput(Throughput::Elements(100));

    g.bench_function("lease_ack/100", |b| {
        let mut fx = Fixture::new("lease-ack");
        b.iter_custom(|iters| {
            fx.reset_over(3_000_000);
            fx.fill(iters * 100);
            let q = fx.queue().clone();
            let start = Stamp::now();
            for _ in 0..iters {
                let msgs = q.lease(100).unwrap();
                debug_assert_eq!(msgs.len(), 100);
                q.ack_all(&msgs).unwrap();
            }
            start.elapsed()
        })
    });

    let failure = Failure::transient("TimeoutError", "the mail server did not answer in time");
    g.bench_function("lease_retry/100", |b| {
        let mut fx = Fixture::new("lease-retry");
        b.iter_custom(|iters| {
            // Retried messages stay in the store (waiting out their backoff): start afresh.
            fx.reset();
            fx.fill(iters * 100);
            let q = fx.queue().clone();
            let report = FailureReport::new(&failure)
                .worker("worker-1")
                .duration(Duration::from_millis(3));
            let later = u64::MAX / 2;
            let start = Stamp::now();
            for _ in 0..iters {
                let msgs = q.lease(100).unwrap();
                debug_assert_eq!(msgs.len(), 100);
                for m in &msgs {
                    q.retry(m, &report, later).unwrap();
                }
            }
            start.elapsed()
        })
    });

    let failure = Failure::permanent("ValidationError", "invalid e-mail address 'bad@.com'");
    g.bench_function("lease_dead_letter/100", |b| {
        let mut fx = Fixture::new("lease-dead");
        b.iter_custom(|iters| {
            fx.reset();
            fx.fill(iters * 100);
            let q = fx.queue().clone();
            let report = FailureReport::new(&failure).worker("worker-1");
            let start = Stamp::now();
            for _ in 0..iters {
                let msgs = q.lease(100).unwrap();
                debug_assert_eq!(msgs.len(), 100);
                for m in &msgs {
                    q.dead_letter(m, &report).unwrap();
                }
            }
            start.elapsed()
        })
    });
    g.finish();
}

fn dlq_reads<M: Measurement<Value = Duration>>(c: &mut Criterion<M>) {
    let mut g = group(c, "dlq");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    g.throughput(Throughput::Elements(1));
    for size in [1_000u64, 100_000] {
        let mut fx = Fixture::new(&format!("dlq-{size}"));
        fx.fill_dlq(size);
        let dlq = fx.dlq();
        assert_eq!(dlq.len(), size);
        let ids = dlq.ids(&Filter::all(), None).unwrap();
        report_reads(&fx, &dlq, &ids, size);

        g.bench_with_input(BenchmarkId::new("stats", size), &size, |b, _| {
            b.iter(|| black_box(dlq.stats()))
        });

        g.bench_with_input(BenchmarkId::new("get", size), &size, |b, _| {
            let mut x: u64 = 0x2545_F491_4F6C_DD1D;
            b.iter(|| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let id = ids[(x % ids.len() as u64) as usize];
                black_box(dlq.get(id).unwrap())
            })
        });

        let filter = Filter::error_kind("TimeoutError");
        g.bench_with_input(BenchmarkId::new("list_kind_100", size), &size, |b, _| {
            b.iter(|| {
                let page = dlq.list(&filter, Page::first(100)).unwrap();
                debug_assert_eq!(page.len(), 100.min(size as usize / KINDS.len()));
                black_box(page)
            })
        });
        let now = fx.store.as_ref().unwrap().config().clock.now_ms();
        g.bench_with_input(BenchmarkId::new("timeline_168h", size), &size, |b, _| {
            b.iter(|| black_box(dlq.failure_timeline(now, 168).unwrap()))
        });
        g.bench_with_input(
            BenchmarkId::new("timeline_168h_by_scans", size),
            &size,
            |b, _| {
                const HOUR: u64 = 3_600_000;
                let start = (now / HOUR + 1 - 168) * HOUR;
                b.iter(|| {
                    let counts: Vec<usize> = (0..168)
                        .map(|h| {
                            let from = start + h * HOUR;
                            let hour = Filter::all().between(Some(from), Some(from + HOUR));
                            dlq.ids(&hour, None).unwrap().len()
                        })
                        .collect();
                    black_box(counts)
                })
            },
        );
        drop(dlq);
    }
    g.finish();
}

/// Prints how many log records `stats`, `get` and the filtered list read per call: the
/// work behind the constant-time claim, free of timing noise.
fn report_reads(fx: &Fixture, dlq: &Dlq, ids: &[u64], size: u64) {
    let store = fx.store.as_ref().unwrap();
    let per_call = |f: &mut dyn FnMut()| {
        let before = store.records_read();
        for _ in 0..100 {
            f();
        }
        (store.records_read() - before) as f64 / 100.0
    };
    let stats = per_call(&mut || {
        black_box(dlq.stats());
    });
    let mut i = 0;
    let get = per_call(&mut || {
        i = (i + 7919) % ids.len();
        black_box(dlq.get(ids[i]).unwrap());
    });
    let filter = Filter::error_kind("TimeoutError");
    let list = per_call(&mut || {
        black_box(dlq.list(&filter, Page::first(100)).unwrap());
    });
    println!(
        "DLQ of {size}: records read per call: stats {stats}, get {get}, list_kind_100 {list}"
    );
}

fn dlq_replay<M: Measurement<Value = Duration>>(c: &mut Criterion<M>) {
    let mut g = group(c, "dlq_replay");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    const N: u64 = 10_000;
    g.throughput(Throughput::Elements(N));
    g.bench_function("bulk/10000", |b| {
        let mut fx = Fixture::new("dlq-replay");
        fx.fill_dlq(N);
        let dlq = fx.dlq();
        let options = ReplayOptions::to_origin()
            .reset_attempts()
            .limit(N as usize);
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Stamp::now();
                let report = dlq.replay(&Filter::all(), &options).unwrap();
                total += start.elapsed();
                assert_eq!(report.replayed.len(), N as usize);
                // Back into the DLQ for the next round (not timed).
                fx.dead_letter_all(N);
            }
            total
        })
    });
    g.bench_function("transformed_10000", |b| {
        let mut fx = Fixture::new("dlq-replay-transformed");
        fx.fill_dlq(N);
        let dlq = fx.dlq();
        let options = ReplayOptions::to_origin().reset_attempts();
        let ids = dlq.ids(&Filter::all(), None).unwrap();
        let mut round = 0u8;
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                round = round.wrapping_add(1);
                let start = Stamp::now();
                let report = dlq
                    .replay_transformed_ids(&ids, &options, |p| {
                        let mut out = p.to_vec();
                        out[0] = round;
                        Ok::<_, String>(out)
                    })
                    .unwrap();
                total += start.elapsed();
                assert_eq!(report.transformed(), N as usize);
                fx.dead_letter_all(N);
            }
            total
        })
    });
    g.finish();
}

/// The resident set size of this process, in bytes.
fn vm_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// Memory held per pending message: RSS before and after enqueuing 1,000,000 messages into
/// a fresh store, and the size the index needs for them.
fn memory_per_pending_message() {
    const N: u64 = 1_000_000;
    let mut fx = Fixture::new("memory");
    let before = vm_rss();
    fx.fill(N);
    let after = vm_rss();
    let store = fx.store.as_ref().unwrap();
    let index = store.index_bytes();
    let stats = fx.queue().stats();
    assert_eq!(stats.counts.ready, N);
    let per = |b: u64| b as f64 / N as f64;
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "memory per pending message ({N} pending, {PAYLOAD_LEN}-byte payloads on disk): \
         RSS {:.1} bytes (RSS {:.1} MiB -> {:.1} MiB); index {:.1} bytes ({:.1} MiB)",
        per(after.saturating_sub(before)),
        mib(before),
        mib(after),
        per(index),
        mib(index),
    );
    // A compaction run builds compaction's own copy of the index and keeps it.
    store.compact_now().unwrap();
    let compacted = vm_rss();
    let copy = store.compaction_index_bytes();
    println!(
        "  with compaction's copy of the index: RSS {:.1} bytes (RSS {:.1} MiB); \
         index {:.1} bytes (copy {:.1} bytes)",
        per(compacted.saturating_sub(before)),
        mib(compacted),
        per(index + copy),
        per(copy),
    );
}

fn all<M: Measurement<Value = Duration>>(c: &mut Criterion<M>) {
    enqueue(c);
    consume(c);
    dlq_reads(c);
    dlq_replay(c);
}

fn main() {
    // Only when benchmarking (not under `cargo test --benches`, which passes no `--bench`),
    // and not when profiling one benchmark (`--profile-time`).
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--profile-time") {
        memory_per_pending_message();
    }
    if cpu_mode() {
        let mut c = Criterion::default()
            .with_measurement(ThreadCpu(WallTime))
            .configure_from_args();
        all(&mut c);
        c.final_summary();
    } else {
        let mut c = Criterion::default().configure_from_args();
        all(&mut c);
        c.final_summary();
    }
}
