//! Compaction: TTL expiry and DLQ retention, relocation, checkpoints and disk reclaim.
//! Some of them reach the checkpoint files and the file system seam through
//! `deadletter::sim`, so these tests need the `sim` feature. One scenario per file:
//!
//! - `reclaim`: disk reclaim keeps every live message, judged from the checkpoint;
//! - `expiry`: TTL expiry, DLQ retention, clock jumps;
//! - `checkpoints`: the two slots, damaged and missing checkpoints, reopen from one;
//! - `relocation`: relocated records keep their envelopes and TTLs;
//! - `history`: the failure history outlives replays, deletes, compaction and reopens;
//! - `mending`: quarantine opens a store whose active segment a checkpoint covers was cut.
//!
//! `helpers` holds the configuration and the steps they share.

#[path = "../common/mod.rs"]
mod common;
mod helpers;

mod checkpoints;
mod expiry;
mod history;
mod mending;
mod reclaim;
mod relocation;
