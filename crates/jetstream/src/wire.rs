//! What this package writes on the server, byte for byte: the headers of a queue message,
//! the DLQ envelope and the attempt history (both JSON, version 1).
//!
//! A queue message's data is the payload as given, so any JetStream consumer can read it.
//! A freshly enqueued message has no header unless it has attributes, a time to live or
//! an idempotency key; a replayed one carries its id, generation, attempts so far and
//! original enqueue time ([`headers`]).
//!
//! A DLQ entry's data is the JSON form of `deadletter::dlq::DeadLetter` ([`EnvelopeV1`]): the
//! same envelope as the embedded store, with the payloads in base64 (standard alphabet,
//! padded). Its headers repeat the error kind and status for tools that only look at
//! headers. The history record of a message being retried is [`HistoryV1`].

use std::collections::BTreeMap;

use async_nats::HeaderMap;
use data_encoding::BASE64;
use deadletter::dlq::{
    Attempt, DeadLetter, DlqMetadata, EntryStatus, FailureInfo, OriginalMetadata,
};
use deadletter::{Error, Result};
use serde::{Deserialize, Serialize};

/// Header names.
pub(crate) mod headers {
    /// The message id, on a replayed message (others: computed from the sequence).
    pub const ID: &str = "Deadletter-Id";
    /// How many times the message was replayed from a DLQ.
    pub const GENERATION: &str = "Deadletter-Generation";
    /// Deliveries counted before this copy was published (a replay keeping the count).
    pub const ATTEMPTS_BASE: &str = "Deadletter-Attempts-Base";
    /// The original enqueue time (ms), on a replayed message.
    pub const ENQUEUED_AT: &str = "Deadletter-Enqueued-At";
    /// The caller's attributes, a JSON object of strings.
    pub const ATTRIBUTES: &str = "Deadletter-Attributes";
    /// When the message's time to live passes (ms).
    pub const EXPIRES_AT: &str = "Deadletter-Expires-At";
    /// Not to be delivered before this time (ms): a delayed enqueue.
    pub const NOT_BEFORE: &str = "Deadletter-Not-Before";
    /// On a replayed message: the queue whose DLQ it came from.
    pub const REPLAYED_FROM: &str = "Deadletter-Replayed-From";
    /// On a DLQ entry: the final error kind.
    pub const ERROR_KIND: &str = "Deadletter-Error-Kind";
    /// On a DLQ entry: `pending`, `reprocessed-ok` or `reprocessed-failed`.
    pub const STATUS: &str = "Deadletter-Status";
    /// On a DLQ entry: the envelope's encoding, `json-v1`.
    pub const ENCODING: &str = "Deadletter-Encoding";
    /// On a forwarded message or entry: the origin (store) it was forwarded from.
    pub const ORIGIN: &str = "Deadletter-Origin";
    /// On a forwarded message or entry: its queue in the origin store.
    pub const QUEUE: &str = "Deadletter-Queue";
}

/// The encoding named in [`headers::ENCODING`].
pub(crate) const ENVELOPE_ENCODING: &str = "json-v1";

/// A header's value parsed as a number.
pub(crate) fn header_u64(h: Option<&HeaderMap>, name: &str) -> Option<u64> {
    h?.get(name)?.as_str().parse().ok()
}

/// The attributes a message carries in its headers.
pub(crate) fn attributes(h: Option<&HeaderMap>) -> BTreeMap<String, String> {
    h.and_then(|h| h.get(headers::ATTRIBUTES))
        .and_then(|v| serde_json::from_str(v.as_str()).ok())
        .unwrap_or_default()
}

/// The DLQ envelope as stored: `deadletter::dlq::DeadLetter` with base64 payloads.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct EnvelopeV1 {
    /// Always 1.
    pub version: u32,
    pub payload: String,
    pub replaced_payload: Option<String>,
    pub metadata: OriginalMetadata,
    pub failure: FailureInfo,
    pub dlq: DlqMetadata,
    pub generation: u32,
    pub status: EntryStatus,
    pub dlq_name: String,
}

/// Encodes an entry, with its headers.
pub(crate) fn encode_entry(e: &DeadLetter) -> Result<(HeaderMap, Vec<u8>)> {
    let wire = EnvelopeV1 {
        version: 1,
        payload: BASE64.encode(&e.payload),
        replaced_payload: e.replaced_payload.as_deref().map(|p| BASE64.encode(p)),
        metadata: e.metadata.clone(),
        failure: e.failure.clone(),
        dlq: e.dlq.clone(),
        generation: e.generation,
        status: e.status,
        dlq_name: e.dlq_name.clone(),
    };
    let data = serde_json::to_vec(&wire).map_err(|e| Error::Codec(e.to_string()))?;
    let mut h = HeaderMap::new();
    h.insert(headers::ENCODING, ENVELOPE_ENCODING);
    h.insert(headers::ERROR_KIND, e.failure.error_kind.as_str());
    h.insert(headers::STATUS, status_text(e.status));
    Ok((h, data))
}

