//! Format version 5: version 4 plus the audit trail and lineage (issue 13).
//! `docs/FORMAT.md` describes the change byte by byte.
//!
//! Records: two Op variants (tag `2`) after version 3's last one (`11`):
//! - variant `12`, an audit record: `at: u64`, `actor: String`, `action` (an enum, see
//!   [`audit::Action`]), `ids: [(u64, u64)]` (sorted runs of ids: first, count). Written
//!   after the records of an operator's change, in the same batch;
//! - variant `13`, a dead-letter record with the message's enqueue time: version 1's
//!   dead-letter fields (variant `6`), then `enqueued_at: Option<u64>`. Version 5 writes
//!   every dead-lettering as variant 13 (a relocated copy of an older variant-6 record
//!   keeps that variant, and means what it meant: no enqueue time).
//!
//! Every other record is version 3's, byte for byte (this module hands them to `v3`).
//!
//! The checkpoint body (`snapshot`) is version 4's followed by the lineage of every
//! message that was in a DLQ, the tombstones, the audit trail and the horizon.
//!
//! Reading an older store: a version-1 to 4 dead-letter record has no enqueue time
//! (`None`); a checkpoint of version 1 to 4 has no lineage, tombstones or trail, and its
//! horizon is its latest time (what left a DLQ before it is unknown).

pub(super) mod audit;
pub(super) mod snapshot;

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::v1::records::{DlqMetadata, FailureInfo};
use super::v3;
use crate::engine::record::{Decoded, Op, PutMeta};
use crate::engine::wire::BadContent;
use crate::error::{Error, Result};

const TAG_OP: u8 = 2;
const TAG_RELOCATED: u8 = 3;
/// Variant index of an audit record (after version 3's twelve Op variants, 0 to 11).
const AUDIT: u8 = 12;
/// Variant index of a dead-letter record with its enqueue time.
const DEAD_LETTER: u8 = 13;

/// The fields of a dead-letter record (variant 13).
#[derive(Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
struct DeadLetter<'a> {
    id: u64,
    failure: FailureInfo<'a>,
    dlq: DlqMetadata<'a>,
    first_received_at: Option<u64>,
    enqueued_at: Option<u64>,
}

/// The bincode configuration of every version-5 value, as of version 1: bincode 2's
/// `standard()`, little-endian with variable-length integers and no limit.
fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

fn codec_error(e: bincode::error::EncodeError) -> Error {
    Error::Codec(e.to_string())
}

/// Encodes a payload record into `out` (cleared first): the same bytes as version 1.
#[inline]
pub(super) fn encode_put(out: &mut Vec<u8>, meta: &PutMeta, payload: &[u8]) -> Result<()> {
    v3::encode_put(out, meta, payload)
}

/// Encodes any other record.
#[inline]
pub(super) fn encode_op(op: &Op) -> Result<Vec<u8>> {
    let mut out = vec![TAG_OP];
    append_op(&mut out, op)?;
    Ok(out)
}

/// Appends the Op's variant index and fields: the two version-5 records here, the rest
/// as version 3.
#[inline]
fn append_op(out: &mut Vec<u8>, op: &Op) -> Result<()> {
    let encoded = match op {
        Op::Audit(entry) => {
            out.push(AUDIT);
            bincode::serde::encode_into_std_write(audit::Entry::from(entry), out, config())
        }
        Op::DeadLetter {
            id,
            failure,
            dlq,
            first_received_at,
            enqueued_at,
        } => {
            out.push(DEAD_LETTER);
            let body = DeadLetter {
                id: *id,
                failure: failure.into(),
                dlq: dlq.into(),
                first_received_at: *first_received_at,
                enqueued_at: *enqueued_at,
            };
            bincode::serde::encode_into_std_write(body, out, config())
        }
        _ => return v3::append_op(out, op),
    };
    encoded.map_err(codec_error)?;
    Ok(())
}

/// Encodes a relocated copy of `original`.
pub(super) fn encode_relocated(original: &Decoded<'_>) -> Result<Vec<u8>> {
    match original {
        Decoded::Relocated(inner) => encode_relocated(inner),
        Decoded::Op(op @ (Op::Audit(_) | Op::DeadLetter { .. })) => {
            let mut out = vec![TAG_RELOCATED, TAG_OP];
            append_op(&mut out, op)?;
            Ok(out)
        }
        _ => v3::encode_relocated(original),
    }
}

