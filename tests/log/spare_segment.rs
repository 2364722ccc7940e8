//! Regression test: the spare segment prepared in the background must never be truncated
//! while a roll installs it.
//!
//! The preparing thread, finding the spare slot empty, creates a new spare under the same
//! file name. A roll used to empty the slot before renaming the spare it took, so the thread
//! could truncate the file being installed: the new segment lost its header (or got the
//! next segment's header at the next roll, when the same handle came back as the spare), and
//! the store no longer opened (`BadHeader`). Found by `tests/crash_compaction.rs`, where
//! relocation makes rolls come in bursts; with 16 KiB segments and no fix, the first or
//! second round fails.

use deadletter::sim::{Log, LogOptions};
use deadletter::store::Durability;

#[test]
fn fast_rolls_never_damage_a_segment_header() {
    let opts = LogOptions {
        // A roll every five appends, so that rolls outrun the preparing thread.
        segment_size: 16 << 10,
        max_record_size: 4096,
        durability: Durability::Never,
        preallocate: false,
        ..LogOptions::default()
    };
    let body = vec![7u8; 3000];
    for round in 0..8 {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = Log::open(dir.path(), opts.clone()).unwrap();
        let positions: Vec<u64> = (0..2000).map(|_| log.append(&body).unwrap()).collect();
        log.close().unwrap();
        drop(log);
        let (log, report) = Log::open(dir.path(), opts.clone())
            .unwrap_or_else(|e| panic!("round {round}: the log no longer opens: {e:?}"));
        assert!(report.quarantined.is_empty(), "round {round}: {report:?}");
        for &p in positions.iter().step_by(97) {
            assert_eq!(&*log.read(p).unwrap(), body.as_slice(), "round {round}");
        }
    }
}
