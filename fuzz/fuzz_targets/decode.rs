//! Decodes arbitrary bytes as record frames, as a segment (header + recovery scan), as a
//! segment file that a `Log` opens in both recovery modes, and as a record body and a
//! checkpoint file (the wire codec). Nothing may panic, every record that comes back must
//! pass a checksum computed here, independently of the library's frame codec, and a body or
//! checkpoint that decodes must decode the same once re-encoded.
//!
//! Each input is used twice: as raw bytes, and as the recipe for a well-formed segment (chunks
//! of `length byte, body`) that is then damaged at places the input's last bytes choose, so
//! that the fuzzer reaches the recovery paths behind valid records quickly.

#![no_main]

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use deadletter::recovery::RecoveryMode;
use deadletter::sim::{self, LockGuard, Log, LogOptions, MappedView, RealFs, Vfs, VfsFile};
use deadletter::store::FORMAT_VERSION;
use libfuzzer_sys::fuzz_target;

const MAX_BODY: usize = 4096;

/// The frame checksum as `docs/FORMAT.md` defines it, written out again here.
fn independent_crc(pos: u64, len: u32, synced: u64, body: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&pos.to_le_bytes());
    h.update(&len.to_le_bytes());
    h.update(&synced.to_le_bytes());
    h.update(body);
    h.finalize()
}

/// Checks that the frame at the start of `bytes`, at log position `pos`, is well formed and
/// carries `body`.
fn check_frame_bytes(bytes: &[u8], pos: u64, body: &[u8]) {
    assert!(bytes.len() >= 16 + body.len());
    let len = u32::from_le_bytes(bytes[0..4].try_into().unwrap());
    let stored = u32::from_le_bytes(bytes[4..8].try_into().unwrap());
    let synced = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    assert_eq!(len as usize, body.len());
    assert!(len > 0);
    assert_eq!(&bytes[16..16 + body.len()], body);
    assert_eq!(independent_crc(pos, len, synced, body), stored);
}

fn fuzz_frames(data: &[u8]) {
    for (off, pos) in [(0usize, 0u64), (8, 1234)] {
        if data.len() < off {
            continue;
        }
        let pos = if off == 8 {
            u64::from_le_bytes(data[0..8].try_into().unwrap()) ^ pos
        } else {
            pos
        };
        if let Ok(frame) = sim::decode_frame(&data[off..], pos, MAX_BODY) {
            check_frame_bytes(&data[off..], pos, frame.body);
        }
    }
}

/// Decodes `data` as a record body of every version this build reads, and as a checkpoint.
fn fuzz_wire(data: &[u8]) {
    for version in 1..=FORMAT_VERSION {
        if let Err(e) = sim::check_record_body(version, data) {
            panic!("record body of version {version}: {e}");
        }
    }
    if let Err(e) = sim::check_checkpoint(data) {
        panic!("checkpoint: {e}");
    }
}

/// Scans `data` as a segment; every record the scan counts must check out independently.
fn fuzz_scan(data: &[u8]) {
    let Ok(header) = sim::decode_segment_header(data, FORMAT_VERSION) else {
        return;
    };
    // The header's length is its version's; its checksum closes it.
    let len = header.len();
    let stored = u32::from_le_bytes(data[len - 4..len].try_into().unwrap());
    assert_eq!(crc32fast::hash(&data[..len - 4]), stored);
    let body = &data[len..];
    for sealed in [false, true] {
        let r = sim::scan(body, header.base, MAX_BODY, sealed);
        assert!(r.end as usize <= body.len());
        let mut d = 0usize;
        let mut counted = 0u64;
        while (d as u64) < r.end {
            if let Some(&(_, e)) = r.damaged.iter().find(|&&(s, _)| s as usize == d) {
                d = e as usize;
                continue;
            }
            let frame = sim::decode_frame(&body[d..], header.base + d as u64, MAX_BODY)
                .expect("scan counted a record that does not decode");
            check_frame_bytes(&body[d..], header.base + d as u64, frame.body);
            counted += 1;
            d += frame.len();
        }
        assert_eq!(d as u64, r.end);
        assert_eq!(counted, r.records);
        if let Some(t) = r.torn_at {
            assert!(t as usize <= body.len());
        }
    }
}

/// The real file system without fsync: the durability of these files does not matter here,
/// and skipping it keeps the fuzzer fast.
struct NoSync(RealFs);
struct NoSyncFile(Arc<dyn VfsFile>);

