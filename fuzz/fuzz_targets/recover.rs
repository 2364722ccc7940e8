//! Recovery of an arbitrary store directory image.
//!
//! The input describes a directory (several segment files with any names and bases, leftover
//! temporary and spare files, checkpoint slots, foreign files), either raw (mode 0), or as a
//! valid store built by the library and then damaged (mode 1: bit flips, truncations, removed
//! and duplicated files, garbage files), or as one of the compatibility fixture stores
//! (`tests/fixtures/v*/store`, one per released format version and the next one's, with
//! relocated records and checkpoints) damaged the same way (mode 2). The image is written into a `SimDisk`, then
//! opened as a `Log` and as a `Store` under both recovery modes. Nothing may panic, and every
//! record the log returns must pass a CRC computed here, independently of the library's frame
//! codec, over the bytes of the file it came from.

#![no_main]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use deadletter::clock::ManualClock;
use deadletter::recovery::RecoveryMode;
use deadletter::sim::inspect::census;
use deadletter::sim::{Log, LogOptions, SimDisk, SimRng, Vfs};
use deadletter::store::{CompactionOptions, Durability};
use deadletter::{Config, Store};
use libfuzzer_sys::fuzz_target;

const DIR: &str = "/store";
const SEGMENT: u64 = 80 << 10;

fn independent_crc(pos: u64, frame: &[u8]) -> Option<(u32, u32)> {
    let len = u32::from_le_bytes(frame.get(0..4)?.try_into().ok()?);
    let stored = u32::from_le_bytes(frame.get(4..8)?.try_into().ok()?);
    let body = frame.get(16..16 + len as usize)?;
    let mut h = crc32fast::Hasher::new();
    h.update(&pos.to_le_bytes());
    h.update(&frame[0..4]);
    h.update(&frame[8..16]);
    h.update(body);
    Some((h.finalize(), stored))
}

/// A small reader of the fuzz input.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }
    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |acc, i| acc | (self.byte() as u64) << (8 * i))
    }
    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn name_for(kind: u8, input: &mut Input) -> String {
    match kind % 8 {
        0..=2 => deadletter::sim::segment_name(input.u64() % (1 << 40)),
        3 => deadletter::sim::temp_name(input.u64() % (1 << 40)),
        4 => "checkpoint-0".into(),
        5 => "checkpoint-1".into(),
        6 => deadletter::sim::SPARE_NAME.into(),
        _ => "notes.txt".into(),
    }
}

/// Mode 0: files written as the input says.
fn raw_image(disk: &SimDisk, input: &mut Input) {
    let mut base = 0u64;
    while !input.is_empty() {
        let kind = input.byte();
        let len = input.u16() as usize;
        let name = if kind & 0x80 != 0 {
            // A segment that continues the previous one, so the sequence checks pass.
            let n = deadletter::sim::segment_name(base);
            let header = deadletter::sim::header_len(deadletter::store::FORMAT_VERSION);
            base += len.saturating_sub(header) as u64;
            n
        } else {
            name_for(kind, input)
        };
        let bytes = input.take(len).to_vec();
        disk.write_durable(&Path::new(DIR).join(name), &bytes);
    }
}

fn config(disk: &SimDisk, recovery: RecoveryMode) -> Config {
    Config::default().durability(Durability::Always).segment_size(SEGMENT).max_message_size(8 << 10).recovery(recovery).compaction(CompactionOptions::default().interval(None))
    .vfs(Arc::new(disk.clone()))
    .clock(ManualClock::new(1_700_000_000_000))
}

/// The fixture stores, read once: for each, its files' names and bytes.
fn fixture_stores() -> &'static [Vec<(String, Vec<u8>)>] {
    static STORES: OnceLock<Vec<Vec<(String, Vec<u8>)>>> = OnceLock::new();
    STORES.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
            .expect("tests/fixtures")
            .map(|e| e.expect("an entry").path().join("store"))
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        dirs.iter()
            .map(|dir| {
                let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
                    .expect("a fixture store")
                    .map(|e| {
                        let e = e.expect("a file");
                        let bytes = std::fs::read(e.path()).expect("readable");
                        (e.file_name().to_string_lossy().into_owned(), bytes)
                    })
                    .collect();
                files.sort();
                files
            })
            .collect()
    })
}

/// Mode 2: a fixture store, then damage.
fn damaged_fixture(disk: &SimDisk, input: &mut Input) {
    let stores = fixture_stores();
    let store = &stores[input.byte() as usize % stores.len()];
    for (name, bytes) in store {
        disk.write_durable(&Path::new(DIR).join(name), bytes);
    }
    damage(disk, input);
}

