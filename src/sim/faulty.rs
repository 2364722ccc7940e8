//! [`FaultyFs`]: a [`Vfs`] wrapper that injects I/O errors into any other `Vfs`.
//!
//! Operations are counted by kind ([`OpKinds`]). A [`FaultPlan`] fails the Nth matching
//! operation once, or every matching operation from the Nth on (the process "stops doing
//! I/O" there, which together with [`super::SimDisk::power_cut`] simulates a crash at that
//! exact step), or each matching operation with a probability. The injected error is
//! ENOSPC, EIO, a short write (part of the buffer lands, then an error), or a failed sync
//! (an error from `sync`/`sync_dir` that made nothing durable).
//!
//! Independently of the plan, [`FaultyFs::set_read_errors`] makes reads fail: each `read_at`,
//! `map` and `len` fails with EIO with a probability, for as long as it is set (a disk with
//! bad sectors, a flaky controller), counted apart ([`FaultyFs::read_errors`]) so that a
//! test can tell them from the plan's faults.
//!
//! Separately, [`FaultyFs::set_disk_full`] models a full disk: operations that need new
//! space fail with ENOSPC (creating a file, writing past a file's end, growing a file with
//! `set_len` or `allocate`), while writes inside a file's current length (a preallocated segment),
//! renames, removals and syncs still work. Turning it off is space coming back.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::SimRng;
use crate::storage::vfs::{LockGuard, MappedView, Vfs, VfsFile};

/// ENOSPC on Linux.
const ENOSPC: i32 = 28;
/// EIO on Linux.
const EIO: i32 = 5;

/// A set of operation kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpKinds(pub u16);

impl OpKinds {
    /// `write_at`.
    pub const WRITE: OpKinds = OpKinds(1);
    /// `sync` of a file.
    pub const SYNC: OpKinds = OpKinds(1 << 1);
    /// `create`.
    pub const CREATE: OpKinds = OpKinds(1 << 2);
    /// `rename`.
    pub const RENAME: OpKinds = OpKinds(1 << 3);
    /// `remove`.
    pub const REMOVE: OpKinds = OpKinds(1 << 4);
    /// `set_len`.
    pub const SET_LEN: OpKinds = OpKinds(1 << 5);
    /// `sync_dir`.
    pub const SYNC_DIR: OpKinds = OpKinds(1 << 6);
    /// `open`.
    pub const OPEN: OpKinds = OpKinds(1 << 7);
    /// `read_at`.
    pub const READ: OpKinds = OpKinds(1 << 8);
    /// `list`, `create_dir_all`.
    pub const LIST: OpKinds = OpKinds(1 << 9);
    /// `lock`.
    pub const LOCK: OpKinds = OpKinds(1 << 10);
    /// `map`, `len`.
    pub const MAP: OpKinds = OpKinds(1 << 11);
    /// Every operation that changes the disk.
    pub const MUTATING: OpKinds = OpKinds(
        Self::WRITE.0
            | Self::SYNC.0
            | Self::CREATE.0
            | Self::RENAME.0
            | Self::REMOVE.0
            | Self::SET_LEN.0
            | Self::SYNC_DIR.0,
    );
    /// Every operation.
    pub const ALL: OpKinds = OpKinds(0x0fff);

    /// The union of two sets.
    pub const fn or(self, other: OpKinds) -> OpKinds {
        OpKinds(self.0 | other.0)
    }

    /// True when `self` holds every kind in `k`.
    pub fn contains(self, k: OpKinds) -> bool {
        self.0 & k.0 == k.0
    }

    /// The name of a single kind.
    pub fn name(self) -> &'static str {
        match self {
            Self::WRITE => "write",
            Self::SYNC => "sync",
            Self::CREATE => "create",
            Self::RENAME => "rename",
            Self::REMOVE => "remove",
            Self::SET_LEN => "set_len",
            Self::SYNC_DIR => "sync_dir",
            Self::OPEN => "open",
            Self::READ => "read",
            Self::LIST => "list",
            Self::LOCK => "lock",
            Self::MAP => "map",
            _ => "several",
        }
    }
}

/// The error an injected fault produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// No space left on device.
    Enospc,
    /// An I/O error.
    Eio,
    /// For writes: a random prefix of the buffer lands, then EIO. Other operations: EIO.
    ShortWrite,
    /// For syncs: nothing is made durable, EIO. Other operations: EIO.
    FailedSync,
}

/// When faults fire.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Trigger {
    /// The Nth matching operation from when the plan was set (0: the next one), once.
    Nth(u64),
    /// Every matching operation from the Nth on.
    From(u64),
    /// Each matching operation with this probability.
    Random(f64),
}

/// A fault injection plan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultPlan {
    /// Which operations count and may fail.
    pub kinds: OpKinds,
    /// When.
    pub trigger: Trigger,
    /// What error.
    pub fault: Fault,
}

