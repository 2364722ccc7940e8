//! The goals of issue 14, judged from one run's rows, machine reference and
//! probes: each says its target, what was measured, and whether it is met,
//! by how much (the measured value over the target, so above 1 is better for
//! a floor and below 1 is better for a ceiling). A goal whose rows are missing
//! from this run (narrowed with `--only` / `--workloads`) is `met: null`.

use serde::Serialize;

use crate::latency::ms;
use crate::machine::Machine;
use crate::probe::{OpenProbe, FEW};
use crate::report::{Row, REFERENCE};

/// One judged goal.
#[derive(Clone, Debug, Serialize)]
pub struct Goal {
    /// The goal's number in issue 14.
    pub goal: u8,
    /// What is measured.
    pub what: String,
    /// The target.
    pub target: String,
    /// What this run measured.
    pub measured: String,
    /// Met, missed, or not measured in this run (`None`).
    pub met: Option<bool>,
    /// The measured value over the target.
    pub ratio_to_target: Option<f64>,
}

fn find<'a>(rows: &'a [Row], w: &str, size: usize, who: &str, durable: bool) -> Option<&'a Row> {
    rows.iter().find(|r| {
        r.workload == w && r.payload_bytes == size && r.contestant == who && r.durable == durable
    })
}

fn human(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} K", v / 1e3)
    } else {
        format!("{v:.1}")
    }
}

/// A floor (`at_least`) or a ceiling on `value`; `None` when not measured.
fn judge(
    goal: u8,
    what: String,
    target: String,
    value: Option<(f64, String)>,
    limit: f64,
    at_least: bool,
) -> Goal {
    let (met, ratio, measured) = match value {
        Some((v, text)) => {
            let ok = if at_least { v >= limit } else { v <= limit };
            (Some(ok), Some(v / limit), text)
        }
        None => (None, None, "not measured in this run".to_owned()),
    };
    Goal {
        goal,
        what,
        target,
        measured,
        met,
        ratio_to_target: ratio,
    }
}

/// deadletter's ops/s over `other`'s on the same row.
fn ratio_to(
    rows: &[Row],
    w: &str,
    size: usize,
    other: &str,
    durable: bool,
) -> Option<(f64, String)> {
    let ours = find(rows, w, size, REFERENCE, durable)?.ops_per_sec;
    let theirs = find(rows, w, size, other, durable)?.ops_per_sec;
    let r = ours / theirs.max(1e-9);
    Some((
        r,
        format!("{r:.2}x ({} vs {} ops/s)", human(ours), human(theirs)),
    ))
}

fn ops(rows: &[Row], w: &str, size: usize, durable: bool) -> Option<(f64, String)> {
    let v = find(rows, w, size, REFERENCE, durable)?.ops_per_sec;
    Some((v, format!("{} msg/s", human(v))))
}

