//! [`SimDisk`]: an in-memory [`Vfs`](super::Vfs) that models what survives a power cut.
//!
//! Every file has a *volatile* image (what reads see: the page cache) and a *durable* image
//! (what is on the medium). Writes and size changes go to the volatile image and are queued
//! as pending changes; [`VfsFile::sync`](super::VfsFile::sync) makes the file's data and size durable. The
//! namespace (file names, directories) likewise has a volatile and a durable version:
//! creations, renames and removals are queued per directory and become durable only by
//! [`Vfs::sync_dir`](super::Vfs::sync_dir) of that directory (a file `sync` does not make its name durable).
//!
//! [`SimDisk::power_cut`] produces the post-crash state from a seed:
//! - each pending write is split at 512-byte sector boundaries, and each piece is kept,
//!   dropped, torn (a prefix of it lands) or garbled (random bytes land), independently, so
//!   unsynced writes may land partly and out of order;
//! - a pending size change (truncate, extend) may or may not persist, and a file may end at
//!   its durable size even if later writes extended it;
//! - each pending directory operation may be applied or undone, independently; a rename is
//!   atomic (old name or new name, never both, never neither);
//! - every lock is released, and handles opened before the cut fail with an I/O error.
//!
//! What the model assumes of real hardware (see `docs/RELIABILITY.md`): a write, lost or
//! torn, damages only the bytes it was writing (no collateral damage to neighbouring synced
//! bytes of the same sector: "powersafe overwrite"); `fsync` of a file makes its data and
//! size durable; `fsync` of a directory makes its entries durable. Damage to synced data (bit
//! rot) is not part of a power cut: tests inject it with [`SimDisk::flip_durable_bit`].
//!
//! [`VfsFile::map`](super::VfsFile::map) returns a snapshot of the volatile image (`is_live() == false`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

mod files;

use super::SimRng;

/// Sector size used to split pending writes at a power cut.
pub const SECTOR: u64 = 512;

type Ino = u64;

/// A change to a file not yet made durable by `sync`.
#[derive(Debug, Clone)]
enum Pending {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

/// A file's images. Cloned, both share the volatile bytes until either writes (every
/// change goes through `Arc::make_mut`).
#[derive(Debug, Clone, Default)]
struct Inode {
    /// What reads see. An `Arc` so that a mapped snapshot costs nothing until the next write.
    data: Arc<Vec<u8>>,
    durable: Vec<u8>,
    pending: Vec<Pending>,
}

impl Inode {
    /// A file whose bytes are all durable.
    fn settled(bytes: Vec<u8>) -> Inode {
        Inode {
            data: Arc::new(bytes.clone()),
            durable: bytes,
            pending: Vec::new(),
        }
    }
}

/// A directory change not yet made durable by `sync_dir`.
#[derive(Debug, Clone)]
enum DirOp {
    Link {
        name: PathBuf,
        ino: Ino,
    },
    Unlink {
        name: PathBuf,
        ino: Ino,
    },
    Rename {
        from: PathBuf,
        to: PathBuf,
        ino: Ino,
    },
    MkDir(PathBuf),
}

/// Counters of what the disk was asked to do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// `write_at` calls.
    pub writes: u64,
    /// File syncs.
    pub syncs: u64,
    /// Directory syncs.
    pub dir_syncs: u64,
    /// Power cuts.
    pub power_cuts: u64,
}

/// How a power cut treats pending changes; probabilities in `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PowerCutOptions {
    /// A sector piece of a pending write lands whole.
    pub keep: f64,
    /// A sector piece lands as random bytes (otherwise it is dropped or torn).
    pub garble: f64,
    /// A sector piece lands partly (a prefix of it).
    pub tear: f64,
    /// A pending size change persists.
    pub keep_len: f64,
    /// A pending directory operation persists.
    pub keep_dir_op: f64,
}

impl PowerCutOptions {
    /// Probabilities drawn from `rng`, so that different seeds stress different mixes
    /// (mostly kept, mostly lost, much garbage...).
    pub fn random(rng: &mut SimRng) -> Self {
        let pick = |rng: &mut SimRng| match rng.below(4) {
            0 => 0.0,
            1 => 1.0,
            _ => rng.below(101) as f64 / 100.0,
        };
        PowerCutOptions {
            keep: pick(rng),
            garble: pick(rng) * 0.3,
            tear: pick(rng) * 0.3,
            keep_len: pick(rng),
            keep_dir_op: pick(rng),
        }
    }
}

