//! Recovery at open: list the directory, check every segment's header and scan its
//! records, truncate a torn tail, remove leftovers, and report (or, in quarantine mode,
//! skip) damaged committed data. See `docs/FORMAT.md` for the rules the scan follows.
//!
//! A read-only scan ([`recover`] with `read_only`, for a snapshot of a store another
//! process may hold) opens every file read-only and changes nothing: a torn tail is where
//! the snapshot ends, leftovers stay, no segment is created, sealed, grown or synced.
//!
//! Nothing is changed on disk before every segment's header has been read: a segment of a
//! newer format version than the log's, or of a development build before release 0.1.0, is
//! [`Error::UnsupportedFormat`] with the directory left as it was. An active segment of an
//! older version (a store of an earlier release) is sealed as it is, and a new active
//! segment of the log's version started after it.
//!
//! The store's identity (format version 2 on): every segment header names the store's id
//! and the segment's sequence number. The store's id is the one most of its segments name
//! (a tie goes to the id the newest checkpoint names, [`LogOptions::checkpoints`], then to the
//! later segment's); a segment naming another is [`CorruptionKind::Foreign`], refused by a
//! strict open and quarantined whole (never read) otherwise. A store without one (all its
//! segments of version 1, or none) gets a new random id when it is opened to write.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{LogOptions, RecoveryMode, CONTROL_SOCKET, LOCK_FILE, MAX_BASE, MAX_SEGMENT_SIZE};
use crate::error::{CorruptionKind, Error, IoContext, Result};
use crate::storage::format::{self, HeaderError, SegmentHeader};
use crate::storage::segment::{self, Segment};
use crate::storage::tail_hint;
use crate::storage::vfs::{write_zeros, Vfs, VfsFile};

/// A torn write found and removed at open.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TornTail {
    /// The segment it was in.
    pub path: PathBuf,
    /// File offset where the dropped bytes began.
    pub offset: u64,
    /// How many bytes were dropped: from `offset` to the last non-zero byte of the file.
    pub dropped_bytes: u64,
    /// Whole records (frames that passed their checksum) dropped with them: written after
    /// the torn one, and never proved durable (see `docs/FORMAT.md`).
    pub dropped_records: u64,
}

/// A damaged range skipped under [`RecoveryMode::Quarantine`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuarantinedRange {
    /// The segment.
    pub path: PathBuf,
    /// What is wrong.
    pub kind: CorruptionKind,
    /// First log position of the range.
    pub start: u64,
    /// Log position just past the range.
    pub end: u64,
}

impl QuarantinedRange {
    /// True for a range no open segment holds (a whole entry quarantined, or a lost tail
    /// past the last segment): reads inside it are answered by the log itself.
    pub(super) fn is_outside_segments(&self) -> bool {
        matches!(
            self.kind,
            CorruptionKind::BadHeader
                | CorruptionKind::NotASegment
                | CorruptionKind::Foreign { .. }
                | CorruptionKind::LostTail { .. }
                | CorruptionKind::MissingSegments { .. }
        )
    }
}

/// What opening the log found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// Segments opened.
    pub segments: usize,
    /// Valid records found.
    pub records: u64,
    /// A torn tail that was truncated, if any.
    pub torn_tail: Option<TornTail>,
    /// Damaged ranges skipped (only under [`RecoveryMode::Quarantine`]).
    pub quarantined: Vec<QuarantinedRange>,
    /// Leftover temporary files from an interrupted segment creation, removed.
    pub removed_temp_files: Vec<String>,
    /// Files that are not the log's, left untouched.
    pub ignored_files: Vec<String>,
    /// The segment this open created to append to (none was usable: a new log, a cut, an
    /// older format's or a quarantined last segment), if it did. An open of the store that
    /// fails after the log's recovery removes it again, so a failed open leaves no new
    /// segment behind.
    pub created_segment: Option<PathBuf>,
    /// The store's id (see `docs/FORMAT.md`, store identity): the one its segments name,
    /// or, for a store that had none (of format version 1 only, or new), the one this open
    /// gave it. `None` only for a read-only snapshot of a store that has none.
    pub store_id: Option<u128>,
}

/// What the header pass found under one segment name.
enum Entry {
    /// A segment with a valid header of a version this build reads.
    Good {
        path: PathBuf,
        file: Arc<dyn VfsFile>,
        len: u64,
        header: SegmentHeader,
    },
    /// Not a segment: a bad header (an empty or zero-filled file included: a `.seg` name
    /// always has a durable header), or not a regular file at all.
    Bad {
        path: PathBuf,
        kind: CorruptionKind,
        len: u64,
    },
}

