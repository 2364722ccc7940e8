//! `replay ID --edit`: an entry's payload opened in the user's editor (`$VISUAL`, else
//! `$EDITOR`, run through `sh` so that it may carry arguments, as `code --wait`), from a
//! file of its own (mode 0600: payloads may hold what others must not read) that is
//! removed afterwards whatever happened.
//!
//! The editor gets the payload's bytes as they are, and what the file holds when it exits
//! is the new payload byte for byte: nothing is reformatted either way.

use std::fs::OpenOptions;
use std::io::{IsTerminal, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::process::Command;

use deadletter::queue::MessageId;

use crate::error::CliError;

/// The editor command the user chose: `$VISUAL`, else `$EDITOR`.
fn editor() -> Result<String, CliError> {
    ["VISUAL", "EDITOR"]
        .iter()
        .filter_map(|name| std::env::var(name).ok())
        .find(|cmd| !cmd.trim().is_empty())
        .ok_or_else(|| {
            CliError::Usage(
                "--edit opens the payload in your editor: set $VISUAL or $EDITOR (such as \
                 EDITOR=vi), or give the corrected payload with --payload-file FILE"
                    .into(),
            )
        })
}

/// Checks, before anything is read or opened, that `--edit` can ask its question: on a
/// terminal, or told not to ask (`yes`, or a dry run, which only shows the change).
pub fn check_can_ask(yes: bool, dry_run: bool) -> Result<(), CliError> {
    editor()?;
    if yes || dry_run || std::io::stdin().is_terminal() {
        return Ok(());
    }
    Err(CliError::Usage(
        "--edit shows the change and asks before replaying, and standard input is not a \
         terminal: run it on one, add --yes to replay without asking, or give the corrected \
         payload with --payload-file FILE"
            .into(),
    ))
}

/// The payload the user makes of entry `id`'s `payload` in their editor.
pub fn edit(id: MessageId, payload: &[u8]) -> Result<Vec<u8>, CliError> {
    let command = editor()?;
    let file = TempFile::create(id, payload)?;
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("{command} \"$1\""))
        .arg("deadletter-edit")
        .arg(&file.path)
        .status()
        .map_err(|e| CliError::io(format!("run the editor ({command})"), e))?;
    if !status.success() {
        return Err(CliError::Incomplete(format!(
            "the editor ({command}) exited with {status}: nothing was replayed"
        )));
    }
    std::fs::read(&file.path).map_err(|e| CliError::io(format!("read {}", file.path.display()), e))
}

/// A file of this process's own, removed when dropped.
struct TempFile {
    path: PathBuf,
}

impl TempFile {
    /// A new file holding `payload`, named after entry `id` (`.json` when the payload is
    /// JSON, so that editors colour it).
    fn create(id: MessageId, payload: &[u8]) -> Result<TempFile, CliError> {
        let ext = if crate::jq::pretty(payload).is_some() {
            "json"
        } else {
            "txt"
        };
        let name = format!("deadletter-entry-{id}-{}.{ext}", std::process::id());
        let path = std::env::temp_dir().join(name);
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| CliError::io(format!("create {}", path.display()), e))?;
        let file = TempFile { path };
        f.write_all(payload)
            .and_then(|()| f.sync_all())
            .map_err(|e| CliError::io(format!("write {}", file.path.display()), e))?;
        Ok(file)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        // It may be gone already (an editor that moves its own file into place failed).
        let _ = std::fs::remove_file(&self.path);
    }
}