/// Decodes a Put or Op body: the two version-5 records here, the rest as version 3.
#[inline]
pub(super) fn decode_plain(body: &[u8]) -> Result<Decoded<'_>, BadContent> {
    match body {
        [TAG_OP, AUDIT, rest @ ..] => {
            let entry: audit::Entry<'_> = decode_exact(rest)?;
            Ok(Decoded::Op(Op::Audit(
                entry.into_engine().ok_or(BadContent)?,
            )))
        }
        [TAG_OP, DEAD_LETTER, rest @ ..] => {
            let d: DeadLetter<'_> = decode_exact(rest)?;
            Ok(Decoded::Op(Op::DeadLetter {
                id: d.id,
                failure: d.failure.into(),
                dlq: d.dlq.into(),
                first_received_at: d.first_received_at,
                enqueued_at: d.enqueued_at,
            }))
        }
        // A relocated copy inside a relocated copy is not a record.
        _ => v3::decode_plain(body),
    }
}

/// The id and final error message of a dead-letter record body (variant 13 starts like
/// version 1's variant 6); `None` for any other record.
#[inline]
pub(super) fn dead_letter_error(body: &[u8]) -> Result<Option<(u64, &str)>, BadContent> {
    match body {
        [TAG_OP, DEAD_LETTER, rest @ ..] => super::v1::dead_letter_head(rest).map(Some),
        _ => super::v1::dead_letter_error(body),
    }
}

/// Decodes one value that fills `bytes` exactly.
#[inline]
fn decode_exact<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, BadContent> {
    let (value, used): (T, usize) =
        bincode::serde::borrow_decode_from_slice(bytes, config()).map_err(|_| BadContent)?;
    if used != bytes.len() {
        return Err(BadContent);
    }
    Ok(value)
}

/// Where the payload of a Put body (or of a relocated copy of one) lies: as version 1.
#[inline]
pub(super) fn put_payload(body: &[u8]) -> Result<Range<usize>, BadContent> {
    v3::put_payload(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body of this version, decoded as the log's reader does (relocation seen through).
    fn decode(body: &[u8]) -> Result<Decoded<'_>, BadContent> {
        crate::engine::wire::decode(5, body)
    }

    /// A body of this version, decoded as the state machine applies it.
    fn decode_for_apply(body: &[u8]) -> Result<Decoded<'_>, BadContent> {
        crate::engine::wire::decode_for_apply(5, body)
    }
    use crate::engine::envelope::{DlqMetadata, FailureInfo};
    use crate::engine::state::{AuditAction, AuditEntry, IdSet};

    fn dead_letter(enqueued_at: Option<u64>) -> Op {
        Op::DeadLetter {
            id: 4,
            failure: FailureInfo::new("Kind", "message", 9_000),
            dlq: DlqMetadata::new(9_000),
            first_received_at: Some(100),
            enqueued_at,
        }
    }

    #[test]
    fn audit_and_dead_letter_records_round_trip_in_their_own_variants() {
        let audit = Op::Audit(AuditEntry::new(
            1_700_000_000_000,
            "ana@box",
            AuditAction::Purge,
            IdSet::of(&[3, 4, 5, 9]),
        ));
        for (op, variant) in [(audit, AUDIT), (dead_letter(Some(70)), DEAD_LETTER)] {
            let body = encode_op(&op).unwrap();
            assert_eq!(&body[..2], &[TAG_OP, variant]);
            assert_eq!(decode(&body), Ok(Decoded::Op(op.clone())));
            // Version 3 does not know them.
            assert_eq!(crate::engine::wire::decode(3, &body), Err(BadContent));
            let copy = encode_relocated(&Decoded::Op(op.clone())).unwrap();
            assert_eq!(
                decode_for_apply(&copy),
                Ok(Decoded::Relocated(Box::new(Decoded::Op(op.clone()))))
            );
            assert_eq!(decode(&body[..body.len() - 1]), Err(BadContent));
            let mut long = body.clone();
            long.push(0);
            assert_eq!(decode(&long), Err(BadContent));
        }
    }

    #[test]
    fn an_older_dead_letter_record_reads_without_an_enqueue_time() {
        let old = super::super::v1::encode_op(&dead_letter(Some(70))).unwrap();
        assert_eq!(old[1], 6);
        assert_eq!(decode(&old), Ok(Decoded::Op(dead_letter(None))));
    }

    #[test]
    fn id_runs_that_break_their_invariants_do_not_decode() {
        let entry = AuditEntry::new(5, "a", AuditAction::Delete, IdSet::of(&[1, 2]));
        let mut body = encode_op(&Op::Audit(entry)).unwrap();
        // at, actor ("a"), action, one run: (1, 2) -> (1, 0).
        assert_eq!(&body[body.len() - 3..], &[1, 1, 2]);
        let last = body.len() - 1;
        body[last] = 0;
        assert_eq!(decode(&body), Err(BadContent));
    }
}
