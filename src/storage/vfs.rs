//! The storage seam: every file and directory operation the log performs.
//!
//! The log never calls `std::fs` directly; it goes through [`Vfs`] and [`VfsFile`], so that
//! tests can substitute a simulated disk (with power cuts) or a faulty wrapper (ENOSPC, EIO,
//! failed fsync) for [`RealFs`]. The trait is deliberately narrow:
//!
//! | operation            | method                         |
//! |----------------------|--------------------------------|
//! | create / open        | [`Vfs::create`], [`Vfs::open`] |
//! | read at an offset    | [`VfsFile::read_at`]           |
//! | write (append)       | [`VfsFile::write_at`]          |
//! | sync a file's data   | [`VfsFile::sync`]              |
//! | set length           | [`VfsFile::set_len`]           |
//! | allocate blocks      | [`VfsFile::allocate`]          |
//! | rename, remove, list | [`Vfs::rename`], [`Vfs::remove`], [`Vfs::list`] |
//! | sync a directory     | [`Vfs::sync_dir`]              |
//! | read-only view       | [`VfsFile::map`]               |
//! | exclusive lock       | [`Vfs::lock`]                  |
//!
//! Contract: `write_at` either writes the whole buffer or returns an error (after which any
//! prefix of it may have landed). `sync` makes every completed write of that file durable.
//! A created, renamed or removed name is durable only after `sync_dir` of its directory.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::allocate;
use super::mmap::MappedFile;
use crate::error::{Error, IoContext, Result};

/// A read-only view of a file's bytes. It hands out ranges, never the whole view: over a
/// live map of a file that is being appended to, a reference must cover only bytes that
/// no write touches while it lives (the log asks only for bytes below its written end).
pub trait MappedView: Send + Sync {
    /// The view's length in bytes.
    fn len(&self) -> usize;
    /// True when the view has no byte (for users of the `sim` feature's `Vfs`; the
    /// library itself asks for ranges).
    #[cfg_attr(not(feature = "sim"), allow(dead_code))]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The bytes `[start, end)`, or `None` when the range is not inside the view.
    fn range(&self, start: usize, end: usize) -> Option<&[u8]>;
    /// True when later writes to the file show through this view (a shared memory map).
    /// A view that is a snapshot returns false, and the reader maps again to see new bytes.
    fn is_live(&self) -> bool;
}

/// A real file's shared memory map (`mmap`): later writes to the file show through it.
impl MappedView for MappedFile {
    fn len(&self) -> usize {
        MappedFile::len(self)
    }
    fn range(&self, start: usize, end: usize) -> Option<&[u8]> {
        MappedFile::range(self, start, end)
    }
    fn is_live(&self) -> bool {
        true
    }
}

/// An open file.
pub trait VfsFile: Send + Sync {
    /// Reads into `buf` from `offset`; returns the count read (0 at end of file).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Writes all of `buf` at `offset`.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes every completed write durable (fdatasync).
    fn sync(&self) -> io::Result<()>;
    /// Truncates or extends (with zeros) the file.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes the file at least `len` bytes long with every block below `len` its own,
    /// without writing them where the file system can (`fallocate`): later writes below
    /// `len` need no new space, and the bytes never written read as zeros. Never shortens
    /// the file. The default, and the fallback where the call does not exist, writes zeros
    /// from the file's end to `len`.
    fn allocate(&self, len: u64) -> io::Result<()> {
        write_zeros(self, self.len()?, len)
    }
    /// The file's current length.
    fn len(&self) -> io::Result<u64>;
    /// True when the file's length is zero (with `sim`, where the trait is exported).
    #[cfg(feature = "sim")]
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// A read-only view of the whole file as it is now.
    fn map(&self) -> io::Result<Arc<dyn MappedView>>;
}

/// Writes zeros over `[from, to)` in large chunks (nothing when `to <= from`): what
/// [`VfsFile::allocate`] falls back to, and how recovery clears a torn tail.
pub fn write_zeros(file: &(impl VfsFile + ?Sized), from: u64, to: u64) -> io::Result<()> {
    const CHUNK: usize = 1 << 20;
    if to <= from {
        return Ok(());
    }
    let zeros = vec![0u8; ((to - from) as usize).min(CHUNK)];
    let mut at = from;
    while at < to {
        let n = ((to - at) as usize).min(CHUNK);
        file.write_at(&zeros[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

/// A guard that holds a directory lock until dropped.
pub trait LockGuard: Send + Sync {}

/// Who holds a store's lock: [`RealFs::lock`] writes it into the lock file as
/// `pid <n>\nhost <name>\n`, and a process refused the lock reads it back to name the
/// holder in [`crate::Error::Locked`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockHolder {
    /// Process id.
    pub pid: Option<u32>,
    /// Host name.
    pub host: Option<String>,
}

impl LockHolder {
    /// This process on this host.
    pub fn this_process() -> LockHolder {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty());
        LockHolder {
            pid: Some(std::process::id()),
            host,
        }
    }

    /// The lock file's text.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        if let Some(pid) = self.pid {
            out.push_str(&format!("pid {pid}\n"));
        }
        if let Some(host) = &self.host {
            out.push_str(&format!("host {host}\n"));
        }
        out
    }

    /// Parses a lock file's text; lines it does not know are ignored.
    pub fn parse(text: &str) -> LockHolder {
        let mut holder = LockHolder::default();
        for line in text.lines() {
            match line.split_once(' ') {
                Some(("pid", v)) => holder.pid = v.trim().parse().ok(),
                Some(("host", v)) if !v.trim().is_empty() => {
                    holder.host = Some(v.trim().to_string())
                }
                _ => {}
            }
        }
        holder
    }

    /// Reads the holder from the lock file at `path` (opened read-only); empty when the
    /// file cannot be read or says nothing.
    pub fn read(fs: &dyn Vfs, path: &Path) -> LockHolder {
        let Ok(file) = fs.open(path, true) else {
            return LockHolder::default();
        };
        let mut buf = [0u8; 512];
        let n = file.read_at(&mut buf, 0).unwrap_or(0);
        LockHolder::parse(&String::from_utf8_lossy(&buf[..n]))
    }
}

