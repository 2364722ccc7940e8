//! The report: a markdown table on stdout, `report.json` and a log-scale SVG
//! bar chart of throughput, both written under [`out_dir`] (`target/compare/`).

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::goals::Goal;
use crate::latency::{ms, Percentiles};
use crate::machine::Machine;
use crate::plan::Workload;
use crate::probe::OpenProbe;

/// The contestant that ratios are computed against.
pub const REFERENCE: &str = "deadletter";

/// One result row (the median of `runs` runs).
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Workload name.
    pub workload: &'static str,
    /// Payload size in bytes.
    pub payload_bytes: usize,
    /// Contestant name.
    pub contestant: &'static str,
    /// Durable commits.
    pub durable: bool,
    /// Median operations per second.
    pub ops_per_sec: f64,
    /// Runs measured.
    pub runs: usize,
    /// Median bytes on disk per message.
    pub disk_bytes_per_msg: f64,
    /// Largest peak-RSS growth over the runs, when measurable.
    pub peak_rss_bytes: Option<u64>,
    /// Latency percentiles over all runs, where the workload measures latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<Percentiles>,
    /// Durable one-message-per-call rows: ops/s over the machine's
    /// write + fdatasync rate measured in the same run (1.0 = one fdatasync per
    /// message at the machine's pace; above 1, commits are shared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fsync_share: Option<f64>,
    /// Operation cap of one run (not in the JSON).
    #[serde(skip)]
    pub n: usize,
}

/// The whole JSON report.
#[derive(Serialize)]
pub struct Report<'a> {
    /// Whether this was a `--quick` run (smaller sizes, shorter runs).
    pub quick: bool,
    /// Load average (1, 5, 15 min) when the run started and when it ended.
    pub load_average: [Option<[f64; 3]>; 2],
    /// Machine-limit reference numbers.
    pub machine: Machine,
    /// All result rows.
    pub results: &'a [Row],
    /// deadletter's open and memory probes (`probe.rs`).
    pub probes: &'a [OpenProbe],
    /// The goals of issue 14, judged from this run.
    pub goals: &'a [Goal],
}

/// The machine's load average now (`/proc/loadavg`), when readable.
pub fn load_average() -> Option<[f64; 3]> {
    let text = fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// A durable one-message-per-call row's throughput as a share of the
/// machine's write + fdatasync rate (see [`Row::fsync_share`]).
pub fn fsync_share(machine: &Machine, row: &Row) -> Option<f64> {
    let one_at_a_time = matches!(row.workload, "enqueue_one" | "enqueue_4_threads");
    (row.durable && one_at_a_time && machine.fsync_per_s > 0.0)
        .then(|| row.ops_per_sec / machine.fsync_per_s)
}

/// Directory the report files go to: `compare` in cargo's target directory, which is
/// `$CARGO_TARGET_DIR` when set, else `target` at the workspace root (the harness runs with
/// its own package as the current directory, so a relative path would land under
/// `crates/compare`).
pub fn out_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            // This package is crates/compare: the workspace root is two levels up.
            let package = Path::new(env!("CARGO_MANIFEST_DIR"));
            package.ancestors().nth(2).unwrap_or(package).join("target")
        });
    target.join("compare")
}

fn reference_ops(rows: &[Row], row: &Row) -> Option<f64> {
    rows.iter()
        .find(|r| {
            r.contestant == REFERENCE
                && r.workload == row.workload
                && r.payload_bytes == row.payload_bytes
                && r.durable == row.durable
        })
        .map(|r| r.ops_per_sec)
}

fn human_ops(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// Renders the machine reference, the result table, latencies, probes and
/// goals as markdown.
pub fn markdown(report: &Report<'_>) -> String {
    let (machine, rows, quick) = (&report.machine, report.results, report.quick);
    let mut s = String::new();
    let mode = if quick { "quick" } else { "full" };
    let _ = writeln!(s, "## Machine limits ({mode} run)\n");
    let _ = writeln!(s, "| reference | value |\n|---|---:|");
    let _ = writeln!(
        s,
        "| sequential write + fsync | {:.0} MB/s |",
        machine.seq_write_mb_s
    );
    let _ = writeln!(
        s,
        "| 100 B append + fdatasync | {:.0} /s |",
        machine.fsync_per_s
    );
    let sync = &machine.fdatasync_latency;
    let _ = writeln!(
        s,
        "| 100 B append + fdatasync latency p50 / p99 / p99.9 | {} / {} / {} ms |",
        ms(sync.p50_ns),
        ms(sync.p99_ns),
        ms(sync.p999_ns)
    );
    let _ = writeln!(s, "| memcpy | {:.1} GB/s |", machine.memcpy_gb_s);
    for (when, load) in ["start", "end"].iter().zip(report.load_average) {
        if let Some([a, b, c]) = load {
            let _ = writeln!(
                s,
                "| load average at the {when} (1/5/15 min) | {a:.2} {b:.2} {c:.2} |"
            );
        }
    }
    s.push('\n');
    let _ = writeln!(s, "## Results ({mode} run)\n");
    let _ = writeln!(
        s,
        "| workload | payload | contestant | durable | ops/s | ratio to {REFERENCE} | % of fdatasync rate | disk bytes/msg | peak RSS | n |"
    );
    let _ = writeln!(s, "|---|---:|---|---|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let ratio = reference_ops(rows, r)
            .filter(|d| *d > 0.0)
            .map(|d| format!("{:.2}", r.ops_per_sec / d))
            .unwrap_or_default();
        let rss = r
            .peak_rss_bytes
            .map(|b| format!("{:.1} MiB", b as f64 / (1 << 20) as f64))
            .unwrap_or_else(|| "null".to_owned());
        let share = r
            .fsync_share
            .map(|f| format!("{:.0}%", f * 100.0))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {:.0} | {} | {} |",
            r.workload,
            r.payload_bytes,
            r.contestant,
            r.durable,
            human_ops(r.ops_per_sec),
            ratio,
            share,
            r.disk_bytes_per_msg,
            rss,
            r.n
        );
    }
    latency_table(&mut s, machine, rows, mode);
    probe_table(&mut s, report.probes, mode);
    goal_table(&mut s, report.goals, mode);
    s
}

