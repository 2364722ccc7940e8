//! Format version 3: version 2 plus two records of the worker pool's batched delivery, a
//! reservation and a start. `docs/FORMAT.md` describes them byte by byte.
//!
//! Version 3 changes nothing version 2 writes (whose record and checkpoint bodies are
//! version 1's): a Put, a relocated copy, every version-1 record and the checkpoint body
//! are the same bytes, so this module hands them to [`super::v1`]'s code, and only the two
//! new records are its own. They are Op records
//! (tag `2`) whose bincode variant index follows version 1's last one (`9`):
//! - variant `10`, a reservation: `at: u64`, `deadline: u64`, `ids: [u64]`;
//! - variant `11`, a start: `at: u64`, `ids: [u64]`.
//!
//! A variant index below 251 is one byte in bincode's variable-length integers, so the
//! byte after the tag tells a version-3 record from an older one.
//!
//! What a version-3 checkpoint means differs from versions 1 and 2 in one point, made by the
//! engine, not here: a reserved message whose handler has not started is written as ready
//! with its reservation's delivery taken back (see `State::snapshot`), and a start record
//! replayed after the checkpoint finds it ready and delivers it again.

use std::borrow::Cow;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::v1;
use crate::engine::record::{Decoded, Op, PutMeta};
use crate::engine::wire::BadContent;
use crate::error::{Error, Result};

const TAG_OP: u8 = 2;
const TAG_RELOCATED: u8 = 3;
/// Variant index of a reservation (after version 1's ten Op variants, 0 to 9).
const RESERVE: u8 = 10;
/// Variant index of a start.
const START: u8 = 11;

/// The fields of a reservation (variant 10).
#[derive(Serialize, Deserialize)]
struct Reserve<'a> {
    at: u64,
    deadline: u64,
    ids: Cow<'a, [u64]>,
}

/// The fields of a start (variant 11).
#[derive(Serialize, Deserialize)]
struct Start<'a> {
    at: u64,
    ids: Cow<'a, [u64]>,
}

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

fn codec_error(e: bincode::error::EncodeError) -> Error {
    Error::Codec(e.to_string())
}

/// Encodes a payload record into `out` (cleared first): the same bytes as version 1.
#[inline]
pub(super) fn encode_put(out: &mut Vec<u8>, meta: &PutMeta, payload: &[u8]) -> Result<()> {
    v1::encode_put(out, meta, payload)
}

/// Encodes any other record.
#[cfg(test)]
pub(super) fn encode_op(op: &Op) -> Result<Vec<u8>> {
    let mut out = vec![TAG_OP];
    append_op(&mut out, op)?;
    Ok(out)
}

#[inline]
pub(super) fn append_op(out: &mut Vec<u8>, op: &Op) -> Result<()> {
    let encoded = match op {
        Op::Reserve { at, deadline, ids } => {
            out.push(RESERVE);
            let body = Reserve {
                at: *at,
                deadline: *deadline,
                ids: Cow::Borrowed(ids),
            };
            bincode::serde::encode_into_std_write(body, out, config())
        }
        Op::Start { at, ids } => {
            out.push(START);
            let body = Start {
                at: *at,
                ids: Cow::Borrowed(ids),
            };
            bincode::serde::encode_into_std_write(body, out, config())
        }
        _ => return v1::append_op(out, op),
    };
    encoded.map_err(codec_error)?;
    Ok(())
}

/// Encodes a relocated copy of `original`.
pub(super) fn encode_relocated(original: &Decoded<'_>) -> Result<Vec<u8>> {
    match original {
        Decoded::Relocated(inner) => encode_relocated(inner),
        Decoded::Op(op @ (Op::Reserve { .. } | Op::Start { .. })) => {
            let mut out = vec![TAG_RELOCATED, TAG_OP];
            append_op(&mut out, op)?;
            Ok(out)
        }
        _ => v1::encode_relocated(original),
    }
}

/// Decodes a Put or Op body: the two version-3 records here, the rest as version 1.
#[inline]
pub(super) fn decode_plain(body: &[u8]) -> Result<Decoded<'_>, BadContent> {
    match body {
        [TAG_OP, RESERVE, rest @ ..] => {
            let r: Reserve<'_> = decode_exact(rest)?;
            Ok(Decoded::Op(Op::Reserve {
                at: r.at,
                deadline: r.deadline,
                ids: r.ids.into_owned(),
            }))
        }
        [TAG_OP, START, rest @ ..] => {
            let s: Start<'_> = decode_exact(rest)?;
            Ok(Decoded::Op(Op::Start {
                at: s.at,
                ids: s.ids.into_owned(),
            }))
        }
        // A relocated copy inside a relocated copy is not a record.
        _ => v1::decode_plain(body),
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
    v1::put_payload(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body of this version, decoded as the log's reader does (relocation seen through).
    fn decode(body: &[u8]) -> Result<Decoded<'_>, BadContent> {
        crate::engine::wire::decode(3, body)
    }

    /// A body of this version, decoded as the state machine applies it.
    fn decode_for_apply(body: &[u8]) -> Result<Decoded<'_>, BadContent> {
        crate::engine::wire::decode_for_apply(3, body)
    }

    #[test]
    fn reservations_and_starts_round_trip_in_their_own_variants() {
        let reserve = Op::Reserve {
            at: 1_700_000_000_000,
            deadline: 1_700_000_030_000,
            ids: vec![7, 8, 300],
        };
        let start = Op::Start {
            at: 1_700_000_000_005,
            ids: vec![8],
        };
        for (op, variant) in [(reserve, RESERVE), (start, START)] {
            let body = encode_op(&op).unwrap();
            assert_eq!(&body[..2], &[TAG_OP, variant]);
            assert_eq!(decode(&body), Ok(Decoded::Op(op.clone())));
            // Version 1 does not know them.
            assert_eq!(crate::engine::wire::decode(1, &body), Err(BadContent));
            let copy = encode_relocated(&Decoded::Op(op.clone())).unwrap();
            assert_eq!(
                decode_for_apply(&copy),
                Ok(Decoded::Relocated(Box::new(Decoded::Op(op.clone()))))
            );
            // A truncated or padded body does not decode.
            assert_eq!(decode(&body[..body.len() - 1]), Err(BadContent));
            let mut long = body.clone();
            long.push(0);
            assert_eq!(decode(&long), Err(BadContent));
        }
    }

    #[test]
    fn version_1_records_keep_their_bytes() {
        let ack = Op::Ack {
            at: 5,
            ids: vec![1, 2],
        };
        assert_eq!(encode_op(&ack).unwrap(), v1::encode_op(&ack).unwrap());
        assert!(v1::encode_op(&Op::Start {
            at: 1,
            ids: vec![1]
        })
        .is_err());
    }
}
