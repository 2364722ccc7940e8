//! The on-disk form of record bodies and checkpoints: the only code that encodes or
//! decodes them.
//!
//! The engine's records ([`crate::engine::record`]) and index snapshots
//! ([`crate::engine::state::Snapshot`]) are plain Rust types, and some of what they carry
//! is public API ([`crate::dlq::FailureInfo`], [`crate::dlq::Attempt`],
//! [`crate::dlq::DlqMetadata`]).
//! None of them is ever handed to an encoder. A format version's module (`v1`, the format
//! of release 0.1.0) has private wire structs that spell out its bytes field by field, and
//! explicit conversions to and from the engine's types, both declared at once with the
//! macros of `convert` (which also holds the conversions of strings, sequences and the
//! like, and the bounded queue id). A public type can therefore grow a field without
//! changing what any store means: until a format version writes the field, the conversion
//! leaves it out (`fill` gives the engine's field its value when reading).
//!
//! Invariants:
//! - records and checkpoints are written in [`FORMAT_VERSION`] only (through `current`);
//! - a record is decoded by the decoder of the version of the segment it lies in (the log
//!   hands out that version with every record), a checkpoint by the version in its header;
//!   the decoder of every released version stays here, so every released store opens;
//! - a released version's wire structs never change: a change after a release goes into
//!   the next release's version (see "The format rule" in `docs/FORMAT.md`);
//! - decoding never panics on any input: bytes that do not decode are [`BadContent`] (a
//!   record) or [`CheckpointError::Damaged`] (a checkpoint);
//! - nothing decoded names a queue id the index cannot hold (at or above
//!   [`MAX_QUEUES`](crate::engine::state::MAX_QUEUES)): such a record or checkpoint does
//!   not decode (a version's wire structs hold queue ids as `convert::Queue`);
//! - a relocated copy (tag `3`, the same in every version) holds its original's body, and
//!   is never the copy of a copy.
//!
//! **The next version.** Version 1 is frozen. The next release's format, version 2, gets a
//! module of its own, `v2`, for what it changes (a record it adds or changes, a new
//! checkpoint body) and hands everything else to `v1`'s code, which stays as it is: its
//! decoders read the stores of release 0.1.0 for good, and their conversions say what such
//! a store means in the engine's model (a field version 1 lacks gets the value that
//! meaning implies). `FORMAT_VERSION` becomes 2, `current` points at `v2`, each dispatch
//! below gains a `2 =>` arm, and `tests/fixtures/v2` holds a store it wrote; until that
//! release, version 2 may still change, and its fixture is written again as it grows.
//! `docs/FORMAT.md` ("The format rule") has the whole list.
//!
//! **Version 2** (the next release's, not frozen yet) changes the segment header
//! (`storage/format.rs`) and the checkpoint header (`checkpoint.rs` here): both carry the
//! store's id. Its module, `v2`, holds what it changed in the bodies (audit entries with
//! more actions and a detail, in the audit record and the checkpoint's audit part) and
//! hands the rest to `v1`; `current` is `v2`. What version 1 wrote of the types version 2
//! changed is read only in `v1` (`read_only` in `convert`'s macros).
//!
//! `docs/FORMAT.md` describes the bytes; `tests/format_compat.rs` opens the fixture store
//! of every released version (`tests/fixtures/v*`) and checks its exact contents.

mod borrow;
mod checkpoint;
mod convert;
#[cfg(test)]
mod fixture_bytes;
mod v1;
mod v2;

use std::ops::Range;

pub use crate::storage::format::FORMAT_VERSION;
pub(crate) use checkpoint::{
    decode_checkpoint, encode_checkpoint, CheckpointError, CheckpointFile,
};

use crate::engine::record::Decoded;
use crate::error::Result;

/// The encoders write the current version only.
pub(crate) use current::{encode_op, encode_put, encode_relocated};
/// The wire structs records and checkpoints are written with. The next version moves this
/// alias to its own module; `v1` and `v2` keep their decoders.
use v2 as current;

/// A record body that does not decode. Its reader reports it as
/// [`CorruptionKind::BadContent`](crate::recovery::CorruptionKind::BadContent) at the record's log
/// position, which only the reader knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadContent;

/// Decodes a record body written in format `version`, as the state machine applies it: a
/// relocated copy decodes as [`Decoded::Relocated`]. Readers that want only the content
/// use [`decode`], which sees through relocation.
#[inline]
pub(crate) fn decode_for_apply(version: u16, body: &[u8]) -> Result<Decoded<'_>, BadContent> {
    match relocated(body) {
        (true, inner) => Ok(Decoded::Relocated(Box::new(decode_plain(version, inner)?))),
        (false, body) => decode_plain(version, body),
    }
}

/// Decodes a record body written in format `version` (a relocated copy decodes as its
/// original).
#[inline]
pub(crate) fn decode(version: u16, body: &[u8]) -> Result<Decoded<'_>, BadContent> {
    decode_plain(version, relocated(body).1)
}

/// The tag byte of a relocated copy, the same in every version: the original record's body
/// follows it (a copy of a copy is a copy of the original, so one tag at most).
const TAG_RELOCATED: u8 = 3;

/// Whether `body` is a relocated copy, and the original's body (`body` itself if not).
#[inline]
fn relocated(body: &[u8]) -> (bool, &[u8]) {
    match body.split_first() {
        Some((&TAG_RELOCATED, inner)) => (true, inner),
        _ => (false, body),
    }
}

