//! The segmented log, the storage layer under every store (reached through
//! `deadletter::sim`, so these tests need the `sim` feature). One scenario per file:
//!
//! - `smoke`: append, read, roll, reopen;
//! - `torn_tail`: a torn last record at every byte offset;
//! - `bit_flips`: every bit of a segment flipped, in strict and quarantine recovery;
//! - `damaged_directory`: missing, cut, empty, leftover, foreign and misnamed files;
//! - `bad_input`: records too large or empty, bad positions, bad options;
//! - `lock`: one process at a time, across processes;
//! - `group_commit`: concurrent appends share fsyncs;
//! - `segments`: rolling at the size limit and deleting whole segments; a store's segment
//!   size read back from its files;
//! - `spare_segment`: the background spare is never damaged by a roll (a regression test);
//! - `format`: the segment header and the record frame, byte by byte;
//! - `failed_fsync`: a failed fsync poisons the log until it is reopened;
//! - `tail_hint`: the active segment is never written past its tail hint, and an open reads
//!   no further;
//! - `versions`: segments of an older format version are read and sealed, a newer one is
//!   refused untouched;
//! - `sim_disk`: the simulated disk, the fault injector and the seeded generator these
//!   tests run on.
//!
//! `helpers` builds, damages and reads back the logs these tests use.

#[path = "../common/mod.rs"]
mod common;
mod helpers;

mod bad_input;
mod bit_flips;
mod damaged_directory;
mod failed_fsync;
mod format;
mod group_commit;
mod lock;
mod segments;
mod sim_disk;
mod smoke;
mod spare_segment;
mod tail_hint;
mod torn_tail;
mod versions;
