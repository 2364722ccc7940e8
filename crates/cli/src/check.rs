//! `verify`: reads every segment read-only through `deadletter::verify::verify` (no lock taken,
//! nothing truncated or removed) and prints what recovery would find, with the on-disk
//! format version of every segment and checkpoint. Exits 1 when it finds damage, or files
//! in a format this build does not read: a newer version (it cannot check those, and the
//! store opens only with a newer deadletter) or a development build's from before release
//! 0.1.0 (which no release opens); a torn tail in the last segment is reported but is not
//! damage (the next open truncates it, as after any crash during a write).

use deadletter::store::FORMAT_VERSION;
use deadletter::verify::{verify_with, HeaderStatus, SegmentReport};

use crate::cli::VerifyArgs;
use crate::error::CliError;
use crate::output::{print, print_json, Table};
use crate::progress::{Progress, Unit};
use crate::store_access;
use crate::timefmt::fmt_bytes;

fn segment_status(s: &SegmentReport) -> String {
    let mut parts = Vec::new();
    match s.header {
        HeaderStatus::Ok => {}
        HeaderStatus::Short => parts.push("header: file too short".to_string()),
        HeaderStatus::BadMagic => parts.push("header: not a deadletter segment".to_string()),
        HeaderStatus::UnsupportedVersion => parts.push(format!(
            "format version {}, newer than this deadletter reads (up to {FORMAT_VERSION}): \
             not checked",
            s.version.map_or("?".to_string(), |v| v.to_string())
        )),
        HeaderStatus::PreRelease => parts.push(format!(
            "written by a development build before release 0.1.0 (its format {}), which no \
             release reads: not checked",
            s.version.map_or("?".to_string(), |v| v.to_string())
        )),
        HeaderStatus::Invalid => parts.push(
            "header: names a format version or header length no deadletter writes".to_string(),
        ),
        HeaderStatus::BadChecksum => parts.push("header: checksum fails".to_string()),
        HeaderStatus::BaseMismatch => {
            parts.push("header: names another position than the file".to_string())
        }
        HeaderStatus::NotAFile | HeaderStatus::Unreadable => parts.push(format!(
            "NOT READABLE: {}",
            s.error.as_deref().unwrap_or("not a regular file")
        )),
        other => parts.push(format!("header: {other:?}")),
    }
    if s.foreign {
        parts.push(format!(
            "FOREIGN: it belongs to another store (store id {}); no open reads it",
            s.store_id.as_deref().unwrap_or("?")
        ));
    }
    if s.empty {
        parts.push("EMPTY: its header is lost".into());
    }
    if let (true, Some(declared)) = (s.is_short(), s.declared_len) {
        parts.push(format!(
            "CUT SHORT: {} bytes of the {declared} its header declares",
            s.file_len
        ));
    }
    for d in &s.damaged {
        parts.push(format!(
            "DAMAGED at byte {} ({} bytes, positions {}..{})",
            d.file_offset,
            d.end - d.start,
            d.start,
            d.end
        ));
    }
    if let Some(t) = &s.torn_tail {
        let what = if s.last { "torn tail" } else { "BAD TAIL" };
        parts.push(format!(
            "{what} at byte {} ({} bytes, {} records)",
            t.file_offset, t.bytes, t.records
        ));
    }
    if parts.is_empty() {
        "ok".into()
    } else {
        parts.join("; ")
    }
}

