//! What a verification is asked to do ([`VerifyOptions`]) and how far it got
//! ([`VerifyProgress`], handed to the callback of [`verify_with`](super::verify_with) after each segment).

/// Settings of a verification. It has none yet: what a valid record is comes from the
/// store's own files (each segment's header records its size, which bounds its frames),
/// never from settings of the reader, so there is no record limit to pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyOptions {}

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
