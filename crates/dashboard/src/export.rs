//! The JSON form of a DLQ envelope, used by `deadletter export` / `import` (one envelope per
//! line: newline-delimited JSON), by `list`/`show --json`, and by the dashboard's API.
//!
//! The form is the serde form of [`DeadLetter`] with two changes, so that every byte of a
//! payload round-trips and a person can still read the rest:
//! - `payload` (and `replaced_payload`, when present) is a string in the encoding named by
//!   `payload_encoding`: `"base64"` (standard alphabet, padded; the default) or `"hex"`
//!   (lower case);
//! - a top-level `id` repeats `metadata.id` for convenience (tools like `jq`).
//!
//! Optionally `payload_text` holds the payload as text when it is valid UTF-8 (it is
//! ignored on import). Unknown fields are ignored on import, so the format can grow.

use std::fmt;

use data_encoding::{BASE64, HEXLOWER, HEXLOWER_PERMISSIVE};
use deadletter::dlq::{DeadLetter, EntryStatus};
use serde_json::Value;

/// `pending`, `reprocessed_ok` or `reprocessed_failed`: the one spelling of an entry's
/// status in every output (the API, `--json`, exports, the command's tables).
pub fn status_name(s: &EntryStatus) -> &'static str {
    match s {
        EntryStatus::Pending => "pending",
        EntryStatus::Reprocessed { success: true, .. } => "reprocessed_ok",
        EntryStatus::Reprocessed { success: false, .. } => "reprocessed_failed",
    }
}

/// How payload bytes are written as a JSON string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PayloadEncoding {
    /// Standard base64 with padding.
    #[default]
    Base64,
    /// Lower-case hexadecimal.
    Hex,
}

impl PayloadEncoding {
    /// The name written in `payload_encoding`.
    pub fn name(self) -> &'static str {
        match self {
            PayloadEncoding::Base64 => "base64",
            PayloadEncoding::Hex => "hex",
        }
    }

    /// The encoding named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "base64" => Some(PayloadEncoding::Base64),
            "hex" => Some(PayloadEncoding::Hex),
            _ => None,
        }
    }

    /// Encodes `bytes`.
    pub fn encode(self, bytes: &[u8]) -> String {
        match self {
            PayloadEncoding::Base64 => BASE64.encode(bytes),
            PayloadEncoding::Hex => HEXLOWER.encode(bytes),
        }
    }

    /// Decodes `text`: strictly for base64 (the standard alphabet, with its padding, and no
    /// stray bits in the last character); hexadecimal in either case.
    pub fn decode(self, text: &str) -> Result<Vec<u8>, ExportError> {
        let (name, encoding) = match self {
            PayloadEncoding::Base64 => ("base64", &BASE64),
            PayloadEncoding::Hex => ("hex", &HEXLOWER_PERMISSIVE),
        };
        encoding
            .decode(text.as_bytes())
            .map_err(|e| ExportError::BadPayload(format!("not valid {name}: {e}")))
    }
}

/// Why an exported envelope could not be read back.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExportError {
    /// The text is not JSON.
    Json(String),
    /// The JSON is not an object, or lacks a field, or a field has the wrong type.
    Shape(String),
    /// `payload_encoding` names no known encoding.
    UnknownEncoding(String),
    /// A payload string is not valid in its encoding.
    BadPayload(String),
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExportError::Json(e) => write!(f, "not valid JSON: {e}"),
            ExportError::Shape(e) => write!(f, "not a DLQ envelope: {e}"),
            ExportError::UnknownEncoding(e) => {
                write!(f, "unknown payload_encoding {e:?} (expected base64 or hex)")
            }
            ExportError::BadPayload(e) => write!(f, "bad payload: {e}"),
        }
    }
}

impl std::error::Error for ExportError {}

/// The JSON form of `entry`, its payloads encoded with `encoding`. With `with_text`, adds
/// `payload_text` when the payload is valid UTF-8.
pub fn envelope_to_json(entry: &DeadLetter, encoding: PayloadEncoding, with_text: bool) -> Value {
    // DeadLetter holds plain strings, integers and maps: serde_json cannot fail on it, but
    // fall back to an explicit error object rather than panic.
    let mut value = match serde_json::to_value(entry) {
        Ok(v) => v,
        Err(e) => return serde_json::json!({ "id": entry.id(), "error": e.to_string() }),
    };
    if let Value::Object(map) = &mut value {
        // Only an imported entry has one (its id where it was first dead-lettered): an
        // export of entries dead-lettered here reads as it did before the field existed.
        if entry.original_id.is_none() {
            map.remove("original_id");
        }
        // Likewise the fingerprint of an entry read from a source that keeps none.
        if entry.fingerprint.is_none() {
            map.remove("fingerprint");
        }
        map.insert("id".into(), Value::from(entry.id()));
        map.insert(
            "payload".into(),
            Value::String(encoding.encode(&entry.payload)),
        );
        map.insert(
            "replaced_payload".into(),
            match &entry.replaced_payload {
                Some(p) => Value::String(encoding.encode(p)),
                None => Value::Null,
            },
        );
        // The status in the one spelling every output uses (the API's): `pending`,
        // `reprocessed_ok`, `reprocessed_failed`, and when it was marked.
        map.insert("status".into(), Value::from(status_name(&entry.status)));
        if let EntryStatus::Reprocessed { at_ms, .. } = entry.status {
            map.insert("reprocessed_at_ms".into(), Value::from(at_ms));
        }
        map.insert("payload_encoding".into(), Value::from(encoding.name()));
        map.insert("payload_size".into(), Value::from(entry.payload.len()));
        if with_text {
            if let Ok(text) = std::str::from_utf8(&entry.payload) {
                map.insert("payload_text".into(), Value::from(text));
            }
        }
    }
    value
}

