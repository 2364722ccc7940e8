//! The report: a markdown table on stdout, `report.json` and a log-scale SVG
//! bar chart of throughput, both written under [`out_dir`] (`target/compare/`).

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::machine::Machine;
use crate::plan::Workload;

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
    /// Operation cap of one run (not in the JSON).
    #[serde(skip)]
    pub n: usize,
}

/// The whole JSON report.
#[derive(Serialize)]
pub struct Report<'a> {
    /// Whether this was a `--quick` run (smaller sizes, shorter runs).
    pub quick: bool,
    /// Machine-limit reference numbers.
    pub machine: Machine,
    /// All result rows.
    pub results: &'a [Row],
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

/// Renders the machine reference and the result table as markdown.
pub fn markdown(machine: &Machine, rows: &[Row], quick: bool) -> String {
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
    let _ = writeln!(s, "| memcpy | {:.1} GB/s |\n", machine.memcpy_gb_s);
    let _ = writeln!(s, "## Results ({mode} run)\n");
    let _ = writeln!(
        s,
        "| workload | payload | contestant | durable | ops/s | ratio to {REFERENCE} | disk bytes/msg | peak RSS | n |"
    );
    let _ = writeln!(s, "|---|---:|---|---|---:|---:|---:|---:|---:|");
    for r in rows {
        let ratio = reference_ops(rows, r)
            .filter(|d| *d > 0.0)
            .map(|d| format!("{:.2}", r.ops_per_sec / d))
            .unwrap_or_default();
        let rss = r
            .peak_rss_bytes
            .map(|b| format!("{:.1} MiB", b as f64 / (1 << 20) as f64))
            .unwrap_or_else(|| "null".to_owned());
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {:.0} | {} | {} |",
            r.workload,
            r.payload_bytes,
            r.contestant,
            r.durable,
            human_ops(r.ops_per_sec),
            ratio,
            r.disk_bytes_per_msg,
            rss,
            r.n
        );
    }
    s
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