fn latency_table(s: &mut String, machine: &Machine, rows: &[Row], mode: &str) {
    let _ = writeln!(s, "\n## Latency ({mode} run, durable)\n");
    let _ = writeln!(
        s,
        "enqueue_one: each call; pool_latency: from before the enqueue call to the start of the message's handler.\n"
    );
    let _ = writeln!(
        s,
        "| workload | payload | contestant | samples | p50 ms | p99 ms | p99.9 ms | max ms | p99 / fdatasync p99 |"
    );
    let _ = writeln!(s, "|---|---:|---|---:|---:|---:|---:|---:|---:|");
    let sync_p99 = machine.fdatasync_latency.p99_ns.max(1) as f64;
    for r in rows.iter().filter(|r| r.durable) {
        let Some(l) = r.latency else { continue };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.2} |",
            r.workload,
            r.payload_bytes,
            r.contestant,
            l.samples,
            ms(l.p50_ns),
            ms(l.p99_ns),
            ms(l.p999_ns),
            ms(l.max_ns),
            l.p99_ns as f64 / sync_p99
        );
    }
}

fn probe_table(s: &mut String, probes: &[OpenProbe], mode: &str) {
    if probes.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n## Open and memory probes ({mode} run, deadletter, a process of their own)\n"
    );
    let _ = writeln!(
        s,
        "| messages | segment | open + stats | RSS growth | process peak RSS | heap per message | heap per message, compaction peak |"
    );
    let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|");
    for p in probes {
        let _ = writeln!(
            s,
            "| {} | {} MiB | {:.2} ms | {:.1} MB | {:.1} MB | {:.1} B | {:.1} B |",
            p.messages,
            p.segment_bytes >> 20,
            p.open_secs * 1e3,
            p.open_rss_growth_bytes as f64 / 1e6,
            p.process_peak_rss_bytes as f64 / 1e6,
            p.anon_bytes_per_msg,
            p.anon_peak_compaction_per_msg
        );
    }
}

