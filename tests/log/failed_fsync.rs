//! A failed fsync poisons the log: the failure is not retried (the page cache may have
//! dropped the data), writes are refused until a reopen, reads go on, and the reopened log
//! holds every record acknowledged before the failure.

use std::sync::Arc;

use deadletter::recovery::RecoveryReport;
use deadletter::sim::{Fault, FaultyFs, Log, OpKinds, RealFs};
use deadletter::Error;

use crate::helpers::{body, opts, read_all};

#[test]
fn failed_fsync_poisons_until_reopen() {
    let root = tempfile::tempdir().unwrap();
    let fs = FaultyFs::new(Arc::new(RealFs), 1);
    let o = opts(4096, 100);
    let (log, _) = Log::open_with(Arc::new(fs.clone()), root.path(), o.clone()).unwrap();
    let mut acked = Vec::new();
    for i in 0..5 {
        let b = body(i, 30);
        acked.push((log.append(&b).unwrap(), b));
    }
    // Every fsync of a file fails from now on, having made nothing durable.
    fs.fail_from(0, OpKinds::SYNC, Fault::FailedSync);
    match log.append(b"this fsync fails") {
        Err(Error::Io { op: "fsync", .. }) => {}
        other => panic!("expected the fsync error, got {other:?}"),
    }
    assert!(log.is_poisoned());
    // The failure is not retried: even with a healthy disk again, writes are refused.
    fs.clear();
    for _ in 0..3 {
        assert!(matches!(log.append(b"later"), Err(Error::Poisoned)));
    }
    assert!(matches!(
        log.append_batch(&[b"a".as_slice(), b"b"]),
        Err(Error::Poisoned)
    ));
    assert!(matches!(log.sync(), Err(Error::Poisoned)));
    assert!(matches!(log.close(), Err(Error::Poisoned)));
    // Records acknowledged before the failure are still readable.
    assert_eq!(&*log.read(acked[0].0).unwrap(), &acked[0].1[..]);
    drop(log);

    let (log, report): (Log, RecoveryReport) = Log::open(root.path(), o).unwrap();
    assert!(!log.is_poisoned());
    let got = read_all(&log);
    assert!(got.len() >= acked.len());
    assert_eq!(got[..acked.len()], acked[..]);
    assert!(report.quarantined.is_empty());
    let p = log.append(b"after reopen").unwrap();
    assert_eq!(&*log.read(p).unwrap(), b"after reopen");
}
