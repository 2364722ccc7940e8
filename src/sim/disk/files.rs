//! The [`Vfs`] and [`VfsFile`] implementations of [`SimDisk`]: every operation reads and
//! changes the volatile image and queues what a sync or a directory sync makes durable.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;

use super::*;
use crate::storage::vfs::{LockGuard, MappedView, Vfs, VfsFile};

impl SimDisk {
    fn handle(&self, path: &Path, inode: Arc<Mutex<Inode>>, read_only: bool) -> Arc<dyn VfsFile> {
        Arc::new(SimFile {
            disk: self.clone(),
            inode,
            epoch: self.shared.epoch.load(Ordering::SeqCst),
            read_only,
            path: path.to_path_buf(),
        })
    }
}

struct SimFile {
    disk: SimDisk,
    inode: Arc<Mutex<Inode>>,
    epoch: u64,
    read_only: bool,
    path: PathBuf,
}

struct Snapshot(Arc<Vec<u8>>);

impl MappedView for Snapshot {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn range(&self, start: usize, end: usize) -> Option<&[u8]> {
        self.0.get(start..end)
    }
    fn is_live(&self) -> bool {
        false
    }
}

impl SimFile {
    fn writable(&self) -> io::Result<()> {
        self.disk.check_epoch(self.epoch)?;
        if self.read_only {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{} is open read-only", self.path.display()),
            ));
        }
        Ok(())
    }
}

impl VfsFile for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.disk.check_epoch(self.epoch)?;
        let inode = self.inode.lock();
        let data = &inode.data;
        if offset >= data.len() as u64 {
            return Ok(0);
        }
        let n = buf.len().min(data.len() - offset as usize);
        buf[..n].copy_from_slice(&data[offset as usize..offset as usize + n]);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.writable()?;
        self.disk.shared.writes.fetch_add(1, Ordering::Relaxed);
        if buf.is_empty() {
            return Ok(());
        }
        let len = self.inode.lock().data.len() as u64;
        self.disk
            .room_for((offset + buf.len() as u64).saturating_sub(len))?;
        let mut inode = self.inode.lock();
        let data = Arc::make_mut(&mut inode.data);
        let end = offset as usize + buf.len();
        if data.len() < end {
            data.resize(end, 0);
        }
        data[offset as usize..end].copy_from_slice(buf);
        inode.pending.push(Pending::Write {
            offset,
            data: buf.to_vec(),
        });
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        self.disk.check_epoch(self.epoch)?;
        self.disk.shared.syncs.fetch_add(1, Ordering::Relaxed);
        let mut inode = self.inode.lock();
        inode.durable = inode.data.as_ref().clone();
        inode.pending.clear();
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.writable()?;
        let now = self.inode.lock().data.len() as u64;
        self.disk.room_for(len.saturating_sub(now))?;
        let mut inode = self.inode.lock();
        Arc::make_mut(&mut inode.data).resize(len as usize, 0);
        inode.pending.push(Pending::SetLen(len));
        Ok(())
    }

    /// Allocation without writing: the disk is charged for the growth, as by `set_len`
    /// (the simulated disk is never sparse), and no write is counted. The length change is
    /// pending until a sync, like any other.
    fn allocate(&self, len: u64) -> io::Result<()> {
        if len <= self.len()? {
            return self.writable();
        }
        self.set_len(len)
    }

    fn len(&self) -> io::Result<u64> {
        self.disk.check_epoch(self.epoch)?;
        Ok(self.inode.lock().data.len() as u64)
    }

    fn map(&self) -> io::Result<Arc<dyn MappedView>> {
        self.disk.check_epoch(self.epoch)?;
        Ok(Arc::new(Snapshot(Arc::clone(&self.inode.lock().data))))
    }
}

struct SimLock {
    disk: SimDisk,
    path: PathBuf,
    token: u64,
}

impl LockGuard for SimLock {}

impl Drop for SimLock {
    fn drop(&mut self) {
        let mut st = self.disk.shared.state.lock();
        if st.locks.get(&self.path) == Some(&self.token) {
            st.locks.remove(&self.path);
        }
    }
}

