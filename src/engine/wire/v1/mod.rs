//! Format version 1, the format of release 0.1.0: the record bodies and checkpoint bodies.
//! `docs/FORMAT.md` describes them byte by byte. Frozen: a store of release 0.1.0 holds
//! exactly these bytes, so nothing here changes (see the module documentation of
//! [`crate::engine::wire`] for how the next version is added).
//!
//! A record body is one tag byte, then:
//! - `1` (Put): `meta_len: u32 LE`, the [`records::PutMeta`] (bincode, `meta_len` bytes),
//!   then the payload to the end of the body, so that the payload sits at a known offset
//!   and is read from the log's memory map without copying;
//! - `2` (Op): one [`records::Op`] (bincode), to the end of the body;
//! - `3` (Relocated): a whole Put or Op body, tag included, byte for byte.
//!
//! Every bincode value uses [`bincode::config::standard`]: little-endian, variable-length
//! integers, no size limit (see [`config`]). The checkpoint body is [`snapshot`]'s; the
//! audit trail's and lineage's structs, shared by a record and the checkpoint, [`audit`]'s.
//!
//! The functions and conversions on the path of every enqueue, delivery and replayed record
//! are `#[inline]`: the layers between the engine and bincode, called, cost a delivery a
//! few percent of its CPU time (`benches/queue.rs`, `consume/lease_ack`).

mod audit;
pub(super) mod records;
pub(super) mod snapshot;

use std::ops::Range;

use crate::engine::record::{Decoded, Op, Put, PutMeta};
use crate::engine::wire::convert::Wire;
use crate::engine::wire::BadContent;
use crate::error::{Error, Result};

const TAG_PUT: u8 = 1;
const TAG_OP: u8 = 2;
const TAG_RELOCATED: u8 = 3;
/// Variant index of a dead-letter record.
const DEAD_LETTER: u8 = 6;

/// The bincode configuration of every value: bincode 2's `standard()`, which is
/// little-endian with variable-length integers and no limit.
fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

fn codec_error(e: bincode::error::EncodeError) -> Error {
    Error::Codec(e.to_string())
}

/// Encodes a payload record into `out` (cleared first).
#[inline]
pub(crate) fn encode_put(out: &mut Vec<u8>, meta: &PutMeta, payload: &[u8]) -> Result<()> {
    out.clear();
    append_put(out, meta, payload)
}

#[inline]
fn append_put(out: &mut Vec<u8>, meta: &PutMeta, payload: &[u8]) -> Result<()> {
    let start = out.len();
    out.push(TAG_PUT);
    out.extend_from_slice(&[0; 4]);
    let meta_len = bincode::serde::encode_into_std_write(records::PutMeta::of(meta), out, config())
        .map_err(codec_error)?;
    let meta_len = u32::try_from(meta_len)
        .map_err(|_| Error::Codec(format!("record metadata of {meta_len} bytes")))?;
    out[start + 1..start + 5].copy_from_slice(&meta_len.to_le_bytes());
    out.extend_from_slice(payload);
    Ok(())
}

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
        Some((&TAG_PUT, _)) => {
            let (meta_bytes, payload) = split_put(body)?;
            let meta: records::PutMeta<'_> = decode_exact(meta_bytes)?;
            Ok(Decoded::Put(Put {
                meta: meta.into_engine().ok_or(BadContent)?,
                payload,
            }))
        }
        Some((&TAG_OP, rest)) => {
            let op: records::Op<'_> = decode_exact(rest)?;
            Ok(Decoded::Op(op.into_engine().ok_or(BadContent)?))
        }
        _ => Err(BadContent),
    }
}

/// Decodes one value that fills `bytes` exactly (borrowing its strings from them).
#[inline]
fn decode_exact<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, BadContent> {
    let (value, used): (T, usize) =
        bincode::serde::borrow_decode_from_slice(bytes, config()).map_err(|_| BadContent)?;
    if used != bytes.len() {
        return Err(BadContent);
    }
    Ok(value)
}

/// The metadata bytes and the payload of a Put body (tag included).
#[inline]
fn split_put(body: &[u8]) -> Result<(&[u8], &[u8]), BadContent> {
    let len_bytes: [u8; 4] = body
        .get(1..5)
        .and_then(|b| b.try_into().ok())
        .ok_or(BadContent)?;
    let meta_end = 5usize
        .checked_add(u32::from_le_bytes(len_bytes) as usize)
        .ok_or(BadContent)?;
    let meta = body.get(5..meta_end).ok_or(BadContent)?;
    Ok((meta, &body[meta_end..]))
}

