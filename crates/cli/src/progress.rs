//! A small progress bar on stderr, drawn only when stderr is a terminal (never in a pipe or
//! a log file), redrawn at most every 100 ms, and erased when done.
//!
//! Hand-written rather than a crate: one line of `\r`-redrawn text is all that is needed,
//! and it keeps the tool's dependency list to clap and serde_json.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How counts are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Plain counts (entries, records).
    Items,
    /// Byte sizes.
    Bytes,
}

/// A progress bar; does nothing unless stderr is a terminal.
pub struct Progress {
    label: String,
    total: u64,
    done: u64,
    unit: Unit,
    enabled: bool,
    drawn: bool,
    started: Instant,
    last_draw: Option<Instant>,
}

impl Progress {
    /// A bar for `total` units of work labelled `label`.
    pub fn new(label: impl Into<String>, total: u64, unit: Unit) -> Self {
        Progress {
            label: label.into(),
            total,
            done: 0,
            unit,
            enabled: std::io::stderr().is_terminal() && total > 0,
            drawn: false,
            started: Instant::now(),
            last_draw: None,
        }
    }

    /// Records `n` more units done.
    pub fn inc(&mut self, n: u64) {
        self.set(self.done.saturating_add(n));
    }

    /// Records the units done so far.
    pub fn set(&mut self, done: u64) {
        self.done = done.min(self.total);
        if !self.enabled {
            return;
        }
        let due = self
            .last_draw
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(100));
        if due || self.done == self.total {
            self.draw();
        }
    }

    fn amount(&self, n: u64) -> String {
        match self.unit {
            Unit::Items => n.to_string(),
            Unit::Bytes => crate::timefmt::fmt_bytes(n),
        }
    }

    fn draw(&mut self) {
        const WIDTH: u64 = 30;
        let filled = (self.done * WIDTH).checked_div(self.total).unwrap_or(WIDTH);
        let pct = (self.done * 100).checked_div(self.total).unwrap_or(100);
        let elapsed = self.started.elapsed().as_secs_f64();
        let eta = if self.done > 0 && self.done < self.total && elapsed > 0.5 {
            let rest = elapsed * (self.total - self.done) as f64 / self.done as f64;
            format!("  ~{}s left", rest.ceil() as u64)
        } else {
            String::new()
        };
        let bar: String = (0..WIDTH)
            .map(|i| if i < filled { '#' } else { '-' })
            .collect();
        let line = format!(
            "\r\x1b[2K{} [{bar}] {pct:>3}%  {}/{}{eta}",
            self.label,
            self.amount(self.done),
            self.amount(self.total)
        );
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(line.as_bytes());
        let _ = err.flush();
        self.drawn = true;
        self.last_draw = Some(Instant::now());
    }

    /// Erases the bar.
    pub fn finish(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(b"\r\x1b[2K");
            let _ = err.flush();
            self.drawn = false;
        }
        self.enabled = false;
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
