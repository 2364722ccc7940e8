//! Allocating a file's blocks without writing them: the one system call std does not offer.
//!
//! Segments and the checkpoint reserve must own their disk blocks before they are written
//! into, so that a write inside them never fails for want of space (a segment's appends go
//! on while the disk is full; a checkpoint is written over the reserve). Filling them with
//! zeros did that at the cost of writing every byte twice (zeros, then data). Here the
//! file system allocates the blocks and marks them unwritten: they read as zeros, and a
//! crash never exposes another file's old bytes through them.
//!
//! - Linux and Android: `fallocate(fd, 0, 0, len)` (mode 0 also sets the length to `len`
//!   when the file is shorter; blocks already allocated are left as they are);
//! - FreeBSD, NetBSD, DragonFly, illumos: `posix_fallocate(fd, 0, len)`;
//! - elsewhere (macOS, OpenBSD), and on a file system without the call (`EOPNOTSUPP`,
//!   `EINVAL` from a FreeBSD ZFS, `ENOSYS`): [`allocate`] returns `Ok(false)` and the caller
//!   writes zeros, the portable way.
//!
//! Invariant: `Ok(true)` means the file is at least `len` bytes long and every block below
//! `len` is allocated; on error nothing is promised (the length may have changed).
//!
//! The crate denies `unsafe_code`; this module allows it for the one FFI call, which takes
//! a file descriptor the `File` it is borrowed from keeps open for the call's duration.

use std::fs::File;
use std::io;

/// Allocates `[0, len)` of `file` without writing it. `Ok(false)`: this platform or file
/// system cannot, and nothing was changed.
pub(crate) fn allocate(file: &File, len: u64) -> io::Result<bool> {
    let Ok(len) = i64::try_from(len) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "allocation past i64::MAX",
        ));
    };
    if len == 0 {
        return Ok(true);
    }
    let code = call(file, len);
    match code {
        None => Ok(false),
        Some(0) => Ok(true),
        Some(errno) if unsupported(errno) => Ok(false),
        Some(errno) => Err(io::Error::from_raw_os_error(errno)),
    }
}

/// True for the errors that say the call is not there, rather than that it failed.
fn unsupported(errno: i32) -> bool {
    [libc::EOPNOTSUPP, libc::ENOTSUP, libc::ENOSYS, libc::EINVAL].contains(&errno)
}

/// The system call's error number (0: done), `None` where there is no such call.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn call(file: &File, len: i64) -> Option<i32> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: `fallocate` reads no memory of ours; the descriptor belongs to `file`,
        // which stays open for the call's duration (borrowed).
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
        if rc == 0 {
            return Some(0);
        }
        let errno = io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        if errno != libc::EINTR {
            return Some(errno);
        }
    }
}

/// The system call's error number (0: done), `None` where there is no such call.
#[cfg(any(
    target_os = "freebsd",
    target_os = "netbsd",
    target_os = "dragonfly",
    target_os = "illumos"
))]
fn call(file: &File, len: i64) -> Option<i32> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: as above: no memory is passed, the descriptor is `file`'s, open for the
        // call. `posix_fallocate` returns the error number instead of setting `errno`.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
        if rc != libc::EINTR {
            return Some(rc);
        }
    }
}

/// The system call's error number (0: done), `None` where there is no such call.
#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_os = "freebsd",
    target_os = "netbsd",
    target_os = "dragonfly",
    target_os = "illumos"
)))]
fn call(_file: &File, _len: i64) -> Option<i32> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn an_allocated_file_has_its_length_and_blocks_and_reads_as_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = File::create_new(&path).unwrap();
        let len = 256 << 10;
        if !allocate(&file, len).unwrap() {
            // No such call here: the caller writes zeros instead.
            return;
        }
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), len);
        assert!(meta.blocks() * 512 >= len, "{} blocks", meta.blocks());
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.iter().all(|&b| b == 0));
        // Allocating less never shortens it.
        assert!(allocate(&file, 4096).unwrap());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
    }
}
