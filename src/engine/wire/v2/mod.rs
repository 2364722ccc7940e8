//! Format version 2, the next release's (not frozen until that release): version 1's
//! record bodies and checkpoint body with version 2's audit entries. `docs/FORMAT.md`
//! describes the differences. What it did not change it hands to version 1's code
//! ([`super::v1`]): payload records are written and read by it, and every wire struct of
//! an op record or a checkpoint other than the audit entry is version 1's.
//!
//! A record body is one tag byte, as in version 1 (`1` a payload record, `2` an op, `3` a
//! relocated copy): a payload record is version 1's byte for byte, an op is a
//! [`records::Op`] (version 1's variants, version 2's audit entry). The checkpoint body is
//! [`snapshot`]'s.
//!
//! Changes to version 2 until its release go here, and its fixture (`tests/fixtures/v2`)
//! is written again after each.

mod audit;
pub(super) mod records;
pub(super) mod snapshot;

use std::ops::Range;

use super::v1::{self, append_put, codec_error, config, decode_exact, TAG_OP, TAG_RELOCATED};
use crate::engine::record::{Decoded, Op};
use crate::engine::wire::convert::{Wire, WireOf};
use crate::engine::wire::BadContent;
use crate::error::Result;

/// Encodes a payload record into `out` (cleared first): as version 1 does.
pub(crate) use super::v1::encode_put;

/// Encodes any other record.
#[inline]
pub(crate) fn encode_op(op: &Op) -> Result<Vec<u8>> {
    let mut out = vec![TAG_OP];
    append_op(&mut out, op)?;
    Ok(out)
}

/// Appends the bincode form of `op` (no tag).
#[inline]
fn append_op(out: &mut Vec<u8>, op: &Op) -> Result<()> {
    bincode::serde::encode_into_std_write(records::Op::of(op), out, config())
        .map_err(codec_error)?;
    Ok(())
}

/// The body of a relocated copy of a record, from the record as `wire::decode` gave it:
/// compaction writes it to move a live record out of a segment it reclaims. The copy is
/// written in the current version whatever version the original was read in, so it says
/// what the original says; a copy of a copy is a copy of the original.
pub(crate) fn encode_relocated(original: &Decoded<'_>) -> Result<Vec<u8>> {
    match original {
        Decoded::Relocated(inner) => encode_relocated(inner),
        Decoded::Put(put) => {
            let mut out = Vec::with_capacity(put.payload.len() + 128);
            out.push(TAG_RELOCATED);
            append_put(&mut out, &put.meta, put.payload)?;
            Ok(out)
        }
        Decoded::Op(op) => {
            let mut out = vec![TAG_RELOCATED, TAG_OP];
            append_op(&mut out, op)?;
            Ok(out)
        }
    }
}

/// Decodes a Put or Op body (a relocated copy inside is not a record).
#[inline]
pub(super) fn decode_plain(body: &[u8]) -> Result<Decoded<'_>, BadContent> {
    match body.split_first() {
        Some((&TAG_OP, rest)) => {
            let op: records::Op<'_> = decode_exact(rest)?;
            Ok(Decoded::Op(op.into_engine().ok_or(BadContent)?))
        }
        // A payload record is version 1's; anything else is no record in either.
        _ => v1::decode_plain(body),
    }
}

/// Where the payload of a Put body (or of a relocated copy of one) lies: as in version 1.
#[inline]
pub(super) fn put_payload(body: &[u8]) -> Result<Range<usize>, BadContent> {
    v1::put_payload(body)
}

/// The id and final error message of a dead-letter record body (not a relocated copy):
/// the dead-letter record is version 1's, at the same variant index.
#[inline]
pub(super) fn dead_letter_error(body: &[u8]) -> Result<Option<(u64, &str)>, BadContent> {
    v1::dead_letter_error(body)
}