/// Every goal of issue 14 for this run.
pub fn judge_all(rows: &[Row], machine: &Machine, probes: &[OpenProbe]) -> Vec<Goal> {
    let mut out = Vec::new();
    let small = 100;

    // 1. The worker pool.
    out.push(judge(
        1,
        "pool_4_workers, durable, no-op handler, 100 B".into(),
        ">= 100 K msg/s".into(),
        ops(rows, "pool_4_workers", small, true),
        100e3,
        true,
    ));
    out.push(judge(
        1,
        "pool_2_workers, not durable, no-op handler, 100 B".into(),
        ">= 1 M msg/s".into(),
        ops(rows, "pool_2_workers", small, false),
        1e6,
        true,
    ));
    let scaling = ["pool_1_worker", "pool_2_workers", "pool_4_workers"]
        .map(|w| find(rows, w, small, REFERENCE, false).map(|r| r.ops_per_sec));
    let worst_step = match scaling {
        [Some(a), Some(b), Some(c)] => Some((
            (b / a).min(c / b),
            format!(
                "1: {}, 2: {}, 4: {} msg/s (2/1 = {:.2}, 4/2 = {:.2})",
                human(a),
                human(b),
                human(c),
                b / a,
                c / b
            ),
        )),
        _ => None,
    };
    out.push(judge(
        1,
        "not durable: more workers never slower than fewer".into(),
        "each step >= 0.95x the one before (5% run-to-run noise)".into(),
        worst_step,
        0.95,
        true,
    ));

    // 2. A pool workload for every contestant, and the failure flow.
    let contestants: Vec<&str> = {
        let mut c: Vec<&str> = rows.iter().map(|r| r.contestant).collect();
        c.sort_unstable();
        c.dedup();
        c
    };
    let with_pool: Vec<&str> = contestants
        .iter()
        .copied()
        .filter(|c| {
            rows.iter()
                .any(|r| r.contestant == *c && r.workload == "pool_4_workers")
        })
        .collect();
    let covered = (!contestants.is_empty()).then(|| {
        (
            with_pool.len() as f64 / contestants.len() as f64,
            format!(
                "{} of {}: {}",
                with_pool.len(),
                contestants.len(),
                with_pool.join(", ")
            ),
        )
    });
    out.push(judge(
        2,
        "a pool workload for every contestant".into(),
        "every contestant".into(),
        covered,
        1.0,
        true,
    ));
    for w in ["pool_failure_flow", "failure_flow"] {
        out.push(judge(
            2,
            format!("{w}, durable, 100 B, deadletter / sqlite"),
            ">= 3x".into(),
            ratio_to(rows, w, small, "sqlite", true),
            3.0,
            true,
        ));
    }

    // 3. DLQ reads against SQLite.
    for w in ["dlq_list_filtered", "dlq_get"] {
        for size in [100, 1024] {
            out.push(judge(
                3,
                format!("{w}, {size} B, deadletter / sqlite"),
                ">= 2x".into(),
                ratio_to(rows, w, size, "sqlite", true),
                2.0,
                true,
            ));
        }
    }

    // 4. Group commit.
    for size in [100, 1024] {
        let v = find(rows, "enqueue_4_threads", size, REFERENCE, true)
            .zip(find(rows, "enqueue_one", size, REFERENCE, true))
            .map(|(four, one)| {
                let r = four.ops_per_sec / one.ops_per_sec.max(1e-9);
                (
                    r,
                    format!(
                        "{r:.2}x ({} vs {} msg/s)",
                        human(four.ops_per_sec),
                        human(one.ops_per_sec)
                    ),
                )
            });
        out.push(judge(
            4,
            format!("enqueue_4_threads / enqueue_one, durable, {size} B"),
            ">= 3x".into(),
            v,
            3.0,
            true,
        ));
    }

    // 5. Latency against the machine's fdatasync.
    let sync_p99 = machine.fdatasync_latency.p99_ns;
    for (w, size) in [
        ("enqueue_one", 100),
        ("enqueue_one", 1024),
        ("pool_latency", 100),
    ] {
        let v = find(rows, w, size, REFERENCE, true)
            .and_then(|r| r.latency)
            .filter(|_| sync_p99 > 0)
            .map(|l| {
                (
                    l.p99_ns as f64 / sync_p99 as f64,
                    format!(
                        "p50 {} / p99 {} / p99.9 {} ms; p99 = {:.2}x fdatasync p99 ({} ms)",
                        ms(l.p50_ns),
                        ms(l.p99_ns),
                        ms(l.p999_ns),
                        l.p99_ns as f64 / sync_p99 as f64,
                        ms(sync_p99)
                    ),
                )
            });
        out.push(judge(
            5,
            format!("{w} durable {size} B: p99 latency"),
            "<= 3x the machine's fdatasync p99".into(),
            v,
            3.0,
            false,
        ));
    }

    // 6. Cheap opens.
    for p in probes.iter().filter(|p| p.messages == FEW) {
        let mib = p.segment_bytes >> 20;
        out.push(judge(
            6,
            format!("open of {FEW} messages, segments up to {mib} MiB: time"),
            "< 10 ms".into(),
            Some((p.open_secs * 1e3, format!("{:.2} ms", p.open_secs * 1e3))),
            10.0,
            false,
        ));
        let mb = p.open_rss_growth_bytes as f64 / 1e6;
        out.push(judge(
            6,
            format!("open of {FEW} messages, segments up to {mib} MiB: RSS"),
            "< 10 MB".into(),
            Some((
                mb,
                format!(
                    "{mb:.1} MB grown over the open (whole process peak {:.1} MB)",
                    p.process_peak_rss_bytes as f64 / 1e6
                ),
            )),
            10.0,
            false,
        ));
    }
    let pending = probes.iter().find(|p| p.messages != FEW);
    out.push(judge(
        6,
        format!(
            "open of {} pending messages",
            pending.map_or("1 M".to_owned(), |p| p.messages.to_string())
        ),
        "< 0.5 s (at 1 M)".into(),
        pending.map(|p| (p.open_secs, format!("{:.3} s", p.open_secs))),
        0.5,
        false,
    ));

    // 7. Memory per pending message.
    out.push(judge(
        7,
        "memory per pending message, compaction included".into(),
        "<= 64 B".into(),
        pending.map(|p| {
            (
                p.anon_peak_compaction_per_msg,
                format!(
                    "{:.1} B at the compaction's peak, {:.1} B open (heap growth over {} messages)",
                    p.anon_peak_compaction_per_msg, p.anon_bytes_per_msg, p.messages
                ),
            )
        }),
        64.0,
        false,
    ));

    // 8. The honest rows.
    let mut reopen: Vec<&str> = rows
        .iter()
        .filter(|r| r.workload == "reopen")
        .map(|r| r.contestant)
        .collect();
    reopen.sort_unstable();
    reopen.dedup();
    let durable_one: Vec<&Row> = rows
        .iter()
        .filter(|r| r.workload == "enqueue_one" && r.durable)
        .collect();
    let shared = durable_one
        .iter()
        .filter(|r| r.fsync_share.is_some())
        .count();
    let reopen_all = contestants
        .iter()
        .filter(|c| {
            rows.iter()
                .any(|r| r.contestant == **c && r.workload == "reopen")
        })
        .count();
    // Contestants measured on reopen at all (the JetStream ones are not).
    let reopen_expected = contestants
        .iter()
        .filter(|c| !c.contains("jetstream"))
        .count();
    out.push(judge(
        8,
        "reopen = open + first lease + pending count for every embedded contestant; every durable enqueue_one row as % of the fdatasync rate".into(),
        "every row".into(),
        (!durable_one.is_empty()).then(|| {
            let complete = reopen_all >= reopen_expected && shared == durable_one.len();
            (
                if complete { 1.0 } else { 0.0 },
                format!(
                    "reopen rows for {}; {shared} of {} durable enqueue_one rows with an fdatasync share",
                    reopen.join(", "),
                    durable_one.len()
                ),
            )
        }),
        1.0,
        true,
    ));
    out
}
