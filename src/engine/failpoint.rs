//! Failpoints: named steps of compaction and checkpointing where a crash test can make the
//! process abort, to check that a crash between two steps loses nothing.
//!
//! With the `sim` feature, [`failpoint`] aborts the process when the environment variable
//! `DEADLETTER_FAILPOINT` names the step. Without it (every user's build) it is an empty
//! function: the variable is never read and its name is not in the binary.

/// Aborts the process here when `DEADLETTER_FAILPOINT` names `step` (with `sim` only).
#[cfg(feature = "sim")]
pub(crate) fn failpoint(step: &str) {
    static NAME: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let name = NAME.get_or_init(|| std::env::var("DEADLETTER_FAILPOINT").ok());
    if name.as_deref() == Some(step) {
        std::process::abort();
    }
}

/// Does nothing: failpoints exist only with the `sim` feature.
#[cfg(not(feature = "sim"))]
#[inline(always)]
pub(crate) fn failpoint(_step: &str) {}
