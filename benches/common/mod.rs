//! What the benchmarks share: where their data goes. Each bench includes this module with
//! `mod common;`.

#![allow(dead_code)]

use std::path::PathBuf;

/// Where benchmark `bench` keeps its stores and files: `bench-data/<bench>` under the
/// target directory (`CARGO_TARGET_DIR` when set). That is on the disk the build uses, not
/// under /tmp, which may be a tmpfs where fsync costs nothing.
pub fn data_root(bench: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("bench-data").join(bench)
}

/// A fresh, empty directory `name` under [`data_root`]`(bench)`.
pub fn fresh_dir(bench: &str, name: &str) -> PathBuf {
    let dir = data_root(bench).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("benchmark data directory");
    dir
}
