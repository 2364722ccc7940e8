//! Failure fingerprints: what groups thousands of DLQ entries into the few bugs behind them.
//!
//! A fingerprint is the error kind plus the error message's *template*: the message with
//! its variable parts replaced by placeholders, so "order ORD-123 not found" and "order
//! ORD-124 not found" share the template `order ORD-<num> not found`. Optionally the first
//! frames of the stack trace (or of the details, when there is no trace) are normalised the
//! same way and added, to tell apart one message raised from different places.
//!
//! Placeholders, tried in this order at the start of each token:
//!
//! | what | example | placeholder |
//! |---|---|---|
//! | a quoted string (`'…'`, `"…"`, `` `…` ``) | `"bob"` | `<str>` |
//! | a URL (`scheme://…`) | `https://x.io/a?b=1` | `<url>` |
//! | a UUID | `6f1c…-…` (8-4-4-4-12 hex) | `<uuid>` |
//! | a timestamp (ISO 8601 date, with time and zone) or a time of day | `2024-05-01T10:00:00Z`, `10:00:01` | `<ts>` |
//! | an e-mail address | `ana@example.com` | `<email>` |
//! | a hex number or id (`0x…`, or 6+ hex digits with a digit and a letter) | `0xdeadbeef`, `3fa9c01b` | `<hex>` |
//! | a long id mixing letters and digits (8+ characters, 2+ digits) | `usr_8fK2pQ9x` | `<id>` |
//! | digits (with a decimal part) | `42`, `3.14` | `<num>` |
//!
//! Before these, a name whose digits are part of the name (an encoding, a hash, a protocol
//! version: `UTF-8`, `SHA-256`, `IPv6`, `HTTP/1.1`, `base64`; the list is [`FIXED_NAMES`],
//! matched without regard to case) is copied as it is: "not UTF-8" and "not UTF-16" are two
//! different failures, not one template `not UTF-<num>`.
//!
//! The normaliser is written out by hand (no regex crate in the core): one pass over the
//! message, each rule a small matcher at a token start. It is deterministic and depends on
//! nothing but its input, so the fingerprint of an entry is the same in every process and
//! version that computes it with the same number of frames; it is never written to disk
//! (the index recomputes it from the stored envelope).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::engine::envelope::FailureInfo;

/// The stable id of a failure fingerprint: a 64-bit FNV-1a hash of the error kind, the
/// message template and the normalised frames, shown as 16 hex digits.
///
/// ```
/// use deadletter::dlq::Fingerprint;
///
/// let a = Fingerprint::compute("NotFound", "order ORD-123 not found", None, 0);
/// let b = Fingerprint::compute("NotFound", "order ORD-977 not found", None, 0);
/// assert_eq!(a, b);
/// let template = deadletter::dlq::message_template("order ORD-123 not found");
/// assert_eq!(template, "order ORD-<num> not found");
/// let parsed: Fingerprint = a.to_string().parse().unwrap();
/// assert_eq!(parsed, a);
/// ```
///
/// Its serde form is the same 16 hex digits, so it reads the same in JSON as on a screen.
///
/// Its `Debug` form shows the same digits (`Fingerprint(3fa9c01b00000000)`), so a logged
/// value can be pasted into the CLI.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint(pub u64);

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

impl Serialize for Fingerprint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Fingerprint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl Fingerprint {
    /// The fingerprint of a failure of `kind` with `message`, plus the first `frames`
    /// non-empty lines of `trace` (normalised), when `frames` > 0.
    pub fn compute(kind: &str, message: &str, trace: Option<&str>, frames: usize) -> Self {
        Self::of_template(kind, &message_template(message), &frame_key(trace, frames))
    }

    /// The fingerprint of a failure envelope: its kind and message, and the first `frames`
    /// lines of its stack trace (or, without one, of its details).
    pub fn of_failure(failure: &FailureInfo, frames: usize) -> Self {
        let trace = failure
            .stack_trace
            .as_deref()
            .or(failure.details.as_deref());
        Self::compute(&failure.error_kind, &failure.error_message, trace, frames)
    }

    pub(crate) fn of_template(kind: &str, template: &str, frames: &str) -> Self {
        let parts = [
            kind.as_bytes(),
            &[0],
            template.as_bytes(),
            &[0],
            frames.as_bytes(),
        ];
        Fingerprint(fnv1a(FNV64, &parts) as u64)
    }
}

