//! The real crash test: a child process (this test binary, re-executed) appends under
//! `Durability::Always` and prints each record's position only after `append` returned; the
//! parent kills it with SIGKILL at random moments, reopens the log, and checks that every
//! printed record is present and byte-identical. The next child goes on appending to the
//! same log.
//!
//! `DEADLETTER_SEED` fixes the random seed (printed at the start); `DEADLETTER_CRASH_KILLS`
//! sets the number of kills (default 100).

mod common;

use std::path::Path;
use std::time::Duration;

use common::crash::{self, ChildSpec};
use deadletter::sim::SimRng as Rng;
use deadletter::sim::{Log, LogOptions};
use deadletter::store::Durability;

/// Indices of one child's records start at `child number * INDEX_STRIDE`.
const INDEX_STRIDE: u64 = 1 << 32;

fn options() -> LogOptions {
    LogOptions {
        // Small segments, so that kills also land during rolls.
        segment_size: 64 << 10,
        max_record_size: 4096,
        durability: Durability::Always,
        ..LogOptions::default()
    }
}

/// The body of record `index`: the index itself, then bytes derived from it. Any record in
/// the log can therefore be checked against the body its first eight bytes name.
fn body(index: u64) -> Vec<u8> {
    let mut rng = Rng::new(index.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xdead);
    let len = 8 + rng.below(3000) as usize;
    let mut b = index.to_le_bytes().to_vec();
    b.extend((8..len).map(|_| rng.next_u64() as u8));
    b
}

/// The child: appends to the log in the directory it is given, forever, printing
/// `ACK index position length crc` after each append returned.
#[test]
fn crash_child() {
    let Some(params) = crash::child("crash_child") else {
        return;
    };
    let mut index: u64 = params.get("start");
    let (log, _) = Log::open(params.path("dir"), options()).expect("child open");
    loop {
        // Mostly single appends, sometimes a batch sharing one fsync.
        let n = if index.is_multiple_of(7) {
            1 + index % 5
        } else {
            1
        };
        let bodies: Vec<Vec<u8>> = (index..index + n).map(body).collect();
        let positions = if n == 1 {
            vec![log.append(&bodies[0]).expect("append")]
        } else {
            log.append_batch(&bodies).expect("append_batch")
        };
        for (k, (p, b)) in positions.iter().zip(&bodies).enumerate() {
            let crc = crc32fast::hash(b);
            crash::say(format_args!(
                "ACK {} {p} {} {crc}",
                index + k as u64,
                b.len()
            ));
        }
        index += n;
    }
}

struct Acked {
    index: u64,
    pos: u64,
    len: usize,
    crc: u32,
}

fn parse_ack(line: &str) -> Option<Acked> {
    let mut f = line.strip_prefix("ACK ")?.split_whitespace();
    let a = Acked {
        index: f.next()?.parse().ok()?,
        pos: f.next()?.parse().ok()?,
        len: f.next()?.parse().ok()?,
        crc: f.next()?.parse().ok()?,
    };
    f.next().is_none().then_some(a)
}

/// Reopens the log and checks every acknowledged record, and that every record present is
/// one some child wrote. Returns the number of records in the log.
fn verify(dir: &Path, acked: &[Acked], round: usize, seed: u64) -> u64 {
    let ctx = format!("seed {seed}, after kill {round}");
    let (log, report) =
        Log::open(dir, options()).unwrap_or_else(|e| panic!("{ctx}: reopen failed: {e}"));
    assert!(report.quarantined.is_empty(), "{ctx}: {report:?}");
    for a in acked {
        let rec = log
            .read(a.pos)
            .unwrap_or_else(|e| panic!("{ctx}: acked record {} at {}: {e}", a.index, a.pos));
        assert_eq!(rec.len(), a.len, "{ctx}: record {} length", a.index);
        assert_eq!(
            crc32fast::hash(&rec),
            a.crc,
            "{ctx}: record {} crc",
            a.index
        );
        assert_eq!(&*rec, &body(a.index)[..], "{ctx}: record {} bytes", a.index);
    }
    let mut count = 0u64;
    let mut last = None;
    for r in log.iter_from(0).expect("iter") {
        let (p, rec) = r.unwrap_or_else(|e| panic!("{ctx}: iteration: {e}"));
        assert!(last.is_none_or(|l| p > l), "{ctx}: positions increase");
        last = Some(p);
        assert!(rec.len() >= 8, "{ctx}: record at {p} too short");
        let index = u64::from_le_bytes(rec[..8].try_into().unwrap());
        assert_eq!(
            &*rec,
            &body(index)[..],
            "{ctx}: record at {p} was never written"
        );
        count += 1;
    }
    count
}

#[test]
fn sigkill_at_random_moments_loses_nothing_acknowledged() {
    let seed = common::seed();
    let kills: usize = common::env_number("DEADLETTER_CRASH_KILLS", 100);
    println!("crash test: seed {seed} (DEADLETTER_SEED={seed} to repeat), {kills} kills");
    let mut rng = Rng::new(seed);
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("log");
    let mut acked: Vec<Acked> = Vec::new();
    let mut records = 0;
    let mut during_startup = 0;
    for round in 0..kills {
        let mut child = ChildSpec::new("crash_child")
            .param("dir", dir.display())
            .param("start", (round as u64 + 1) * INDEX_STRIDE)
            .spawn(root.path());
        // A quarter of the kills land at any moment after the start (opening, recovering);
        // the others after the first acknowledged append, in the middle of the appending.
        let delay = Duration::from_micros(rng.below(40_000));
        let mut lines = Vec::new();
        if rng.below(4) == 0 {
            during_startup += 1;
        } else {
            let first_ack = |l: &str| l.starts_with("ACK ");
            lines = child.wait_for(first_ack, Duration::from_secs(30));
        }
        std::thread::sleep(delay);
        lines.extend(child.kill());
        acked.extend(lines.iter().filter_map(|l| parse_ack(l)));
        records = verify(&dir, &acked, round, seed);
    }
    println!(
        "crash test: {kills} kills ({during_startup} at any moment, the rest mid-append), \
         {} acknowledged records verified, {records} records in the log",
        acked.len()
    );
    assert!(acked.len() >= kills / 2, "children appended too little");
}
