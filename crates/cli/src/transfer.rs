//! `export` and `import`: DLQ envelopes as newline-delimited JSON, one envelope per line,
//! payloads in base64 so every byte round-trips (see `deadletter_dashboard::export` for the format).
//!
//! An export to a file is written under a temporary name and renamed into place once
//! complete, so a failed export never leaves a partial file behind. An import streams the
//! file: it parses a line at a time and writes batches (one commit and one fsync each),
//! skipping the entries the store already holds, so memory stays bounded and importing an
//! export twice adds nothing. A bad line stops it; what came before is imported.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use deadletter::dlq::{DeadLetter, ImportedEntry, Importer};
use deadletter::{DeadLetterQueue, Store};
use deadletter_dashboard::export::{envelope_to_line, parse_line};
use deadletter_dashboard::Source;
use serde_json::json;

use crate::change::empty_selection_hint;
use crate::cli::{ExportArgs, ImportArgs};
use crate::error::CliError;
use crate::live::Live;
use crate::names::{self, Created};
use crate::output::{print, print_json, Table};
use crate::progress::{Progress, Unit};
use crate::store_access::{self, select_dlqs, Writable};

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
    let hint = empty_selection_hint(&args.sel, total, &groups)?;
    let summary = if json {
        let mut doc = json!({ "exported": count, "out": out_name });
        if let Some(h) = &hint {
            doc["error_kind_hint"] = h.to_json();
        }
        doc.to_string()
    } else {
        match &hint {
            Some(h) => format!("exported {count} entries to {out_name}: {}", h.sentence()),
            None => format!("exported {count} entries to {out_name}"),
        }
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
    let (reader, source, size): (Box<dyn Read>, String, Option<u64>) = if from_stdin {
        (Box::new(std::io::stdin()), "stdin".into(), None)
    } else {
        let path = args.file.clone().unwrap_or_default();
        let file =
            File::open(&path).map_err(|e| CliError::io(format!("open {}", path.display()), e))?;
        let size = file.metadata().ok().map(|m| m.len());
        (Box::new(file), path.display().to_string(), size)
    };
    let (store, new_store) = store_access::open_target(&args.dir, args.create)?;
    let mut sink = match store {
        Writable::Local(store) => Sink::Local(store.importer(args.queue.as_deref())?, store),
        Writable::Owner(live) => Sink::Owner(live, args.queue.clone()),
    };
    let mut targets = Targets {
        create: args.create,
        json,
        checked: HashSet::new(),
        pending: Vec::new(),
        created: Created {
            store: new_store.then(|| args.dir.display().to_string()),
            queues: Vec::new(),
        },
    };
    if new_store && !json {
        eprintln!("created store {}", args.dir.display());
    }
    // One target for every entry: checked before anything is read.
    if let Some(q) = &args.queue {
        targets.check(&sink, q)?;
    }
    let mut progress = Progress::new("importing", size.unwrap_or(0), Unit::Bytes);
    let mut summary = ImportSummary::default();
    let mut batch: Vec<DeadLetter> = Vec::with_capacity(IMPORT_BATCH);
    let mut batch_bytes = 0usize;
    let mut reader = BufReader::with_capacity(1 << 20, reader);
    let mut line = String::new();
    let mut number = 0usize;
    loop {
        line.clear();
        let n = reader
            .read_line(&mut line)
            .map_err(|e| CliError::io(format!("read {source}"), e))?;
        if n == 0 {
            break;
        }
        number += 1;
        progress.inc(n as u64);
        if line.trim().is_empty() {
            continue;
        }
        let parsed = parse_line(line.trim_end())
            .map_err(|e| CliError::Input(format!("{source} line {number}: {e}")))
            .and_then(|entry| {
                if args.queue.is_none() {
                    targets.check(&sink, &entry.metadata.queue)?;
                }
                Ok(entry)
            });
        let entry = match parsed {
            Ok(entry) => entry,
            Err(e) => {
                // What came before is imported; importing the file again after fixing the
                // line (or with --create) adds only the rest (an import skips entries the
                // store holds).
                sink.import(&batch, &mut summary)?;
                targets.imported();
                progress.finish();
                let rest = format!(
                    "; the {} entries before it were imported ({} already held), importing \
                     the file again adds only the rest",
                    summary.imported.len(),
                    summary.skipped
                );
                return Err(match e {
                    CliError::UnknownQueue(u) => u
                        .prefixed(&format!("{source} line {number}: "))
                        .then(&rest)
                        .into(),
                    CliError::Input(m) => CliError::Input(m + &rest),
                    e => e,
                });
            }
        };
        batch_bytes += entry.payload.len();
        batch.push(entry);
        if batch.len() >= IMPORT_BATCH || batch_bytes >= IMPORT_BATCH_BYTES {
            sink.import(&batch, &mut summary)?;
            targets.imported();
            batch.clear();
            batch_bytes = 0;
        }
    }
    sink.import(&batch, &mut summary)?;
    targets.imported();
    progress.finish();
    let ImportSummary { imported, skipped } = summary;
    if json {
        let mut doc = json!({
            "imported": imported.len(),
            "skipped": skipped,
            "source": source,
            "created": targets.created.to_json(),
        });
        if args.ids {
            doc["entries"] = imported
                .iter()
                .map(|e| json!({ "original_id": e.original_id, "id": e.id, "dlq": e.dlq }))
                .collect();
        }
        return print_json(&doc);
    }
    let mut text = String::new();
    if args.ids && !imported.is_empty() {
        let mut t = Table::new(&[">ORIGINAL ID", ">NEW ID", "DLQ"]);
        for e in &imported {
            t.row(vec![
                e.original_id.to_string(),
                e.id.to_string(),
                e.dlq.clone(),
            ]);
        }
        text.push_str(&t.render());
        text.push('\n');
    }
    let mut by_dlq: Vec<(&str, usize)> = Vec::new();
    for e in &imported {
        match by_dlq.iter_mut().find(|(d, _)| *d == e.dlq) {
            Some((_, n)) => *n += 1,
            None => by_dlq.push((&e.dlq, 1)),
        }
    }
    text.push_str(&format!(
        "imported {} entries from {source}",
        imported.len()
    ));
    if !by_dlq.is_empty() {
        let parts: Vec<String> = by_dlq.iter().map(|(d, n)| format!("{n} to {d}")).collect();
        text.push_str(&format!(" ({})", parts.join(", ")));
    }
    text.push_str(&format!("; skipped {skipped} the store already held\n"));
    if !args.ids && !imported.is_empty() {
        text.push_str("(--ids prints each entry's original and new id)\n");
    }
    print(&text)
}