/// A file system.
pub trait Vfs: Send + Sync {
    /// Creates the directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Creates a new file (truncating one that exists), opened for reading and writing.
    fn create(&self, path: &Path) -> io::Result<Arc<dyn VfsFile>>;
    /// Opens an existing file for reading and, unless `read_only`, writing.
    fn open(&self, path: &Path, read_only: bool) -> io::Result<Arc<dyn VfsFile>>;
    /// Renames a file, replacing the target.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Lists the names of the entries of a directory (not recursive).
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Makes creations, renames and removals in the directory durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Takes an exclusive lock on `path` (created if missing); `WouldBlock` when held.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn LockGuard>>;
    /// True when the log may run file operations on a background thread (preparing the
    /// next segment). A simulated disk returns false so that a run is a function of its
    /// seed alone: the log then does that work inline, at the same point every time.
    fn allows_background_io(&self) -> bool {
        true
    }
}

/// Creates directory `dir` and its missing parents durably: after each is created, the
/// directory that holds its name is synced (a new directory's entry is, like a file's,
/// durable only once its parent is synced). A path that is, or runs through, something
/// that is not a directory is [`Error::NotADirectory`]. Nothing is synced when `dir`
/// exists.
pub(crate) fn create_dir_durably(fs: &dyn Vfs, dir: &Path) -> Result<()> {
    let not_a_dir = || Error::NotADirectory {
        path: dir.to_path_buf(),
    };
    // The missing directories, deepest first: up to the first ancestor that is there (one
    // that cannot be listed for another reason, such as permissions, is there).
    let mut missing: Vec<&Path> = Vec::new();
    for d in dir.ancestors().take_while(|d| !d.as_os_str().is_empty()) {
        match fs.list(d) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push(d),
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => return Err(not_a_dir()),
            _ => break,
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    match fs.create_dir_all(dir) {
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::AlreadyExists | io::ErrorKind::NotADirectory
            ) =>
        {
            return Err(not_a_dir())
        }
        created => created.io("create dir", dir)?,
    }
    for d in missing.iter().rev() {
        let parent = match d.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        fs.sync_dir(&parent).io("fsync dir", &parent)?;
    }
    Ok(())
}

/// The real file system: positioned writes, fdatasync, and memory-mapped reads (the map
/// itself is made in `storage/mmap.rs`, the crate's one module with `unsafe` code).
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

struct RealFile {
    file: File,
}

struct EmptyView;

impl MappedView for EmptyView {
    fn len(&self) -> usize {
        0
    }
    fn range(&self, start: usize, end: usize) -> Option<&[u8]> {
        (start == 0 && end == 0).then_some(&[])
    }
    fn is_live(&self) -> bool {
        false
    }
}

impl VfsFile for RealFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.file.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }
    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
    fn allocate(&self, len: u64) -> io::Result<()> {
        if allocate::allocate(&self.file, len)? {
            return Ok(());
        }
        write_zeros(self, self.len()?, len)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
    fn map(&self) -> io::Result<Arc<dyn MappedView>> {
        if self.len()? == 0 {
            return Ok(Arc::new(EmptyView));
        }
        Ok(Arc::new(MappedFile::map(&self.file)?))
    }
}

struct RealLock {
    _file: File,
}

impl LockGuard for RealLock {}

impl Vfs for RealFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }
    fn create(&self, path: &Path) -> io::Result<Arc<dyn VfsFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(Arc::new(RealFile { file }))
    }
    fn open(&self, path: &Path, read_only: bool) -> io::Result<Arc<dyn VfsFile>> {
        let file = OpenOptions::new().read(true).write(!read_only).open(path)?;
        Ok(Arc::new(RealFile { file }))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if let Ok(name) = entry.file_name().into_string() {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn LockGuard>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        match file.try_lock() {
            Ok(()) => {
                // Say who holds it, for the error another process gets. Best effort: the
                // lock is what protects the store, these bytes only explain it.
                let holder = LockHolder::this_process().to_text();
                if file.set_len(0).is_ok() {
                    let _ = file.write_all_at(holder.as_bytes(), 0);
                }
                Ok(Box::new(RealLock { _file: file }))
            }
            Err(std::fs::TryLockError::WouldBlock) => Err(io::ErrorKind::WouldBlock.into()),
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        }
    }
}
