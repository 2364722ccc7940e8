//! Test tools for fault injection and power-loss simulation. Not part of the stable API.
//!
//! - [`SimDisk`]: an in-memory [`crate::storage::vfs::Vfs`] with a volatile and a durable image of
//!   every file and directory, and [`SimDisk::power_cut`], which keeps, drops, tears or
//!   garbles each unsynced write per 512-byte sector and undoes directory operations that
//!   no directory sync made durable.
//! - [`FaultyFs`]: wraps any `Vfs` and fails chosen operations with ENOSPC, EIO, a short
//!   write or a failed sync; models a full disk.
//! - [`SimRng`]: the seeded generator both use (the crate's one generator, which the
//!   worker pool's retry jitter uses too).
//! - [`inspect::census`]: every message of a store with its payload read back, for checking
//!   a store against a model.
//!
//! They live in the library (not behind a feature) so that integration tests and fuzz
//! targets can use them; `docs/RELIABILITY.md` lists what each test built on them checks.

pub mod disk;
pub mod faulty;
pub mod inspect;

pub use crate::rng::SplitMix64 as SimRng;
pub use disk::{DiskStats, PowerCutOptions, SimDisk};
pub use faulty::{Fault, FaultPlan, FaultyFs, OpKinds, Trigger};
