//! The crash harness: a test runs its own binary again as a child process that executes one
//! other test function of the same binary (the child's body), lets it work, kills it with
//! SIGKILL (or lets it die by itself), and reads back what the child had printed. The
//! parent then reopens the store and checks it against those lines.
//!
//! - The child's function starts with `let Some(params) = crash::child("its_name") else {
//!   return };`: run by `cargo test` it is not a test on its own and returns at once.
//! - The child prints each fact with [`say`] only after the call it reports returned
//!   (and, to report a call the kill may interrupt, a line before it). Lines are marked, so
//!   the test harness's own output is ignored, and flushed one by one.
//! - Only whole lines count: a line the kill cut short was never fully printed.
//! - The child's standard error goes to a file that a failure shows.
//! - Children do not inherit `DEADLETTER_FAILPOINT`: a test that wants one sets it with
//!   [`ChildSpec::env`].

use std::collections::BTreeMap;
use std::fmt::Display;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Names the child test function a child process runs; its absence means "not a child".
const CHILD_ENV: &str = "DEADLETTER_CHILD";
/// Prefix of the environment variables that carry a child's parameters.
const PARAM_ENV: &str = "DEADLETTER_CHILD_";
/// Marks the child's lines in its standard output.
const MARK: &str = "@@ ";

/// The parameters a parent gave its child ([`ChildSpec::param`]).
#[derive(Debug)]
pub struct Params(BTreeMap<String, String>);

impl Params {
    /// The parameter `key`, parsed; panics when it is missing or does not parse.
    pub fn get<T: std::str::FromStr>(&self, key: &str) -> T {
        let text = self
            .0
            .get(key)
            .unwrap_or_else(|| panic!("child parameter {key} missing"));
        text.parse()
            .unwrap_or_else(|_| panic!("child parameter {key}={text:?} does not parse"))
    }

    /// The parameter `key` as a path.
    pub fn path(&self, key: &str) -> PathBuf {
        self.get(key)
    }
}

/// In a child process started for test function `test`, its parameters; `None` otherwise.
pub fn child(test: &str) -> Option<Params> {
    if std::env::var(CHILD_ENV).ok()? != test {
        return None;
    }
    let params = std::env::vars()
        .filter(|(k, _)| k != CHILD_ENV)
        .filter_map(|(k, v)| Some((k.strip_prefix(PARAM_ENV)?.to_lowercase(), v)))
        .collect();
    Some(Params(params))
}

/// In the child: prints one line for the parent and flushes it, so the parent has it
/// before the child's next call starts.
pub fn say(line: impl Display) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{MARK}{line}").expect("stdout");
    out.flush().expect("stdout");
}

/// What a child process runs: a test function of this binary, with parameters.
#[must_use]
pub struct ChildSpec {
    test: String,
    params: Vec<(String, String)>,
    env: Vec<(String, String)>,
}

impl ChildSpec {
    /// A child that runs test function `test` of this test binary.
    pub fn new(test: &str) -> ChildSpec {
        ChildSpec {
            test: test.to_string(),
            params: Vec::new(),
            env: Vec::new(),
        }
    }

    /// Gives the child parameter `key` (read with [`Params::get`]).
    pub fn param(mut self, key: &str, value: impl Display) -> ChildSpec {
        self.params.push((key.to_string(), value.to_string()));
        self
    }

