//! Group commit: eight threads appending under `Durability::Always` share fsyncs, and every
//! record is there after a reopen.

use std::sync::Arc;

use deadletter::sim::{Log, LogStats};

use crate::helpers::{body, opts, read_all};

#[test]
fn group_commit_shares_fsyncs() {
    const THREADS: u64 = 8;
    const PER_THREAD: u64 = 200;
    let root = tempfile::tempdir().unwrap();
    let o = opts(64 << 10, 1000);
    let (log, _) = Log::open(root.path(), o.clone()).unwrap();
    let log = Arc::new(log);
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                (0..PER_THREAD)
                    .map(|i| {
                        let b = body(t * 10_000 + i, 20 + (i % 50) as usize);
                        (log.append(&b).unwrap(), b)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut written: Vec<(u64, Vec<u8>)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    written.sort();
    let LogStats {
        fsyncs, appends, ..
    } = log.stats();
    println!("group commit: {appends} appends from {THREADS} threads, {fsyncs} fsyncs");
    assert_eq!(appends, THREADS * PER_THREAD);
    assert!(fsyncs < appends, "{fsyncs} fsyncs for {appends} appends");
    drop(log);
    let (log, report) = Log::open(root.path(), o).unwrap();
    assert_eq!(report.records, THREADS * PER_THREAD);
    assert_eq!(read_all(&log), written);
}
