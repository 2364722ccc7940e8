//! One process at a time: a second open of a log directory is `Error::Locked`, in the same
//! process and from another one (a child process that holds the log), and the lock goes
//! away with its holder, even one killed with SIGKILL.

use std::time::Duration;

use deadletter::sim::Log;
use deadletter::Error;

use crate::common::crash::{self, ChildSpec};
use crate::helpers::opts;

/// The child: opens the log in the directory it is given, says so, and holds it until it
/// is killed.
#[test]
fn lock_child_process() {
    let Some(params) = crash::child("lock::lock_child_process") else {
        return;
    };
    let (_log, _) = Log::open(params.path("dir"), opts(4096, 100)).expect("child open");
    crash::say("HOLDS-LOCK");
    loop {
        std::thread::park();
    }
}

#[test]
fn second_open_is_locked_in_process_and_across_processes() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("log");
    let o = opts(4096, 100);
    {
        let (_log, _) = Log::open(&dir, o.clone()).unwrap();
        match Log::open(&dir, o.clone()) {
            Err(Error::Locked { path, .. }) => assert_eq!(path, dir),
            other => panic!("expected Locked, got {other:?}"),
        }
    }
    // Released on drop.
    drop(Log::open(&dir, o.clone()).unwrap());

    let mut child = ChildSpec::new("lock::lock_child_process")
        .param("dir", dir.display())
        .spawn(root.path());
    child.wait_for(|l| l == "HOLDS-LOCK", Duration::from_secs(30));
    match Log::open(&dir, o.clone()) {
        Err(Error::Locked { path, .. }) => assert_eq!(path, dir),
        other => panic!("expected Locked while the child holds it, got {other:?}"),
    }
    // The kernel releases the lock of a process that dies.
    child.kill();
    drop(Log::open(&dir, o).unwrap());
}
