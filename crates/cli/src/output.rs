//! Output helpers: aligned tables for people, JSON for scripts, and text truncation.

use std::io::Write;

use deadletter_dashboard::export::PayloadEncoding;

use crate::error::CliError;

/// A table printed with aligned columns; numeric columns are right-aligned.
pub struct Table {
    headers: Vec<&'static str>,
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these headers; a header starting with `>` is right-aligned (the `>` is
    /// not printed).
    pub fn new(headers: &[&'static str]) -> Self {
        Table {
            headers: headers
                .iter()
                .map(|h| h.strip_prefix('>').unwrap_or(h))
                .collect(),
            right: headers.iter().map(|h| h.starts_with('>')).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// True when no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text, one line per row, with a trailing newline, fitted to the
    /// terminal's width (see [`terminal_width`]).
    pub fn render(&self) -> String {
        self.render_width(terminal_width())
    }

    /// The width of the table's widest line, uncut.
    pub fn natural_width(&self) -> usize {
        let widths = self.widths();
        widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1)
    }

    /// Each column's width: its widest cell or header.
    fn widths(&self) -> Vec<usize> {
        let cols = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(cols) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        widths
    }

    /// The table as text, at most `max` characters wide when given: the widest text
    /// (left-aligned) columns are narrowed, their cells cut with `…`; numbers are never cut.
    pub fn render_width(&self, max: Option<usize>) -> String {
        let cols = self.headers.len();
        let mut widths = self.widths();
        if let Some(max) = max {
            self.fit(&mut widths, max);
        }
        let mut out = String::new();
        let headers: Vec<String> = self.headers.iter().map(|h| h.to_string()).collect();
        for row in std::iter::once(&headers).chain(self.rows.iter()) {
            let mut line = String::new();
            for (i, width) in widths.iter().enumerate() {
                let full = row.get(i).map(String::as_str).unwrap_or("");
                let clipped;
                let cell = if full.chars().count() > *width {
                    clipped = clip(full, *width);
                    clipped.as_str()
                } else {
                    full
                };
                let pad = width.saturating_sub(cell.chars().count());
                if i > 0 {
                    line.push_str("  ");
                }
                if self.right[i] {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    if i + 1 < cols {
                        line.push_str(&" ".repeat(pad));
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

impl Table {
    /// Narrows columns, one character at a time, until the table fits in `max` or none
    /// can be narrowed further: the widest text (left-aligned) column first, down to
    /// [`MIN_COLUMN`] characters; then the headers of number columns, down to their widest
    /// number (numbers are never cut; a header is cut like a cell).
    fn fit(&self, widths: &mut [usize], max: usize) {
        let total = |w: &[usize]| w.iter().sum::<usize>() + 2 * w.len().saturating_sub(1);
        let data_width = |i: usize| {
            self.rows
                .iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
                .max(MIN_NUMBER)
        };
        while total(widths) > max {
            let text = (0..widths.len())
                .filter(|&i| !self.right[i] && widths[i] > MIN_COLUMN)
                .max_by_key(|&i| widths[i]);
            let number = || {
                (0..widths.len())
                    .filter(|&i| self.right[i] && widths[i] > data_width(i))
                    .max_by_key(|&i| widths[i] - data_width(i))
            };
            match text.or_else(number) {
                Some(i) => widths[i] -= 1,
                None => return,
            }
        }
    }
}

/// The narrowest a text column is cut to.
const MIN_COLUMN: usize = 6;

/// The narrowest a number column's header is cut to.
const MIN_NUMBER: usize = 4;

/// The width tables are fitted to: `COLUMNS` when set, else the terminal's width when
/// standard output is a terminal; none (full width) in a pipe.
pub fn terminal_width() -> Option<usize> {
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
    {
        return Some(n);
    }
    terminal_size::terminal_size_of(std::io::stdout()).map(|(w, _)| w.0 as usize)
}

/// Writes `text` to stdout; a closed pipe (`| head`) is not an error worth a message.
pub fn print(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::io("write to stdout", e)),
    }
}

/// Prints one JSON document (pretty, with a trailing newline).
pub fn print_json(value: &serde_json::Value) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::Input(format!("cannot encode JSON: {e}")))?;
    print(&(text + "\n"))
}

/// At most `max` characters of `s` on one line, with `…` when cut.
pub fn clip(s: &str, max: usize) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut out: String = one_line.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A short view of a payload: its text if UTF-8, else `0x` and hex of its first bytes.
pub fn payload_preview(bytes: &[u8], max: usize) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => clip(text, max),
        Err(_) => {
            let hex = PayloadEncoding::Hex.encode(&bytes[..bytes.len().min(max / 2)]);
            clip(&format!("0x{hex}"), max)
        }
    }
}

/// A classic hex dump: offset, 16 bytes in hex, and their printable ASCII.
pub fn hex_dump(bytes: &[u8]) -> String {
    let mut out = String::new();
    for (i, chunk) in bytes.chunks(16).enumerate() {
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        let ascii: String = chunk
            .iter()
            .map(|&b| {
                if (0x20..0x7f).contains(&b) {
                    b as char
                } else {
                    '.'
                }
            })
            .collect();
        out.push_str(&format!("{:08x}  {:<47}  {ascii}\n", i * 16, hex.join(" ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns() {
        let mut t = Table::new(&["NAME", ">COUNT"]);
        t.row(vec!["orders".into(), "3".into()]);
        t.row(vec!["x".into(), "1200".into()]);
        assert_eq!(
            t.render_width(None),
            "NAME    COUNT\norders      3\nx        1200\n"
        );
    }

    #[test]
    fn tables_fit_a_width() {
        let mut t = Table::new(&["NAME", ">COUNT", "MESSAGE"]);
        t.row(vec![
            "orders".into(),
            "3".into(),
            "a long message that goes on".into(),
        ]);
        let text = t.render_width(Some(30));
        assert!(text.lines().all(|l| l.chars().count() <= 30), "{text}");
        assert!(text.contains("a long me"), "{text}");
        assert!(text.contains('…'), "{text}");
        assert!(text.contains("orders") && text.contains(" 3 "), "{text}");
        // Unlimited: as wide as it needs.
        assert!(t.render_width(None).contains("goes on"));
    }

    #[test]
    fn clipping() {
        assert_eq!(clip("abc", 5), "abc");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("a\nb", 5), "a b");
        assert_eq!(payload_preview(&[0xff, 0x00], 10), "0xff00");
    }

    #[test]
    fn hex_dump_lines() {
        let d = hex_dump(b"hello\xff");
        assert!(d.starts_with("00000000  68 65 6c 6c 6f ff"));
        assert!(d.trim_end().ends_with("hello."));
    }
}
