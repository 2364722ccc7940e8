//! Opening a store: the facade at the top of the API layer.
//!
//! [`Store::open`] opens the engine, builds the store handle over it and starts the
//! services its [`Config`] asks for, whose guards the handle (and every handle made from
//! it) keeps: a compaction schedule ([`CompactionOptions::interval`], every minute by
//! default), the guarded-replay driver ([`Config::guarded_replay_driver`], on by default)
//! and the control socket ([`Config::control_socket`], off by default). So a program that
//! opens a store with the defaults gets background compaction and expiry, and guarded
//! replays driven, with no more code; one that wants them on its own terms turns them off
//! and starts them itself (`crate::services`). [`Store::open_read_only`] starts none.
//!
//! Invariants: the services' guards are dropped, control socket first, before the engine
//! closes (see `core::store`); a service that fails to start fails the open, and the ones
//! started before it stop again.
//!
//! [`CompactionOptions::interval`]: crate::store::CompactionOptions::interval

use std::path::Path;
use std::sync::Arc;

use crate::api::core::config::Config;
use crate::api::core::store::Store;
use crate::api::services::{Compactor, ControlServer, GuardedReplayDriver};
use crate::engine::record::RECORD_OVERHEAD;
use crate::engine::{Engine, EngineOptions};
use crate::error::Result;
use crate::storage::log::{Durability, LogOptions};
use crate::storage::vfs::RealFs;

impl Store {
    /// Opens (creating if needed) the store in `dir`, replaying its log, and starts the
    /// services `config` asks for (module documentation of [`crate::services`]): they run
    /// until the last handle on the store is dropped.
    pub fn open(dir: impl AsRef<Path>, config: Config) -> Result<Store> {
        config.validate()?;
        let engine = Engine::open(dir.as_ref(), engine_options(&config))?;
        let store = Store::with_engine(engine, config);
        let services = start_services(&store)?;
        Ok(store.with_services(services))
    }

    /// Opens a read-only snapshot of the store in `dir`: what its log holds now, without
    /// taking its lock and without writing anything, so it works while another process
    /// holds the store (and on a read-only directory or a copy). Browsing, counting and
    /// analysing work as on a store opened with [`Store::open`]; every change is
    /// [`Error::ReadOnly`](crate::Error::ReadOnly) (a change to a store another process
    /// holds goes through that process: see [`crate::control`]). The snapshot does not
    /// follow later writes: open it again to see them. It holds what the owner has written
    /// to its files: every acknowledged change under [`Durability::Always`] (the default),
    /// and under `Interval` or `Never` what was flushed so far. Leases stay as the log has
    /// them (their holder may be alive), and no service runs.
    ///
    /// ```
    /// use deadletter::{Config, Error, Store};
    ///
    /// # let dir = tempfile::tempdir().unwrap();
    /// let owner = Store::open(&dir, Config::fast())?;
    /// owner.queue("orders")?.enqueue(b"ORD-1")?;
    /// owner.sync()?; // without fsync (`fast`), records reach the file at a flush
    ///
    /// // While `owner` holds the store, a snapshot reads it...
    /// let snapshot = Store::open_read_only(&dir, Config::fast())?;
    /// assert_eq!(snapshot.existing_queue("orders")?.len(), 1);
    /// // ...and refuses changes.
    /// let err = snapshot.existing_queue("orders")?.enqueue(b"ORD-2").unwrap_err();
    /// assert!(matches!(err, Error::ReadOnly { .. }));
    /// # Ok::<(), deadletter::Error>(())
    /// ```
    pub fn open_read_only(dir: impl AsRef<Path>, config: Config) -> Result<Store> {
        config.validate()?;
        let engine = Engine::open_read_only(dir.as_ref(), engine_options(&config))?;
        Ok(Store::with_engine(engine, config))
    }
}

/// The guards of the services `store`'s configuration asks for, in the order they are to
/// stop: the control socket (no new request is taken), the guarded-replay driver, the
/// compaction schedule.
fn start_services(store: &Store) -> Result<Vec<Box<dyn Send + Sync>>> {
    let config = store.config();
    let mut guards: Vec<Box<dyn Send + Sync>> = Vec::new();
    if config.control_socket {
        guards.push(Box::new(ControlServer::start(store)?));
    }
    if config.guarded_replay_driver {
        guards.push(Box::new(GuardedReplayDriver::start(store)?));
    }
    if let Some(every) = config.compaction.interval {
        guards.push(Box::new(Compactor::start(store, every)?));
    }
    Ok(guards)
}

/// How the engine of a store opened with `config` is set up.
fn engine_options(config: &Config) -> EngineOptions {
    let wait_for_sync = config.durability == Durability::Always;
    let log = LogOptions {
        segment_size: config.segment_size,
        first_segment_size: config.first_segment_size,
        // Room for the payload plus its metadata.
        max_record_size: config.max_message_size + RECORD_OVERHEAD,
        // The engine waits for durability itself, outside its lock (group commit).
        durability: if wait_for_sync {
            Durability::Never
        } else {
            config.durability
        },
        preallocate: config.preallocate,
        recovery: config.recovery,
        // The last 1/32 of a full-size segment (of a smaller one, the same share) is kept
        // for records that carry no payload, so that on a full disk, once a roll fails,
        // consumers can still lease, ack and dead-letter (and free what producers wait for).
        reserve: config.segment_size / 32,
        ..LogOptions::default()
    };
    EngineOptions {
        fs: config.vfs_or(|| Arc::new(RealFs)),
        log,
        wait_for_sync,
        relocate_below: config.compaction.relocate_below,
        batch: config.compaction.batch,
        idempotency_window_ms: config.idempotency_window.as_millis() as u64,
        fingerprint_frames: config.fingerprint_frames,
        audit: config.audit,
    }
}