impl VfsFile for NoSyncFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_at(buf, offset)
    }
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn allocate(&self, len: u64) -> io::Result<()> {
        self.0.allocate(len)
    }
    fn len(&self) -> io::Result<u64> {
        self.0.len()
    }
    fn map(&self) -> io::Result<Arc<dyn MappedView>> {
        self.0.map()
    }
}

impl Vfs for NoSync {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.0.create_dir_all(dir)
    }
    fn create(&self, path: &Path) -> io::Result<Arc<dyn VfsFile>> {
        Ok(Arc::new(NoSyncFile(self.0.create(path)?)))
    }
    fn open(&self, path: &Path, read_only: bool) -> io::Result<Arc<dyn VfsFile>> {
        Ok(Arc::new(NoSyncFile(self.0.open(path, read_only)?)))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.0.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.0.remove(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.0.list(dir)
    }
    fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn LockGuard>> {
        self.0.lock(path)
    }
}

/// Where the per-input log directories go: a tmpfs when there is one (durability does not
/// matter here, speed does), else the system's temporary directory.
fn temp_root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let shm = PathBuf::from("/dev/shm");
        if shm.is_dir() {
            shm
        } else {
            std::env::temp_dir()
        }
    })
}

/// Writes `data` as a segment file and opens a log on it in both recovery modes; every
/// record the log returns must check out against the bytes written.
fn fuzz_log(data: &[u8]) {
    if data.len() > 64 << 10 {
        return;
    }
    let header = sim::decode_segment_header(data, FORMAT_VERSION).ok();
    let header_len = header.map_or(0, |h| h.len());
    let base = header
        .map(|h| h.base)
        .unwrap_or(0)
        // Keep a little room below u64::MAX so position arithmetic cannot overflow.
        .min(u64::MAX / 2);
    for recovery in [RecoveryMode::Strict, RecoveryMode::Quarantine] {
        let dir = tempfile::tempdir_in(temp_root()).expect("tempdir");
        let path = dir.path().join(sim::segment_name(base));
        std::fs::write(&path, data).expect("write segment");
        let opts = LogOptions {
            segment_size: 64 << 10,
            max_record_size: MAX_BODY,
            recovery,
            ..LogOptions::default()
        };
        let Ok((log, _report)) = Log::open_with(Arc::new(NoSync(RealFs)), dir.path(), opts) else {
            continue;
        };
        let Ok(iter) = log.iter_from(0) else { continue };
        for item in iter {
            let Ok((pos, rec)) = item else { break };
            let off = header_len + (pos - base) as usize;
            assert!(pos >= base && off + 16 + rec.len() <= data.len());
            check_frame_bytes(&data[off..], pos, &rec);
        }
    }
}

/// Builds a valid segment from `data` (chunks of a length byte and a body; each record's
/// `synced_through` is its own position, as under `Durability::Always` one at a time), then
/// damages it: the last four input bytes pick an offset and an XOR mask.
fn structured(data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < 6 {
        return None;
    }
    let (recipe, tail) = data.split_at(data.len() - 4);
    let base = 4096u64;
    // The header, with the size the segment ends up with, is written once that is known.
    let header_len = sim::header_len(FORMAT_VERSION);
    let mut seg = vec![0u8; header_len];
    let mut i = 0;
    while i < recipe.len() {
        let len = (recipe[i] as usize % 64) + 1;
        let body: Vec<u8> = recipe[i + 1..]
            .iter()
            .copied()
            .chain(std::iter::repeat(0xab))
            .take(len)
            .collect();
        i += 1 + len;
        let pos = base + (seg.len() - header_len) as u64;
        let mut frame = Vec::new();
        sim::encode_frame(&mut frame, pos, &body, pos);
        seg.extend_from_slice(&frame);
    }
    seg.resize(seg.len() + 64, 0);
    let header =
        sim::SegmentHeader::new(base, FORMAT_VERSION, seg.len() as u64).identified(0x5EED, 0);
    seg[..header_len].copy_from_slice(&sim::encode_segment_header(&header));
    let at = u16::from_le_bytes([tail[0], tail[1]]) as usize % seg.len();
    seg[at] ^= tail[2];
    if tail[3] & 1 == 1 {
        // And sometimes cut the file there (shorter than its header declares).
        seg.truncate(at + 1);
    }
    Some(seg)
}

fuzz_target!(|data: &[u8]| {
    fuzz_wire(data);
    fuzz_frames(data);
    fuzz_scan(data);
    fuzz_log(data);
    if let Some(seg) = structured(data) {
        fuzz_scan(&seg);
        fuzz_log(&seg);
    }
});