/// The longest header read at the header pass: a newer version's may be this long.
const HEADER_READ: usize = 4096;

/// Opens the entry named like the segment at `base` and reads its header. An intact header
/// of a format this build does not read (a newer version, a development build's) is
/// [`Error::UnsupportedFormat`].
fn read_entry(
    fs: &dyn Vfs,
    dir: &Path,
    base: u64,
    opts: &LogOptions,
    read_only: bool,
) -> Result<Entry> {
    let path = dir.join(segment::segment_name(base));
    let file = match fs.open(&path, read_only) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::IsADirectory => {
            return Ok(Entry::Bad {
                path,
                kind: CorruptionKind::NotASegment,
                len: 0,
            });
        }
        Err(e) => return Err(Error::io("open", &path, e)),
    };
    let len = file.len().io("stat", &path)?;
    let mut head = vec![0u8; (len as usize).min(HEADER_READ)];
    segment::read_exact_at(file.as_ref(), &mut head, 0).io("read", &path)?;
    Ok(
        match format::decode_segment_header(&head, opts.format_version) {
            // Positions stay below 2^63, so position arithmetic can never overflow.
            Ok(header) if header.base == base && base <= MAX_BASE => Entry::Good {
                path,
                file,
                len,
                header,
            },
            Err(e @ (HeaderError::Newer(found) | HeaderError::PreRelease(found))) => {
                return Err(Error::UnsupportedFormat {
                    path,
                    found,
                    supported: opts.format_version,
                    pre_release: matches!(e, HeaderError::PreRelease(_)),
                });
            }
            _ => Entry::Bad {
                path,
                kind: CorruptionKind::BadHeader,
                len,
            },
        },
    )
}

/// The store's id, from the segments' headers: the id most of them name; a tie goes to
/// `checkpoint`'s (the id the newest checkpoint names) when it is among the tied, else to
/// the id of the later segment. Without a segment that names one, `checkpoint`'s.
fn store_id_of(entries: &[Entry], checkpoint: Option<u128>) -> Option<u128> {
    let mut votes: BTreeMap<u128, (usize, usize)> = BTreeMap::new();
    for (i, entry) in entries.iter().enumerate() {
        if let Entry::Good { header, .. } = entry {
            if header.has_identity() {
                let v = votes.entry(header.store_id).or_default();
                *v = (v.0 + 1, i);
            }
        }
    }
    let most = votes.values().map(|v| v.0).max();
    let Some(most) = most else {
        return checkpoint;
    };
    if let Some(id) = checkpoint.filter(|id| votes.get(id).is_some_and(|v| v.0 == most)) {
        return Some(id);
    }
    votes
        .iter()
        .filter(|(_, v)| v.0 == most)
        .max_by_key(|(_, v)| v.1)
        .map(|(&id, _)| id)
}

/// What recovery hands the log: the segments, the report, and the bound of the active
/// segment's tail hint when it keeps one (see `storage/tail_hint.rs`).
pub(super) type Recovered = (BTreeMap<u64, Arc<Segment>>, RecoveryReport, Option<u64>);

