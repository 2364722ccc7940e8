//! What the examples share: where each keeps its store.
//!
//! The examples are their own package (`deadletter-examples`, not published) so that
//! building one builds the library and nothing else: the library's dev-dependencies
//! (criterion, proptest, ...) belong to its tests and benches, not to a demo.

use std::error::Error;
use std::path::{Path, PathBuf};

/// The store directory of the example `name`: the first command-line argument, or
/// `deadletter-example-NAME` under the system's temporary directory.
pub fn store_dir(name: &str) -> PathBuf {
    std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(format!("deadletter-example-{name}")))
}

/// Whether `dir` holds a store: at least one segment file (`*.seg`).
fn holds_a_store(dir: &Path) -> std::io::Result<bool> {
    for entry in std::fs::read_dir(dir)? {
        if entry?.file_name().to_string_lossy().ends_with(".seg") {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Makes `dir` ready for a fresh store: removes the store an earlier run left there, so
/// running an example twice starts from an empty store both times. Refuses to remove a
/// directory that holds files but no store (a mistyped path must not cost anyone data).
pub fn fresh_store_dir(dir: &Path) -> Result<(), Box<dyn Error>> {
    match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot read {}: {e}", dir.display()).into()),
        Ok(mut entries) => {
            if entries.next().is_none() {
                return Ok(());
            }
        }
    }
    if !holds_a_store(dir)? {
        return Err(format!(
            "{} is not empty and holds no deadletter store: give an empty or new directory",
            dir.display()
        )
        .into());
    }
    std::fs::remove_dir_all(dir)
        .map_err(|e| format!("cannot remove the earlier store in {}: {e}", dir.display()).into())
}

/// The directory given as the first argument, which must not exist or be empty (for
/// examples that write a fixture and must not mix it with anything else).
pub fn new_dir_arg(usage: &str) -> Result<PathBuf, Box<dyn Error>> {
    let dir = PathBuf::from(std::env::args().nth(1).ok_or(usage)?);
    if std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(format!("{} exists and is not empty", dir.display()).into());
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "deadletter-examples-test-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn an_earlier_store_is_removed() {
        let dir = scratch("store");
        std::fs::write(dir.join("00000000000000000000.seg"), b"x").unwrap();
        std::fs::write(dir.join("LOCK"), b"").unwrap();
        fresh_store_dir(&dir).unwrap();
        assert!(!dir.exists());
        // Missing and empty directories are fine as they are.
        fresh_store_dir(&dir).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        fresh_store_dir(&dir).unwrap();
        assert!(dir.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_that_is_not_a_store_is_kept() {
        let dir = scratch("other");
        std::fs::write(dir.join("notes.txt"), b"mine").unwrap();
        let err = fresh_store_dir(&dir).unwrap_err().to_string();
        assert!(err.contains("holds no deadletter store"), "{err}");
        assert_eq!(std::fs::read(dir.join("notes.txt")).unwrap(), b"mine");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
