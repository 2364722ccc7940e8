//! Format version 6: version 5 plus guarded replays. One new record, and a checkpoint body
//! that also holds every guarded replay's state. `docs/FORMAT.md` describes them byte by
//! byte.
//!
//! The record is an Op record (tag `2`) whose bincode variant index follows version 5's
//! last one (`13`): variant `14`, a guarded replay's step, `guard: u64`, `at: u64`, then
//! the event (an enum: `0` start with its plan, `1` release, `2` pause, `3` resume, `4`
//! cancel). Every other record is version 5's, byte for byte, so this module hands them to
//! [`super::v5`].
//!
//! The checkpoint body is a version-5 body followed by the guarded replays
//! ([`snapshot`]).

pub(super) mod snapshot;

use std::borrow::Cow;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::v5;
use crate::engine::record::{self as engine, Decoded, GuardEvent, Op, PutMeta};
use crate::engine::wire::BadContent;
use crate::error::{Error, Result};

const TAG_OP: u8 = 2;
const TAG_RELOCATED: u8 = 3;
/// Variant index of a guarded replay's step (after version 5's fourteen Op variants).
const GUARD: u8 = 14;

/// The fields of a guarded replay's step (variant 12).
#[derive(Serialize, Deserialize)]
struct Guard<'a> {
    guard: u64,
    at: u64,
    #[serde(borrow)]
    event: Event<'a>,
}

/// Variant indexes 0 to 4.
#[derive(Serialize, Deserialize)]
enum Event<'a> {
    Start(#[serde(borrow)] Plan<'a>),
    Release {
        consumed: u32,
        released: Vec<Released>,
    },
    Pause,
    Resume,
    Cancel,
}

/// A guarded replay's plan; also a checkpoint's.
#[derive(Serialize, Deserialize)]
pub(super) struct Plan<'a> {
    dlq: u32,
    target: Option<u32>,
    reset_attempts: bool,
    force: bool,
    canary: u32,
    growth_permille: u32,
    max_failure_permille: u32,
    rate_per_sec: Option<u32>,
    selection: Cow<'a, str>,
    actor: Cow<'a, str>,
    ids: Cow<'a, [u64]>,
}

#[derive(Serialize, Deserialize)]
struct Released {
    id: u64,
    queue: u32,
    attempts: u32,
    generation: u32,
}

impl<'a> From<&'a engine::GuardPlan> for Plan<'a> {
    fn from(p: &'a engine::GuardPlan) -> Self {
        Plan {
            dlq: p.dlq,
            target: p.target,
            reset_attempts: p.reset_attempts,
            force: p.force,
            canary: p.canary,
            growth_permille: p.growth_permille,
            max_failure_permille: p.max_failure_permille,
            rate_per_sec: p.rate_per_sec,
            selection: Cow::Borrowed(&p.selection),
            actor: Cow::Borrowed(&p.actor),
            ids: Cow::Borrowed(&p.ids),
        }
    }
}

impl From<Plan<'_>> for engine::GuardPlan {
    fn from(p: Plan<'_>) -> Self {
        engine::GuardPlan {
            dlq: p.dlq,
            target: p.target,
            reset_attempts: p.reset_attempts,
            force: p.force,
            canary: p.canary,
            growth_permille: p.growth_permille,
            max_failure_permille: p.max_failure_permille,
            rate_per_sec: p.rate_per_sec,
            selection: p.selection.into_owned(),
            actor: p.actor.into_owned(),
            ids: p.ids.into_owned(),
        }
    }
}

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// Encodes a payload record into `out` (cleared first): the same bytes as version 5.
#[inline]
pub(super) fn encode_put(out: &mut Vec<u8>, meta: &PutMeta, payload: &[u8]) -> Result<()> {
    v5::encode_put(out, meta, payload)
}

/// Encodes any other record.
#[inline]
pub(super) fn encode_op(op: &Op) -> Result<Vec<u8>> {
    match op {
        Op::Guard { .. } => {
            let mut out = vec![TAG_OP];
            append_guard(&mut out, op)?;
            Ok(out)
        }
        _ => v5::encode_op(op),
    }
}

fn append_guard(out: &mut Vec<u8>, op: &Op) -> Result<()> {
    let Op::Guard { guard, at, event } = op else {
        return Err(Error::Codec(format!(
            "{op:?} is not a guarded replay's step"
        )));
    };
    let event = match event {
        GuardEvent::Start(plan) => Event::Start(Plan::from(&**plan)),
        GuardEvent::Release { consumed, released } => Event::Release {
            consumed: *consumed,
            released: released
                .iter()
                .map(|r| Released {
                    id: r.id,
                    queue: r.queue,
                    attempts: r.attempts,
                    generation: r.generation,
                })
                .collect(),
        },
        GuardEvent::Pause => Event::Pause,
        GuardEvent::Resume => Event::Resume,
        GuardEvent::Cancel => Event::Cancel,
    };
    out.push(GUARD);
    let body = Guard {
        guard: *guard,
        at: *at,
        event,
    };
    bincode::serde::encode_into_std_write(body, out, config())
        .map_err(|e| Error::Codec(e.to_string()))?;
    Ok(())
}

