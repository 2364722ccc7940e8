//! Helpers shared by the integration tests: the configurations and temporary stores they
//! open, their manual clock's start, seeds and environment knobs, and the crash harness
//! ([`crash`]). A test file includes them with `mod common;` (a file in a folder of
//! scenarios, with `#[path = "../common/mod.rs"] mod common;` in its `main.rs`).
//!
//! Each test binary uses only part of this module, hence `dead_code` is allowed here.

#![allow(dead_code)]

pub mod crash;

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use deadletter::clock::ManualClock;
use deadletter::store::CompactionOptions;
use deadletter::{Config, Store};

/// Where the manual clocks of the tests start (2023-11-14T22:13:20Z, in ms since the
/// epoch): a fixed time, so ages, expiry and hourly buckets are exact.
pub const T0: u64 = 1_700_000_000_000;

/// The configuration tests start from: the defaults (durable), except that compaction runs
/// only when the test calls [`Store::compact_now`], so nothing changes the store behind the
/// test's back. Tests chain what else they need (`.durability(..)`, `.segment_size(..)`).
pub fn config() -> Config {
    Config::default().compaction(CompactionOptions::default().interval(None))
}

/// [`config`] with `clock`: time moves only when the test advances it.
pub fn config_at(clock: &ManualClock) -> Config {
    config().clock(clock.clone())
}

/// A store in a fresh temporary directory, removed when the returned `TempDir` drops
/// (keep it alive as long as the store).
pub fn temp_store(config: Config) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = Store::open(dir.path(), config).expect("open the store");
    (dir, store)
}

/// The number in environment variable `name`, if it is set. A value that is set but not a
/// number is a mistake worth stopping for.
pub fn env_option<T: FromStr>(name: &str) -> Option<T> {
    let text = std::env::var(name).ok()?;
    let number = text.trim().parse();
    Some(number.unwrap_or_else(|_| panic!("{name}={text:?} is not a number")))
}

/// The number in environment variable `name`, or `default` when it is not set.
pub fn env_number<T: FromStr>(name: &str, default: T) -> T {
    env_option(name).unwrap_or(default)
}

/// The seed of a randomised test: `DEADLETTER_SEED` when set (to replay a run), otherwise
/// one taken from the time. The test prints it, so a failure can be replayed.
pub fn seed() -> u64 {
    seed_from("DEADLETTER_SEED")
}

/// [`seed`], read from environment variable `name`.
pub fn seed_from(name: &str) -> u64 {
    env_option(name).unwrap_or_else(time_seed)
}

fn time_seed() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

/// Copies the files of directory `from` (not its subdirectories) into `to`, created if
/// needed: a test that must not disturb a store checks a copy of it.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy's directory");
    for entry in std::fs::read_dir(from).expect("list the directory") {
        let entry = entry.expect("directory entry");
        if entry.file_type().expect("file type").is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy a file");
        }
    }
}

/// The total size of the files in `dir`: what the store takes on disk.
pub fn disk_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("list the directory")
        .map(|e| {
            e.expect("directory entry")
                .metadata()
                .expect("metadata")
                .len()
        })
        .sum()
}

/// Every file of `dir` (not its subdirectories) with its bytes: taken before and after an
/// operation, it shows that the operation changed nothing.
pub fn dir_contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .expect("list the directory")
        .map(|e| e.expect("directory entry"))
        .filter(|e| e.file_type().expect("file type").is_file())
        .map(|e| {
            let bytes = std::fs::read(e.path()).expect("read a file");
            (e.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect()
}
