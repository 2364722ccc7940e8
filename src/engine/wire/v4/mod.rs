//! Format version 4: version 3's records (and version 2's segment header), byte for byte,
//! and a checkpoint body (version 1's until then) that also holds each DLQ's failure
//! history (dead-letterings per hour and error kind, see
//! [`crate::engine::state::FailureHistory`]), so that the history outlives compaction,
//! which drops the records it was counted from. `docs/FORMAT.md` describes the change.
//!
//! The records did not change, so their decoders are version 3's; only the snapshot module
//! is this version's own (version 5's checkpoint body starts with it, and version 6's
//! with version 5's).

pub(super) mod snapshot;

/// The bincode configuration of every version-4 value, as of version 1: bincode 2's
/// `standard()`, little-endian with variable-length integers and no limit.
fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}