/// Scans the directory, verifies every segment and returns them ready to use (to read
/// only, when `read_only`: see the module documentation).
pub(super) fn recover(
    fs: &dyn Vfs,
    dir: &Path,
    opts: &LogOptions,
    read_only: bool,
) -> Result<Recovered> {
    let mut report = RecoveryReport::default();
    let names = fs.list(dir).io("list", dir)?;
    let mut bases = Vec::new();
    let mut temp_files = Vec::new();
    for name in names {
        if let Some(base) = segment::parse_segment_name(&name) {
            bases.push(base);
        } else if segment::parse_temp_name(&name).is_some() || name == segment::SPARE_NAME {
            // Removed once every segment's header has been checked.
            temp_files.push(name);
        } else if name != LOCK_FILE && name != CONTROL_SOCKET {
            report.ignored_files.push(name);
        }
    }
    bases.sort_unstable();
    let strict = opts.recovery == RecoveryMode::Strict;
    let corrupt = |kind, path: &Path, offset| Error::corrupt_file(kind, path, offset);
    // Every header first, in base order: a format this build does not read anywhere is
    // refused (`read_entry`), and a stray entry or a bad header is reported against itself,
    // before any segment's boundary with its successor is judged and before anything is
    // changed.
    let mut entries = Vec::with_capacity(bases.len());
    for &base in &bases {
        entries.push(read_entry(fs, dir, base, opts, read_only)?);
    }
    let newest_checkpoint = opts.checkpoints.last().and_then(|m| m.store_id);
    let store_id = store_id_of(&entries, newest_checkpoint).or_else(|| {
        // A store without an id (version 1 only, or new) gets one when it is opened to
        // write: its new active segment carries it.
        (!read_only).then(crate::rng::random_u128)
    });
    report.store_id = store_id;
    // The log made durable every position a checkpoint of this store covers, and held
    // every segment number one names.
    let own = || {
        opts.checkpoints
            .iter()
            .filter(|m| m.store_id.is_none() || m.store_id == store_id)
    };
    let high_water = own().map(|m| m.position).fold(opts.high_water, u64::max);
    let high_seq = own().filter_map(|m| m.seq).max();
    // Another store's segments are never read as this one's.
    for entry in &mut entries {
        if let Entry::Good { path, header, .. } = entry {
            if let Some(expected) =
                store_id.filter(|&id| header.has_identity() && header.store_id != id)
            {
                let kind = CorruptionKind::Foreign {
                    expected,
                    found: header.store_id,
                };
                *entry = Entry::Bad {
                    path: path.clone(),
                    kind,
                    len: 0,
                };
            }
        }
    }
    // The highest sequence number of the store's segments: the next one created follows it,
    // and it must reach the highest one a checkpoint names.
    let last_seq = entries
        .iter()
        .filter_map(|e| match e {
            Entry::Good { header, .. } if header.has_identity() => Some(header.seq),
            _ => None,
        })
        .max();
    // An entry after the last of them whose header is lost (quarantine steps past it) may
    // have had the next numbers: they are not given again either.
    let unknown_numbers = entries
        .iter()
        .rev()
        .take_while(|e| !matches!(e, Entry::Good { header, .. } if header.has_identity()))
        .filter(|e| {
            matches!(e, Entry::Bad { kind, .. } if !matches!(kind, CorruptionKind::Foreign { .. }))
        })
        .count() as u64;
    let lost_segments = high_seq
        .filter(|&named| last_seq.is_none_or(|have| have < named))
        .map(|named| CorruptionKind::MissingSegments {
            first: last_seq.map_or(named, |have| have + 1),
            last: named,
        });
    if strict {
        if let Some((path, kind, offset)) = entries.iter().find_map(|e| match e {
            Entry::Bad { path, kind, .. } => Some((path.clone(), *kind, 0)),
            Entry::Good {
                path, len, header, ..
            } if *len < header.size => {
                let kind = CorruptionKind::ShortSegment {
                    expected: header.size,
                    actual: *len,
                };
                Some((path.clone(), kind, *len))
            }
            _ => None,
        }) {
            return Err(corrupt(kind, &path, offset));
        }
    }
    // The last segment's tail hint: no byte at or past its bound was ever written, so the
    // scan of that segment reads only up to it (when the records then end cleanly).
    let hint = bases
        .last()
        .and_then(|&base| Some((base, tail_hint::read(fs, dir, base)?)));
    let mut segments = BTreeMap::new();
    // Lowest position a new active segment may start at.
    let mut next_free = 0u64;
    // True when the last segment was cut: it is sealed, and a new one started after it.
    let mut last_is_short = false;
    for (i, entry) in entries.into_iter().enumerate() {
        let base = bases[i];
        let is_last = i + 1 == bases.len();
        let (path, file, len, header) = match entry {
            Entry::Good {
                path,
                file,
                len,
                header,
            } => (path, file, len, header),
            Entry::Bad { path, kind, len } => {
                // Quarantine (strict returned above). It cannot step past a damaged file
                // that claims positions beyond the largest base: the log could not continue
                // after it.
                if base > MAX_BASE {
                    return Err(corrupt(kind, &path, 0));
                }
                // Its header, and the size it declared, are lost: the last entry may have
                // held any position up to the largest segment a log creates.
                let end = bases
                    .get(i + 1)
                    .copied()
                    .unwrap_or(base + MAX_SEGMENT_SIZE.max(len));
                // Never reuse the damaged entry's name for a new segment.
                next_free = next_free.max(end).max(base + 1);
                report.quarantined.push(QuarantinedRange {
                    path,
                    kind,
                    start: base,
                    end,
                });
                continue;
            }
        };
        let (version, declared) = (header.version, header.size);
        // Its records start after its header, whose length is its version's.
        let header_len = header.len() as u64;
        // A segment cut short (quarantine: strict returned above) is sealed where its
        // declared size ends, whether or not it was the last one.
        let short = (len < declared).then_some(declared);
        // The common case (records, then zeros) is read in small pieces; anything else is
        // scanned whole: mapped, or for a snapshot read into a private copy, since the owner
        // may be writing past its last record while the scan looks (see `storage/mmap.rs`).
        let data_len = len.saturating_sub(header_len);
        let sealed = !is_last || short.is_some();
        // Behind the hint's bound every byte is zero (storage/tail_hint.rs): the clean scan
        // stops a little past it, after checking that no frame header starts at the bound
        // either (a cheap check of the claim itself). Anything but a clean end before it is
        // left to the whole scan.
        let zero_from = match hint {
            Some((b, bound)) if b == base && !sealed => {
                tail_hint::read_limit(header_len, bound, data_len)
            }
            _ => data_len,
        };
        // A frame is judged by the segment's own size (its header's), never by the
        // opener's record limit: a writer with a larger limit may have written it.
        let max_body = format::max_body_in(declared.max(len), header.len());
        let clean = segment::scan_clean(file.as_ref(), header_len, base, zero_from, max_body)
            .io("read", &path)?;
        let scan = match clean {
            Some(scan) => scan,
            None if read_only => {
                let mut data = vec![0u8; data_len as usize];
                segment::read_exact_at(file.as_ref(), &mut data, header_len).io("read", &path)?;
                segment::scan(&data, base, max_body, sealed)
            }
            None => {
                let view = file.map().io("mmap", &path)?;
                let data = view.range(header.len(), view.len()).unwrap_or(&[]);
                segment::scan(data, base, max_body, sealed)
            }
        };
        let mut quarantined = Vec::new();
        for &(s, e) in &scan.damaged {
            if strict {
                return Err(corrupt(CorruptionKind::BadRecord, &path, header_len + s));
            }
            quarantined.push((s, e));
            report.quarantined.push(QuarantinedRange {
                path: path.clone(),
                kind: CorruptionKind::BadRecord,
                start: base + s,
                end: base + e,
            });
        }
        report.records += scan.records;
        let mut end = scan.end;
        let sealed_end = match bases.get(i + 1) {
            Some(&next) => Some(next.saturating_sub(base)),
            None => short.map(|d| d - header_len),
        };
        let capacity = if let Some(expected) = sealed_end {
            last_is_short = is_last;
            if end != expected {
                // A file shorter than its header declares: it was cut. Records running past
                // the next segment's base: the sequence overlaps. A bad frame ending the
                // data: damage. Data that ends cleanly before the successor's base: a
                // segment between is missing.
                let kind = if let Some(d) = short.filter(|_| end < expected) {
                    CorruptionKind::ShortSegment {
                        expected: d,
                        actual: len,
                    }
                } else if end > expected {
                    CorruptionKind::MissingSegment
                } else if scan.torn_at.is_some() {
                    CorruptionKind::BadRecord
                } else {
                    // The positions between are in no segment: the segments that held
                    // them are gone.
                    CorruptionKind::MissingRange {
                        start: base + end,
                        end: base + expected,
                    }
                };
                if strict {
                    return Err(corrupt(kind, &path, header_len + end.min(expected)));
                }
                if end < expected {
                    quarantined.push((end, expected));
                }
                report.quarantined.push(QuarantinedRange {
                    path: path.clone(),
                    kind,
                    start: base + end.min(expected),
                    end: base + end.max(expected),
                });
                end = expected;
            }
            len.saturating_sub(header_len).max(end)
        } else {
            // The last segment: cut a torn tail, make sure it has room, sync what it holds. Not
            // before checking that its records reach the durable high-water mark.
            let kept = scan.torn_at.unwrap_or(end);
            if strict && base + kept < high_water {
                let kind = CorruptionKind::LostTail {
                    expected: high_water,
                    actual: base + kept,
                };
                return Err(corrupt(kind, &path, header_len + kept));
            }
            // The positions may not show it (a checkpoint written when the lost segment
            // was new and empty): the numbers do.
            if let Some(kind) = lost_segments.filter(|_| strict) {
                return Err(corrupt(kind, &path, 0));
            }
            if read_only {
                // A snapshot ends where the valid records end: a torn tail may be a record the
                // owner is writing right now.
                end = scan.torn_at.unwrap_or(end);
                len.saturating_sub(header_len).max(end)
            } else {
                if let Some(torn) = scan.torn_at {
                    // Zeroed in place, never truncated: a segment is never shorter than its
                    // declared size, even if this open is interrupted here (the next one finds
                    // zeros, or the rest of the same torn tail).
                    let at = header_len + torn;
                    write_zeros(file.as_ref(), at, at + scan.torn_bytes)
                        .io("zero torn tail", &path)?;
                    report.torn_tail = Some(TornTail {
                        path: path.clone(),
                        offset: at,
                        dropped_bytes: scan.torn_bytes,
                        dropped_records: scan.torn_records,
                    });
                    end = torn;
                }
                let size = declared.max(len);
                let current = file.len().io("stat", &path)?;
                if current < size {
                    let grown = if opts.preallocate {
                        file.allocate(size)
                    } else {
                        file.set_len(size)
                    };
                    grown.io("preallocate", &path)?;
                }
                file.sync().io("fsync", &path)?;
                if version < opts.format_version && end == 0 {
                    // An empty active segment of an older version: replaced below by one of the
                    // log's version under the same name.
                    next_free = next_free.max(base);
                    continue;
                }
                size - header_len
            }
        };
        let seg = Segment::new(
            base,
            version,
            header.seq,
            path,
            file,
            capacity,
            end,
            quarantined,
        )?;
        segments.insert(base, Arc::new(seg));
    }
    report.segments = segments.len();
    if read_only {
        return Ok((segments, report, None));
    }
    // A new active segment is needed when none is left (none at all, the last one
    // removed, replaced or quarantined) or when the last one holds records of an older
    // format version: it is then sealed as it is (its data ends where the new one begins).
    let log_end = segments
        .values()
        .next_back()
        .map(|s| s.end_position())
        .unwrap_or(0)
        .max(next_free);
    // A log that ends before its durable high-water mark lost its tail (strict: refused
    // below, or above when segments are left). Appends resume past the mark.
    let lost_tail = log_end < high_water;
    let needs_active = lost_tail
        || lost_segments.is_some()
        || last_is_short
        || match segments.values().next_back() {
            None => true,
            Some(last) => {
                last.base != *bases.last().unwrap_or(&u64::MAX)
                    || last.version < opts.format_version
            }
        };
    // The hint stays with the segment it describes if that segment stays active; every
    // other file named like a temporary segment goes.
    let kept_hint = hint.filter(|_| !needs_active);
    let kept_name = kept_hint.map(|(base, _)| tail_hint::hint_name(base));
    for name in temp_files {
        if Some(&name) == kept_name.as_ref() {
            continue;
        }
        let path = dir.join(&name);
        fs.remove(&path).io("remove", &path)?;
        report.removed_temp_files.push(name);
    }
    // Make the directory durable as it is now. A name an earlier process created or renamed
    // (a segment, a checkpoint slot) whose directory sync failed, or that died before it, is
    // in the listing but could still vanish at a power cut: nothing may be appended to it or
    // relied on until it is durable.
    fs.sync_dir(dir).io("fsync dir", dir)?;
    if lost_tail {
        let path = segments
            .values()
            .next_back()
            .map_or_else(|| dir.to_path_buf(), |s| s.path.clone());
        let kind = CorruptionKind::LostTail {
            expected: high_water,
            actual: log_end,
        };
        if strict {
            return Err(corrupt(kind, &path, 0));
        }
        report.quarantined.push(QuarantinedRange {
            path,
            kind,
            start: log_end,
            end: high_water,
        });
    }
    // Past the lost segments: each held at most the largest segment a log creates, so
    // positions (and the ids skipped past the range) never go backwards.
    let mut resume = log_end.max(high_water);
    if let Some(kind @ CorruptionKind::MissingSegments { first, last }) = lost_segments {
        let path = segments
            .values()
            .next_back()
            .map_or_else(|| dir.to_path_buf(), |s| s.path.clone());
        if strict {
            return Err(corrupt(kind, &path, 0));
        }
        let end = resume.saturating_add((last - first + 1).saturating_mul(MAX_SEGMENT_SIZE));
        report.quarantined.push(QuarantinedRange {
            path,
            kind,
            start: resume,
            end,
        });
        resume = end;
    }
    if needs_active {
        let base = resume;
        // The store's next segment: its id, the sequence number after the highest one
        // (a quarantined segment's number is never given again: it was lower), and after
        // every one a checkpoint names (a lost segment's).
        let seq = last_seq.max(high_seq).map_or(0, |s| s + 1) + unknown_numbers;
        // A segment the log starts is small; rolls grow the next ones.
        let size = opts.start_size();
        let header = SegmentHeader::new(base, opts.format_version, size)
            .identified(store_id.unwrap_or_default(), seq);
        let file = segment::create(fs, dir, header, size, opts.preallocate)?;
        let seg = Segment::new(
            base,
            header.version,
            seq,
            dir.join(segment::segment_name(base)),
            file,
            size - header.len() as u64,
            0,
            Vec::new(),
        )?;
        segments.insert(base, Arc::new(seg));
        report.segments = segments.len();
        report.created_segment = Some(dir.join(segment::segment_name(base)));
    }
    Ok((segments, report, kept_hint.map(|(_, bound)| bound)))
}
