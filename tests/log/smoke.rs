//! The log's basic life: appends one by one and in a batch across several segments, reads
//! by position, a second open refused while it is held, and every record back in order
//! after a reopen.

use deadletter::sim::{Log, LogOptions};
use deadletter::store::Durability;

#[test]
fn append_read_reopen_roll() {
    let dir = tempfile::tempdir().unwrap();
    let opts = LogOptions {
        segment_size: 4096,
        max_record_size: 1000,
        durability: Durability::Always,
        ..LogOptions::default()
    };
    let mut positions = Vec::new();
    {
        let (log, report) = Log::open(dir.path(), opts.clone()).unwrap();
        assert_eq!(report.records, 0);
        for i in 0..200u32 {
            let body = format!("record-{i}-").repeat((i % 7 + 1) as usize);
            positions.push((log.append(body.as_bytes()).unwrap(), body));
        }
        let b: Vec<Vec<u8>> = (0..50).map(|i| vec![i as u8 + 1; 30]).collect();
        let ps = log.append_batch(&b).unwrap();
        for (p, body) in ps.iter().zip(b) {
            positions.push((*p, String::from_utf8(body).unwrap()));
        }
        assert!(log.stats().segments > 1);
        for (p, body) in &positions {
            assert_eq!(&*log.read(*p).unwrap(), body.as_bytes());
        }
        assert!(matches!(
            Log::open(dir.path(), opts.clone()),
            Err(deadletter::Error::Locked { .. })
        ));
    }
    let (log, report) = Log::open(dir.path(), opts).unwrap();
    assert_eq!(report.records, 250, "{report:?}");
    assert!(report.torn_tail.is_none());
    let all: Vec<_> = log.iter_from(0).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(all.len(), 250);
    for ((p, rec), (ep, body)) in all.iter().zip(&positions) {
        assert_eq!(p, ep);
        assert_eq!(&**rec, body.as_bytes());
    }
}