/// The normalised first `frames` non-empty lines of `trace`, joined by newlines.
pub(crate) fn frame_key(trace: Option<&str>, frames: usize) -> String {
    let Some(trace) = trace.filter(|_| frames > 0) else {
        return String::new();
    };
    trace
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(frames)
        .map(message_template)
        .collect::<Vec<_>>()
        .join("\n")
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// A fingerprint that is not 1 to 16 hex digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseFingerprintError(pub String);

impl fmt::Display for ParseFingerprintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not a fingerprint (1 to 16 hex digits)", self.0)
    }
}

impl std::error::Error for ParseFingerprintError {}

impl FromStr for Fingerprint {
    type Err = ParseFingerprintError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ParseFingerprintError(s.to_string());
        if s.is_empty() || s.len() > 16 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        u64::from_str_radix(s, 16)
            .map(Fingerprint)
            .map_err(|_| bad())
    }
}

/// FNV-1a's 64-bit offset basis and prime.
pub(crate) const FNV64: (u128, u128) = (0xcbf2_9ce4_8422_2325, 0x0000_0100_0000_01b3);
/// FNV-1a's 128-bit offset basis and prime.
pub(crate) const FNV128: (u128, u128) = (
    0x6c62_272e_07bb_0142_62b8_2175_6295_c58d,
    0x0000_0000_0100_0000_0000_0000_0000_013b,
);

/// FNV-1a of `parts` read one after another, with the offset and prime of [`FNV64`] or
/// [`FNV128`]: written out because fingerprints and entry identities must be the same in
/// every process, build and machine, which `std`'s hashers do not promise. Both widths run
/// in `u128`; the 64-bit hash is the low 64 bits (`as u64`), which XOR and a wrapping
/// multiply compute exactly whatever the bits above them hold.
pub(crate) fn fnv1a((offset, prime): (u128, u128), parts: &[&[u8]]) -> u128 {
    let bytes = parts.iter().copied().flatten();
    bytes.fold(offset, |h, &b| (h ^ u128::from(b)).wrapping_mul(prime))
}

/// The template of an error message: its variable parts replaced by placeholders (see the
/// module documentation for the rules).
pub fn message_template(message: &str) -> String {
    let b = message.as_bytes();
    let mut out = String::with_capacity(message.len());
    let mut i = 0;
    while i < b.len() {
        let at_start = i == 0 || !is_word(b[i - 1]);
        if at_start {
            if let Some(end) = fixed_name(b, i) {
                // Only ASCII was matched, so `end` is a character boundary.
                out.push_str(&message[i..end]);
                i = end;
                continue;
            }
            if let Some((end, placeholder)) = token_at(b, i) {
                out.push_str(placeholder);
                i = end;
                continue;
            }
        }
        if b[i].is_ascii_digit() {
            // Digits inside a word ("user42"): a number all the same.
            out.push_str("<num>");
            i += digit_run(b, i);
            continue;
        }
        // Copy one character (whole, when it is not ASCII).
        let c = message.get(i..).and_then(|rest| rest.chars().next());
        out.extend(c);
        i += c.map_or(1, char::len_utf8);
    }
    out
}

/// Names whose digits belong to the name, copied into a template as they are (compared
/// without regard to case, and only as a whole word). Where one name is the start of
/// another, the longer comes first.
pub const FIXED_NAMES: &[&str] = &[
    "UTF-8",
    "UTF-16",
    "UTF-32",
    "UTF8",
    "UTF16",
    "UTF32",
    "ISO-8859-15",
    "ISO-8859-1",
    "Latin-1",
    "Latin1",
    "SHA-1",
    "SHA-224",
    "SHA-256",
    "SHA-384",
    "SHA-512",
    "SHA1",
    "SHA256",
    "SHA512",
    "MD5",
    "CRC32",
    "AES-128",
    "AES-256",
    "IPv4",
    "IPv6",
    "HTTP/1.0",
    "HTTP/1.1",
    "HTTP/2",
    "HTTP/3",
    "base32",
    "base64",
    "x86_64",
    "S3",
    "EC2",
    "OAuth2",
];

/// Where the name of [`FIXED_NAMES`] that starts at `i` ends, if one does.
fn fixed_name(b: &[u8], i: usize) -> Option<usize> {
    FIXED_NAMES.iter().find_map(|name| {
        let end = i + name.len();
        let found = b.get(i..end)?.eq_ignore_ascii_case(name.as_bytes());
        (found && ends_word(b, end)).then_some(end)
    })
}