/// Decodes a payload or op body written in format `version` (not a relocated copy: each
/// version rejects the tag inside one).
#[inline]
fn decode_plain(version: u16, body: &[u8]) -> Result<Decoded<'_>, BadContent> {
    match version {
        1 => v1::decode_plain(body),
        2 => v2::decode_plain(body),
        _ => Err(BadContent),
    }
}

/// Where the payload of a payload record written in format `version` lies in its body,
/// without decoding the record's metadata.
#[inline]
pub(crate) fn put_payload(version: u16, body: &[u8]) -> Result<Range<usize>, BadContent> {
    match version {
        1 => v1::put_payload(body),
        2 => v2::put_payload(body),
        _ => Err(BadContent),
    }
}

/// The id and final error message of a dead-letter record body written in format
/// `version` (a relocated copy reads as its original), from the record's first fields
/// only: what a DLQ listing shows, without decoding the history and metadata behind them.
/// `None` when the body is another record (an imported entry's envelope is in its payload
/// record: [`decode`] it).
#[inline]
pub(crate) fn dead_letter_error(
    version: u16,
    body: &[u8],
) -> Result<Option<(u64, &str)>, BadContent> {
    match version {
        1 => v1::dead_letter_error(relocated(body).1),
        2 => v2::dead_letter_error(relocated(body).1),
        _ => Err(BadContent),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::record::{GuardEvent, GuardPlan, Op, PutMeta};
    use crate::engine::state::MAX_QUEUES;
    use v2::tests::{every_put_meta, guard_plan};

    #[test]
    fn unknown_versions_do_not_decode() {
        let body = encode_op(&Op::Ack {
            at: 1,
            ids: vec![2],
        })
        .unwrap();
        assert!(decode(FORMAT_VERSION, &body).is_ok());
        for version in [0, FORMAT_VERSION + 1] {
            assert_eq!(decode(version, &body), Err(BadContent));
            assert_eq!(decode_for_apply(version, &body), Err(BadContent));
            assert_eq!(put_payload(version, &body), Err(BadContent));
            assert_eq!(dead_letter_error(version, &body), Err(BadContent));
        }
    }

    /// A record naming a queue id the index cannot hold does not decode, alone or as a
    /// relocated copy; the last one it can hold does.
    #[test]
    fn queue_ids_past_the_index_limit_do_not_decode() {
        fn op(op: Op) -> Vec<u8> {
            encode_op(&op).unwrap()
        }
        let put = |queue| {
            let meta = PutMeta {
                queue,
                ..every_put_meta().remove(0)
            };
            let mut out = Vec::new();
            encode_put(&mut out, &meta, b"payload").unwrap();
            out
        };
        let replay = |queue| {
            op(Op::Replay {
                id: 9,
                queue,
                at: 1,
                visible_at: 1,
                attempts: 0,
                generation: 1,
            })
        };
        let declare = |queue| {
            let name = "q".to_string();
            op(Op::DeclareQueue { queue, name })
        };
        let guard_target = |queue| {
            let plan = GuardPlan {
                target: Some(queue),
                ..guard_plan()
            };
            let event = GuardEvent::Start(Box::new(plan));
            op(Op::Guard {
                guard: 7,
                at: 1,
                event,
            })
        };
        for body in [put, replay, declare, guard_target] {
            let last = body(MAX_QUEUES - 1);
            let original = decode(FORMAT_VERSION, &last).unwrap();
            assert!(decode(FORMAT_VERSION, &encode_relocated(&original).unwrap()).is_ok());
            for queue in [MAX_QUEUES, u32::MAX] {
                let bad = body(queue);
                assert_eq!(decode(FORMAT_VERSION, &bad), Err(BadContent));
                let copy = [&[TAG_RELOCATED][..], &bad].concat();
                assert_eq!(decode_for_apply(FORMAT_VERSION, &copy), Err(BadContent));
            }
        }
    }

    #[test]
    fn a_dead_letter_records_error_reads_from_its_first_fields() {
        use crate::engine::envelope::{Attempt, DlqMetadata, FailureInfo};
        let op = Op::DeadLetter {
            id: 300,
            failure: FailureInfo::new("Timeout", "upstream timed out", 9_000)
                .attempts(vec![Attempt::new(1, 8_000, "Io", "reset")]),
            dlq: DlqMetadata::new(9_000).worker("w-1"),
            first_received_at: Some(7_000),
            enqueued_at: 6_000,
        };
        let expected = Ok(Some((300, "upstream timed out")));
        let body = encode_op(&op).unwrap();
        assert_eq!(dead_letter_error(FORMAT_VERSION, &body), expected);
        let copy = encode_relocated(&decode(FORMAT_VERSION, &body).unwrap()).unwrap();
        assert_eq!(dead_letter_error(FORMAT_VERSION, &copy), expected);
        // Cut inside the message: not a record.
        let at = body.windows(8).position(|w| w == b"upstream").unwrap();
        let cut = &body[..at + 5];
        assert_eq!(dead_letter_error(FORMAT_VERSION, cut), Err(BadContent));
        // Another record is none (an unknown version: unknown_versions_do_not_decode).
        let ack = encode_op(&Op::Ack {
            at: 1,
            ids: vec![2],
        })
        .unwrap();
        assert_eq!(dead_letter_error(FORMAT_VERSION, &ack), Ok(None));
    }
}