pub fn verify(args: &VerifyArgs, json: bool) -> Result<(), CliError> {
    // Refuse a mistyped path rather than report "no problems" on an empty directory.
    store_access::check_is_store(&args.dir)?;
    let mut progress: Option<Progress> = None;
    let report = verify_with(&args.dir, |p| {
        let bar =
            progress.get_or_insert_with(|| Progress::new("verifying", p.bytes_total, Unit::Bytes));
        bar.set(p.bytes_done);
    })?;
    if let Some(mut bar) = progress {
        bar.finish();
    }
    let problems = report.problems();
    let newer = report.newer_versions();
    let pre_release = report.pre_release_files();
    if json {
        let mut value = serde_json::to_value(&report)
            .map_err(|e| CliError::Input(format!("cannot encode JSON: {e}")))?;
        if let serde_json::Value::Object(map) = &mut value {
            map.insert("problems".into(), problems.into());
            let listed = |files: &[(&str, u16)]| -> Vec<serde_json::Value> {
                files
                    .iter()
                    .map(|(file, version)| serde_json::json!({"file": file, "version": version}))
                    .collect()
            };
            map.insert("newer_versions".into(), listed(&newer).into());
            map.insert("pre_release_files".into(), listed(&pre_release).into());
            map.insert("clean".into(), report.is_clean().into());
        }
        print_json(&value)?;
    } else {
        let mut t = Table::new(&[
            "SEGMENT",
            ">BASE",
            ">FORMAT",
            ">RECORDS",
            ">RECORD BYTES",
            ">FILE",
            "STATUS",
        ]);
        for s in &report.segments {
            t.row(vec![
                s.file.clone(),
                s.base.to_string(),
                s.version.map_or("-".to_string(), |v| v.to_string()),
                s.records.to_string(),
                fmt_bytes(s.record_bytes),
                fmt_bytes(s.file_len),
                segment_status(s),
            ]);
        }
        let mut text = t.render();
        for b in &report.boundaries {
            let count = match b.missing_segments {
                Some(n) if n > 0 => format!("; {n} segment(s) missing by their numbers"),
                _ => String::new(),
            };
            text.push_str(&format!(
                "BOUNDARY {} -> {}: {:?} (records end at {}, next segment starts at {}{count})\n",
                b.file, b.next_file, b.kind, b.end, b.next_base
            ));
        }
        for c in &report.checkpoints {
            match (&c.position, &c.error, c.version) {
                (Some(_), _, _) if c.foreign => text.push_str(&format!(
                    "checkpoint {}: FOREIGN: it belongs to another store (store id {}); no \
                     open restores it\n",
                    c.file,
                    c.store_id.as_deref().unwrap_or("?")
                )),
                (Some(pos), _, version) => text.push_str(&format!(
                    "checkpoint {}: ok (format version {}), covers positions below {pos}\n",
                    c.file,
                    version.unwrap_or(FORMAT_VERSION)
                )),
                (None, Some(e), _) => {
                    text.push_str(&format!("checkpoint {}: DAMAGED: {e}\n", c.file))
                }
                (None, None, Some(v)) if c.pre_release => text.push_str(&format!(
                    "checkpoint {}: written by a development build before release 0.1.0 (its \
                     format {v}), which no release reads: not checked\n",
                    c.file
                )),
                (None, None, Some(v)) => text.push_str(&format!(
                    "checkpoint {}: format version {v}, newer than this deadletter reads \
                     (up to {FORMAT_VERSION}): not checked\n",
                    c.file
                )),
                (None, None, None) => {}
            }
        }
        if let Some(lost) = &report.lost_tail {
            text.push_str(&format!(
                "LOST TAIL: the log ends at position {}, before position {}, which a \
                 checkpoint shows it had made durable\n",
                lost.actual, lost.expected
            ));
        }
        if let Some(missing) = &report.missing_segments {
            text.push_str(&format!(
                "MISSING SEGMENTS: segments numbered {} to {} are gone; a checkpoint was \
                 written while segment {} existed (the log lost its last segments)\n",
                missing.first, missing.last, missing.last
            ));
        }
        if let Some(missing) = &report.missing_range {
            text.push_str(&format!(
                "MISSING SEGMENTS: the store needs log positions {} to {}, before {}, and no \
                 segment holds them\n",
                missing.start, missing.end, missing.file
            ));
        }
        if let Some(bound) = report.tail_hint {
            text.push_str(&format!(
                "tail hint: the last segment was never written past data offset {bound} (an \
                 open reads no further)\n"
            ));
        }
        if let Some((at, bytes)) = report.written_past_hint() {
            text.push_str(&format!(
                "WRITTEN PAST THE TAIL HINT: {bytes} bytes from file offset {at}, where the log \
                 never wrote (damage from outside; an open does not read them, appends \
                 overwrite them)\n"
            ));
        }
        for f in &report.temp_files {
            if f == "checkpoint.tmp" {
                // Between checkpoints it is the room kept for the next one (a full disk).
                text.push_str(&format!(
                    "temporary file {f}: the checkpoint reserve, or a checkpoint being written\n"
                ));
            } else {
                text.push_str(&format!(
                    "temporary file {f} (an open removes or uses it)\n"
                ));
            }
        }
        for f in &report.other_files {
            text.push_str(&format!("not a log file, ignored: {f}\n"));
        }
        text.push_str(&format!(
            "\n{} segments, {} records ({}), {} read\n",
            report.segments.len(),
            report.records,
            fmt_bytes(report.record_bytes),
            fmt_bytes(report.bytes_read)
        ));
        if let Some(id) = &report.store_id {
            text.push_str(&format!("store id {id}\n"));
        }
        if let Some(t) = report.torn_tail() {
            text.push_str(&format!(
                "torn tail: {} bytes ({} records) after position {} in the last segment (an \
                 interrupted write, or one in progress if a process holds the store); the \
                 next open truncates it\n",
                t.bytes, t.records, t.position
            ));
        }
        if !newer.is_empty() {
            text.push_str(&format!(
                "{} file(s) in a newer format version than this deadletter reads (up to \
                 {FORMAT_VERSION}): they were not checked, and the store opens only with a \
                 newer deadletter\n",
                newer.len()
            ));
        }
        if !pre_release.is_empty() {
            text.push_str(&format!(
                "{} file(s) written by a development build before release 0.1.0: no release \
                 opens this store; drain it, or export its DLQ entries, with the build that \
                 wrote it\n",
                pre_release.len()
            ));
        }
        if problems == 0 {
            text.push_str("no damage found; nothing was changed\n");
        } else {
            text.push_str(&format!(
                "{problems} problem(s) found; nothing was changed\n"
            ));
        }
        print(&text)?;
    }
    if problems > 0 {
        return Err(CliError::Incomplete(format!(
            "verify found {problems} problem(s) in {}",
            args.dir.display()
        )));
    }
    if let Some((file, version)) = newer.first() {
        return Err(CliError::Incomplete(format!(
            "{} is in format version {version}, newer than this deadletter reads (up to \
             {FORMAT_VERSION}): verify it with a newer deadletter",
            args.dir.join(file).display()
        )));
    }
    if let Some((file, version)) = pre_release.first() {
        return Err(CliError::Incomplete(format!(
            "{} was written by a development build before release 0.1.0 (its format \
             {version}), which no release of deadletter reads",
            args.dir.join(file).display()
        )));
    }
    Ok(())
}