/// Encodes a relocated copy of `original`.
pub(super) fn encode_relocated(original: &Decoded<'_>) -> Result<Vec<u8>> {
    match original {
        Decoded::Relocated(inner) => encode_relocated(inner),
        Decoded::Op(op @ Op::Guard { .. }) => {
            let mut out = vec![TAG_RELOCATED, TAG_OP];
            append_guard(&mut out, op)?;
            Ok(out)
        }
        _ => v5::encode_relocated(original),
    }
}

/// Decodes a Put or Op body: the guarded replay's record here, the rest as version 5.
#[inline]
pub(super) fn decode_plain(body: &[u8]) -> Result<Decoded<'_>, BadContent> {
    match body {
        [TAG_OP, GUARD, rest @ ..] => decode_guard(rest),
        _ => v5::decode_plain(body),
    }
}

fn decode_guard(bytes: &[u8]) -> Result<Decoded<'static>, BadContent> {
    let (g, used): (Guard<'_>, usize) =
        bincode::serde::borrow_decode_from_slice(bytes, config()).map_err(|_| BadContent)?;
    if used != bytes.len() {
        return Err(BadContent);
    }
    let event = match g.event {
        Event::Start(plan) => GuardEvent::Start(Box::new(plan.into())),
        Event::Release { consumed, released } => GuardEvent::Release {
            consumed,
            released: released
                .into_iter()
                .map(|r| engine::GuardRelease {
                    id: r.id,
                    queue: r.queue,
                    attempts: r.attempts,
                    generation: r.generation,
                })
                .collect(),
        },
        Event::Pause => GuardEvent::Pause,
        Event::Resume => GuardEvent::Resume,
        Event::Cancel => GuardEvent::Cancel,
    };
    Ok(Decoded::Op(Op::Guard {
        guard: g.guard,
        at: g.at,
        event,
    }))
}

/// Where the payload of a Put body (or of a relocated copy of one) lies: as version 5.
#[inline]
pub(super) fn put_payload(body: &[u8]) -> Result<Range<usize>, BadContent> {
    v5::put_payload(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body of this version, decoded as the log's reader does (relocation seen through).
    fn decode(body: &[u8]) -> Result<Decoded<'_>, BadContent> {
        crate::engine::wire::decode(6, body)
    }

    /// A body of this version, decoded as the state machine applies it.
    fn decode_for_apply(body: &[u8]) -> Result<Decoded<'_>, BadContent> {
        crate::engine::wire::decode_for_apply(6, body)
    }
    use crate::engine::record::{GuardPlan, GuardRelease};

    fn steps() -> Vec<Op> {
        let plan = GuardPlan {
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
        };
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
            GuardEvent::Start(Box::new(plan)),
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

    #[test]
    fn guarded_replay_steps_round_trip_in_their_own_variant() {
        for op in steps() {
            let body = encode_op(&op).unwrap();
            assert_eq!(&body[..2], &[TAG_OP, GUARD]);
            assert_eq!(decode(&body), Ok(Decoded::Op(op.clone())));
            assert_eq!(decode_for_apply(&body), Ok(Decoded::Op(op.clone())));
            // Version 5 does not know it.
            assert_eq!(crate::engine::wire::decode(5, &body), Err(BadContent));
            let copy = encode_relocated(&Decoded::Op(op.clone())).unwrap();
            assert_eq!(
                decode_for_apply(&copy),
                Ok(Decoded::Relocated(Box::new(Decoded::Op(op.clone()))))
            );
            assert_eq!(decode(&copy), Ok(Decoded::Op(op.clone())));
            // A truncated or padded body does not decode.
            assert_eq!(decode(&body[..body.len() - 1]), Err(BadContent));
            let mut long = body.clone();
            long.push(0);
            assert_eq!(decode(&long), Err(BadContent));
        }
    }

    #[test]
    fn older_records_keep_their_bytes() {
        let ack = Op::Ack {
            at: 5,
            ids: vec![1, 2],
        };
        assert_eq!(encode_op(&ack).unwrap(), v5::encode_op(&ack).unwrap());
        assert!(v5::encode_op(&steps()[0]).is_err());
    }
}