#[cfg(test)]
pub(in crate::engine::wire) mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::engine::envelope::{Attempt, DlqMetadata, FailureInfo};
    use crate::engine::record::{
        GuardEvent, GuardPlan, GuardRelease, History, ImportedEntry, PutCause,
    };
    use crate::engine::record::{Put, PutMeta};
    use crate::engine::state::{AuditAction, AuditEntry, IdSet};

    /// A body of this version, decoded as the log's reader does (relocation seen through).
    fn decode(body: &[u8]) -> Result<Decoded<'_>, BadContent> {
        crate::engine::wire::decode(2, body)
    }

    /// A body of this version, decoded as the state machine applies it.
    fn decode_for_apply(body: &[u8]) -> Result<Decoded<'_>, BadContent> {
        crate::engine::wire::decode_for_apply(2, body)
    }

    /// Audit records of version 2's actions, with and without a detail.
    fn audit_entries() -> impl Iterator<Item = Op> {
        let at = 1_700_000_000_000;
        let ids = || IdSet::of(&[7, 8, 9]);
        [
            AuditEntry::new(at, "ana@box", AuditAction::Replay, ids())
                .with_detail("transform: .orderId |= ascii_upcase"),
            AuditEntry::new(at, "ana@box", AuditAction::RetryNow, ids()),
            AuditEntry::new(at, "ana@box", AuditAction::Delay, ids()),
            AuditEntry::new(at, "ana@box", AuditAction::MoveToDlq, ids())
                .with_detail("address service rejects it"),
            AuditEntry::new(at, "ana@box", AuditAction::DeleteMessage, ids()),
        ]
        .into_iter()
        .map(Op::Audit)
    }

    /// A version-1 audit record reads with no detail, and version 2 writes the detail after
    /// version 1's fields.
    #[test]
    fn a_version_1_audit_entry_reads_without_a_detail() {
        let entry = AuditEntry::new(5, "a", AuditAction::Delete, IdSet::of(&[1, 2]));
        let v2 = encode_op(&Op::Audit(entry.clone())).unwrap();
        // Version 1's bytes are version 2's without the detail's `None`.
        let v1 = &v2[..v2.len() - 1];
        assert_eq!(
            crate::engine::wire::decode(1, v1),
            Ok(Decoded::Op(Op::Audit(entry.clone())))
        );
        assert_eq!(decode(&v2), Ok(Decoded::Op(Op::Audit(entry))));
        // Version 2's actions do not exist in version 1.
        let retry_now = AuditEntry::new(5, "a", AuditAction::RetryNow, IdSet::of(&[1]));
        let body = encode_op(&Op::Audit(retry_now)).unwrap();
        assert_eq!(
            crate::engine::wire::decode(1, &body[..body.len() - 1]),
            Err(BadContent)
        );
    }

    fn attempt(number: u32) -> Attempt {
        let at = 1_000 + number as u64;
        let attempt = Attempt::new(number, at, "Timeout", "timed out").details("GET /x");
        attempt.duration_ms(250).worker("w-1")
    }

    fn failure() -> FailureInfo {
        FailureInfo::new("Timeout", "timed out", 9_000)
            .stack_trace("at f")
            .attempts(vec![attempt(1), attempt(2)])
            .attempts_dropped(3)
            .context(BTreeMap::from([("k".into(), "v".into())]))
    }

    fn dlq_meta() -> DlqMetadata {
        DlqMetadata::new(9_000)
            .environment("prod")
            .tags(BTreeMap::from([("team".into(), "a".into())]))
            .expires_at_ms(99_000)
    }

    fn every_op() -> Vec<Op> {
        vec![
            Op::DeclareQueue {
                queue: 3,
                name: "orders".into(),
            },
            Op::Lease {
                at: 1,
                deadline: 30_001,
                ids: vec![1, 300, 70_000],
            },
            Op::Extend {
                deadline: 60_000,
                ids: vec![1],
            },
            Op::Ack {
                at: 2,
                ids: vec![1, 2],
            },
            Op::Retry {
                id: 4,
                visible_at: 5_000,
                history: History {
                    first_received_at: Some(100),
                    attempts: vec![attempt(1)],
                    dropped: 0,
                },
            },
            Op::Release {
                id: 4,
                visible_at: 6_000,
            },
            Op::DeadLetter {
                id: 4,
                failure: failure(),
                dlq: dlq_meta(),
                first_received_at: Some(100),
                enqueued_at: 50,
            },
            Op::Replay {
                id: 4,
                queue: 0,
                at: 10_000,
                visible_at: 10_000,
                attempts: 0,
                generation: 1,
            },
            Op::Delete {
                at: 11_000,
                ids: vec![4, 5],
                expired: true,
            },
            Op::MarkReprocessed {
                id: 5,
                success: false,
                at: 12_000,
            },
            Op::Reserve {
                at: 1_700_000_000_000,
                deadline: 1_700_000_030_000,
                ids: vec![7, 8, 300],
            },
            Op::Start {
                at: 1_700_000_000_005,
                ids: vec![8],
            },
            Op::Audit(AuditEntry::new(
                1_700_000_000_000,
                "ana@box",
                AuditAction::Purge,
                IdSet::of(&[3, 4, 5, 9]),
            )),
        ]
        .into_iter()
        .chain(audit_entries())
        .chain(guard_steps())
        .collect()
    }

    /// A guarded replay's plan, with a target and a rate.
    pub(in crate::engine::wire) fn guard_plan() -> GuardPlan {
        GuardPlan {
            dlq: 1,
            target: Some(3),
            reset_attempts: true,
            force: false,
            canary: 5,
            growth_permille: 2000,
            max_failure_permille: 100,
            rate_per_sec: Some(50),
            selection: "kind=Timeout".into(),
            actor: "ana@ops-1".into(),
            ids: vec![4, 9, 300_000],
        }
    }

    /// A guarded replay's steps, one of each event.
    fn guard_steps() -> Vec<Op> {
        let release = GuardEvent::Release {
            consumed: 2,
            released: vec![GuardRelease {
                id: 4,
                queue: 3,
                attempts: 0,
                generation: 1,
            }],
        };
        [
            GuardEvent::Start(Box::new(guard_plan())),
            release,
            GuardEvent::Pause,
            GuardEvent::Resume,
            GuardEvent::Cancel,
        ]
        .into_iter()
        .map(|event| Op::Guard {
            guard: 7,
            at: 1_700_000_000_000,
            event,
        })
        .collect()
    }

    pub(in crate::engine::wire) fn every_put_meta() -> Vec<PutMeta> {
        let meta = |cause| PutMeta {
            id: 7,
            queue: 1,
            enqueued_at: 10,
            visible_at: 10,
            expires_at: Some(3_600_010),
            attributes: BTreeMap::from([("k".to_string(), "v".to_string())]),
            idempotency_key: Some("key".into()),
            cause,
        };
        vec![
            meta(PutCause::Enqueue),
            meta(PutCause::CorrectedReplay {
                previous_payload: b"old".to_vec(),
                attempts: 2,
                generation: 3,
                from_dlq: 1,
            }),
            meta(PutCause::Imported(Box::new(ImportedEntry {
                failure: failure(),
                dlq: dlq_meta(),
                first_received_at: None,
                attempts: 4,
                generation: 0,
                replaced_payload: Some(b"older".to_vec()),
                original_id: 77,
            }))),
        ]
    }

    #[test]
    fn every_record_round_trips_and_relocates() {
        for op in every_op() {
            let body = encode_op(&op).unwrap();
            assert_eq!(decode(&body), Ok(Decoded::Op(op.clone())));
            // A truncated or padded body does not decode.
            assert_eq!(decode(&body[..body.len() - 1]), Err(BadContent), "{op:?}");
            let mut long = body.clone();
            long.push(0);
            assert_eq!(decode(&long), Err(BadContent), "{op:?}");
            let copy = encode_relocated(&Decoded::Op(op.clone())).unwrap();
            assert_eq!(copy[0], TAG_RELOCATED);
            assert_eq!(&copy[1..], &body[..], "a copy holds its original's bytes");
            assert_eq!(decode(&copy), Ok(Decoded::Op(op.clone())));
            assert_eq!(
                decode_for_apply(&copy),
                Ok(Decoded::Relocated(Box::new(Decoded::Op(op))))
            );
        }
        for meta in every_put_meta() {
            let mut body = Vec::new();
            encode_put(&mut body, &meta, b"payload bytes").unwrap();
            let range = put_payload(&body).unwrap();
            assert_eq!(&body[range], b"payload bytes");
            let put = Decoded::Put(Put {
                meta,
                payload: b"payload bytes",
            });
            assert_eq!(decode(&body), Ok(put.clone()));
            let copy = encode_relocated(&put).unwrap();
            assert_eq!(&copy[1..], &body[..]);
            assert_eq!(&copy[put_payload(&copy).unwrap()], b"payload bytes");
            // A copy of a copy is the same copy, seen through or applied.
            for again in [decode(&copy).unwrap(), decode_for_apply(&copy).unwrap()] {
                assert_eq!(encode_relocated(&again).unwrap(), copy);
            }
        }
    }

    /// The bytes of a few records, written out from the layout in `docs/FORMAT.md`: the
    /// encoder and the document say the same thing.
    #[test]
    fn bytes_are_those_the_format_document_describes() {
        let ack = encode_op(&Op::Ack {
            at: 300,
            ids: vec![7, 251],
        })
        .unwrap();
        // tag 2, variant 3, at = 300 (0xFB + u16), ids: length 2, 7, 251 (0xFB + u16).
        assert_eq!(
            ack,
            [2, 3, 0xFB, 0x2C, 0x01, 2, 7, 0xFB, 0xFB, 0x00].to_vec()
        );
        let meta = PutMeta {
            id: 1,
            queue: 0,
            enqueued_at: 70_000,
            visible_at: 70_000,
            expires_at: None,
            attributes: BTreeMap::from([("a".to_string(), "b".to_string())]),
            idempotency_key: None,
            cause: PutCause::Enqueue,
        };
        let mut put = Vec::new();
        encode_put(&mut put, &meta, b"xy").unwrap();
        let mut expected = vec![1, 20, 0, 0, 0];
        expected.extend([1, 0]); // id, queue
        expected.extend([0xFC, 0x70, 0x11, 0x01, 0x00]); // enqueued_at = 70,000 (0xFC + u32)
        expected.extend([0xFC, 0x70, 0x11, 0x01, 0x00]); // visible_at
        expected.push(0); // expires_at: None
        expected.extend([1, 1, b'a', 1, b'b']); // attributes: 1 entry, "a" -> "b"
        expected.push(0); // idempotency_key: None
        expected.push(0); // cause: Enqueue
        expected.extend(b"xy");
        assert_eq!(put, expected);
    }

    /// Each Op is written as the variant `docs/FORMAT.md` gives it (one byte after the tag).
    #[test]
    fn every_op_has_its_documented_variant_index() {
        let indexes: Vec<u8> = every_op()
            .iter()
            .map(|op| encode_op(op).unwrap()[1])
            .collect();
        let mut expected: Vec<u8> = (0..=12).collect();
        expected.extend(std::iter::repeat_n(12, audit_entries().count()));
        expected.extend(std::iter::repeat_n(13, guard_steps().len()));
        assert_eq!(indexes, expected);
    }

    #[test]
    fn id_runs_that_break_their_invariants_do_not_decode() {
        let entry = AuditEntry::new(5, "a", AuditAction::Delete, IdSet::of(&[1, 2]));
        let mut body = encode_op(&Op::Audit(entry)).unwrap();
        // at, actor ("a"), action, one run: (1, 2) -> (1, 0), no detail.
        assert_eq!(&body[body.len() - 4..], &[1, 1, 2, 0]);
        let count = body.len() - 2;
        body[count] = 0;
        assert_eq!(decode(&body), Err(BadContent));
    }
}