#[derive(Debug, Default, Clone)]
struct State {
    dirs: BTreeSet<PathBuf>,
    durable_dirs: BTreeSet<PathBuf>,
    names: BTreeMap<PathBuf, Ino>,
    durable_names: BTreeMap<PathBuf, Ino>,
    pending: BTreeMap<PathBuf, Vec<DirOp>>,
    inodes: HashMap<Ino, Arc<Mutex<Inode>>>,
    next_ino: Ino,
    locks: HashMap<PathBuf, u64>,
    next_token: u64,
}

struct Shared {
    state: Mutex<State>,
    /// Bumped by every power cut; handles from an older epoch fail.
    epoch: AtomicU64,
    writes: AtomicU64,
    syncs: AtomicU64,
    dir_syncs: AtomicU64,
    power_cuts: AtomicU64,
    /// The disk's size in bytes (`u64::MAX`: unlimited); see [`SimDisk::set_capacity`].
    capacity: AtomicU64,
    /// `sync_dir` returns `Ok` without making anything durable; see
    /// [`SimDisk::set_lying_dir_syncs`].
    lying_dir_syncs: std::sync::atomic::AtomicBool,
}

/// An in-memory file system with power-cut simulation. Clones share the same disk.
#[derive(Clone)]
pub struct SimDisk {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for SimDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimDisk")
            .field("epoch", &self.shared.epoch.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Default for SimDisk {
    fn default() -> Self {
        Self::new()
    }
}

fn is_root(p: &Path) -> bool {
    p.as_os_str().is_empty() || p == Path::new("/") || p == Path::new(".")
}

fn parent_of(p: &Path) -> PathBuf {
    p.parent().map(Path::to_path_buf).unwrap_or_default()
}

fn not_found(p: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: not found", p.display()),
    )
}

impl State {
    fn dir_exists(&self, d: &Path) -> bool {
        is_root(d) || self.dirs.contains(d)
    }

    fn push_op(&mut self, dir: PathBuf, op: DirOp) {
        self.pending.entry(dir).or_default().push(op);
    }

    /// Queues the link of `name` to `ino` in its directory.
    fn push_link(&mut self, name: &Path, ino: Ino) {
        let name = name.to_path_buf();
        self.push_op(parent_of(&name), DirOp::Link { name, ino });
    }

    /// Queues the unlink of `name` (from `ino`) in its directory.
    fn push_unlink(&mut self, name: &Path, ino: Ino) {
        let name = name.to_path_buf();
        self.push_op(parent_of(&name), DirOp::Unlink { name, ino });
    }

    fn new_inode(&mut self, inode: Inode) -> Ino {
        self.next_ino += 1;
        let ino = self.next_ino;
        self.inodes.insert(ino, Arc::new(Mutex::new(inode)));
        ino
    }