/// One line of an export: the JSON form with base64 payloads, no trailing newline.
pub fn envelope_to_line(entry: &DeadLetter) -> String {
    envelope_to_json(entry, PayloadEncoding::Base64, false).to_string()
}

/// Reads an envelope back from its JSON form.
pub fn envelope_from_json(value: &Value) -> Result<DeadLetter, ExportError> {
    let Value::Object(map) = value else {
        return Err(ExportError::Shape("expected a JSON object".into()));
    };
    let encoding = match map.get("payload_encoding") {
        None | Some(Value::Null) => PayloadEncoding::Base64,
        Some(Value::String(name)) => PayloadEncoding::from_name(name)
            .ok_or_else(|| ExportError::UnknownEncoding(name.clone()))?,
        Some(_) => {
            return Err(ExportError::Shape(
                "payload_encoding is not a string".into(),
            ))
        }
    };
    let mut map = map.clone();
    for field in ["payload", "replaced_payload"] {
        let decoded = match map.get(field) {
            Some(Value::String(text)) => {
                let bytes = encoding
                    .decode(text)
                    .map_err(|e| ExportError::BadPayload(format!("{field}: {e}")))?;
                Value::Array(bytes.into_iter().map(Value::from).collect())
            }
            Some(Value::Null) if field == "replaced_payload" => Value::Null,
            None if field == "replaced_payload" => Value::Null,
            None => return Err(ExportError::Shape(format!("missing field {field}"))),
            Some(_) => return Err(ExportError::Shape(format!("{field} is not a string"))),
        };
        map.insert(field.into(), decoded);
    }
    // The status as written since 0.2 (a name, and when it was marked); 0.1 wrote the
    // serde form, which reads as it is.
    let at_ms = map
        .remove("reprocessed_at_ms")
        .and_then(|v| v.as_u64())
        .unwrap_or(0);
    let status = match map.get("status").and_then(Value::as_str) {
        Some("pending") => Some(EntryStatus::Pending),
        Some("reprocessed_ok") => Some(EntryStatus::Reprocessed {
            success: true,
            at_ms,
        }),
        Some("reprocessed_failed") => Some(EntryStatus::Reprocessed {
            success: false,
            at_ms,
        }),
        _ => None,
    };
    if let Some(status) = status {
        let value = serde_json::to_value(status).map_err(|e| ExportError::Shape(e.to_string()))?;
        map.insert("status".into(), value);
    }
    for extra in ["id", "payload_encoding", "payload_text", "payload_size"] {
        map.remove(extra);
    }
    serde_json::from_value(Value::Object(map)).map_err(|e| ExportError::Shape(e.to_string()))
}

/// Reads an envelope from one line of an export.
///
/// ```
/// use deadletter::{Config, Failure, Filter, Page, Store};
/// use deadletter::queue::FailureReport;
/// use deadletter_dashboard::export::{envelope_to_line, parse_line};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = std::env::temp_dir().join(format!("deadletter-doc-export-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let store = Store::open(&dir, Config::fast())?;
/// let orders = store.queue("orders")?;
/// orders.enqueue([0u8, 159, 146, 150, 255])?; // not text: base64 in the JSON form
/// let msg = orders.lease(1)?.remove(0);
/// orders.dead_letter(&msg, &FailureReport::new(&Failure::permanent("Bad", "bytes")))?;
///
/// let entry = orders.dlq().list(&Filter::all(), Page::first(1))?.remove(0);
/// let line = envelope_to_line(&entry);
/// assert!(line.contains(r#""payload":"AJ+Slv8=""#));
/// assert_eq!(parse_line(&line)?, entry); // every byte and field round-trips
/// # drop((msg, orders, store));
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
pub fn parse_line(line: &str) -> Result<DeadLetter, ExportError> {
    let value: Value = serde_json::from_str(line).map_err(|e| ExportError::Json(e.to_string()))?;
    envelope_from_json(&value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_in_both_encodings() {
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        for n in [0, 1, 2, 3, 4, 255, all.len()] {
            for encoding in [PayloadEncoding::Base64, PayloadEncoding::Hex] {
                let text = encoding.encode(&all[..n]);
                assert_eq!(encoding.decode(&text).unwrap(), &all[..n]);
            }
        }
        assert_eq!(PayloadEncoding::Base64.encode(b"fo"), "Zm8=");
        assert_eq!(PayloadEncoding::Hex.encode(b"\x0a\xff"), "0aff");
        assert_eq!(PayloadEncoding::Hex.decode("0AfF").unwrap(), b"\x0a\xff");
    }

    #[test]
    fn malformed_payloads_are_rejected() {
        // Unpadded, misplaced padding, a stray character, stray bits in the last character.
        for bad in ["Zg=", "Z===", "Zm9*", "Zh=="] {
            let e = PayloadEncoding::Base64.decode(bad).unwrap_err();
            assert!(matches!(e, ExportError::BadPayload(_)), "{bad}: {e}");
        }
        for bad in ["abc", "zz"] {
            assert!(PayloadEncoding::Hex.decode(bad).is_err(), "{bad}");
        }
    }
}
