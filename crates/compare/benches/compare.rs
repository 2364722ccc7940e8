//! Comparison benchmark: deadletter against other ways to build a persistent
//! queue with a dead letter queue, on the same workloads, in one process run.
//!
//! Run: `cargo bench -p deadletter-compare` (full, about half an hour on a busy
//! 2-core machine) or `cargo bench -p deadletter-compare -- --quick` (a few
//! minutes, every workload).
//! Options: `--quick`; `--only=NAME[,NAME...]` runs only those contestants;
//! `--workloads=NAME[,NAME...]` runs only those workloads (the DLQ reads and
//! replay share a store and run together; `probes` names deadletter's open and
//! memory probes); `--trace` prints the duration of untimed phases (filling,
//! flushing, cleanup). `--probe-open=...` is the probe's child process
//! (`compare/probe.rs`), not for direct use.
//! Other arguments (such as the `--bench` cargo passes) are ignored.
//!
//! Output: a markdown table on stdout, `target/compare/report.json` and
//! `target/compare/throughput.svg` in the workspace's target directory (or
//! `$CARGO_TARGET_DIR`). Stores live in temporary directories under
//! `target/compare/tmp`, removed after use.
//!
//! Contestants (see `compare/contestant.rs` for the trait they implement):
//! * `filesystem-json`: one JSON file per message in directories
//!   (`compare/fs_json.rs`), durable (fsync files and directories) and plain;
//! * `sqlite`: a messages table + a dlq table in WAL mode (`compare/sqlite.rs`);
//! * `rustqueue`: the `rustqueue` crate (redb-backed job queue with retries and
//!   a DLQ, `compare/rust_queue.rs`). Found with `cargo info rustqueue`
//!   (0.3.0); it builds and works as an embedded library, so no other crate was
//!   needed. Its async API needs tokio (already one of its dependencies).
//! * `deadletter-jetstream`: the `deadletter-jetstream` package (queues and the DLQ
//!   envelope on NATS JetStream), and `jetstream-plain`: what a user builds by hand
//!   with the async-nats client (a work-queue stream, a pull consumer, and a second
//!   stream the last delivery is published to), so the report shows what the envelope
//!   costs (`compare/jetstream.rs`). Each run starts its own nats-server (the binary of
//!   `DEADLETTER_NATS_SERVER`, `sync_interval: always`) on a free loopback port with its
//!   store in the run's directory. Measured on the enqueue workloads, drain, failure_flow
//!   and the pool workloads, with file storage fsynced per write ("durable" rows).
//!
//! Sizes and durations: `compare/plan.rs`. What each workload does and how
//! it is measured: `compare/workloads.rs`. Peak RSS method: `compare/measure.rs`.
//!
//! Adding a contestant: implement `contestant::Contestant`, provide an
//! `open(dir, durable)` function and add it to `registry()`. Ratios in the
//! report are against the contestant named `deadletter` with the same
//! durability, and are left empty when it is absent.
//!
//! This package (`crates/compare`, not published) exists so that these
//! contestants' dependencies — serde (derive), serde_json, uuid (v4), rusqlite
//! (bundled SQLite), tempfile, rustqueue (default-features = false), tokio
//! (rt-multi-thread), async-nats, futures-util and bytes, about 300 crates — are built only when the comparison
//! is, never by the library's tests or the examples. Peak RSS and the
//! `chattr`/`sync` helpers are Linux-specific and degrade to `null` / no-ops
//! elsewhere.

#[path = "compare/contestant.rs"]
mod contestant;
#[path = "compare/deadletter.rs"]
mod deadletter_queue;
#[path = "compare/fs_json.rs"]
mod fs_json;
#[path = "compare/goals.rs"]
mod goals;
#[path = "compare/jetstream.rs"]
mod jetstream;
#[path = "compare/latency.rs"]
mod latency;
#[path = "compare/machine.rs"]
mod machine;
#[path = "compare/measure.rs"]
mod measure;
#[path = "compare/plan.rs"]
mod plan;
#[path = "compare/pool.rs"]
mod pool;
#[path = "compare/pool_workloads.rs"]
mod pool_workloads;
#[path = "compare/probe.rs"]
mod probe;
#[path = "compare/report.rs"]
mod report;
#[path = "compare/rust_queue.rs"]
mod rust_queue;
#[path = "compare/sqlite.rs"]
mod sqlite;
#[path = "compare/workloads.rs"]
mod workloads;