    /// Drops inodes that no name, durable name or pending operation refers to.
    fn collect_garbage(&mut self) {
        let mut used: BTreeSet<Ino> = self.names.values().copied().collect();
        used.extend(self.durable_names.values().copied());
        for ops in self.pending.values() {
            for op in ops {
                match op {
                    DirOp::Link { ino, .. }
                    | DirOp::Unlink { ino, .. }
                    | DirOp::Rename { ino, .. } => {
                        used.insert(*ino);
                    }
                    DirOp::MkDir(_) => {}
                }
            }
        }
        self.inodes.retain(|ino, _| used.contains(ino));
    }
}

fn apply_dir_op(names: &mut BTreeMap<PathBuf, Ino>, dirs: &mut BTreeSet<PathBuf>, op: &DirOp) {
    match op {
        DirOp::Link { name, ino } => {
            names.insert(name.clone(), *ino);
        }
        DirOp::Unlink { name, ino } => {
            if names.get(name) == Some(ino) {
                names.remove(name);
            }
        }
        DirOp::Rename { from, to, ino } => {
            if names.get(from) == Some(ino) {
                names.remove(from);
            }
            names.insert(to.clone(), *ino);
        }
        DirOp::MkDir(d) => {
            dirs.insert(d.clone());
        }
    }
}

/// The durable image a file has after a power cut.
fn crash_image(inode: &Inode, rng: &mut SimRng, o: &PowerCutOptions) -> Vec<u8> {
    let mut img = inode.durable.clone();
    let durable_len = img.len();
    for p in &inode.pending {
        match p {
            Pending::SetLen(n) => {
                if rng.chance(o.keep_len) {
                    img.resize(*n as usize, 0);
                }
            }
            Pending::Write { offset, data } => {
                let mut at = *offset;
                let end = offset + data.len() as u64;
                while at < end {
                    let piece_end = ((at / SECTOR + 1) * SECTOR).min(end);
                    let src = &data[(at - offset) as usize..(piece_end - offset) as usize];
                    let roll = rng.below(1_000_000) as f64 / 1_000_000.0;
                    let landed: Option<Vec<u8>> = if roll < o.keep {
                        Some(src.to_vec())
                    } else if roll < o.keep + (1.0 - o.keep) * o.garble {
                        Some(rng.bytes(src.len()))
                    } else if roll < o.keep + (1.0 - o.keep) * (o.garble + o.tear) {
                        let n = rng.index(src.len() + 1);
                        Some(src[..n].to_vec())
                    } else {
                        None
                    };
                    if let Some(bytes) = landed {
                        let a = at as usize;
                        if img.len() < a + bytes.len() {
                            img.resize(a + bytes.len(), 0);
                        }
                        img[a..a + bytes.len()].copy_from_slice(&bytes);
                    }
                    at = piece_end;
                }
            }
        }
    }
    // A size change made by the writes themselves may not have reached the medium either
    // (only bytes past the durable size can vanish this way).
    if img.len() > durable_len && !rng.chance(o.keep_len) {
        img.truncate(durable_len);
    }
    img
}

impl SimDisk {
    /// An empty disk: only the root directory exists.
    pub fn new() -> Self {
        SimDisk {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                epoch: AtomicU64::new(0),
                writes: AtomicU64::new(0),
                syncs: AtomicU64::new(0),
                dir_syncs: AtomicU64::new(0),
                power_cuts: AtomicU64::new(0),
                capacity: AtomicU64::new(u64::MAX),
                lying_dir_syncs: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// Makes `sync_dir` lie (`true`): it returns `Ok` and makes no directory operation
    /// durable, as a store that skipped its directory syncs would leave things. For tests
    /// that prove the simulation catches a missing directory fsync.
    pub fn set_lying_dir_syncs(&self, lie: bool) {
        self.shared.lying_dir_syncs.store(lie, Ordering::SeqCst);
    }

    /// Gives the disk a size: from now on, growing a file (a write past its end, `set_len`
    /// longer) fails with ENOSPC when the bytes of every named file would exceed
    /// `capacity`, and creating a file fails when not one byte is free. Writes inside a
    /// file's length, shrinking, renames, removals and syncs work as before; removing or
    /// shrinking a file frees its bytes at once (a removed file still open counts no more).
    /// `None` makes the disk unlimited again. Space is counted in bytes of file data
    /// (the volatile image), not blocks; the check is not atomic against another thread
    /// growing a file at the same time.
    pub fn set_capacity(&self, capacity: Option<u64>) {
        self.shared
            .capacity
            .store(capacity.unwrap_or(u64::MAX), Ordering::SeqCst);
    }

    /// Bytes of data in every named file (the volatile image): what
    /// [`SimDisk::set_capacity`] counts.
    pub fn used_bytes(&self) -> u64 {
        let inodes: Vec<Arc<Mutex<Inode>>> = {
            let st = self.shared.state.lock();
            st.names
                .values()
                .map(|ino| Arc::clone(&st.inodes[ino]))
                .collect()
        };
        inodes.iter().map(|i| i.lock().data.len() as u64).sum()
    }

    /// ENOSPC unless `growth` more bytes fit within the capacity.
    fn room_for(&self, growth: u64) -> io::Result<()> {
        let capacity = self.shared.capacity.load(Ordering::SeqCst);
        if capacity == u64::MAX || growth == 0 || self.used_bytes() + growth <= capacity {
            return Ok(());
        }
        Err(io::Error::from_raw_os_error(28))
    }

    /// Counters of the disk's work.
    pub fn stats(&self) -> DiskStats {
        let s = &self.shared;
        DiskStats {
            writes: s.writes.load(Ordering::Relaxed),
            syncs: s.syncs.load(Ordering::Relaxed),
            dir_syncs: s.dir_syncs.load(Ordering::Relaxed),
            power_cuts: s.power_cuts.load(Ordering::Relaxed),
        }
    }

    /// Cuts the power: the disk becomes what a machine would find after a crash at this
    /// instant, with the pending changes treated per options drawn from `seed`.
    pub fn power_cut(&self, seed: u64) {
        let mut rng = SimRng::new(seed);
        let options = PowerCutOptions::random(&mut rng);
        self.power_cut_with(&mut rng, &options);
    }

    /// Cuts the power with explicit options.
    pub fn power_cut_with(&self, rng: &mut SimRng, o: &PowerCutOptions) {
        let mut st = self.shared.state.lock();
        self.shared.epoch.fetch_add(1, Ordering::SeqCst);
        self.shared.power_cuts.fetch_add(1, Ordering::Relaxed);
        let mut names = st.durable_names.clone();
        let mut dirs = st.durable_dirs.clone();
        let pending = std::mem::take(&mut st.pending);
        for op in pending.values().flatten() {
            if rng.chance(o.keep_dir_op) {
                apply_dir_op(&mut names, &mut dirs, op);
            }
        }
        // Entries whose directory did not survive are gone with it.
        let alive = |p: &Path, dirs: &BTreeSet<PathBuf>| {
            let mut parents = p.ancestors().skip(1).take_while(|d| !is_root(d));
            parents.all(|d| dirs.contains(d))
        };
        let dirs_snapshot = dirs.clone();
        dirs.retain(|d| alive(d, &dirs_snapshot));
        names.retain(|p, _| alive(p, &dirs));
        let inos: BTreeSet<Ino> = names.values().copied().collect();
        st.inodes = inos
            .into_iter()
            .map(|ino| {
                let img = st.inodes.get(&ino).map(|i| crash_image(&i.lock(), rng, o));
                (
                    ino,
                    Arc::new(Mutex::new(Inode::settled(img.unwrap_or_default()))),
                )
            })
            .collect();
        st.names = names.clone();
        st.durable_names = names;
        st.dirs = dirs.clone();
        st.durable_dirs = dirs;
        st.locks.clear();
    }

    /// An independent copy of this disk (volatile and durable images, pending changes).
    /// Handles and locks are not copied.
    pub fn fork(&self) -> SimDisk {
        let st = self.shared.state.lock();
        let copy = SimDisk::new();
        // Its own files, and none of them locked.
        let inodes = st.inodes.iter();
        *copy.shared.state.lock() = State {
            inodes: inodes
                .map(|(&i, inode)| (i, Arc::new(Mutex::new(inode.lock().clone()))))
                .collect(),
            locks: HashMap::new(),
            ..st.clone()
        };
        let capacity = self.shared.capacity.load(Ordering::SeqCst);
        copy.shared.capacity.store(capacity, Ordering::SeqCst);
        copy
    }

    /// The durable bytes of the file at `path` (as a power cut that loses every pending
    /// change would leave them), if its name is durable.
    pub fn durable_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.shared.state.lock();
        let ino = st.durable_names.get(path)?;
        let bytes = st.inodes.get(ino)?.lock().durable.clone();
        Some(bytes)
    }

    /// The bytes reads of `path` see now.
    pub fn file_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.shared.state.lock();
        let ino = st.names.get(path)?;
        let bytes = st.inodes.get(ino)?.lock().data.as_ref().clone();
        Some(bytes)
    }

