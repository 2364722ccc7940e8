//! How far a verification got ([`VerifyProgress`], handed to the callback of
//! [`verify_with`](super::verify_with) after each segment).

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