/// The id and final error message of a dead-letter record body (not a relocated copy),
/// read from its first fields only (after its variant index), whatever follows them;
/// `None` for any other record.
#[inline]
pub(super) fn dead_letter_error(body: &[u8]) -> Result<Option<(u64, &str)>, BadContent> {
    let [TAG_OP, DEAD_LETTER, fields @ ..] = body else {
        return Ok(None);
    };
    let (head, _): (records::DeadLetterHead<'_>, usize) =
        bincode::serde::borrow_decode_from_slice(fields, config()).map_err(|_| BadContent)?;
    Ok(Some((head.id, head.error_message)))
}

/// Where the payload of a Put body (or of a relocated copy of one) lies, without decoding
/// its metadata.
#[inline]
pub(super) fn put_payload(body: &[u8]) -> Result<Range<usize>, BadContent> {
    let (skip, put) = match body.split_first() {
        Some((&TAG_RELOCATED, inner)) => (1, inner),
        _ => (0, body),
    };
    if put.first() != Some(&TAG_PUT) {
        return Err(BadContent);
    }
    let (_, payload) = split_put(put)?;
    Ok(skip + put.len() - payload.len()..skip + put.len())
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A body of this version, decoded as the log's reader does (relocation seen through).
    fn decode(body: &[u8]) -> Result<Decoded<'_>, BadContent> {
        crate::engine::wire::decode(1, body)
    }

    /// A body of this version, decoded as the state machine applies it.
    fn decode_for_apply(body: &[u8]) -> Result<Decoded<'_>, BadContent> {
        crate::engine::wire::decode_for_apply(1, body)
    }
    use crate::engine::envelope::{Attempt, DlqMetadata, FailureInfo};
    use crate::engine::record::{
        GuardEvent, GuardPlan, GuardRelease, History, ImportedEntry, PutCause,
    };
    use crate::engine::state::{AuditAction, AuditEntry, IdSet};

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
        let guard_steps = guard_steps().len();
        let mut expected: Vec<u8> = (0..=12).collect();
        expected.extend(std::iter::repeat_n(13, guard_steps));
        assert_eq!(indexes, expected);
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

    /// A body re-encoded from the wire structs alone (no engine type involved): every
    /// version-1 record of the fixture stores is exactly these bytes.
    pub(in crate::engine::wire) fn reencode_wire(body: &[u8]) -> Vec<u8> {
        match body.split_first() {
            Some((&TAG_RELOCATED, inner)) => [&[TAG_RELOCATED][..], &reencode_wire(inner)].concat(),
            Some((&TAG_PUT, _)) => {
                let (meta, payload) = split_put(body).unwrap();
                let meta: records::PutMeta<'_> = decode_exact(meta).unwrap();
                let meta = bincode::serde::encode_to_vec(meta, config()).unwrap();
                let len = (meta.len() as u32).to_le_bytes();
                [&[TAG_PUT][..], &len, &meta, payload].concat()
            }
            Some((&TAG_OP, rest)) => {
                let op: records::Op<'_> = decode_exact(rest).unwrap();
                [
                    vec![TAG_OP],
                    bincode::serde::encode_to_vec(op, config()).unwrap(),
                ]
                .concat()
            }
            _ => panic!("not a record"),
        }
    }

    #[test]
    fn garbage_is_bad_content() {
        assert_eq!(decode(&[]), Err(BadContent));
        assert_eq!(decode(&[9, 1, 2]), Err(BadContent));
        assert_eq!(decode(&[TAG_PUT, 255, 255, 255, 255]), Err(BadContent));
        assert_eq!(decode(&[TAG_OP, 200]), Err(BadContent));
        // (An Op followed by stray bytes: every_record_round_trips_and_relocates.)
        // A relocated copy of a relocated copy is not a record.
        assert_eq!(
            decode(&[TAG_RELOCATED, TAG_RELOCATED, TAG_OP]),
            Err(BadContent)
        );
        // Lengths far past the body are refused before anything is allocated: a name, a
        // map key, a byte string, a sequence.
        let huge = [0xFD, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F];
        let declare = [&[TAG_OP, 0, 0][..], &huge].concat();
        assert_eq!(decode(&declare), Err(BadContent));
        let ack = [&[TAG_OP, 3, 1][..], &huge].concat();
        assert_eq!(decode(&ack), Err(BadContent));
        let put = |meta: &[u8]| [&[TAG_PUT][..], &(meta.len() as u32).to_le_bytes(), meta].concat();
        let meta = [&[1, 0, 1, 1, 0][..], &[1], &huge].concat();
        assert_eq!(decode(&put(&meta)), Err(BadContent));
        let corrected = [&[1, 0, 1, 1, 0, 0, 0, 1][..], &huge].concat();
        assert_eq!(decode(&put(&corrected)), Err(BadContent));
        assert_eq!(put_payload(&[TAG_OP, 1]), Err(BadContent));
        assert_eq!(put_payload(&[TAG_PUT, 9, 0, 0, 0]), Err(BadContent));
    }
}