    /// Sets an environment variable of the child.
    pub fn env(mut self, key: &str, value: impl Display) -> ChildSpec {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    /// Starts the child. Its standard error goes to a file in `scratch`.
    pub fn spawn(self, scratch: &Path) -> Child {
        let exe = std::env::current_exe().expect("the test binary's path");
        let stderr_path = scratch.join(format!("{}.stderr", self.test.replace("::", "-")));
        let stderr = std::fs::File::create(&stderr_path).expect("the child's stderr file");
        let mut cmd = Command::new(exe);
        // The test's full name (a test in a module of a folder of scenarios has a path).
        cmd.args(["--exact", &self.test, "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &self.test)
            .env_remove("DEADLETTER_FAILPOINT")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr);
        for (k, v) in &self.params {
            cmd.env(format!("{PARAM_ENV}{}", k.to_uppercase()), v);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let mut process = cmd.spawn().expect("start the child process");
        let stdout = process.stdout.take().expect("the child's stdout");
        let (tx, lines) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut stdout = BufReader::new(stdout);
            let mut line = String::new();
            loop {
                line.clear();
                match stdout.read_line(&mut line) {
                    Ok(n) if n > 0 && line.ends_with('\n') => {
                        // The test harness may print "test name ... " on the same line.
                        if let Some(at) = line.find(MARK) {
                            let text = line[at + MARK.len()..].trim_end().to_string();
                            if tx.send(text).is_err() {
                                return;
                            }
                        }
                    }
                    // The end, or a last line cut short by the kill.
                    _ => return,
                }
            }
        });
        Child {
            test: self.test,
            process,
            lines,
            reader: Some(reader),
            stderr_path,
        }
    }
}

/// A running child process.
pub struct Child {
    test: String,
    process: std::process::Child,
    lines: Receiver<String>,
    reader: Option<JoinHandle<()>>,
    stderr_path: PathBuf,
}

impl Child {
    /// The child's next line, waiting at most `timeout`.
    pub fn recv(&self, timeout: Duration) -> Result<String, RecvTimeoutError> {
        self.lines.recv_timeout(timeout)
    }

    /// The child's lines up to the first one `found` accepts (included), waiting at most
    /// `timeout`. Panics, showing the child's standard error, when the child ends first or
    /// the time runs out.
    pub fn wait_for(&mut self, found: impl Fn(&str) -> bool, timeout: Duration) -> Vec<String> {
        let by = Instant::now() + timeout;
        let mut lines = Vec::new();
        loop {
            match self.lines.recv_timeout(Duration::from_millis(50)) {
                Ok(line) => {
                    let done = found(&line);
                    lines.push(line);
                    if done {
                        return lines;
                    }
                }
                Err(e) => {
                    self.assert_running("before printing the awaited line");
                    assert!(
                        Instant::now() < by,
                        "child {} printed no awaited line in {timeout:?}; it printed: {lines:?}",
                        self.test
                    );
                    if e == RecvTimeoutError::Disconnected {
                        // Its output closed but it runs on: wait for it to end (or the time).
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        }
    }

    /// Panics, showing the child's standard error, if the child has ended: it was to run
    /// until killed.
    pub fn assert_running(&mut self, when: &str) {
        if let Some(status) = self.process.try_wait().expect("child status") {
            panic!(
                "child {} ended by itself ({status}) {when}; its stderr:\n{}",
                self.test,
                self.stderr()
            );
        }
    }

    /// Kills the child with SIGKILL (it must still be running) and returns the whole lines
    /// it printed that were not read yet.
    pub fn kill(mut self) -> Vec<String> {
        self.assert_running("before the kill");
        self.process.kill().expect("SIGKILL the child");
        self.process.wait().expect("reap the child");
        self.rest()
    }

    /// Lets the child end by itself, waiting at most `timeout`; returns how it ended and the
    /// whole lines it printed that were not read yet.
    pub fn wait(mut self, timeout: Duration) -> (ExitStatus, Vec<String>) {
        let by = Instant::now() + timeout;
        let mut lines = Vec::new();
        let status = loop {
            if let Some(status) = self.process.try_wait().expect("child status") {
                break status;
            }
            assert!(
                Instant::now() < by,
                "child {} still running after {timeout:?}; its stderr:\n{}",
                self.test,
                self.stderr()
            );
            // Reading as it goes keeps the pipe from filling up.
            if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(20)) {
                lines.push(line);
            }
        };
        lines.extend(self.rest());
        (status, lines)
    }

    /// What the child wrote to its standard error.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// After the child ended: every line left in the pipe.
    fn rest(&mut self) -> Vec<String> {
        if let Some(reader) = self.reader.take() {
            reader.join().expect("the child's output reader");
        }
        self.lines.try_iter().collect()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // A failing parent does not leave its child running.
        if self.reader.is_some() {
            let _ = self.process.kill();
            let _ = self.process.wait();
        }
    }
}
