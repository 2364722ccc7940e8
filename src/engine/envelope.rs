//! The parts of a dead-letter envelope that the log stores: the failure with its history
//! ([`FailureInfo`], [`Attempt`]) and the DLQ's metadata ([`DlqMetadata`]), plus the
//! message and queue id types.
//!
//! They are public types (re-exported at the crate root) that the engine's records carry.
//! They are not what is written on disk: [`crate::engine::wire`] converts them to and from
//! each format version's own structs, so they can grow (they are `#[non_exhaustive]`, built
//! with `new` and chained setters) without changing what a store means. Their serde forms
//! are for users (JSON exports and the like), not for the log. Times are milliseconds since
//! the Unix epoch.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A message id: unique in its store, stable for the message's whole life (replays included).
pub type MessageId = u64;

/// Dense number of a queue inside one store.
pub type QueueId = u32;

/// One delivery that failed, as kept in a message's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
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
#[non_exhaustive]
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
#[non_exhaustive]
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

impl Attempt {
    /// Attempt `number` (1 for the first delivery), failed at `at_ms` with this error; no
    /// details, duration or worker (set them with the setters of the same names).
    pub fn new(
        number: u32,
        at_ms: u64,
        error_kind: impl Into<String>,
        error_message: impl Into<String>,
    ) -> Self {
        Attempt {
            number,
            at_ms,
            error_kind: error_kind.into(),
            error_message: error_message.into(),
            details: None,
            duration_ms: 0,
            worker: None,
        }
    }

    setters! {
        /// Sets the error's details.
        details(details: impl Into<String>) => details = Some(details.into());
        /// Sets how long the handler ran, in milliseconds.
        duration_ms(ms: u64) => duration_ms = ms;
        /// Sets the worker that handled it.
        worker(worker: impl Into<String>) => worker = Some(worker.into());
    }
}

impl FailureInfo {
    /// A failure of this kind and message, dead-lettered at `failed_at_ms`, with no
    /// details, stack trace, history or context (set them with the setters of the same
    /// names).
    pub fn new(
        error_kind: impl Into<String>,
        error_message: impl Into<String>,
        failed_at_ms: u64,
    ) -> Self {
        FailureInfo {
            error_kind: error_kind.into(),
            error_message: error_message.into(),
            details: None,
            stack_trace: None,
            attempts: Vec::new(),
            attempts_dropped: 0,
            failed_at_ms,
            context: BTreeMap::new(),
        }
    }

    setters! {
        /// Sets the final error's details.
        details(details: impl Into<String>) => details = Some(details.into());
        /// Sets the final error's stack trace.
        stack_trace(trace: impl Into<String>) => stack_trace = Some(trace.into());
        /// Sets the failed attempts kept, oldest first.
        attempts(attempts: Vec<Attempt>) => attempts = attempts;
        /// Sets how many older attempts were dropped.
        attempts_dropped(dropped: u32) => attempts_dropped = dropped;
        /// Sets the processing context of the final failure.
        context(context: BTreeMap<String, String>) => context = context;
    }
}

impl DlqMetadata {
    /// Metadata of an entry dead-lettered at `dead_lettered_at_ms`, with no worker,
    /// environment, code version, tags or retention deadline (set them with the setters of
    /// the same names).
    pub fn new(dead_lettered_at_ms: u64) -> Self {
        DlqMetadata {
            dead_lettered_at_ms,
            worker: None,
            environment: None,
            code_version: None,
            tags: BTreeMap::new(),
            expires_at_ms: None,
        }
    }

    setters! {
        /// Sets the worker that reported the final failure.
        worker(worker: impl Into<String>) => worker = Some(worker.into());
        /// Sets the environment name.
        environment(environment: impl Into<String>) => environment = Some(environment.into());
        /// Sets the code version.
        code_version(version: impl Into<String>) => code_version = Some(version.into());
        /// Sets the tags.
        tags(tags: BTreeMap<String, String>) => tags = tags;
        /// Sets when retention removes it.
        expires_at_ms(at_ms: u64) => expires_at_ms = Some(at_ms);
    }
}
