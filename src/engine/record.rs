//! The queue-level records stored in the log, and their encoding.
//!
//! A record body is one tag byte followed by a bincode-encoded struct. Records that carry a
//! payload ([`Put`]) have the layout `tag | meta_len: u32 LE | meta (bincode) | payload`, so
//! the payload sits at a known offset inside the record and is read straight from the log's
//! memory map without copying. Every state change of a message is exactly one record, so a
//! move between a queue and its DLQ is atomic: the log holds the record or it does not.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::engine::envelope::{Attempt, DlqMetadata, FailureInfo, MessageId};
use crate::error::{Error, Result};

/// Dense number of a queue inside one store.
pub type QueueId = u32;

/// Room a record needs beyond its payload (the record's metadata, or a dead-letter
/// envelope): a store accepts log records of up to its largest message size plus this.
pub(crate) const RECORD_OVERHEAD: usize = 64 << 10;

/// Metadata stored with a payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutMeta {
    /// Message id.
    pub id: MessageId,
    /// Queue it is put in.
    pub queue: QueueId,
    /// When the message was first enqueued.
    pub enqueued_at: u64,
    /// Not delivered before this time.
    pub visible_at: u64,
    /// Expires (TTL) at this time, if set.
    pub expires_at: Option<u64>,
    /// Caller's attributes.
    pub attributes: BTreeMap<String, String>,
    /// Caller's idempotency key.
    pub idempotency_key: Option<String>,
    /// Why this payload record was written.
    pub cause: PutCause,
}

/// Why a [`Put`] record was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PutCause {
    /// A new message.
    Enqueue,
    /// A DLQ entry replayed with a corrected payload; the old payload is kept here.
    CorrectedReplay {
        /// The payload that failed.
        previous_payload: Vec<u8>,
        /// Attempts after the replay.
        attempts: u32,
        /// Replay generation after the replay.
        generation: u32,
        /// The DLQ it came from.
        from_dlq: QueueId,
    },
    /// A DLQ entry imported from an export: the message arrives in the DLQ directly, in
    /// one record.
    Imported(Box<ImportedEntry>),
}

/// The dead-letter part of an imported DLQ entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportedEntry {
    /// Failure and history.
    pub failure: FailureInfo,
    /// DLQ metadata.
    pub dlq: DlqMetadata,
    /// First delivery time.
    pub first_received_at: Option<u64>,
    /// Deliveries counted.
    pub attempts: u32,
    /// Replay generation.
    pub generation: u32,
    /// The payload a corrected replay replaced, if any.
    pub replaced_payload: Option<Vec<u8>>,
    /// The id it had in the store it was exported from.
    pub original_id: MessageId,
}

/// A payload-carrying record: metadata plus the payload bytes after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Put<'a> {
    /// Metadata.
    pub meta: PutMeta,
    /// Payload bytes (borrowed from the log when decoded).
    pub payload: &'a [u8],
}

/// Failure history carried by retry records (cumulative: the latest one holds it all).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    /// When the message was first delivered.
    pub first_received_at: Option<u64>,
    /// The newest attempts, oldest first.
    pub attempts: Vec<Attempt>,
    /// Attempts dropped from the front to respect the bound.
    pub dropped: u32,
}

impl History {
    /// Adds `attempt`, keeping the newest `max` attempts and counting the dropped ones.
    pub(crate) fn push(&mut self, attempt: Attempt, max: usize) {
        self.attempts.push(attempt);
        while self.attempts.len() > max {
            self.attempts.remove(0);
            self.dropped += 1;
        }
    }
}