/// Mode 1: a valid store, then damage.
fn damaged_store(disk: &SimDisk, input: &mut Input) {
    {
        let Ok(store) = Store::open(DIR, config(disk, RecoveryMode::Strict)) else {
            return;
        };
        let Ok(q) = store.queue("q") else { return };
        let mut rng = SimRng::new(input.u64());
        let rounds = input.byte() % 40;
        for _ in 0..rounds {
            match input.byte() % 6 {
                0 | 1 => {
                    let n = rng.range(1, 6000) as usize;
                    let _ = q.enqueue(rng.bytes(n));
                }
                2 => {
                    if let Ok(msgs) = q.lease(3) {
                        let _ = q.ack_all(&msgs);
                    }
                }
                3 => {
                    if let Ok(msgs) = q.lease(1) {
                        for m in msgs {
                            let f = deadletter::Failure::permanent("E", "e");
                            let _ = q.dead_letter(&m, &deadletter::queue::FailureReport::new(&f));
                        }
                    }
                }
                4 => {
                    let _ = store.compact_now();
                }
                _ => {
                    let batch: Vec<Vec<u8>> = (0..rng.range(1, 12))
                        .map(|_| {
                            let n = rng.range(1, 4000) as usize;
                            rng.bytes(n)
                        })
                        .collect();
                    let _ = q.enqueue_batch(&batch);
                }
            }
        }
    }
    damage(disk, input);
}

/// Damages the store image as the rest of the input says: bit flips, truncations, removed
/// files, copies under other names.
fn damage(disk: &SimDisk, input: &mut Input) {
    let dir = PathBuf::from(DIR);
    while !input.is_empty() {
        let names = disk.durable_list(&dir);
        if names.is_empty() {
            return;
        }
        let name = names[input.byte() as usize % names.len()].clone();
        let path = dir.join(&name);
        let Some(bytes) = disk.durable_bytes(&path) else { continue };
        match input.byte() % 5 {
            0 | 1 => {
                let bit = input.u64() % (bytes.len() as u64 * 8).max(1);
                disk.flip_durable_bit(&path, bit);
            }
            2 => {
                let at = input.u64() as usize % (bytes.len() + 1);
                disk.write_durable(&path, &bytes[..at]);
            }
            3 => {
                let _ = disk.remove(&path);
                let _ = disk.sync_dir(&dir);
            }
            _ => {
                let other = name_for(input.byte(), input);
                disk.write_durable(&dir.join(other), &bytes);
            }
        }
    }
}

fn check_log(disk: &SimDisk, recovery: RecoveryMode) {
    let opts = LogOptions {
        segment_size: SEGMENT,
        max_record_size: (8 << 10) + (64 << 10),
        recovery,
        ..LogOptions::default()
    };
    let Ok((log, _report)) = Log::open_with(Arc::new(disk.clone()), DIR, opts) else {
        return;
    };
    let segments = log.segments();
    let Ok(iter) = log.iter_from(0) else { return };
    for item in iter.take(10_000) {
        let Ok((pos, body)) = item else { break };
        let seg = segments
            .iter()
            .find(|s| pos >= s.base && pos < s.end)
            .expect("a record lies in a segment");
        let file = disk.file_bytes(&seg.path).expect("its file exists");
        // Records start after the header, whose length its bytes 10..12 say.
        let header = u16::from_le_bytes([file[10], file[11]]) as usize;
        let at = header + (pos - seg.base) as usize;
        let frame = &file[at..];
        let (computed, stored) = independent_crc(pos, frame).expect("a whole frame");
        assert_eq!(computed, stored, "record at {pos} fails its checksum");
        assert_eq!(&frame[16..16 + body.len()], &*body);
        // Reading it again by position gives the same bytes.
        assert_eq!(&*log.read(pos).expect("readable"), &*body);
    }
}

fn check_store(disk: &SimDisk, recovery: RecoveryMode) {
    if let Ok(store) = Store::open(DIR, config(disk, recovery)) {
        let _ = census(&store);
        for name in store.queue_names() {
            if let Ok(dlq) = store.dlq(&name) {
                let _ = dlq.list(&deadletter::Filter::all(), deadletter::Page::first(50));
                let _ = dlq.stats();
            }
            if let Ok(q) = store.existing_queue(&name) {
                let _ = q.lease_for(10, Duration::from_secs(1));
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let disk = SimDisk::new();
    disk.create_dir_all(Path::new(DIR)).unwrap();
    disk.sync_dir(Path::new("/")).unwrap();
    match input.byte() % 3 {
        0 => raw_image(&disk, &mut input),
        1 => damaged_store(&disk, &mut input),
        _ => damaged_fixture(&disk, &mut input),
    }
    for mode in [RecoveryMode::Strict, RecoveryMode::Quarantine] {
        check_log(&disk.fork(), mode);
        check_store(&disk.fork(), mode);
    }
});
