//! [`TraceParent`]: a W3C Trace Context `traceparent`, the one attribute that ties a
//! message's spans (its enqueue, every delivery and retry, the DLQ, a replay) into one
//! trace.
//!
//! Invariants: a parsed or built value is always valid by the W3C rules (version `00`, a
//! trace id and a parent id that are not all zeros, lower-case hex), so what
//! [`TraceParent`]'s `Display` writes always parses back to the same value.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// The attribute a message carries its trace context in (the W3C header's name).
pub const TRACEPARENT_ATTRIBUTE: &str = "traceparent";

/// A W3C `traceparent` (`00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`).
///
/// Set it on an enqueue with
/// [`EnqueueOptions::traceparent`](crate::queue::EnqueueOptions::traceparent); it stays in
/// the message's attributes through every retry, into its DLQ entry and through a replay,
/// and every span and event deadletter emits for the message (feature `tracing`) carries
/// it as the field `traceparent`.
///
/// ```
/// use deadletter::trace::TraceParent;
///
/// let tp: TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".parse()?;
/// assert!(tp.sampled());
/// assert_eq!(tp.trace_id(), 0x4bf92f3577b34da6a3ce929d0e0e4736);
/// let child = tp.child();
/// assert_eq!(child.trace_id(), tp.trace_id());
/// assert_ne!(child.parent_id(), tp.parent_id());
/// assert_eq!(child.to_string().parse::<TraceParent>()?, child);
/// assert!("00-00000000000000000000000000000000-00f067aa0ba902b7-01"
///     .parse::<TraceParent>()
///     .is_err());
/// # Ok::<(), deadletter::trace::ParseTraceParentError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    trace_id: u128,
    parent_id: u64,
    flags: u8,
}

/// The W3C flag bit that says the trace is sampled.
const SAMPLED: u8 = 0x01;

impl TraceParent {
    /// A new trace (random ids), sampled: for a message that starts a trace of its own.
    pub fn new_root() -> Self {
        let trace_id = crate::rng::random_u128();
        TraceParent {
            trace_id,
            parent_id: random_nonzero_u64(),
            flags: SAMPLED,
        }
    }

    /// A value from its parts; `None` when the trace id or the parent id is 0 (which the
    /// W3C rules forbid).
    pub fn from_parts(trace_id: u128, parent_id: u64, flags: u8) -> Option<Self> {
        (trace_id != 0 && parent_id != 0).then_some(TraceParent {
            trace_id,
            parent_id,
            flags,
        })
    }

    /// The trace context in a message's `attributes` ([`TRACEPARENT_ATTRIBUTE`]), if it
    /// holds a valid one.
    pub fn from_attributes(attributes: &BTreeMap<String, String>) -> Option<Self> {
        attributes.get(TRACEPARENT_ATTRIBUTE)?.parse().ok()
    }

    /// The same trace with a new parent id: what one hop passes on to the next.
    pub fn child(&self) -> Self {
        TraceParent {
            parent_id: random_nonzero_u64(),
            ..*self
        }
    }

    /// The 128-bit trace id.
    pub fn trace_id(&self) -> u128 {
        self.trace_id
    }

    /// The 64-bit id of the span this context came from.
    pub fn parent_id(&self) -> u64 {
        self.parent_id
    }

    /// The trace flags byte.
    pub fn flags(&self) -> u8 {
        self.flags
    }

    /// True when the sampled flag is set.
    pub fn sampled(&self) -> bool {
        self.flags & SAMPLED != 0
    }
}

fn random_nonzero_u64() -> u64 {
    // random_u128 is never 0; its two halves are independent, so take a half that is not.
    let r = crate::rng::random_u128();
    match r as u64 {
        0 => (r >> 64) as u64,
        low => low,
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{:032x}-{:016x}-{:02x}",
            self.trace_id, self.parent_id, self.flags
        )
    }
}

/// A `traceparent` that does not follow the W3C form, with the text and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseTraceParentError {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub problem: &'static str,
}

impl fmt::Display for ParseTraceParentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>): {}",
            self.text, self.problem
        )
    }
}

impl std::error::Error for ParseTraceParentError {}

impl FromStr for TraceParent {
    type Err = ParseTraceParentError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |problem| ParseTraceParentError {
            text: s.to_string(),
            problem,
        };
        let parts: Vec<&str> = s.split('-').collect();
        let [version, trace, parent, flags] = parts[..] else {
            return Err(bad("it needs four fields separated by '-'"));
        };
        let hex = |field: &str, len: usize, what| {
            let lower = field
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
            if field.len() != len || !lower {
                return Err(bad(what));
            }
            u128::from_str_radix(field, 16).map_err(|_| bad(what))
        };
        if hex(version, 2, "the version is not 2 lower-case hex digits")? != 0 {
            return Err(bad("only version 00 is known"));
        }
        let trace_id = hex(trace, 32, "the trace id is not 32 lower-case hex digits")?;
        let parent_id = hex(parent, 16, "the parent id is not 16 lower-case hex digits")? as u64;
        let flags = hex(flags, 2, "the flags are not 2 lower-case hex digits")? as u8;
        TraceParent::from_parts(trace_id, parent_id, flags)
            .ok_or_else(|| bad("an all-zero trace id or parent id is invalid"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_values_are_refused_with_the_reason() {
        let problem = |s: &str| s.parse::<TraceParent>().unwrap_err().problem;
        assert!(problem("").contains("four fields"));
        assert!(problem("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").contains("00"));
        assert!(
            problem("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01").contains("trace id")
        );
        assert!(
            problem("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01").contains("parent id")
        );
        assert!(
            problem("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01").contains("all-zero")
        );
        assert!(
            problem("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1").contains("flags")
        );
        assert!(
            problem("00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").contains("trace id")
        );
    }

    #[test]
    fn roots_are_new_sampled_and_round_trip() {
        let a = TraceParent::new_root();
        let b = TraceParent::new_root();
        assert_ne!(a.trace_id(), b.trace_id());
        assert!(a.sampled());
        assert_eq!(a.to_string().parse::<TraceParent>(), Ok(a));
        assert_eq!(a.to_string().len(), 55);
    }
}