impl Vfs for SimDisk {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.shared.state.lock();
        let mut chain = Vec::new();
        let mut cur = dir.to_path_buf();
        while !is_root(&cur) && !st.dirs.contains(&cur) {
            if st.names.contains_key(&cur) {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} is a file", cur.display()),
                ));
            }
            chain.push(cur.clone());
            cur = parent_of(&cur);
        }
        for d in chain.into_iter().rev() {
            st.dirs.insert(d.clone());
            st.push_op(parent_of(&d), DirOp::MkDir(d));
        }
        Ok(())
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn VfsFile>> {
        let st = self.shared.state.lock();
        let dir = parent_of(path);
        if !st.dir_exists(&dir) {
            return Err(not_found(&dir));
        }
        if st.dirs.contains(path) {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("{} is a directory", path.display()),
            ));
        }
        if let Some(ino) = st.names.get(path).copied() {
            let inode = Arc::clone(&st.inodes[&ino]);
            {
                let mut i = inode.lock();
                Arc::make_mut(&mut i.data).clear();
                i.pending.push(Pending::SetLen(0));
            }
            return Ok(self.handle(path, inode, false));
        }
        drop(st);
        // A new file needs room for its first byte (a block, on a real disk).
        self.room_for(1)?;
        let mut st = self.shared.state.lock();
        if st.names.contains_key(path) {
            drop(st);
            return self.create(path);
        }
        let ino = st.new_inode(Inode::default());
        st.names.insert(path.to_path_buf(), ino);
        st.push_link(path, ino);
        let inode = Arc::clone(&st.inodes[&ino]);
        Ok(self.handle(path, inode, false))
    }

    fn open(&self, path: &Path, read_only: bool) -> io::Result<Arc<dyn VfsFile>> {
        let st = self.shared.state.lock();
        let ino = *st.names.get(path).ok_or_else(|| not_found(path))?;
        let inode = Arc::clone(&st.inodes[&ino]);
        Ok(self.handle(path, inode, read_only))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.shared.state.lock();
        if !st.dir_exists(&parent_of(to)) {
            return Err(not_found(&parent_of(to)));
        }
        let ino = st.names.remove(from).ok_or_else(|| not_found(from))?;
        st.names.insert(to.to_path_buf(), ino);
        if parent_of(from) == parent_of(to) {
            st.push_op(
                parent_of(from),
                DirOp::Rename {
                    from: from.to_path_buf(),
                    to: to.to_path_buf(),
                    ino,
                },
            );
        } else {
            st.push_unlink(from, ino);
            st.push_link(to, ino);
        }
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut st = self.shared.state.lock();
        let ino = st.names.remove(path).ok_or_else(|| not_found(path))?;
        st.push_unlink(path, ino);
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let st = self.shared.state.lock();
        if !st.dir_exists(dir) {
            return Err(not_found(dir));
        }
        let mut out: Vec<String> = st
            .names
            .keys()
            .chain(st.dirs.iter())
            .filter(|p| parent_of(p) == dir)
            .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
            .collect();
        out.sort();
        Ok(out)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.shared.state.lock();
        if !st.dir_exists(dir) {
            return Err(not_found(dir));
        }
        self.shared.dir_syncs.fetch_add(1, Ordering::Relaxed);
        if self.shared.lying_dir_syncs.load(Ordering::SeqCst) {
            return Ok(());
        }
        if let Some(ops) = st.pending.remove(dir) {
            let State {
                durable_names,
                durable_dirs,
                ..
            } = &mut *st;
            for op in &ops {
                apply_dir_op(durable_names, durable_dirs, op);
            }
        }
        st.collect_garbage();
        Ok(())
    }

    fn allows_background_io(&self) -> bool {
        false
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn LockGuard>> {
        {
            let st = self.shared.state.lock();
            if st.locks.contains_key(path) {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            if !st.dir_exists(&parent_of(path)) {
                return Err(not_found(&parent_of(path)));
            }
        }
        if !self.shared.state.lock().names.contains_key(path) {
            self.create(path)?;
        }
        let mut st = self.shared.state.lock();
        if st.locks.contains_key(path) {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        st.next_token += 1;
        let token = st.next_token;
        st.locks.insert(path.to_path_buf(), token);
        Ok(Box::new(SimLock {
            disk: self.clone(),
            path: path.to_path_buf(),
            token,
        }))
    }
}