use std::time::Instant;

use contestant::{BenchResult, Entry};
use plan::{Plan, Workload};
use report::{Report, Row};
use workloads::{Case, Measured};

/// Every contestant, in report order. A new engine adds one entry here
/// (`deadletter` first: the ratios are computed against it).
fn registry() -> Vec<Entry> {
    vec![
        Entry {
            name: "deadletter",
            open: deadletter_queue::open,
            runs: contestant::all_runs,
        },
        Entry {
            name: "filesystem-json",
            open: fs_json::open,
            runs: contestant::all_runs,
        },
        Entry {
            name: "sqlite",
            open: sqlite::open,
            runs: contestant::all_runs,
        },
        Entry {
            name: "rustqueue",
            open: rust_queue::open,
            runs: contestant::all_runs,
        },
        Entry {
            name: "deadletter-jetstream",
            open: jetstream::open_deadletter,
            runs: jetstream::runs,
        },
        Entry {
            name: "jetstream-plain",
            open: jetstream::open_plain,
            runs: jetstream::runs,
        },
    ]
}

/// Folds the runs of one case into a report row (latency percentiles over the
/// samples of all its runs).
fn row(case: &Case<'_>, (w, durable, samples): &Measured) -> Row {
    let ops: Vec<f64> = samples.iter().map(|s| s.ops_per_sec).collect();
    let disk: Vec<f64> = samples.iter().map(|s| s.disk_bytes_per_msg).collect();
    let mut latencies: Vec<u64> = samples
        .iter()
        .flat_map(|s| s.latencies.iter().copied())
        .collect();
    Row {
        workload: w.name(),
        payload_bytes: case.size,
        contestant: case.entry.name,
        durable: *durable,
        ops_per_sec: measure::median(&ops),
        runs: samples.len(),
        disk_bytes_per_msg: measure::median(&disk),
        peak_rss_bytes: samples.iter().filter_map(|s| s.peak_rss_bytes).max(),
        latency: latency::Percentiles::of(&mut latencies),
        fsync_share: None,
        n: case.plan.n(*w, *durable, case.entry.name),
    }
}

/// Measures one case of `w`. `dlq_stats` stands for the whole shared-DLQ
/// suite (the three DLQ reads and replay), which yields several rows.
fn measure_case(case: &Case<'_>, w: Workload) -> BenchResult<Vec<Measured>> {
    match w {
        Workload::DlqStats => workloads::dlq_suite(case),
        Workload::Reopen => Ok(vec![(w, case.durable, workloads::reopen(case)?)]),
        _ => {
            let samples = (0..case.plan.runs)
                .map(|_| workloads::fresh_run(case, w))
                .collect::<BenchResult<Vec<_>>>()?;
            Ok(vec![(w, case.durable, samples)])
        }
    }
}

/// Progress and failures go to stderr; stdout carries only the report.
struct Progress {
    start: Instant,
}

impl Progress {
    fn done(&self, r: &Row) {
        eprintln!(
            "[{:>7.1}s] {:<18} {:>5} B {:<16} durable={:<5} {:>14.1} ops/s",
            self.start.elapsed().as_secs_f64(),
            r.workload,
            r.payload_bytes,
            r.contestant,
            r.durable,
            r.ops_per_sec
        );
    }