fn status_text(s: EntryStatus) -> &'static str {
    match s {
        EntryStatus::Pending => "pending",
        EntryStatus::Reprocessed { success: true, .. } => "reprocessed-ok",
        EntryStatus::Reprocessed { success: false, .. } => "reprocessed-failed",
    }
}

/// Decodes an entry stored by [`encode_entry`]; `where_` names it in an error.
pub(crate) fn decode_entry(data: &[u8], where_: &str) -> Result<DeadLetter> {
    let bad = |what: String| Error::Codec(format!("DLQ entry {where_}: {what}"));
    let wire: EnvelopeV1 = serde_json::from_slice(data).map_err(|e| bad(e.to_string()))?;
    if wire.version != 1 {
        return Err(bad(format!("envelope version {} is unknown", wire.version)));
    }
    let b64 = |s: &str| BASE64.decode(s.as_bytes()).map_err(|e| bad(e.to_string()));
    let payload = b64(&wire.payload)?;
    let replaced_payload = wire.replaced_payload.as_deref().map(b64).transpose()?;
    let mut entry = DeadLetter::new(payload, wire.metadata, wire.failure, wire.dlq)
        .generation(wire.generation)
        .status(wire.status)
        .dlq_name(wire.dlq_name);
    entry.replaced_payload = replaced_payload;
    Ok(entry)
}

/// The failed attempts of a message in a queue, for one generation (a replay starts a
/// new one).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct HistoryV1 {
    /// Always 1.
    pub version: u32,
    pub generation: u32,
    pub attempts: Vec<Attempt>,
    pub dropped: u32,
    pub first_received_at_ms: Option<u64>,
    /// The payload a corrected replay replaced (base64).
    pub replaced_payload: Option<String>,
    /// Deliveries of a delayed message given back before its time (not attempts).
    #[serde(default)]
    pub deferred: u32,
}

impl HistoryV1 {
    pub(crate) fn new(generation: u32) -> Self {
        HistoryV1 {
            version: 1,
            generation,
            ..HistoryV1::default()
        }
    }

    /// Adds an attempt, keeping the newest `max` (older ones are counted).
    pub(crate) fn push(&mut self, attempt: Attempt, max: usize) {
        self.attempts.push(attempt);
        while self.attempts.len() > max.max(1) {
            self.attempts.remove(0);
            self.dropped += 1;
        }
    }

    pub(crate) fn replaced(&self) -> Result<Option<Vec<u8>>> {
        self.replaced_payload
            .as_deref()
            .map(|s| {
                BASE64
                    .decode(s.as_bytes())
                    .map_err(|e| Error::Codec(format!("history record: {e}")))
            })
            .transpose()
    }

    pub(crate) fn encode(&self) -> Result<Vec<u8>> {
        serde_json::to_vec(self).map_err(|e| Error::Codec(e.to_string()))
    }

    pub(crate) fn decode(data: &[u8]) -> Result<Self> {
        let h: HistoryV1 = serde_json::from_slice(data)
            .map_err(|e| Error::Codec(format!("history record: {e}")))?;
        if h.version != 1 {
            return Err(Error::Codec(format!(
                "history record version {} is unknown",
                h.version
            )));
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_survives_its_encoding() {
        let metadata = OriginalMetadata::new(7, "q", 1)
            .first_received_at_ms(2)
            .delivery_count(3)
            .attributes(BTreeMap::from([("k".into(), "v".into())]));
        let failure = FailureInfo::new("K", "m", 4);
        let dlq = DlqMetadata::new(4).worker("w");
        let entry = DeadLetter::new(vec![0, 255, 10, 13], metadata, failure, dlq)
            .replaced_payload(b"old".to_vec())
            .generation(1)
            .status(EntryStatus::Reprocessed {
                success: true,
                at_ms: 9,
            })
            .dlq_name("q-dlq");
        let (h, data) = encode_entry(&entry).unwrap();
        assert_eq!(h.get(headers::STATUS).unwrap().as_str(), "reprocessed-ok");
        assert_eq!(decode_entry(&data, "test").unwrap(), entry);
        assert!(decode_entry(b"{}", "test").is_err());
    }
}