/// The placeholder of the token that starts at `i`, and where it ends.
fn token_at(b: &[u8], i: usize) -> Option<(usize, &'static str)> {
    /// The matchers before [`word`], in the order of the module documentation's table.
    type Matcher = fn(&[u8], usize) -> Option<usize>;
    const MATCHERS: [(Matcher, &str); 5] = [
        (quoted, "<str>"),
        (url, "<url>"),
        (uuid, "<uuid>"),
        (timestamp, "<ts>"),
        (email, "<email>"),
    ];
    let found = MATCHERS.iter().find_map(|(m, p)| Some((m(b, i)?, *p)));
    found.or_else(|| is_word(b[i]).then(|| word(b, i)).flatten())
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The longest quoted string (and URL scheme, and e-mail local part) a matcher looks for.
const MAX_QUOTED: usize = 256;
const MAX_SCHEME: usize = 32;
const MAX_LOCAL: usize = 64;

/// A quoted string: an opening quote not preceded by a letter (so "can't" is not one),
/// and the same quote closing it, not followed by a letter or digit.
fn quoted(b: &[u8], i: usize) -> Option<usize> {
    let q = b[i];
    if !matches!(q, b'"' | b'\'' | b'`') {
        return None;
    }
    let mut j = i + 1;
    // Bounded, so that a message full of unclosed quotes costs linear time.
    let limit = b.len().min(i + MAX_QUOTED);
    while j < limit {
        if b[j] == b'\\' {
            j += 2;
            continue;
        }
        if b[j] == q && (j + 1 >= b.len() || !b[j + 1].is_ascii_alphanumeric()) {
            return Some(j + 1);
        }
        j += 1;
    }
    None
}

/// `scheme://rest` up to whitespace or a closing bracket or quote, without trailing
/// punctuation.
fn url(b: &[u8], i: usize) -> Option<usize> {
    if !b[i].is_ascii_alphabetic() {
        return None;
    }
    let mut j = i + 1;
    while j < b.len() && (b[j].is_ascii_alphanumeric() || matches!(b[j], b'+' | b'.' | b'-')) {
        j += 1;
        if j - i > MAX_SCHEME {
            return None;
        }
    }
    if !b[j..].starts_with(b"://") {
        return None;
    }
    j += 3;
    let start = j;
    while j < b.len()
        && !b[j].is_ascii_whitespace()
        && !matches!(b[j], b'"' | b'\'' | b'`' | b'>' | b')' | b']')
    {
        j += 1;
    }
    while j > start && matches!(b[j - 1], b'.' | b',' | b';' | b':' | b'!' | b'?') {
        j -= 1;
    }
    (j > start).then_some(j)
}

/// Counts hex digits from `i`, at most `max`.
fn hex_run(b: &[u8], i: usize, max: usize) -> usize {
    b[i..]
        .iter()
        .take(max)
        .take_while(|c| c.is_ascii_hexdigit())
        .count()
}

fn digit_run(b: &[u8], i: usize) -> usize {
    b[i.min(b.len())..]
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .count()
}

/// True when no word character follows position `end`.
fn ends_word(b: &[u8], end: usize) -> bool {
    end >= b.len() || !is_word(b[end])
}

/// 8-4-4-4-12 hex digits.
fn uuid(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    for (n, len) in [8, 4, 4, 4, 12].into_iter().enumerate() {
        if n > 0 {
            if b.get(j) != Some(&b'-') {
                return None;
            }
            j += 1;
        }
        if j > b.len() || hex_run(b, j, len + 1) != len {
            return None;
        }
        j += len;
    }
    ends_word(b, j).then_some(j)
}

/// Exactly `n` digits at `j`.
fn digits(b: &[u8], j: usize, n: usize) -> bool {
    j <= b.len() && digit_run(b, j) == n
}

/// `YYYY-MM-DD`, optionally `[T ]hh:mm[:ss[.fff]]` and a zone (`Z` or `±hh[:]mm`); or a
/// time of day `hh:mm:ss[.fff]` alone.
fn timestamp(b: &[u8], i: usize) -> Option<usize> {
    let date = digits(b, i, 4)
        && b.get(i + 4) == Some(&b'-')
        && digits(b, i + 5, 2)
        && b.get(i + 7) == Some(&b'-')
        && digits(b, i + 8, 2);
    if date {
        let mut j = i + 10;
        if matches!(b.get(j), Some(b'T' | b't' | b' ')) {
            if let Some(end) = time_of_day(b, j + 1, false) {
                j = zone(b, end);
            }
        }
        return ends_word(b, j).then_some(j);
    }
    let end = time_of_day(b, i, true)?;
    ends_word(b, end).then_some(end)
}

/// `hh:mm` (`hh:mm:ss` when `seconds` is required), with optional fractional seconds.
fn time_of_day(b: &[u8], i: usize, seconds: bool) -> Option<usize> {
    if !(digits(b, i, 2) && b.get(i + 2) == Some(&b':') && digits(b, i + 3, 2)) {
        return None;
    }
    let mut j = i + 5;
    if b.get(j) == Some(&b':') && digits(b, j + 1, 2) {
        j += 3;
        if b.get(j) == Some(&b'.') && digit_run(b, j + 1) > 0 {
            j += 1 + digit_run(b, j + 1);
        }
    } else if seconds {
        return None;
    }
    Some(j)
}

fn zone(b: &[u8], j: usize) -> usize {
    match b.get(j) {
        Some(b'Z' | b'z') => j + 1,
        Some(b'+' | b'-') => match digit_run(b, j + 1) {
            4 => j + 5,
            2 if b.get(j + 3) == Some(&b':') && digits(b, j + 4, 2) => j + 6,
            2 => j + 3,
            _ => j,
        },
        _ => j,
    }
}

/// `local@domain.tld`: a local part of letters, digits and `._%+-`, a domain of labels
/// with a dot, ending in letters.
fn email(b: &[u8], i: usize) -> Option<usize> {
    let local = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'%' | b'+' | b'-');
    let mut j = i;
    while j < b.len() && local(b[j]) {
        j += 1;
        if j - i > MAX_LOCAL {
            return None;
        }
    }
    if j == i || b.get(j) != Some(&b'@') {
        return None;
    }
    j += 1;
    let start = j;
    while j < b.len() && (b[j].is_ascii_alphanumeric() || matches!(b[j], b'.' | b'-')) {
        j += 1;
    }
    while j > start && matches!(b[j - 1], b'.' | b'-') {
        j -= 1;
    }
    let domain = &b[start..j];
    let dot = domain.iter().rposition(|&c| c == b'.')?;
    let tld = &domain[dot + 1..];
    (dot > 0 && tld.len() >= 2 && tld.iter().all(u8::is_ascii_alphabetic)).then_some(j)
}