    /// Names in directory `dir` that are durable.
    pub fn durable_list(&self, dir: &Path) -> Vec<String> {
        let st = self.shared.state.lock();
        st.durable_names
            .keys()
            .filter(|p| parent_of(p) == dir)
            .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
            .collect()
    }

    /// Creates (or replaces) the file at `path` with `bytes`, durably, creating its
    /// directories durably too: for building a disk image (fuzzing, foreign files).
    pub fn write_durable(&self, path: &Path, bytes: &[u8]) {
        let mut st = self.shared.state.lock();
        for d in path.ancestors().skip(1).take_while(|d| !is_root(d)) {
            st.dirs.insert(d.to_path_buf());
            st.durable_dirs.insert(d.to_path_buf());
        }
        let ino = st.new_inode(Inode::settled(bytes.to_vec()));
        st.names.insert(path.to_path_buf(), ino);
        st.durable_names.insert(path.to_path_buf(), ino);
    }

    /// Flips bit `bit` of the file at `path` in both images (bit rot of the medium, seen at
    /// once by new reads). Returns false when the file or the bit does not exist.
    pub fn flip_durable_bit(&self, path: &Path, bit: u64) -> bool {
        let st = self.shared.state.lock();
        let Some(inode) = st.durable_names.get(path).and_then(|i| st.inodes.get(i)) else {
            return false;
        };
        let mut inode = inode.lock();
        let byte = (bit / 8) as usize;
        if byte >= inode.durable.len() {
            return false;
        }
        inode.durable[byte] ^= 1 << (bit % 8);
        let data = Arc::make_mut(&mut inode.data);
        if byte < data.len() {
            data[byte] ^= 1 << (bit % 8);
        }
        true
    }

    fn check_epoch(&self, epoch: u64) -> io::Result<()> {
        if self.shared.epoch.load(Ordering::SeqCst) != epoch {
            return Err(io::Error::other(
                "handle opened before a simulated power cut",
            ));
        }
        Ok(())
    }
}