/// Every record other than [`Put`].
// A dead-letter record carries its whole envelope. Records are built to be encoded, or
// decoded to be applied, one at a time: boxing the large variants would only add an
// allocation to each.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// Names a queue id.
    DeclareQueue {
        /// Its id.
        queue: QueueId,
        /// Its name.
        name: String,
    },
    /// Messages delivered: each delivery is counted here before the handler runs.
    Lease {
        /// When.
        at: u64,
        /// Lease deadline.
        deadline: u64,
        /// The messages.
        ids: Vec<MessageId>,
    },
    /// Leases extended (heartbeat).
    Extend {
        /// New deadline.
        deadline: u64,
        /// The messages.
        ids: Vec<MessageId>,
    },
    /// Messages processed successfully and removed.
    Ack {
        /// When.
        at: u64,
        /// The messages.
        ids: Vec<MessageId>,
    },
    /// A failed delivery; the message becomes visible again at `visible_at`.
    Retry {
        /// The message.
        id: MessageId,
        /// Next visible time.
        visible_at: u64,
        /// The whole (bounded) history including this attempt.
        history: History,
    },
    /// A message leaves a lease without an outcome (nack without error), visible at a time.
    Release {
        /// The message.
        id: MessageId,
        /// Next visible time.
        visible_at: u64,
    },
    /// The move to the DLQ, with the whole envelope (the payload stays where it is).
    DeadLetter {
        /// The message.
        id: MessageId,
        /// Failure and history.
        failure: FailureInfo,
        /// DLQ metadata.
        dlq: DlqMetadata,
        /// First delivery time.
        first_received_at: Option<u64>,
    },
    /// A DLQ entry moved back to a queue (payload unchanged).
    Replay {
        /// The message.
        id: MessageId,
        /// Target queue.
        queue: QueueId,
        /// When.
        at: u64,
        /// Visible from.
        visible_at: u64,
        /// Attempts after the replay (0 when reset).
        attempts: u32,
        /// Generation after the replay.
        generation: u32,
    },
    /// DLQ entries (or queued messages) deleted.
    Delete {
        /// When.
        at: u64,
        /// The messages.
        ids: Vec<MessageId>,
        /// Why: removed by TTL or retention (true) or by a person or program (false).
        expired: bool,
    },
    /// A DLQ entry's outcome handled outside the queue.
    MarkReprocessed {
        /// The entry.
        id: MessageId,
        /// Outcome.
        success: bool,
        /// When.
        at: u64,
    },
}

const TAG_PUT: u8 = 1;
const TAG_OP: u8 = 2;
/// A relocated copy: this tag followed by the original record's body, byte for byte.
const TAG_RELOCATED: u8 = 3;

fn config() -> impl bincode::config::Config {
    bincode::config::standard()
}

/// A record body that does not decode. Its reader reports it as
/// [`CorruptionKind::BadContent`](crate::CorruptionKind::BadContent) at the record's log
/// position, which only the reader knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadContent;

fn bad_content() -> BadContent {
    BadContent
}

/// A decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A payload record.
    Put(Put<'a>),
    /// Any other record.
    Op(Op),
    /// A relocated copy of a record: the message's pointer to that record moves here, and
    /// nothing else changes.
    Relocated(Box<Decoded<'a>>),
}

/// Encodes a payload record into `out` (cleared first).
pub fn encode_put(out: &mut Vec<u8>, meta: &PutMeta, payload: &[u8]) -> Result<()> {
    out.clear();
    out.push(TAG_PUT);
    out.extend_from_slice(&[0; 4]);
    let meta_len = bincode::serde::encode_into_std_write(meta, out, config())
        .map_err(|e| Error::Codec(e.to_string()))?;
    out[1..5].copy_from_slice(&(meta_len as u32).to_le_bytes());
    out.extend_from_slice(payload);
    Ok(())
}

/// Encodes any other record.
pub fn encode_op(op: &Op) -> Result<Vec<u8>> {
    let mut out = vec![TAG_OP];
    bincode::serde::encode_into_std_write(op, &mut out, config())
        .map_err(|e| Error::Codec(e.to_string()))?;
    Ok(out)
}

/// Wraps a record body as a relocated copy (written by compaction to move a live record out
/// of a segment it reclaims).
/// A body that is already a relocated copy is copied as it is.
pub fn encode_relocated(body: &[u8]) -> Vec<u8> {
    if body.first() == Some(&TAG_RELOCATED) {
        return body.to_vec();
    }
    let mut out = Vec::with_capacity(body.len() + 1);
    out.push(TAG_RELOCATED);
    out.extend_from_slice(body);
    out
}

/// Decodes a record body as the state machine sees it: a relocated copy decodes as
/// [`Decoded::Relocated`]. Readers that only want the content use [`decode`], which sees
/// through relocation.
pub fn decode_for_apply(body: &[u8]) -> std::result::Result<Decoded<'_>, BadContent> {
    match body.first() {
        Some(&TAG_RELOCATED) => {
            let inner = &body[1..];
            if inner.first() == Some(&TAG_RELOCATED) {
                return Err(bad_content());
            }
            Ok(Decoded::Relocated(Box::new(decode(inner)?)))
        }
        _ => decode(body),
    }
}

