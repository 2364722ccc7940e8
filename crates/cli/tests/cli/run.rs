//! Running the `deadletter` binary and reading what it printed.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// The binary under test, built by cargo for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_deadletter");

/// Tests run one at a time: a child spawned by one test inherits, until it calls exec, the
/// descriptors another test's thread has open, including a store's lock file; a test that
/// drops its store and runs the tool at that moment would find the store still locked.
pub static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Holds the lock that runs these tests one at a time (see [`SERIAL`]).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs the binary with `args` and no standard input.
pub fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("COLUMNS")
        .stdin(Stdio::null())
        .output()
        .expect("run deadletter")
}

/// Runs the binary with `args`, writing `input` to its standard input.
pub fn run_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .env_remove("COLUMNS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn deadletter");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write stdin");
    child.wait_with_output().expect("wait")
}

/// Standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Standard error as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs and expects exit 0 and JSON on stdout.
pub fn json(args: &[&str]) -> Value {
    let out = ok(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}): {out}"))
}

/// Runs and expects exit 0; returns standard output.
pub fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(
        o.status.success(),
        "{args:?} failed: {}\n{}",
        stderr(&o),
        stdout(&o)
    );
    stdout(&o)
}

/// Expects exit `code` and one line on stderr containing `needle`.
pub fn fails(args: &[&str], code: i32, needle: &str) -> String {
    let o = run(args);
    assert_eq!(
        o.status.code(),
        Some(code),
        "{args:?}: stdout {} stderr {}",
        stdout(&o),
        stderr(&o)
    );
    let err = stderr(&o);
    assert!(
        err.contains(needle),
        "{args:?}: stderr {err:?} lacks {needle:?}"
    );
    err
}

/// The ids of the entries of a `list --json` output.
pub fn ids_of(v: &Value) -> Vec<u64> {
    v["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["id"].as_u64().expect("id"))
        .collect()
}