#[derive(Debug)]
struct Control {
    plan: Mutex<Option<(FaultPlan, u64)>>,
    disk_full: AtomicBool,
    /// The probability of a read error, in millionths (0: none).
    read_error_ppm: AtomicU64,
    read_errors: AtomicU64,
    injected: AtomicU64,
    ops: AtomicU64,
    rng: Mutex<SimRng>,
}

/// A fault-injecting wrapper around another [`Vfs`]. Clones share the same plan.
#[derive(Clone)]
pub struct FaultyFs {
    inner: Arc<dyn Vfs>,
    ctl: Arc<Control>,
}

impl std::fmt::Debug for FaultyFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultyFs")
            .field("plan", &*self.ctl.plan.lock())
            .field("injected", &self.injected())
            .finish_non_exhaustive()
    }
}

fn err(code: i32, what: &str) -> io::Error {
    let base = io::Error::from_raw_os_error(code);
    io::Error::new(base.kind(), format!("injected: {what}: {base}"))
}

impl FaultyFs {
    /// Wraps `inner`; `seed` drives random triggers and short-write lengths.
    pub fn new(inner: Arc<dyn Vfs>, seed: u64) -> Self {
        FaultyFs {
            inner,
            ctl: Arc::new(Control {
                plan: Mutex::new(None),
                disk_full: AtomicBool::new(false),
                read_error_ppm: AtomicU64::new(0),
                read_errors: AtomicU64::new(0),
                injected: AtomicU64::new(0),
                ops: AtomicU64::new(0),
                rng: Mutex::new(SimRng::new(seed)),
            }),
        }
    }

    /// Sets the plan (replacing any earlier one); counting starts now.
    pub fn set_plan(&self, plan: FaultPlan) {
        *self.ctl.plan.lock() = Some((plan, 0));
    }

    /// Fails the `n`th next operation of `kinds` (0: the next one) with `fault`, once.
    pub fn fail_nth(&self, n: u64, kinds: OpKinds, fault: Fault) {
        self.set_plan(FaultPlan {
            kinds,
            trigger: Trigger::Nth(n),
            fault,
        });
    }

    /// Fails every operation of `kinds` from the `n`th next one on.
    pub fn fail_from(&self, n: u64, kinds: OpKinds, fault: Fault) {
        self.set_plan(FaultPlan {
            kinds,
            trigger: Trigger::From(n),
            fault,
        });
    }

    /// Removes the plan: no more injected faults (the disk-full switch stays as it is).
    pub fn clear(&self) {
        *self.ctl.plan.lock() = None;
    }

    /// The disk is full (true) or has space again (false).
    pub fn set_disk_full(&self, full: bool) {
        self.ctl.disk_full.store(full, Ordering::SeqCst);
    }

    /// True while the disk is full.
    pub fn is_disk_full(&self) -> bool {
        self.ctl.disk_full.load(Ordering::SeqCst)
    }

    /// From now on each read (`read_at`, `map`, `len`) fails with EIO with `probability`
    /// (clamped to `[0, 1]`), besides what the plan does; `None` (or 0) stops it.
    pub fn set_read_errors(&self, probability: Option<f64>) {
        let ppm = (probability.unwrap_or(0.0).clamp(0.0, 1.0) * 1e6) as u64;
        self.ctl.read_error_ppm.store(ppm, Ordering::SeqCst);
    }

    /// True while reads fail at random ([`FaultyFs::set_read_errors`]).
    pub fn read_errors_on(&self) -> bool {
        self.ctl.read_error_ppm.load(Ordering::SeqCst) > 0
    }

    /// Read errors injected by [`FaultyFs::set_read_errors`] so far (also counted in
    /// [`FaultyFs::injected`]).
    pub fn read_errors(&self) -> u64 {
        self.ctl.read_errors.load(Ordering::SeqCst)
    }

    /// Faults injected so far (plan, read errors and disk full).
    pub fn injected(&self) -> u64 {
        self.ctl.injected.load(Ordering::SeqCst)
    }

    /// Operations seen so far.
    pub fn ops(&self) -> u64 {
        self.ctl.ops.load(Ordering::SeqCst)
    }

    /// Decides whether an operation of kind `k` fails; returns the fault.
    fn check(&self, k: OpKinds) -> Option<Fault> {
        self.ctl.ops.fetch_add(1, Ordering::SeqCst);
        let mut guard = self.ctl.plan.lock();
        let (plan, seen) = guard.as_mut()?;
        if !plan.kinds.contains(k) {
            return None;
        }
        let n = *seen;
        *seen += 1;
        let fire = match plan.trigger {
            Trigger::Nth(at) => n == at,
            Trigger::From(at) => n >= at,
            Trigger::Random(p) => self.ctl.rng.lock().chance(p),
        };
        if !fire {
            return None;
        }
        let fault = plan.fault;
        drop(guard);
        self.note();
        Some(fault)
    }