    fn failed(&self, what: &str, case: &Case<'_>, err: &dyn std::fmt::Display) {
        eprintln!(
            "[{:>7.1}s] FAILED {what} {} B {} durable={}: {err}",
            self.start.elapsed().as_secs_f64(),
            case.size,
            case.entry.name,
            case.durable
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(spec) = args.iter().find_map(|a| a.strip_prefix(probe::CHILD_ARG)) {
        if let Err(e) = probe::child_main(spec) {
            eprintln!("probe: {e}");
            std::process::exit(1);
        }
        return;
    }
    let load_at_start = report::load_average();
    let quick = args.iter().any(|a| a == "--quick");
    if args.iter().any(|a| a == "--trace") {
        measure::enable_trace();
    }
    let only: Option<Vec<String>> = args
        .iter()
        .find_map(|a| a.strip_prefix("--only="))
        .map(|s| s.split(',').map(str::to_owned).collect());
    let wanted: Option<Vec<String>> = args
        .iter()
        .find_map(|a| a.strip_prefix("--workloads="))
        .map(|s| s.split(',').map(str::to_owned).collect());
    let plan = Plan::new(quick);
    let entries: Vec<Entry> = registry()
        .into_iter()
        .filter(|e| only.as_ref().is_none_or(|o| o.iter().any(|n| n == e.name)))
        .collect();
    let progress = Progress {
        start: Instant::now(),
    };

    let machine = machine::measure(&plan).expect("machine reference measurement failed");
    eprintln!(
        "machine: seq write {:.0} MB/s, fsync {:.0}/s, memcpy {:.1} GB/s",
        machine.seq_write_mb_s, machine.fsync_per_s, machine.memcpy_gb_s
    );

    let mut rows: Vec<Row> = Vec::new();
    for w in Workload::ALL {
        // The shared-DLQ workloads all run under dlq_stats.
        if w.uses_dlq_store() && w != Workload::DlqStats {
            continue;
        }
        let selected = wanted.as_ref().is_none_or(|ws| {
            Workload::ALL.iter().any(|x| {
                ws.iter().any(|n| n == x.name())
                    && (*x == w || (w == Workload::DlqStats && x.uses_dlq_store()))
            })
        });
        if !selected {
            continue;
        }
        for &size in w.payload_sizes(&plan) {
            for &durable in w.durabilities() {
                for entry in entries.iter().filter(|e| (e.runs)(w, durable)) {
                    let case = Case {
                        plan: &plan,
                        entry,
                        size,
                        durable,
                    };
                    match measure_case(&case, w) {
                        Ok(measured) => {
                            for m in &measured {
                                let r = row(&case, m);
                                progress.done(&r);
                                rows.push(r);
                            }
                        }
                        Err(e) => progress.failed(w.name(), &case, &e),
                    }
                }
            }
        }
    }
    for r in &mut rows {
        r.fsync_share = report::fsync_share(&machine, r);
    }
    // The probes are deadletter's; `--workloads=probes` runs them alone.
    let probes_wanted = wanted
        .as_ref()
        .is_none_or(|ws| ws.iter().any(|n| n == "probes"));
    let probes = if probes_wanted && entries.iter().any(|e| e.name == report::REFERENCE) {
        probe::measure(&plan).unwrap_or_else(|e| {
            eprintln!("FAILED probes: {e}");
            Vec::new()
        })
    } else {
        Vec::new()
    };
    let _ = std::fs::remove_dir(measure::scratch_root());

    let order = |r: &Row| {
        (
            Workload::ALL.iter().position(|w| w.name() == r.workload),
            r.payload_bytes,
            !r.durable,
            entries.iter().position(|e| e.name == r.contestant),
        )
    };
    rows.sort_by_key(order);

    let goals = goals::judge_all(&rows, &machine, &probes);
    let report = Report {
        quick,
        load_average: [load_at_start, report::load_average()],
        machine,
        results: &rows,
        probes: &probes,
        goals: &goals,
    };
    print!("{}", report::markdown(&report));
    let out = report::out_dir();
    let json = report::write_json(&out, &report).expect("cannot write report.json");
    let names: Vec<&str> = entries.iter().map(|e| e.name).collect();
    let svg = report::svg(&rows, &names, &plan.payload_sizes);
    let svg_path = report::write_svg(&out, &svg).expect("cannot write throughput.svg");
    eprintln!(
        "wrote {} and {} in {:.1}s",
        json.display(),
        svg_path.display(),
        progress.start.elapsed().as_secs_f64()
    );
}