/// Entries per import batch (one commit, one fsync each), and the payload bytes at which a
/// batch is written sooner: memory stays bounded whatever the file's size.
const IMPORT_BATCH: usize = 2000;
const IMPORT_BATCH_BYTES: usize = 8 << 20;

/// Where an import's batches go: an importer on a store this process holds, or the owner
/// of a store another process holds.
enum Sink {
    Local(Importer, Store),
    Owner(Live, Option<String>),
}

/// The DLQs an import writes into: each checked once, when first met (an unknown one is
/// refused without `--create`), and those created said once their first batch is in.
struct Targets {
    create: bool,
    json: bool,
    /// The names checked so far.
    checked: HashSet<String>,
    /// Queues to be created by the batch being gathered.
    pending: Vec<String>,
    created: Created,
}

impl Targets {
    /// Checks `name`, the DLQ (or queue) an entry goes to.
    fn check(&mut self, sink: &Sink, name: &str) -> Result<(), CliError> {
        if self.checked.contains(name) {
            return Ok(());
        }
        let new = match sink {
            Sink::Local(_, store) => names::import_target(store, name, self.create)?,
            Sink::Owner(live, _) => names::import_target(live, name, self.create)?,
        };
        if new {
            self.pending.push(name.to_string());
        }
        self.checked.insert(name.to_string());
        Ok(())
    }

    /// The batch gathered is imported: its new queues exist now.
    fn imported(&mut self) {
        let new = Created {
            store: None,
            queues: std::mem::take(&mut self.pending),
        };
        new.say(self.json);
        self.created.queues.extend(new.queues);
    }
}

#[derive(Default)]
struct ImportSummary {
    imported: Vec<ImportedEntry>,
    skipped: usize,
}

impl Sink {
    fn import(&mut self, batch: &[DeadLetter], into: &mut ImportSummary) -> Result<(), CliError> {
        if batch.is_empty() {
            return Ok(());
        }
        let report = match self {
            Sink::Local(importer, _) => importer.import_batch(batch)?,
            Sink::Owner(live, queue) => live.client().import(queue.as_deref(), batch)?,
        };
        into.skipped += report.skipped.len();
        into.imported.extend(report.imported);
        Ok(())
    }
}
