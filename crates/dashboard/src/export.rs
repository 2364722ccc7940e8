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

use deadletter::DeadLetter;
use serde_json::Value;

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
            PayloadEncoding::Base64 => base64_encode(bytes),
            PayloadEncoding::Hex => hex_encode(bytes),
        }
    }

    /// Decodes `text`.
    pub fn decode(self, text: &str) -> Result<Vec<u8>, ExportError> {
        match self {
            PayloadEncoding::Base64 => base64_decode(text),
            PayloadEncoding::Hex => hex_decode(text),
        }
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
    for extra in ["id", "payload_encoding", "payload_text", "payload_size"] {
        map.remove(extra);
    }
    serde_json::from_value(Value::Object(map)).map_err(|e| ExportError::Shape(e.to_string()))
}

/// Reads an envelope from one line of an export.
pub fn parse_line(line: &str) -> Result<DeadLetter, ExportError> {
    let value: Value = serde_json::from_str(line).map_err(|e| ExportError::Json(e.to_string()))?;
    envelope_from_json(&value)
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn b64_value(c: u8) -> Option<u32> {
    match c {
        b'A'..=b'Z' => Some(u32::from(c - b'A')),
        b'a'..=b'z' => Some(u32::from(c - b'a') + 26),
        b'0'..=b'9' => Some(u32::from(c - b'0') + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// Decodes standard padded base64, strictly (no whitespace, padding only at the end).
pub fn base64_decode(text: &str) -> Result<Vec<u8>, ExportError> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return Err(ExportError::BadPayload(
            "base64 length is not a multiple of 4".into(),
        ));
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let groups = bytes.len() / 4;
    for (g, quad) in bytes.chunks(4).enumerate() {
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && g + 1 != groups) {
            return Err(ExportError::BadPayload("misplaced base64 padding".into()));
        }
        let mut n = 0u32;
        for (i, &c) in quad.iter().enumerate() {
            let v = if i >= 4 - pad {
                0
            } else {
                b64_value(c).ok_or_else(|| {
                    ExportError::BadPayload(format!("invalid base64 character {:?}", c as char))
                })?
            };
            n = (n << 6) | v;
        }
        let group = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&group[..3 - pad]);
    }
    Ok(out)
}

/// Lower-case hexadecimal.
pub fn hex_encode(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
    out
}

/// Decodes hexadecimal (either case).
pub fn hex_decode(text: &str) -> Result<Vec<u8>, ExportError> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return Err(ExportError::BadPayload("hex length is odd".into()));
    }
    let digit = |c: u8| {
        (c as char)
            .to_digit(16)
            .map(|d| d as u8)
            .ok_or_else(|| ExportError::BadPayload(format!("invalid hex digit {:?}", c as char)))
    };
    bytes
        .chunks(2)
        .map(|pair| Ok(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_known_vectors() {
        for (plain, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64_encode(plain.as_bytes()), enc);
            assert_eq!(base64_decode(enc).unwrap(), plain.as_bytes());
        }
    }

    #[test]
    fn base64_and_hex_round_trip_every_byte() {
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        for n in 0..all.len() {
            let b = &all[..n];
            assert_eq!(base64_decode(&base64_encode(b)).unwrap(), b);
            assert_eq!(hex_decode(&hex_encode(b)).unwrap(), b);
        }
    }

    #[test]
    fn malformed_input_is_rejected() {
        assert!(base64_decode("Zg=").is_err());
        assert!(base64_decode("Z===").is_err());
        assert!(base64_decode("Zg==Zm8=").is_err());
        assert!(base64_decode("Zm9*").is_err());
        assert!(hex_decode("abc").is_err());
        assert!(hex_decode("zz").is_err());
    }
}