fn goal_table(s: &mut String, goals: &[Goal], mode: &str) {
    let _ = writeln!(s, "\n## Goals of issue 14 ({mode} run)\n");
    let _ = writeln!(s, "| goal | what | target | measured | met |");
    let _ = writeln!(s, "|---:|---|---|---|---|");
    for g in goals {
        let met = match (g.met, g.ratio_to_target) {
            (Some(true), Some(r)) => format!("yes ({r:.2}x the target)"),
            (Some(false), Some(r)) => format!("**no** ({r:.2}x the target)"),
            _ => "not measured".to_owned(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            g.goal, g.what, g.target, g.measured, met
        );
    }
}

/// Writes `report.json` into `dir`.
pub fn write_json(dir: &Path, report: &Report<'_>) -> io::Result<PathBuf> {
    fs::create_dir_all(dir)?;
    let path = dir.join("report.json");
    let text = serde_json::to_string_pretty(report).map_err(io::Error::other)?;
    fs::write(&path, text + "\n")?;
    Ok(path)
}

const PALETTE: [&str; 8] = [
    "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Renders throughput as grouped log-scale bars: one panel per payload size,
/// one group per workload, one bar per contestant and durability (solid =
/// durable, pale = not durable).
pub fn svg(rows: &[Row], contestants: &[&str], payload_sizes: &[usize]) -> String {
    let series: Vec<(&str, bool)> = contestants
        .iter()
        .flat_map(|c| [(*c, true), (*c, false)])
        .filter(|(c, d)| rows.iter().any(|r| r.contestant == *c && r.durable == *d))
        .collect();
    let workloads: Vec<&str> = Workload::ALL
        .iter()
        .map(|w| w.name())
        .filter(|w| rows.iter().any(|r| r.workload == *w))
        .collect();
    let positive = rows.iter().map(|r| r.ops_per_sec).filter(|v| *v > 0.0);
    let lo = positive.clone().fold(f64::INFINITY, f64::min);
    let hi = positive.fold(0.0f64, f64::max);
    let (lo_dec, hi_dec) = if hi > 0.0 {
        (
            lo.log10().floor() as i32,
            hi.log10().ceil().max(lo.log10().floor() + 1.0) as i32,
        )
    } else {
        (0, 1)
    };

    let bar_w = 9.0;
    let group_gap = 18.0;
    let group_w = series.len().max(1) as f64 * bar_w + group_gap;
    let left = 70.0;
    let panel_h = 300.0;
    let panel_gap = 110.0;
    let top = 60.0;
    let width = (left + workloads.len().max(1) as f64 * group_w + 200.0).max(820.0);
    let height = top + payload_sizes.len() as f64 * (panel_h + panel_gap) + 20.0;
    let y_of = |v: f64| {
        let frac = (v.log10() - lo_dec as f64) / (hi_dec - lo_dec) as f64;
        panel_h * (1.0 - frac.clamp(0.0, 1.0))
    };

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="24" font-size="15">Throughput per workload, ops/s (log scale; solid = durable, pale = not durable)</text>"#
    );
    for (pi, size) in payload_sizes.iter().enumerate() {
        let y0 = top + pi as f64 * (panel_h + panel_gap);
        let _ = writeln!(s, r#"<g transform="translate(0,{y0:.0})">"#);
        let _ = writeln!(
            s,
            r#"<text x="{left}" y="-8" font-size="13">payload {size} B</text>"#
        );
        for d in lo_dec..=hi_dec {
            let y = y_of(10f64.powi(d));
            let x2 = width - 200.0;
            let _ = writeln!(
                s,
                r##"<line x1="{left}" y1="{y:.1}" x2="{x2:.0}" y2="{y:.1}" stroke="#ddd"/><text x="{:.0}" y="{:.1}" text-anchor="end">1e{d}</text>"##,
                left - 6.0,
                y + 4.0
            );
        }
        for (gi, w) in workloads.iter().enumerate() {
            let gx = left + gi as f64 * group_w + group_gap / 2.0;
            for (si, (c, durable)) in series.iter().enumerate() {
                let Some(r) = rows.iter().find(|r| {
                    r.workload == *w
                        && r.payload_bytes == *size
                        && r.contestant == *c
                        && r.durable == *durable
                }) else {
                    continue;
                };
                if r.ops_per_sec <= 0.0 {
                    continue;
                }
                let ci = contestants.iter().position(|x| x == c).unwrap_or(0);
                let color = PALETTE[ci % PALETTE.len()];
                let opacity = if *durable { 1.0 } else { 0.45 };
                let x = gx + si as f64 * bar_w;
                let y = y_of(r.ops_per_sec);
                let _ = writeln!(
                    s,
                    r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{color}" fill-opacity="{opacity}"><title>{} {} B {} durable={}: {:.0} ops/s</title></rect>"#,
                    bar_w - 1.0,
                    panel_h - y,
                    escape(w),
                    size,
                    escape(c),
                    durable,
                    r.ops_per_sec
                );
            }
            let lx = gx + series.len() as f64 * bar_w / 2.0;
            let _ = writeln!(
                s,
                r#"<text x="{lx:.1}" y="{:.0}" text-anchor="end" transform="rotate(-35 {lx:.1} {:.0})">{}</text>"#,
                panel_h + 14.0,
                panel_h + 14.0,
                escape(w)
            );
        }
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{panel_h}" x2="{:.0}" y2="{panel_h}" stroke="#333"/></g>"##,
            width - 200.0
        );
    }
    let lx = width - 185.0;
    for (i, (c, durable)) in series.iter().enumerate() {
        let ci = contestants.iter().position(|x| x == c).unwrap_or(0);
        let color = PALETTE[ci % PALETTE.len()];
        let opacity = if *durable { 1.0 } else { 0.45 };
        let y = top + i as f64 * 18.0;
        let label = if *durable { "durable" } else { "plain" };
        let _ = writeln!(
            s,
            r#"<rect x="{lx}" y="{y:.0}" width="12" height="12" fill="{color}" fill-opacity="{opacity}"/><text x="{:.0}" y="{:.0}">{} ({label})</text>"#,
            lx + 18.0,
            y + 10.0,
            escape(c)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// Writes `throughput.svg` into `dir`.
pub fn write_svg(dir: &Path, text: &str) -> io::Result<PathBuf> {
    fs::create_dir_all(dir)?;
    let path = dir.join("throughput.svg");
    fs::write(&path, text)?;
    Ok(path)
}
