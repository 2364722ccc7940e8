//! The loss bounds of the weaker durability policies, on the simulated disk: seeded runs of
//! appends (single and batched, some rolling segments) interleaved with explicit syncs,
//! clean restarts and power cuts, under `Durability::Never` and `Durability::Interval`.
//! After every power cut the log must hold exactly a prefix of what was acknowledged,
//! byte-identical and at the same positions (nothing invented, nothing reordered, no hole),
//! and that prefix must reach at least the durable position the log reported just before
//! the cut: everything acknowledged before the last sync survives. Under `Interval` the
//! background thread alone must make every acknowledged record durable (no call to `sync`),
//! which bounds the loss to what was appended since its last pass. A clean restart loses
//! nothing under either policy.

use std::sync::Arc;
use std::time::{Duration, Instant};

use deadletter::sim::{Log, LogOptions, SimDisk, SimRng};
use deadletter::store::Durability;

const LOG_DIR: &str = "/loss";
/// Seeds per policy in a debug build (`DEADLETTER_SIM_SEEDS` overrides).
const SEEDS: u64 = 120;
/// How long the `Interval` flusher may take to cover the records, on a loaded machine. Not
/// a performance figure: only a flusher that never syncs gets near it.
const FLUSHER_DEADLINE: Duration = Duration::from_secs(20);

fn options(durability: Durability, rng: &mut SimRng) -> LogOptions {
    LogOptions {
        segment_size: 4096,
        max_record_size: 2000,
        durability,
        write_buffer: rng.range(0, 3000) as usize,
        ..LogOptions::default()
    }
}

fn open(disk: &SimDisk, opts: &LogOptions) -> Log {
    Log::open_with(Arc::new(disk.clone()), LOG_DIR, opts.clone())
        .expect("the log opens after a power cut")
        .0
}

/// Every record of the log, in order.
fn contents(log: &Log) -> Vec<(u64, Vec<u8>)> {
    log.iter_from(log.first_position())
        .expect("iterate")
        .map(|r| r.map(|(p, b)| (p, b.to_vec())).expect("a readable record"))
        .collect()
}

/// Checks what survived a power cut against what was acknowledged; returns the survivors.
fn check_after_cut(
    seed: u64,
    acked: &[(u64, Vec<u8>)],
    durable: u64,
    log: &Log,
) -> Vec<(u64, Vec<u8>)> {
    let got = contents(log);
    assert!(
        got.len() <= acked.len() && got[..] == acked[..got.len()],
        "seed {seed}: the log after a power cut is not a prefix of what was acknowledged \
         ({} records kept of {})",
        got.len(),
        acked.len()
    );
    let must = acked.iter().take_while(|(p, _)| *p < durable).count();
    assert!(
        got.len() >= must,
        "seed {seed}: {} records acknowledged before the durable position {durable}, only {} \
         survived",
        must,
        got.len()
    );
    got
}

/// One seeded run; returns (records lost to power cuts, records appended).
fn run(seed: u64, interval: bool) -> (usize, usize) {
    let mut rng = SimRng::new(seed);
    let durability = if interval {
        Durability::Interval(Duration::from_millis(rng.range(1, 4)))
    } else {
        Durability::Never
    };
    let disk = SimDisk::new();
    let opts = options(durability, &mut rng);
    let mut log = open(&disk, &opts);
    let mut acked: Vec<(u64, Vec<u8>)> = Vec::new();
    let (mut lost, mut appended) = (0, 0);
    for step in 0..rng.range(20, 60) {
        match rng.below(100) {
            0..=54 => {
                let body: Vec<u8> = (0..rng.range(1, 600))
                    .map(|_| rng.below(256) as u8)
                    .collect();
                let pos = log.append(&body).expect("append");
                acked.push((pos, body));
                appended += 1;
            }
            55..=69 => {
                let bodies: Vec<Vec<u8>> = (0..rng.range(2, 12))
                    .map(|i| vec![(step + i) as u8; rng.range(1, 900) as usize])
                    .collect();
                let positions = log.append_batch(&bodies).expect("append batch");
                appended += bodies.len();
                acked.extend(positions.into_iter().zip(bodies));
            }
            70..=79 if !interval => {
                log.sync().expect("sync");
                assert!(log.durable_position() >= log.end_position());
            }
            70..=79 => {
                // The flusher alone makes everything acknowledged durable.
                let end = log.end_position();
                let started = Instant::now();
                while log.durable_position() < end {
                    assert!(
                        started.elapsed() < FLUSHER_DEADLINE,
                        "seed {seed}: the interval flusher never made {end} durable"
                    );
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            80..=87 => {
                // A clean restart loses nothing.
                log.close().expect("close");
                drop(log);
                log = open(&disk, &opts);
                assert_eq!(
                    contents(&log),
                    acked,
                    "seed {seed}: a clean restart lost records"
                );
            }
            _ => {
                let durable = log.durable_position();
                disk.power_cut(rng.next_u64());
                log.abandon();
                log = open(&disk, &opts);
                let kept = check_after_cut(seed, &acked, durable, &log);
                lost += acked.len() - kept.len();
                acked = kept;
            }
        }
    }
    (lost, appended)
}

fn seeds() -> std::ops::Range<u64> {
    let start = std::env::var("DEADLETTER_SIM_START")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let count = std::env::var("DEADLETTER_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEEDS);
    start..start + count
}

#[test]
fn never_keeps_everything_acknowledged_before_the_last_sync() {
    let (mut lost, mut appended) = (0, 0);
    for seed in seeds() {
        let (l, a) = run(seed, false);
        lost += l;
        appended += a;
    }
    // The runs must have lost something, or they did not test the bound.
    assert!(
        lost > 0,
        "no power cut lost an unsynced record ({appended} appended)"
    );
    eprintln!("Never: {lost} of {appended} records lost to power cuts, all after the last sync");
}

#[test]
fn interval_makes_acknowledged_records_durable_on_its_own() {
    let (mut lost, mut appended) = (0, 0);
    for seed in seeds() {
        let (l, a) = run(seed, true);
        lost += l;
        appended += a;
    }
    eprintln!("Interval: {lost} of {appended} records lost to power cuts, all after the flusher's last pass");
}