/// A word (letters, digits, `_`) that holds digits: a hex number or id, a long mixed id,
/// digits, or a word whose digit runs are numbers. `None` for a word without digits (and
/// for a short hex-looking word without them, such as "cafe").
fn word(b: &[u8], i: usize) -> Option<(usize, &'static str)> {
    let len = b[i..].iter().take_while(|&&c| is_word(c)).count();
    let end = i + len;
    let w = &b[i..end];
    let digit_count = w.iter().filter(|c| c.is_ascii_digit()).count();
    if (w.starts_with(b"0x") || w.starts_with(b"0X"))
        && w.len() > 2
        && w[2..].iter().all(u8::is_ascii_hexdigit)
    {
        return Some((end, "<hex>"));
    }
    if digit_count == 0 {
        return None;
    }
    if digit_count == w.len() {
        // Digits, with a decimal part.
        let mut end = end;
        if b.get(end) == Some(&b'.')
            && digit_run(b, end + 1) > 0
            && ends_word(b, end + 1 + digit_run(b, end + 1))
        {
            end += 1 + digit_run(b, end + 1);
        }
        return Some((end, "<num>"));
    }
    if w.len() >= 6 && w.iter().all(u8::is_ascii_hexdigit) {
        return Some((end, "<hex>"));
    }
    if w.len() >= 8 && digit_count >= 2 {
        return Some((end, "<id>"));
    }
    // A short word mixing letters and digits ("v2", "user42"): its letters are copied and
    // its digit runs become `<num>` by the caller.
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frames a fingerprint adds: the first non-empty lines, trimmed, normalised
    /// (`tests/queue_api/templates.rs` checks the templates and fingerprints themselves).
    #[test]
    fn frame_keys_are_the_normalised_first_lines() {
        let trace = Some("at handler.rs:10\n\n  at main.rs:3\nat start");
        assert_eq!(frame_key(trace, 2), "at handler.rs:<num>\nat main.rs:<num>");
        assert_eq!(frame_key(trace, 0), "");
        assert_eq!(frame_key(None, 2), "");
    }
}
