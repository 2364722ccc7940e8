//! `export` and `import`: DLQ envelopes as newline-delimited JSON, one envelope per line,
//! payloads in base64 so every byte round-trips (see `deadletter_dashboard::export` for the format).
//!
//! An export to a file is written under a temporary name and renamed into place once
//! complete, so a failed export never leaves a partial file behind. An import parses and
//! checks every line before it writes anything.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use deadletter::{DeadLetter, DeadLetterQueue, Dlq, Store};
use deadletter_dashboard::export::{envelope_to_line, parse_line};
use deadletter_dashboard::Source;
use serde_json::{json, Value};

use crate::cli::{ExportArgs, ImportArgs};
use crate::error::CliError;
use crate::output::{print, print_json, Table};
use crate::progress::{Progress, Unit};
use crate::store_access::{self, select_dlqs, Open, Writable};

pub fn export(args: &ExportArgs, json: bool) -> Result<(), CliError> {
    let store = store_access::open_read(&args.dir)?;
    export_on(&store, args, json)
}

/// `export` on any source of queues and DLQs (a store, a JetStream namespace).
pub fn export_on<S: Source>(store: &S, args: &ExportArgs, json: bool) -> Result<(), CliError> {
    let dlqs = select_dlqs(store, args.sel.queue.as_deref())?;
    let filter = args.sel.filter();
    let mut groups = Vec::new();
    for dlq in dlqs {
        let ids = dlq.ids(&filter, None)?;
        groups.push((dlq, ids));
    }
    let total: usize = groups.iter().map(|(_, ids)| ids.len()).sum();
    let count = match &args.out {
        Some(path) => export_to_file(path, &groups, total)?,
        None => {
            let stdout = std::io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            let n = write_entries(&mut out, &groups, total, "stdout")?;
            out.flush()
                .map_err(|e| CliError::io("write to stdout", e))?;
            n
        }
    };
    let out_name = args
        .out
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "stdout".into());
    // With --out the summary goes to stdout; otherwise stdout holds the data, so the
    // summary goes to stderr.
    let summary = if json {
        json!({ "exported": count, "out": out_name }).to_string()
    } else {
        format!("exported {count} entries to {out_name}")
    };
    if args.out.is_some() {
        print(&(summary + "\n"))
    } else {
        eprintln!("{summary}");
        Ok(())
    }
}

fn export_to_file<D: DeadLetterQueue>(
    path: &Path,
    groups: &[(D, Vec<u64>)],
    total: usize,
) -> Result<usize, CliError> {
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".partial");
    let tmp = PathBuf::from(tmp_name);
    let file =
        File::create(&tmp).map_err(|e| CliError::io(format!("create {}", tmp.display()), e))?;
    let mut out = BufWriter::new(file);
    let what = tmp.display().to_string();
    let result = write_entries(&mut out, groups, total, &what).and_then(|n| {
        let file = out
            .into_inner()
            .map_err(|e| CliError::io(format!("write {what}"), e.into_error()))?;
        file.sync_all()
            .map_err(|e| CliError::io(format!("fsync {what}"), e))?;
        Ok(n)
    });
    match result {
        Ok(n) => {
            std::fs::rename(&tmp, path).map_err(|e| {
                CliError::io(format!("rename {} to {}", tmp.display(), path.display()), e)
            })?;
            Ok(n)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

fn write_entries<D: DeadLetterQueue>(
    out: &mut impl Write,
    groups: &[(D, Vec<u64>)],
    total: usize,
    what: &str,
) -> Result<usize, CliError> {
    let mut progress = Progress::new("exporting", total as u64, Unit::Items);
    let mut count = 0;
    for (dlq, ids) in groups {
        for &id in ids {
            let entry = dlq.get(id)?;
            let line = envelope_to_line(&entry);
            match out
                .write_all(line.as_bytes())
                .and_then(|_| out.write_all(b"\n"))
            {
                Ok(()) => {}
                // `export | head`: the reader has seen enough.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(count),
                Err(e) => return Err(CliError::io(format!("write {what}"), e)),
            }
            count += 1;
            progress.inc(1);
        }
    }
    Ok(count)
}

pub fn import(args: &ImportArgs, json: bool) -> Result<(), CliError> {
    let from_stdin = args.file.as_ref().is_none_or(|f| f.as_os_str() == "-");
    let (reader, source): (Box<dyn Read>, String) = if from_stdin {
        (Box::new(std::io::stdin()), "stdin".into())
    } else {
        let path = args.file.clone().unwrap_or_default();
        let file =
            File::open(&path).map_err(|e| CliError::io(format!("open {}", path.display()), e))?;
        (Box::new(file), path.display().to_string())
    };
    // Parse everything first: a bad line imports nothing.
    let mut entries = Vec::new();
    for (i, line) in BufReader::new(reader).lines().enumerate() {
        let line = line.map_err(|e| CliError::io(format!("read {source}"), e))?;
        if line.trim().is_empty() {
            continue;
        }
        let entry = parse_line(&line)
            .map_err(|e| CliError::Input(format!("{source} line {}: {e}", i + 1)))?;
        entries.push(entry);
    }
    let mut progress = Progress::new("importing", entries.len() as u64, Unit::Items);
    let mut imported = Vec::new();
    match store_access::open_write(&args.dir, Open::Create, false)? {
        Writable::Local(store) => {
            for entry in &entries {
                let dlq = import_target(&store, args.queue.as_deref(), entry)?;
                let id = dlq.import(entry)?;
                imported.push((entry.id(), id, dlq.name()));
                progress.inc(1);
            }
        }
        Writable::Owner(live) => {
            for chunk in entries.chunks(IMPORT_BATCH) {
                for e in live.client().import(args.queue.as_deref(), chunk)? {
                    imported.push((e.original_id, e.id, e.dlq));
                }
                progress.inc(chunk.len() as u64);
            }
        }
    }
    progress.finish();
    if json {
        let list: Vec<Value> = imported
            .iter()
            .map(|(old, new, dlq)| json!({ "original_id": old, "id": new, "dlq": dlq }))
            .collect();
        return print_json(&json!({ "imported": imported.len(), "entries": list }));
    }
    let mut text = String::new();
    if !imported.is_empty() {
        let mut t = Table::new(&[">ORIGINAL ID", ">NEW ID", "DLQ"]);
        for (old, new, dlq) in &imported {
            t.row(vec![old.to_string(), new.to_string(), dlq.clone()]);
        }
        text.push_str(&t.render());
        text.push('\n');
    }
    text.push_str(&format!(
        "imported {} entries from {source}\n",
        imported.len()
    ));
    print(&text)
}

/// Entries sent to a store's owner per request.
const IMPORT_BATCH: usize = 1000;

/// The DLQ an imported entry goes to: `--queue` (a DLQ or queue name, the queue created if
/// missing) or the entry's own queue.
fn import_target(store: &Store, queue: Option<&str>, entry: &DeadLetter) -> Result<Dlq, CliError> {
    let name = queue.unwrap_or(&entry.metadata.queue);
    match store.dlq(name) {
        Ok(d) => Ok(d),
        Err(deadletter::Error::UnknownQueue(_)) => Ok(store.queue(name)?.dlq()),
        Err(e) => Err(e.into()),
    }
}
