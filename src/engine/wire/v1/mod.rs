//! Format version 1, the format of release 0.1.0: the record bodies and checkpoint bodies.
//! `docs/FORMAT.md` describes them byte by byte. Frozen: a store of release 0.1.0 holds
//! exactly these bytes, so nothing here changes (see the module documentation of
//! [`crate::engine::wire`] for how the next version is added).
//!
//! Version 2 ([`super::v2`]) writes its payload records with this module's encoder (they
//! did not change) and everything else with its own: the wire structs of what it changed
//! (the op records, the checkpoint body and the audit entries in both) are read only here
//! (`read_only` in the macros of [`super::convert`]), and what version 1 lacks gets its
//! meaning on reading: an audit entry of version 1 has no detail (`None`).
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

pub(super) mod audit;
pub(super) mod records;
pub(super) mod snapshot;

use std::ops::Range;

use crate::engine::record::{Decoded, Put, PutMeta};
use crate::engine::wire::convert::{Wire, WireOf};
use crate::engine::wire::BadContent;
use crate::error::{Error, Result};

pub(super) const TAG_PUT: u8 = 1;
pub(super) const TAG_OP: u8 = 2;
pub(super) const TAG_RELOCATED: u8 = 3;
/// Variant index of a dead-letter record.
const DEAD_LETTER: u8 = 6;

/// The bincode configuration of every value: bincode 2's `standard()`, which is
/// little-endian with variable-length integers and no limit.
pub(super) fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

pub(super) fn codec_error(e: bincode::error::EncodeError) -> Error {
    Error::Codec(e.to_string())
}

/// Encodes a payload record into `out` (cleared first). Version 2 writes payload records
/// as version 1 does.
#[inline]
pub(crate) fn encode_put(out: &mut Vec<u8>, meta: &PutMeta, payload: &[u8]) -> Result<()> {
    out.clear();
    append_put(out, meta, payload)
}

#[inline]
pub(super) fn append_put(out: &mut Vec<u8>, meta: &PutMeta, payload: &[u8]) -> Result<()> {
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
pub(super) fn decode_exact<'a, T: serde::Deserialize<'a>>(
    bytes: &'a [u8],
) -> Result<T, BadContent> {
    let (value, used): (T, usize) =
        bincode::serde::borrow_decode_from_slice(bytes, config()).map_err(|_| BadContent)?;
    if used != bytes.len() {
        return Err(BadContent);
    }
    Ok(value)
}

/// The metadata bytes and the payload of a Put body (tag included).
#[inline]
pub(super) fn split_put(body: &[u8]) -> Result<(&[u8], &[u8]), BadContent> {
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
    use super::*;

    /// A body of this version, decoded as the log's reader does (relocation seen through).
    fn decode(body: &[u8]) -> Result<Decoded<'_>, BadContent> {
        crate::engine::wire::decode(1, body)
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