/// Decodes a record body (a relocated copy decodes as its original). A body that does not
/// decode is [`BadContent`]; the caller reports it at the record's position.
pub fn decode(body: &[u8]) -> std::result::Result<Decoded<'_>, BadContent> {
    let body = match body.first() {
        Some(&TAG_RELOCATED) if body.get(1) != Some(&TAG_RELOCATED) => &body[1..],
        _ => body,
    };
    match body.first() {
        Some(&TAG_PUT) => {
            let (meta, payload) = split_put(body)?;
            Ok(Decoded::Put(Put { meta, payload }))
        }
        Some(&TAG_OP) => {
            let (op, used): (Op, usize) = bincode::serde::decode_from_slice(&body[1..], config())
                .map_err(|_| bad_content())?;
            if used + 1 != body.len() {
                return Err(bad_content());
            }
            Ok(Decoded::Op(op))
        }
        _ => Err(bad_content()),
    }
}

fn split_put(body: &[u8]) -> std::result::Result<(PutMeta, &[u8]), BadContent> {
    let len_bytes: [u8; 4] = body
        .get(1..5)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(bad_content)?;
    let meta_len = u32::from_le_bytes(len_bytes) as usize;
    let meta_end = 5usize.checked_add(meta_len).ok_or_else(bad_content)?;
    let meta_bytes = body.get(5..meta_end).ok_or_else(bad_content)?;
    let (meta, used): (PutMeta, usize) =
        bincode::serde::decode_from_slice(meta_bytes, config()).map_err(|_| bad_content())?;
    if used != meta_len {
        return Err(bad_content());
    }
    Ok((meta, &body[meta_end..]))
}

/// The payload of a [`Put`] record body, without decoding its metadata.
pub fn put_payload(body: &[u8]) -> std::result::Result<std::ops::Range<usize>, BadContent> {
    if body.first() == Some(&TAG_RELOCATED) {
        let inner = put_payload(body.get(1..).ok_or_else(bad_content)?)?;
        return Ok(inner.start + 1..inner.end + 1);
    }
    if body.first() != Some(&TAG_PUT) {
        return Err(bad_content());
    }
    let len_bytes: [u8; 4] = body
        .get(1..5)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(bad_content)?;
    let start = 5usize
        .checked_add(u32::from_le_bytes(len_bytes) as usize)
        .filter(|&s| s <= body.len())
        .ok_or_else(bad_content)?;
    Ok(start..body.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_round_trip_keeps_payload_at_known_offset() {
        let meta = PutMeta {
            id: 7,
            queue: 1,
            enqueued_at: 10,
            visible_at: 10,
            expires_at: None,
            attributes: BTreeMap::from([("k".to_string(), "v".to_string())]),
            idempotency_key: Some("key".into()),
            cause: PutCause::Enqueue,
        };
        let mut out = Vec::new();
        encode_put(&mut out, &meta, b"payload bytes").unwrap();
        let range = put_payload(&out).unwrap();
        assert_eq!(&out[range], b"payload bytes");
        match decode(&out).unwrap() {
            Decoded::Put(p) => {
                assert_eq!(p.meta, meta);
                assert_eq!(p.payload, b"payload bytes");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn relocated_copies_decode_as_their_original() {
        let op = Op::Ack {
            at: 1,
            ids: vec![4],
        };
        let body = encode_op(&op).unwrap();
        let copy = encode_relocated(&body);
        assert_eq!(decode(&copy).unwrap(), Decoded::Op(op.clone()));
        assert_eq!(
            decode_for_apply(&copy).unwrap(),
            Decoded::Relocated(Box::new(Decoded::Op(op)))
        );
        assert_eq!(encode_relocated(&copy), copy);
        assert!(decode(&[TAG_RELOCATED, TAG_RELOCATED, TAG_OP]).is_err());
        let meta = PutMeta {
            id: 1,
            queue: 0,
            enqueued_at: 0,
            visible_at: 0,
            expires_at: None,
            attributes: BTreeMap::new(),
            idempotency_key: None,
            cause: PutCause::Enqueue,
        };
        let mut put = Vec::new();
        encode_put(&mut put, &meta, b"xyz").unwrap();
        let copy = encode_relocated(&put);
        assert_eq!(&copy[put_payload(&copy).unwrap()], b"xyz");
    }

    #[test]
    fn op_round_trip_and_garbage_is_bad_content() {
        let op = Op::Ack {
            at: 5,
            ids: vec![1, 2, 3],
        };
        let body = encode_op(&op).unwrap();
        assert_eq!(decode(&body).unwrap(), Decoded::Op(op));
        assert_eq!(decode(&[9, 1, 2]), Err(BadContent));
        assert!(decode(&[TAG_PUT, 255, 255, 255, 255]).is_err());
        assert!(decode(&[TAG_OP, 200]).is_err());
    }
}
