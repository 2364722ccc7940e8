//! What a verification is asked to do ([`VerifyOptions`]) and how far it got
//! ([`VerifyProgress`], handed to the callback of [`verify_with`](super::verify_with) after each segment).

use crate::api::core::config::DEFAULT_MAX_MESSAGE_SIZE;
use crate::engine::record::RECORD_OVERHEAD;

/// Settings of a verification.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyOptions {
    /// Largest record body to accept, as the store's log does: the store's
    /// `max_message_size` plus 64 KiB of metadata room.
    pub max_record_size: usize,
}

impl VerifyOptions {
    setters! {
        /// Sets the largest record body accepted (a store's `max_message_size` plus 64 KiB).
        max_record_size(bytes: usize) => max_record_size = bytes;
    }
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            max_record_size: DEFAULT_MAX_MESSAGE_SIZE + RECORD_OVERHEAD,
        }
    }
}

/// Progress of a verification, passed to the callback of [`verify_with`](super::verify_with).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyProgress {
    /// Segment files verified so far.
    pub segments_done: usize,
    /// Segment files in all.
    pub segments_total: usize,
    /// Bytes of segment files verified so far.
    pub bytes_done: u64,
    /// Bytes of segment files in all (their sizes when listed).
    pub bytes_total: u64,
}
