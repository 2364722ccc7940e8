//! The parts of a dead-letter envelope that the log stores: the failure with its history
//! ([`FailureInfo`], [`Attempt`]) and the DLQ's metadata ([`DlqMetadata`]), plus the
//! message id type.
//!
//! They are public types (re-exported at the crate root) that the engine's records carry
//! as they are, encoded with bincode; times are milliseconds since the Unix epoch.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A message id: unique in its store, stable for the message's whole life (replays included).
pub type MessageId = u64;

/// One delivery that failed, as kept in a message's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// 1 for the first delivery.
    pub number: u32,
    /// When the failure was recorded.
    pub at_ms: u64,
    /// Error kind.
    pub error_kind: String,
    /// Error message.
    pub error_message: String,
    /// Optional details.
    pub details: Option<String>,
    /// How long the handler ran, in milliseconds.
    pub duration_ms: u64,
    /// The worker that handled it, if known.
    pub worker: Option<String>,
}

/// Why a message ended in the DLQ, with its whole history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureInfo {
    /// Kind of the final error.
    pub error_kind: String,
    /// Message of the final error.
    pub error_message: String,
    /// Details of the final error.
    pub details: Option<String>,
    /// Stack trace of the final error, when enabled.
    pub stack_trace: Option<String>,
    /// Failed attempts, oldest first (at most the configured number, newest kept).
    pub attempts: Vec<Attempt>,
    /// How many older attempts were dropped to respect that bound.
    pub attempts_dropped: u32,
    /// When it was dead-lettered.
    pub failed_at_ms: u64,
    /// Processing context of the final failure.
    pub context: BTreeMap<String, String>,
}

/// Metadata the DLQ keeps about an entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DlqMetadata {
    /// When it was moved to the DLQ.
    pub dead_lettered_at_ms: u64,
    /// The worker that reported the final failure.
    pub worker: Option<String>,
    /// The environment name from the store configuration.
    pub environment: Option<String>,
    /// The code version from the store configuration.
    pub code_version: Option<String>,
    /// Tags for categorisation.
    pub tags: BTreeMap<String, String>,
    /// When retention removes it (`None`: kept until deleted).
    pub expires_at_ms: Option<u64>,
}