    /// Counts an injected fault.
    fn note(&self) {
        self.ctl.injected.fetch_add(1, Ordering::SeqCst);
    }

    /// A read (`k` is READ or MAP) fails as the plan says, or at random while read errors
    /// are on.
    fn read_error(&self, k: OpKinds) -> io::Result<()> {
        self.simple(k)?;
        let ppm = self.ctl.read_error_ppm.load(Ordering::SeqCst);
        if ppm == 0 || self.ctl.rng.lock().below(1_000_000) >= ppm {
            return Ok(());
        }
        self.ctl.read_errors.fetch_add(1, Ordering::SeqCst);
        self.note();
        Err(err(EIO, k.name()))
    }

    fn error_for(fault: Fault, k: OpKinds) -> io::Error {
        match fault {
            Fault::Enospc => err(ENOSPC, k.name()),
            _ => err(EIO, k.name()),
        }
    }

    fn full(&self, k: OpKinds) -> io::Result<()> {
        if self.is_disk_full() {
            self.note();
            return Err(err(ENOSPC, k.name()));
        }
        Ok(())
    }

    fn wrap(&self, file: Arc<dyn VfsFile>) -> Arc<dyn VfsFile> {
        Arc::new(FaultyFile {
            fs: self.clone(),
            inner: file,
        })
    }

    fn simple(&self, k: OpKinds) -> io::Result<()> {
        match self.check(k) {
            Some(f) => Err(Self::error_for(f, k)),
            None => Ok(()),
        }
    }
}

struct FaultyFile {
    fs: FaultyFs,
    inner: Arc<dyn VfsFile>,
}

impl VfsFile for FaultyFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.fs.read_error(OpKinds::READ)?;
        self.inner.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if let Some(fault) = self.fs.check(OpKinds::WRITE) {
            if fault == Fault::ShortWrite && !buf.is_empty() {
                let n = self.fs.ctl.rng.lock().index(buf.len());
                self.inner.write_at(&buf[..n], offset)?;
            }
            return Err(FaultyFs::error_for(fault, OpKinds::WRITE));
        }
        if self.fs.is_disk_full() {
            let len = self.inner.len()?;
            let end = offset + buf.len() as u64;
            if end > len {
                // The part inside the file's allocated length lands; the rest has no space.
                let fits = len.saturating_sub(offset) as usize;
                if fits > 0 {
                    self.inner.write_at(&buf[..fits.min(buf.len())], offset)?;
                }
                self.fs.note();
                return Err(err(ENOSPC, "write"));
            }
        }
        self.inner.write_at(buf, offset)
    }

    fn sync(&self) -> io::Result<()> {
        self.fs.simple(OpKinds::SYNC)?;
        self.inner.sync()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.fs.simple(OpKinds::SET_LEN)?;
        if len > self.inner.len()? {
            self.fs.full(OpKinds::SET_LEN)?;
        }
        self.inner.set_len(len)
    }

    /// Counted and failed as `set_len` (it changes the file's size and needs space).
    fn allocate(&self, len: u64) -> io::Result<()> {
        self.fs.simple(OpKinds::SET_LEN)?;
        if len > self.inner.len()? {
            self.fs.full(OpKinds::SET_LEN)?;
        }
        self.inner.allocate(len)
    }

    fn len(&self) -> io::Result<u64> {
        self.fs.read_error(OpKinds::MAP)?;
        self.inner.len()
    }

    fn map(&self) -> io::Result<Arc<dyn MappedView>> {
        self.fs.read_error(OpKinds::MAP)?;
        self.inner.map()
    }
}

impl Vfs for FaultyFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.simple(OpKinds::LIST)?;
        self.inner.create_dir_all(dir)
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn VfsFile>> {
        self.simple(OpKinds::CREATE)?;
        self.full(OpKinds::CREATE)?;
        let f = self.inner.create(path)?;
        Ok(self.wrap(f))
    }

    fn open(&self, path: &Path, read_only: bool) -> io::Result<Arc<dyn VfsFile>> {
        self.simple(OpKinds::OPEN)?;
        let f = self.inner.open(path, read_only)?;
        Ok(self.wrap(f))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.simple(OpKinds::RENAME)?;
        self.inner.rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.simple(OpKinds::REMOVE)?;
        self.inner.remove(path)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.simple(OpKinds::LIST)?;
        self.inner.list(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.simple(OpKinds::SYNC_DIR)?;
        self.inner.sync_dir(dir)
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn LockGuard>> {
        self.simple(OpKinds::LOCK)?;
        self.inner.lock(path)
    }

    fn allows_background_io(&self) -> bool {
        self.inner.allows_background_io()
    }
}
