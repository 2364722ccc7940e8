//! Every on-disk format version stays readable: the stores each version wrote open with
//! today's code, with exactly the contents they were written with, and take new records.
//!
//! `tests/fixtures/vN/store` is a small store written in format version N (v1 by the code
//! of deadletter's first version, see its README). Every fixture holds the same scenario,
//! so one set of expectations describes them all: [`write_scenario`] (today's API) and
//! `tests/fixtures/v1/GENERATOR.rs.txt` (the first version's API) do the same things in
//! the same order, on a manual clock, with fixed payloads.
//!
//! - `every_fixture_opens_with_its_exact_contents`: for each fixture, a copy is opened; every
//!   queue's and DLQ's counters, every message in the index, every pending message's
//!   payload, attempts and attributes, and every DLQ entry's envelope, field by field, are
//!   what the scenario left. Then more records are written (enqueue, lease, ack, retry,
//!   dead-letter, replay, a compaction), the store is reopened, and old and new records are
//!   checked again.
//! - `a_newer_format_version_is_refused_untouched`: a copy whose segment, or whose
//!   checkpoint, says `FORMAT_VERSION + 1` (header and checksum rewritten) is refused with
//!   `Error::UnsupportedFormat` naming both versions, and not a byte of it changes;
//!   `verify` reports it.
//! - `write_fixture` (ignored): the current-version fixture writer. After a change of the
//!   format (see "Changing the format" in `docs/FORMAT.md`):
//!   `DEADLETTER_WRITE_FIXTURE=tests/fixtures/vN cargo test --all-features --test format_compat -- --ignored write_fixture`

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{copy_dir, T0};

use deadletter::sim::{DebugMessage, Place, StoreHooks};
use deadletter::{
    Attempt, AuditAction, Clock, CompactionOptions, Config, DeadLetter, DeadLetterSummary,
    DlqMetadata, DlqStats, Durability, EnqueueOptions, EntryStatus, Error, Failure, FailureInfo,
    FailureOutcome, FailureReport, Filter, GuardedReplayOptions, GuardedReplayState, HeaderStatus,
    HistoryEvent, ManualClock, MessageState, OriginalMetadata, Page, QueueOptions, QueueStats,
    RecoveryMode, Removal, ReplayOptions, Store, FORMAT_VERSION,
};

const SEC: u64 = 1000;
/// The clock when the scenario ends.
const T_END: u64 = T0 + 3_700 * SEC;
/// Retention of DLQ entries (the default, 30 days), in milliseconds.
const RETENTION: u64 = 30 * 24 * 3600 * SEC;
const SEGMENT_SIZE: u64 = 72 << 10;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `len` bytes repeating `{tag}-{i:03};`.
fn filler(tag: &str, i: usize, len: usize) -> Vec<u8> {
    let unit = format!("{tag}-{i:03};");
    unit.bytes().cycle().take(len).collect()
}

fn order(n: u32) -> String {
    format!(r#"{{"orderId":"ORD-{n}"}}"#)
}

fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The store settings the scenario was written with.
fn config(clock: &ManualClock) -> Config {
    Config::default()
        .durability(Durability::Always)
        .clock(clock.clone())
        .segment_size(SEGMENT_SIZE)
        .max_message_size(4 << 10)
        .environment("fixture")
        .code_version("fixture-1.0")
        .max_history(3)
        .include_stack_traces(true)
        .preallocate(false)
        .compaction(
            CompactionOptions::default()
                .interval(None)
                .relocate_below(0.5)
                .max_forward_jump(Duration::from_secs(7 * 24 * 3600))
                .batch(256),
        )
}

/// The queues of the scenario with their options (options live in the process, not in the
/// store, so every opener sets them again).
struct Queues {
    audit: deadletter::Queue,
    orders: deadletter::Queue,
    emails: deadletter::Queue,
    payments: deadletter::Queue,
}

fn queues(store: &Store) -> Queues {
    Queues {
        audit: store
            .queue_with("audit", QueueOptions::default().expired_to_dlq(false))
            .unwrap(),
        orders: store
            .queue_with("orders", QueueOptions::default().max_attempts(3))
            .unwrap(),
        emails: store
            .queue_with(
                "emails",
                QueueOptions::default().default_ttl(Duration::from_secs(3600)),
            )
            .unwrap(),
        payments: store.queue("payments").unwrap(),
    }
}

/// The scenario every fixture holds, written with today's API (the current-version fixture
/// writer). Step by step the same as `tests/fixtures/v1/GENERATOR.rs.txt`.
fn write_scenario(dir: &Path) -> deadletter::Result<()> {
    let clock = ManualClock::new(T0);
    let store = Store::open(dir, config(&clock))?;
    let Queues {
        audit,
        orders,
        emails,
        payments,
    } = queues(&store);
    let vis = Duration::from_secs(30);

    // A. audit: 20 messages of 3,000 bytes (ids 0..=19); 17 acked, one released, one
    // extended, and two left leased: their leases are lost when the store closes.
    let batch: Vec<Vec<u8>> = (0..20).map(|i| filler("audit", i, 3000)).collect();
    assert_eq!(audit.enqueue_batch(&batch)?, (0..20).collect::<Vec<u64>>());
    let leased = audit.lease_for(20, Duration::from_secs(60))?;
    assert_eq!(leased.len(), 20);
    audit.ack_all(&leased[..17])?;
    audit.release(&leased[17], Duration::from_secs(2))?;
    audit.extend(&leased[18], Duration::from_secs(120))?;
    clock.advance(SEC);

    // B. orders (ids 20..=23): attributes, an idempotency key, a delayed message; one
    // acked, one retried twice then dead-lettered on its last attempt, one dead-lettered
    // at once with details, a stack trace, context and a tag.
    let ord1 = EnqueueOptions::new()
        .attribute("customer", "c-100")
        .attribute("priority", "high")
        .idempotency_key("ORD-1");
    assert_eq!(orders.enqueue_with(order(1), &ord1)?, 20);
    let ord2 = EnqueueOptions::new().attribute("customer", "c-101");
    assert_eq!(orders.enqueue_with(order(2), &ord2)?, 21);
    let ord3 = EnqueueOptions::new().attribute("customer", "c-102");
    assert_eq!(orders.enqueue_with(order(3), &ord3)?, 22);
    let ord4 = EnqueueOptions::new()
        .attribute("customer", "c-103")
        .delay(Duration::from_secs(600));
    assert_eq!(orders.enqueue_with(order(4), &ord4)?, 23);
    let again = EnqueueOptions::new().idempotency_key("ORD-1");
    assert_eq!(orders.enqueue_with(order(1), &again)?, 20);
    let m = orders.lease_for(3, vis)?;
    assert_eq!(m.iter().map(|m| m.id()).collect::<Vec<_>>(), [20, 21, 22]);
    orders.ack(&m[0])?;
    let timeout = Failure::transient("Timeout", "inventory service timed out")
        .with_details("GET /inventory/sku-9: 504");
    let report = FailureReport::new(&timeout)
        .duration(ms(1500))
        .worker("worker-a");
    orders.retry(&m[1], &report, clock.now_ms() + 5 * SEC)?;
    let invalid = Failure::permanent("ValidationError", "missing field: sku")
        .with_details("line 1, column 17")
        .with_stack_trace("at orders::validate (src/orders.rs:42)")
        .with_context("field", "sku")
        .with_context("schema", "v3");
    let report = FailureReport::new(&invalid)
        .duration(ms(40))
        .worker("worker-b")
        .tag("team", "checkout");
    orders.dead_letter(&m[2], &report)?;
    clock.advance(6 * SEC);
    let m = orders.lease_for(1, vis)?;
    assert_eq!((m[0].id(), m[0].attempt()), (21, 2));
    let report = FailureReport::new(&timeout)
        .duration(ms(2500))
        .worker("worker-b");
    orders.retry(&m[0], &report, clock.now_ms() + 5 * SEC)?;
    clock.advance(6 * SEC);
    let m = orders.lease_for(1, vis)?;
    assert_eq!((m[0].id(), m[0].attempt()), (21, 3));
    let reset = Failure::transient("ConnectionReset", "connection reset by peer");
    let report = FailureReport::new(&reset)
        .duration(ms(800))
        .worker("worker-a");
    let outcome = orders.retry(&m[0], &report, clock.now_ms() + 5 * SEC)?;
    assert_eq!(outcome, FailureOutcome::DeadLettered);
    clock.advance(SEC);

    // C. payments: 10 messages of 2,000 bytes (ids 24..=33), which roll the log into its
    // second segment; 8 acked, one retried (a pending message with a history), one
    // released.
    let batch: Vec<Vec<u8>> = (0..10).map(|i| filler("payment", i, 2000)).collect();
    assert_eq!(
        payments.enqueue_batch(&batch)?,
        (24..34).collect::<Vec<u64>>()
    );
    let m = payments.lease_for(10, vis)?;
    payments.ack_all(&m[..8])?;
    let busy =
        Failure::transient("GatewayBusy", "payment gateway busy").with_details("retry-after: 60");
    let report = FailureReport::new(&busy)
        .duration(ms(300))
        .worker("worker-c");
    payments.retry(&m[8], &report, clock.now_ms() + 60 * SEC)?;
    payments.release(&m[9], Duration::ZERO)?;
    clock.advance(SEC);

    // D. emails: one message fails five times (max_history 3 keeps the last three and
    // counts two dropped); TTLs: one expires to the DLQ, one stays; an audit message with
    // a TTL is dropped when it expires (audit's expired_to_dlq is false).
    assert_eq!(emails.enqueue(b"to=ann@example.com;template=welcome")?, 34);
    let smtp = Failure::transient("SmtpError", "451 4.7.1 try again later");
    for attempt in 1..=5u32 {
        let m = emails.lease_for(1, vis)?;
        assert_eq!((m[0].id(), m[0].attempt()), (34, attempt));
        let worker = if attempt % 2 == 1 {
            "worker-a"
        } else {
            "worker-b"
        };
        let report = FailureReport::new(&smtp)
            .duration(ms(100 * attempt as u64))
            .worker(worker);
        let outcome = emails.retry(&m[0], &report, clock.now_ms() + SEC)?;
        assert_eq!(outcome == FailureOutcome::DeadLettered, attempt == 5);
        clock.advance(2 * SEC);
    }
    assert_eq!(emails.enqueue(b"to=bob@example.com;template=reset")?, 35);
    let digest = EnqueueOptions::new().ttl(Duration::from_secs(4 * 3600));
    assert_eq!(
        emails.enqueue_with(b"to=cy@example.com;template=digest", &digest)?,
        36
    );
    let short = EnqueueOptions::new().ttl(Duration::from_secs(1800));
    assert_eq!(audit.enqueue_with(b"audit: short-lived", &short)?, 37);
    clock.advance(SEC);

    // E. orders-dlq: three more entries (ids 38..=40); one marked reprocessed, one
    // deleted, one exported and imported into payments-dlq (id 41). Then a compaction:
    // relocation of the first segment's live records and the first checkpoint.
    for n in 5..=7 {
        orders.enqueue(order(n))?;
    }
    let m = orders.lease_for(3, vis)?;
    assert_eq!(m.iter().map(|m| m.id()).collect::<Vec<_>>(), [38, 39, 40]);
    let declined = Failure::permanent("PaymentDeclined", "card declined");
    let fraud = Failure::permanent("FraudSuspected", "velocity check failed");
    let expired_card = Failure::permanent("PaymentDeclined", "card expired");
    for (msg, failure) in m.iter().zip([&declined, &fraud, &expired_card]) {
        let report = FailureReport::new(failure)
            .duration(ms(10))
            .worker("worker-c");
        orders.dead_letter(msg, &report)?;
    }
    let dlq = orders.dlq();
    dlq.mark_reprocessed(38, true)?;
    dlq.delete(39)?;
    let exported = dlq.get(40)?;
    assert_eq!(payments.dlq().import(&exported)?, 41);
    clock.advance(SEC);
    let first = store.compact_now()?;
    assert!(first.records_relocated > 0, "{first:?}");
    assert!(first.checkpoint_position.is_some());

    // F. replays: 40 back to orders with its attempts reset; 21 with a corrected payload,
    // keeping its attempts, then delivered and dead-lettered again (its history goes on,
    // the payload it replaced is kept).
    dlq.replay_one(40, &ReplayOptions::to_origin().reset_attempts())?;
    let corrected = br#"{"orderId":"ORD-2","sku":"sku-9"}"#;
    dlq.replay_corrected(21, corrected, &ReplayOptions::to_origin())?;
    let m = orders.lease_for(1, vis)?;
    assert_eq!((m[0].id(), m[0].attempt()), (21, 4));
    assert_eq!(m[0].payload(), corrected);
    let discontinued =
        Failure::permanent("ValidationError", "sku-9 is discontinued").with_details("catalog v7");
    let report = FailureReport::new(&discontinued)
        .duration(ms(25))
        .worker("worker-b");
    orders.dead_letter(&m[0], &report)?;
    clock.advance(SEC);

    // G. archive: 20 messages of 3,000 bytes (ids 42..=61), all acked, roll the log into
    // its third segment. An hour later a second compaction expires the TTLs, writes the
    // second checkpoint and deletes the first segment.
    let archive = store.queue("archive")?;
    let batch: Vec<Vec<u8>> = (0..20).map(|i| filler("archive", i, 3000)).collect();
    assert_eq!(
        archive.enqueue_batch(&batch)?,
        (42..62).collect::<Vec<u64>>()
    );
    let leased = archive.lease_for(20, vis)?;
    assert_eq!(leased.len(), 20);
    archive.ack_all(&leased)?;
    clock.set(T0 + 3700 * SEC);
    let second = store.compact_now()?;
    assert_eq!((second.expired_to_dlq, second.expired_dropped), (1, 1));
    assert!(second.segments_deleted >= 1, "{second:?}");

    // H. the log after the last checkpoint: an enqueue, a DLQ entry marked failed, and a
    // lease that the close loses.
    let ord8 = EnqueueOptions::new().attribute("customer", "c-104");
    assert_eq!(orders.enqueue_with(order(8), &ord8)?, 62);
    emails.dlq().mark_reprocessed(34, false)?;
    let m = payments.lease_for(1, vis)?;
    assert_eq!(m[0].id(), 33);

    // I (format version 3 and later). A worker pool's batch: payments' last ready message
    // (id 32) reserved and not started, emails' (id 36) reserved and started; the close
    // takes the first back uncounted and leaves the second a suspect.
    clock.set(T_END);
    let reserved = payments.reserve_wait(5, Duration::ZERO)?;
    assert_eq!(reserved.iter().map(|m| m.id()).collect::<Vec<_>>(), [32]);
    let started = emails.reserve_wait(5, Duration::ZERO)?;
    assert_eq!(started.iter().map(|m| m.id()).collect::<Vec<_>>(), [36]);
    assert_eq!(emails.start(&started[0], &[])?, (0, true));

    // J (format version 6 and later). A guarded replay of audit's DLQ whose selection has
    // left it (id 0 was acked, 999999 never existed): its canary skips both, and it
    // completes having released nothing.
    let guarded = GuardedReplayOptions::to_origin()
        .canary(1)
        .rate(5)
        .max_failure_ratio(0.5)
        .selection("fixture: entries gone");
    let replay = audit.dlq().replay_guarded_ids(&[0, 999_999], &guarded)?;
    assert_eq!(replay.state, GuardedReplayState::Completed);
    drop((audit, orders, emails, payments, archive, dlq));
    store.close()
}

/// Every fixture store, with the format version its directory is named after.
fn fixtures() -> Vec<(u16, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out: Vec<(u16, PathBuf)> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let version = name.strip_prefix('v')?.parse().ok()?;
            Some((version, e.path().join("store")))
        })
        .collect();
    out.sort();
    assert_eq!(
        out.last().map(|(v, _)| *v),
        Some(FORMAT_VERSION),
        "every format version has its fixture, the current one included"
    );
    out
}

/// A copy of a fixture store in a new temporary directory, with the lock file every
/// store has once opened.
fn copy_of(store: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(store, dir.path());
    std::fs::write(dir.path().join("LOCK"), b"").unwrap();
    dir
}

fn index_entry(
    id: u64,
    queue: &str,
    place: Place,
    attempts: u32,
    visible_at_ms: u64,
    generation: u32,
) -> DebugMessage {
    DebugMessage {
        id,
        queue: queue.into(),
        place,
        attempts,
        visible_at_ms,
        generation,
        suspect: place == Place::ReadyAfterLostLease,
    }
}

/// The index the scenario leaves, as a reopen rebuilds it: every message, where it is,
/// its deliveries, its visible-at (lease deadline, dead-lettered-at) and generation.
/// Messages whose lease the close cut are ready at once (visible-at 0) and suspects.
///
/// From format version 3 on, the fixture also holds a reservation the close took back (32:
/// ready at once, its delivery uncounted) and a started one (36: a suspect, counted).
fn scenario_index(version: u16) -> Vec<DebugMessage> {
    use Place::{Dead, Ready, ReadyAfterLostLease as Lost};
    let mut index = vec![
        index_entry(17, "audit", Ready, 1, T0 + 2 * SEC, 0),
        index_entry(18, "audit", Lost, 1, 0, 0),
        index_entry(19, "audit", Lost, 1, 0, 0),
        index_entry(21, "orders", Dead, 4, T0 + 27 * SEC, 1),
        index_entry(22, "orders", Dead, 1, T0 + SEC, 0),
        index_entry(23, "orders", Ready, 0, T0 + 601 * SEC, 0),
        index_entry(32, "payments", Ready, 1, T0 + 74 * SEC, 0),
        index_entry(33, "payments", Lost, 2, 0, 0),
        index_entry(34, "emails", Dead, 5, T0 + 23 * SEC, 0),
        index_entry(35, "emails", Dead, 0, T_END, 0),
        index_entry(36, "emails", Ready, 0, T0 + 25 * SEC, 0),
        index_entry(38, "orders", Dead, 1, T0 + 26 * SEC, 0),
        index_entry(40, "orders", Ready, 0, T0 + 27 * SEC, 1),
        index_entry(41, "payments", Dead, 1, T0 + 26 * SEC, 0),
        index_entry(62, "orders", Ready, 0, T_END, 0),
    ];
    if version >= 3 {
        for m in &mut index {
            match m.id {
                32 => m.visible_at_ms = 0,
                36 => *m = index_entry(36, "emails", Lost, 1, 0, 0),
                _ => {}
            }
        }
    }
    index
}

/// The payload of every message of the scenario's index.
fn scenario_payload(id: u64) -> Vec<u8> {
    match id {
        17..=19 => filler("audit", id as usize, 3000),
        21 => br#"{"orderId":"ORD-2","sku":"sku-9"}"#.to_vec(),
        22 => order(3).into_bytes(),
        23 => order(4).into_bytes(),
        32 | 33 => filler("payment", id as usize - 24, 2000),
        34 => b"to=ann@example.com;template=welcome".to_vec(),
        35 => b"to=bob@example.com;template=reset".to_vec(),
        36 => b"to=cy@example.com;template=digest".to_vec(),
        38 => order(5).into_bytes(),
        40 | 41 => order(7).into_bytes(),
        62 => order(8).into_bytes(),
        _ => panic!("message {id} is not in the scenario"),
    }
}

/// The counters of a queue, all but the derived `oldest_ready_at_ms` (not stored: the
/// head of the ready lists): ready, in flight, enqueued, acked, retried, dead-lettered,
/// expired, deleted, DLQ size.
fn queue_counts(s: &QueueStats) -> [u64; 9] {
    [
        s.ready,
        s.in_flight,
        s.enqueued,
        s.acked,
        s.retried,
        s.dead_lettered,
        s.expired,
        s.deleted,
        s.dlq_size,
    ]
}

/// The counters of a DLQ: total, pending, reprocessed (kept), reprocessed ok and failed,
/// replayed, deleted, expired.
fn dlq_counts(s: &DlqStats) -> [u64; 8] {
    [
        s.total,
        s.pending,
        s.reprocessed,
        s.reprocessed_ok,
        s.reprocessed_failed,
        s.replayed,
        s.deleted,
        s.expired,
    ]
}

fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
}

/// The DLQ metadata the scenario's store gives an entry dead-lettered at `at` (its
/// environment, code version and 30-day retention).
fn dlq_meta(at: u64, worker: Option<&str>) -> DlqMetadata {
    let meta = DlqMetadata::new(at)
        .environment("fixture")
        .code_version("fixture-1.0")
        .expires_at_ms(at + RETENTION);
    match worker {
        Some(w) => meta.worker(w),
        None => meta,
    }
}

fn attempt(n: u32, at: u64, kind: &str, message: &str, duration: u64, worker: &str) -> Attempt {
    Attempt::new(n, at, kind, message)
        .duration_ms(duration)
        .worker(worker)
}

/// A permanent failure on the first delivery: an entry of `queue`'s DLQ for message `id`
/// (`payload`, enqueued and first delivered at `enqueued`), failed at `at` with `failure`
/// after `duration_ms` on `worker`.
fn failed_once(
    (id, queue, payload): (u64, &str, Vec<u8>),
    enqueued: u64,
    at: u64,
    (kind, message): (&str, &str),
    (duration_ms, worker): (u64, &str),
) -> DeadLetter {
    let failure = FailureInfo::new(kind, message, at).attempts(vec![attempt(
        1,
        at,
        kind,
        message,
        duration_ms,
        worker,
    )]);
    let metadata = OriginalMetadata::new(id, queue, enqueued)
        .first_received_at_ms(enqueued)
        .delivery_count(1);
    DeadLetter::new(payload, metadata, failure, dlq_meta(at, Some(worker)))
        .dlq_name(format!("{queue}-dlq"))
}

/// Entry 22: dead-lettered at once, with details, a stack trace, context and a tag.
fn entry_22() -> DeadLetter {
    let at = T0 + SEC;
    let (kind, message) = ("ValidationError", "missing field: sku");
    let failure = FailureInfo::new(kind, message, at)
        .details("line 1, column 17")
        .stack_trace("at orders::validate (src/orders.rs:42)")
        .context(attrs(&[("field", "sku"), ("schema", "v3")]))
        .attempts(vec![
            attempt(1, at, kind, message, 40, "worker-b").details("line 1, column 17")
        ]);
    let metadata = OriginalMetadata::new(22, "orders", at)
        .first_received_at_ms(at)
        .delivery_count(1)
        .attributes(attrs(&[("customer", "c-102")]));
    let dlq = dlq_meta(at, Some("worker-b")).tags(attrs(&[("team", "checkout")]));
    DeadLetter::new(order(3).into_bytes(), metadata, failure, dlq).dlq_name("orders-dlq")
}

/// Entry 38: marked reprocessed (ok).
fn entry_38() -> DeadLetter {
    let at = T0 + 26 * SEC;
    let message = (38, "orders", order(5).into_bytes());
    failed_once(
        message,
        at,
        at,
        ("PaymentDeclined", "card declined"),
        (10, "worker-c"),
    )
    .status(EntryStatus::Reprocessed {
        success: true,
        at_ms: at,
    })
}

/// Entry 21: retried twice, dead-lettered on its last attempt, replayed with a corrected
/// payload keeping its attempts, and dead-lettered again: generation 1, the payload it
/// replaced kept, the newest three of its four attempts.
fn entry_21() -> DeadLetter {
    let at = T0 + 27 * SEC;
    let timeout = ("Timeout", "inventory service timed out");
    let failure = FailureInfo::new("ValidationError", "sku-9 is discontinued", at)
        .details("catalog v7")
        .attempts(vec![
            attempt(2, T0 + 7 * SEC, timeout.0, timeout.1, 2500, "worker-b")
                .details("GET /inventory/sku-9: 504"),
            attempt(
                3,
                T0 + 13 * SEC,
                "ConnectionReset",
                "connection reset by peer",
                800,
                "worker-a",
            ),
            attempt(
                4,
                at,
                "ValidationError",
                "sku-9 is discontinued",
                25,
                "worker-b",
            )
            .details("catalog v7"),
        ])
        .attempts_dropped(1);
    let metadata = OriginalMetadata::new(21, "orders", T0 + SEC)
        .first_received_at_ms(T0 + SEC)
        .delivery_count(4)
        .attributes(attrs(&[("customer", "c-101")]));
    DeadLetter::new(
        br#"{"orderId":"ORD-2","sku":"sku-9"}"#.to_vec(),
        metadata,
        failure,
        dlq_meta(at, Some("worker-b")),
    )
    .replaced_payload(order(2).into_bytes())
    .generation(1)
    .dlq_name("orders-dlq")
}

/// Entry 34: five failures, the newest three kept, marked reprocessed (failed).
fn entry_34() -> DeadLetter {
    let (kind, message) = ("SmtpError", "451 4.7.1 try again later");
    let at = T0 + 23 * SEC;
    let failure = FailureInfo::new(kind, message, at)
        .attempts(vec![
            attempt(3, T0 + 19 * SEC, kind, message, 300, "worker-a"),
            attempt(4, T0 + 21 * SEC, kind, message, 400, "worker-b"),
            attempt(5, at, kind, message, 500, "worker-a"),
        ])
        .attempts_dropped(2);
    let metadata = OriginalMetadata::new(34, "emails", T0 + 15 * SEC)
        .first_received_at_ms(T0 + 15 * SEC)
        .delivery_count(5);
    DeadLetter::new(
        scenario_payload(34),
        metadata,
        failure,
        dlq_meta(at, Some("worker-a")),
    )
    .status(EntryStatus::Reprocessed {
        success: false,
        at_ms: T_END,
    })
    .dlq_name("emails-dlq")
}

/// Entry 35: expired by its TTL, never delivered.
fn entry_35() -> DeadLetter {
    let failure = FailureInfo::new(
        deadletter::EXPIRED_KIND,
        "the message's time to live passed",
        T_END,
    );
    let metadata = OriginalMetadata::new(35, "emails", T0 + 25 * SEC);
    DeadLetter::new(
        scenario_payload(35),
        metadata,
        failure,
        dlq_meta(T_END, None),
    )
    .dlq_name("emails-dlq")
}

/// Entry 41: entry 40 exported and imported into payments-dlq (its record keeps 40 as its
/// original id, read back as `original_id`).
fn entry_41() -> DeadLetter {
    let at = T0 + 26 * SEC;
    let message = (41, "payments", order(7).into_bytes());
    failed_once(
        message,
        at,
        at,
        ("PaymentDeclined", "card expired"),
        (10, "worker-c"),
    )
    .original_id(40)
}

/// The entries of `dlq`, each checked to carry the fingerprint of its failure (which the
/// index computes, and no fixture stores) and to have the summary `list_summaries` and
/// `summary` read, then without the fingerprint, to compare with the scenario's.
fn entries(store: &Store, dlq: &str) -> Vec<DeadLetter> {
    let dlq = store.dlq(dlq).unwrap();
    let mut entries = dlq.list(&Filter::all(), Page::first(100)).unwrap();
    // Summaries read the same records without decoding them whole.
    let summaries = dlq
        .list_summaries(&Filter::all(), Page::first(100))
        .unwrap();
    let expected: Vec<DeadLetterSummary> = entries
        .iter()
        .cloned()
        .map(DeadLetterSummary::from)
        .collect();
    assert_eq!(summaries, expected);
    for s in &summaries {
        assert_eq!(&dlq.summary(s.id).unwrap(), s);
    }
    for e in &mut entries {
        let computed = deadletter::Fingerprint::of_failure(&e.failure, 0);
        assert_eq!(e.fingerprint.take(), Some(computed), "entry {}", e.id());
    }
    entries
}

/// Checks everything the scenario left in `store`, opened at `T_END + 60 s`.
fn check_scenario(store: &Store, ctx: &str, version: u16) {
    assert_eq!(
        store.queue_names(),
        ["audit", "orders", "emails", "payments", "archive"],
        "{ctx}"
    );
    assert_eq!(store.debug_messages(), scenario_index(version), "{ctx}");
    for m in scenario_index(version) {
        let payload = store.debug_payload(m.id).unwrap();
        assert_eq!(
            payload,
            scenario_payload(m.id),
            "{ctx}: payload of {}",
            m.id
        );
    }
    let queue = |name| queue_counts(&store.existing_queue(name).unwrap().stats());
    assert_eq!(queue("audit"), [3, 0, 21, 17, 0, 0, 1, 0, 0], "{ctx}");
    assert_eq!(queue("orders"), [3, 0, 8, 1, 2, 6, 0, 0, 3], "{ctx}");
    assert_eq!(queue("emails"), [1, 0, 3, 0, 4, 2, 1, 0, 2], "{ctx}");
    assert_eq!(queue("payments"), [2, 0, 10, 8, 1, 1, 0, 0, 1], "{ctx}");
    assert_eq!(queue("archive"), [0, 0, 20, 20, 0, 0, 0, 0, 0], "{ctx}");

    let dlq = |name| store.dlq(name).unwrap().stats();
    let orders = dlq("orders-dlq");
    assert_eq!(dlq_counts(&orders), [3, 2, 1, 1, 1, 2, 1, 0], "{ctx}");
    assert_eq!(
        orders.by_error_kind,
        counts(&[("PaymentDeclined", 1), ("ValidationError", 2)])
    );
    assert_eq!(
        orders.by_worker,
        counts(&[("worker-b", 2), ("worker-c", 1)])
    );
    assert_eq!(
        (orders.oldest_age_ms, orders.newest_age_ms),
        (Some(3_759_000), Some(3_733_000))
    );
    let emails = dlq("emails-dlq");
    assert_eq!(dlq_counts(&emails), [2, 1, 1, 0, 1, 0, 0, 0], "{ctx}");
    assert_eq!(
        emails.by_error_kind,
        counts(&[("SmtpError", 1), (deadletter::EXPIRED_KIND, 1)])
    );
    assert_eq!(emails.by_worker, counts(&[("", 1), ("worker-a", 1)]));
    let payments = dlq("payments-dlq");
    assert_eq!(dlq_counts(&payments), [1, 1, 0, 0, 0, 0, 0, 0], "{ctx}");
    assert_eq!(payments.by_error_kind, counts(&[("PaymentDeclined", 1)]));
    for empty in ["audit-dlq", "archive-dlq"] {
        assert_eq!(dlq_counts(&dlq(empty)), [0; 8], "{ctx}: {empty}");
    }

    check_entries(store, &[entry_22(), entry_38(), entry_21()], ctx);
    check_guarded(store, version, ctx);
}

/// From format version 6 on, the store holds the guarded replay of step J, completed.
fn check_guarded(store: &Store, version: u16, ctx: &str) {
    let replays = store.guarded_replays();
    if version < 6 {
        assert!(replays.is_empty(), "{ctx}");
        return;
    }
    assert_eq!(replays.len(), 1, "{ctx}");
    let r = &replays[0];
    assert_eq!(
        (
            r.id,
            r.dlq.as_str(),
            r.selection.as_str(),
            r.started_by.as_str(),
            r.state
        ),
        (
            1,
            "audit-dlq",
            "fixture: entries gone",
            "library",
            GuardedReplayState::Completed
        ),
        "{ctx}"
    );
    assert_eq!(
        (
            r.selected,
            r.replayed,
            r.skipped,
            r.left,
            r.canary,
            r.rate_per_sec
        ),
        (2, 0, 2, 0, 1, Some(5)),
        "{ctx}"
    );
    assert_eq!(
        (r.max_failure_ratio, r.started_at_ms),
        (0.5, T_END),
        "{ctx}"
    );
}

/// The failure history: from format version 4 on, the store keeps every dead-lettering
/// (so each DLQ's history adds up to its queue's dead-lettered count, whatever left the DLQ
/// since); an older store has none before its checkpoint, so the history starts with the
/// entries the checkpoint held, and counts at least every entry held now.
fn check_history(store: &Store, version: u16, ctx: &str) {
    for name in store.queue_names() {
        let dlq = store.dlq(&name).unwrap();
        let t = dlq.failure_timeline(T1, deadletter::HISTORY_HOURS).unwrap();
        let total = t.buckets.iter().sum::<u64>() + t.earlier;
        let dead_lettered = store.existing_queue(&name).unwrap().stats().dead_lettered;
        if version >= 4 {
            assert_eq!(total, dead_lettered, "{ctx}: history of {name}");
        } else {
            assert!(
                total >= dlq.len() && total <= dead_lettered,
                "{ctx}: history of {name}"
            );
        }
    }
}

/// Lineage and the audit trail: from format version 5 on, the store keeps what operators
/// did to its DLQs (the scenario's handles are the library's) and the life of each message
/// that was in one, through the scenario's two compactions. An older store kept none of
/// it before its newest checkpoint (its horizon).
fn check_lineage(store: &Store, version: u16, ctx: &str) {
    if version < 5 {
        return;
    }
    let h = store.history(39).unwrap();
    assert_eq!(
        h.state,
        MessageState::Removed {
            how: Some(Removal::Deleted),
            at_ms: T0 + 26 * SEC
        },
        "{ctx}"
    );
    let last = h.steps.last().unwrap();
    assert_eq!(last.actor.as_deref(), Some("library"), "{ctx}");
    assert!(
        matches!(&h.steps[1].event, HistoryEvent::DeadLettered { error_kind, .. } if error_kind == "FraudSuspected"),
        "{ctx}: {h:?}"
    );
    let replayed = store.history(40).unwrap();
    assert!(
        replayed.steps.iter().any(|s| matches!(
            s.event,
            HistoryEvent::Replayed { generation: 1, .. }
        ) && s.actor.as_deref() == Some("library")),
        "{ctx}: {replayed:?}"
    );
    let imported = store.history(41).unwrap();
    assert!(
        matches!(
            imported.steps[1].event,
            HistoryEvent::Imported {
                original_id: 40,
                ..
            }
        ),
        "{ctx}: {imported:?}"
    );
    let actions: Vec<AuditAction> = store.audit_trail(100).iter().map(|e| e.action).collect();
    for action in [
        AuditAction::MarkReprocessed,
        AuditAction::Delete,
        AuditAction::Import,
        AuditAction::Replay,
    ] {
        assert!(actions.contains(&action), "{ctx}: {actions:?}");
    }
}

/// Time travel: every DLQ as of now shows what its list shows, whatever the version (an
/// entry restored from a checkpoint that kept no lineage is answered from the index and its
/// envelope). An older store answers from its horizon on (its newest checkpoint's time)
/// and refuses earlier times with a typed error; from version 5 on the store knows its DLQs
/// from the start, which were empty before the scenario.
fn check_as_of(store: &Store, version: u16, ctx: &str) {
    let horizon = store.audit_horizon();
    for name in store.queue_names() {
        let dlq = store.existing_queue(&name).unwrap().dlq();
        let live = dlq.list(&Filter::all(), Page::first(100)).unwrap();
        let past = dlq.as_of(T1).unwrap();
        let shown = past.list(&Filter::all(), Page::first(100)).unwrap();
        let view: Vec<_> = shown
            .iter()
            .map(|e| {
                (
                    e.id,
                    e.dead_lettered_at_ms,
                    e.error_kind.clone(),
                    e.error_message.clone(),
                    e.worker.clone(),
                    e.attempts,
                    e.generation,
                    e.status,
                )
            })
            .collect();
        let want: Vec<_> = live
            .iter()
            .map(|e| {
                (
                    e.id(),
                    e.dlq.dead_lettered_at_ms,
                    e.failure.error_kind.clone(),
                    e.failure.error_message.clone(),
                    e.dlq.worker.clone(),
                    e.metadata.delivery_count,
                    e.generation,
                    e.status,
                )
            })
            .collect();
        assert_eq!(view, want, "{ctx}: {name} as of now");
        let (now, then) = (dlq.stats(), past.stats());
        assert_eq!(
            (
                then.total,
                then.pending,
                then.reprocessed,
                &then.by_error_kind
            ),
            (now.total, now.pending, now.reprocessed, &now.by_error_kind),
            "{ctx}: {name} counts as of now"
        );
        let before = if version < 5 { horizon - 1 } else { T0 - 1 };
        match dlq.as_of(before) {
            Err(Error::BeforeHorizon {
                asked_ms,
                earliest_ms,
            }) => {
                assert!(version < 5, "{ctx}: {name}");
                assert_eq!((asked_ms, earliest_ms), (before, horizon), "{ctx}");
            }
            Ok(empty) => {
                assert!(version >= 5 && empty.is_empty(), "{ctx}: {name}");
            }
            Err(e) => panic!("{ctx}: {name} as of {before}: {e}"),
        }
    }
    if version < 5 {
        assert!(horizon > T0 && horizon <= T_END, "{ctx}: horizon {horizon}");
    } else {
        assert_eq!(horizon, 0, "{ctx}");
    }
}

/// Checks every DLQ's entries, field by field: orders-dlq holds `orders`; the others hold
/// what the scenario left (nothing changes them afterwards).
fn check_entries(store: &Store, orders: &[DeadLetter], ctx: &str) {
    assert_eq!(entries(store, "orders-dlq"), orders, "{ctx}");
    assert_eq!(
        entries(store, "emails-dlq"),
        [entry_34(), entry_35()],
        "{ctx}"
    );
    assert_eq!(entries(store, "payments-dlq"), [entry_41()], "{ctx}");
}

/// A delivery as a test sees it: id, attempt, payload, attributes.
type Delivered = (u64, u32, Vec<u8>, BTreeMap<String, String>);

/// Leases from `queue` one message at a time until none is left (suspects are delivered
/// one at a time), acking each; returns what was delivered, sorted by id.
fn drain(queue: &deadletter::Queue) -> Vec<Delivered> {
    let mut out = Vec::new();
    loop {
        let m = queue.lease_for(1, Duration::from_secs(30)).unwrap();
        let Some(m) = m.first() else { break };
        out.push((
            m.id(),
            m.attempt(),
            m.payload().to_vec(),
            m.attributes().clone(),
        ));
        queue.ack(m).unwrap();
    }
    out.sort();
    out
}

/// After the scenario: every pending message is delivered (its attempts, payload and
/// attributes checked) and dealt with, an entry is replayed and acked, new messages are
/// enqueued, and a compaction writes a checkpoint. Time is `T1`.
const T1: u64 = T_END + 60 * SEC;

fn continue_scenario(store: &Store, version: u16) {
    let Queues {
        audit,
        orders,
        emails,
        payments,
    } = queues(store);
    let vis = Duration::from_secs(30);
    let m = orders.lease_for(10, vis).unwrap();
    let seen: Vec<_> = m
        .iter()
        .map(|m| {
            (
                m.id(),
                m.attempt(),
                m.enqueued_at_ms(),
                m.attributes().clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (40, 1, T0 + 26 * SEC, attrs(&[])),
            (23, 1, T0 + SEC, attrs(&[("customer", "c-103")])),
            (62, 1, T_END, attrs(&[("customer", "c-104")])),
        ]
    );
    for m in &m {
        assert_eq!(m.payload(), scenario_payload(m.id()));
    }
    orders.ack(&m[1]).unwrap();
    let again = Failure::permanent("PaymentDeclined", "card expired again");
    let report = FailureReport::new(&again)
        .duration(ms(5))
        .worker("worker-d");
    orders.dead_letter(&m[0], &report).unwrap();
    let slow = Failure::transient("Timeout", "slow");
    let report = FailureReport::new(&slow).duration(ms(7)).worker("worker-d");
    assert_eq!(
        orders.retry(&m[2], &report, T1 + 10 * SEC).unwrap(),
        FailureOutcome::Retried {
            visible_at_ms: T1 + 10 * SEC
        }
    );

    let delivered = |id: u64, attempt: u32| (id, attempt, scenario_payload(id), attrs(&[]));
    assert_eq!(
        drain(&audit),
        [delivered(17, 2), delivered(18, 2), delivered(19, 2)]
    );
    assert_eq!(drain(&payments), [delivered(32, 2), delivered(33, 3)]);
    let emails_36 = if version >= 3 { 2 } else { 1 };
    assert_eq!(drain(&emails), [delivered(36, emails_36)]);

    let dlq = orders.dlq();
    dlq.replay_one(22, &ReplayOptions::to_origin().reset_attempts())
        .unwrap();
    let m = orders.lease_for(1, vis).unwrap();
    assert_eq!((m[0].id(), m[0].attempt()), (22, 1));
    assert_eq!(m[0].attributes(), &attrs(&[("customer", "c-102")]));
    orders.ack(&m[0]).unwrap();

    let fresh = store.queue("fresh").unwrap();
    let with_attr = EnqueueOptions::new().attribute("k", "v");
    assert_eq!(fresh.enqueue_with("new-1", &with_attr).unwrap(), 63);
    assert_eq!(fresh.enqueue_batch(&["new-2", "new-3"]).unwrap(), [64, 65]);
    assert_eq!(orders.enqueue(order(9)).unwrap(), 66);
    let report = store.compact_now().unwrap();
    assert!(report.checkpoint_position.is_some());
}

/// Entry 40 after `continue_scenario`: replayed (attempts reset), delivered once more and
/// dead-lettered again.
fn entry_40_again() -> DeadLetter {
    let message = (40, "orders", order(7).into_bytes());
    let failure = ("PaymentDeclined", "card expired again");
    failed_once(message, T0 + 26 * SEC, T1, failure, (5, "worker-d")).generation(1)
}

/// Checks the store after `continue_scenario` and a reopen: the records written before
/// and after.
fn check_continued(store: &Store, ctx: &str) {
    use Place::{Dead, Ready};
    let index = vec![
        index_entry(21, "orders", Dead, 4, T0 + 27 * SEC, 1),
        index_entry(34, "emails", Dead, 5, T0 + 23 * SEC, 0),
        index_entry(35, "emails", Dead, 0, T_END, 0),
        index_entry(38, "orders", Dead, 1, T0 + 26 * SEC, 0),
        index_entry(40, "orders", Dead, 1, T1, 1),
        index_entry(41, "payments", Dead, 1, T0 + 26 * SEC, 0),
        index_entry(62, "orders", Ready, 1, T1 + 10 * SEC, 0),
        index_entry(63, "fresh", Ready, 0, T1, 0),
        index_entry(64, "fresh", Ready, 0, T1, 0),
        index_entry(65, "fresh", Ready, 0, T1, 0),
        index_entry(66, "orders", Ready, 0, T1, 0),
    ];
    assert_eq!(store.debug_messages(), index, "{ctx}");
    for (id, payload) in [
        (62, order(8)),
        (63, "new-1".into()),
        (64, "new-2".into()),
        (65, "new-3".into()),
        (66, order(9)),
    ] {
        assert_eq!(
            store.debug_payload(id).unwrap(),
            payload.as_bytes(),
            "{ctx}"
        );
    }
    check_entries(store, &[entry_38(), entry_21(), entry_40_again()], ctx);
    let orders = store.dlq("orders-dlq").unwrap().stats();
    assert_eq!(dlq_counts(&orders), [3, 2, 1, 2, 2, 3, 1, 0], "{ctx}");
    let queue = |name| queue_counts(&store.existing_queue(name).unwrap().stats());
    assert_eq!(queue("orders"), [2, 0, 9, 3, 3, 7, 0, 0, 3], "{ctx}");
    assert_eq!(queue("audit"), [0, 0, 21, 20, 0, 0, 1, 0, 0], "{ctx}");
    assert_eq!(queue("fresh"), [3, 0, 3, 0, 0, 0, 0, 0, 0], "{ctx}");
    let fresh = store.existing_queue("fresh").unwrap();
    let m = fresh.lease_for(3, Duration::from_secs(30)).unwrap();
    let attributes: Vec<_> = m.iter().map(|m| (m.id(), m.attributes().clone())).collect();
    assert_eq!(
        attributes,
        [
            (63, attrs(&[("k", "v")])),
            (64, attrs(&[])),
            (65, attrs(&[]))
        ],
        "{ctx}"
    );
}

#[test]
fn every_fixture_opens_with_its_exact_contents() {
    for (version, fixture) in fixtures() {
        let ctx = format!("fixture v{version}");
        let dir = copy_of(&fixture);
        // A tool that did not write the store finds its segment size.
        let found = Config::for_existing_store(dir.path());
        assert_eq!(found.segment_size, SEGMENT_SIZE, "{ctx}");
        let clock = ManualClock::new(T1);
        let store = Store::open(dir.path(), config(&clock)).unwrap();
        assert!(store.recovery_report().torn_tail.is_none(), "{ctx}");
        check_scenario(&store, &ctx, version);
        check_history(&store, version, &ctx);
        check_lineage(&store, version, &ctx);
        check_as_of(&store, version, &ctx);
        // Reading changed nothing: a second open finds the same.
        store.close().unwrap();
        let store = Store::open(dir.path(), config(&clock)).unwrap();
        check_scenario(&store, &format!("{ctx}, reopened"), version);

        continue_scenario(&store, version);
        store.close().unwrap();
        let store = Store::open(dir.path(), config(&clock)).unwrap();
        check_continued(&store, &format!("{ctx}, continued"));
        drop(store);

        // What was written since is in the current version; nothing is damaged.
        let report = deadletter::verify(dir.path()).unwrap();
        assert!(report.is_clean(), "{ctx}: {report:?}");
        let last = report.segments.last().unwrap();
        assert_eq!(last.version, Some(FORMAT_VERSION), "{ctx}");
        assert!(
            report
                .checkpoints
                .iter()
                .any(|c| c.version == Some(FORMAT_VERSION)),
            "{ctx}: {:?}",
            report.checkpoints
        );
        for s in &report.segments {
            assert!(
                s.version.is_some_and(|v| v <= FORMAT_VERSION),
                "{ctx}: {s:?}"
            );
        }
    }
}

/// Rewrites the format version of the segment header at the start of `path` and its
/// checksum (CRC-32 of bytes 0..28, at 28).
fn bump_segment_version(path: &Path, version: u16) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[8..10].copy_from_slice(&version.to_le_bytes());
    let crc = crc32fast::hash(&bytes[..28]);
    bytes[28..32].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(path, bytes).unwrap();
}

/// Rewrites the format version of a checkpoint file and its checksum (CRC-32 of the whole
/// file with the checksum's bytes 12..16 zeroed).
fn bump_checkpoint_version(path: &Path, version: u16) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[8..10].copy_from_slice(&version.to_le_bytes());
    bytes[12..16].fill(0);
    let crc = crc32fast::hash(&bytes);
    bytes[12..16].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_newer_format_version_is_refused_untouched() {
    let (_, fixture) = fixtures().pop().unwrap();
    let newer = FORMAT_VERSION + 1;
    let segments = |dir: &Path| {
        let mut names: Vec<String> = common::dir_contents(dir)
            .into_keys()
            .filter(|n| n.ends_with(".seg"))
            .collect();
        names.sort();
        names
    };
    let first_segment = segments(&fixture)[0].clone();
    let last_segment = segments(&fixture).pop().unwrap();
    type Bump<'a> = &'a dyn Fn(&Path);
    let cases: [(&str, Bump); 3] = [
        ("the first (sealed) segment", &|dir| {
            bump_segment_version(&dir.join(&first_segment), newer)
        }),
        ("the active segment", &|dir| {
            bump_segment_version(&dir.join(&last_segment), newer)
        }),
        ("a checkpoint", &|dir| {
            bump_checkpoint_version(&dir.join("checkpoint-1"), newer)
        }),
    ];
    for (what, bump) in cases {
        let dir = copy_of(&fixture);
        bump(dir.path());
        let before = dir_contents(dir.path());
        let clock = ManualClock::new(T1);
        // The default segment size differs from the store's: an open that went ahead would
        // grow the active segment. Neither recovery mode opens it.
        for config in [
            Config::default().clock(clock.clone()),
            config(&clock).recovery(RecoveryMode::Quarantine),
        ] {
            match Store::open(dir.path(), config) {
                Err(Error::UnsupportedFormat {
                    path,
                    found,
                    supported,
                }) => {
                    assert_eq!((found, supported), (newer, FORMAT_VERSION), "{what}");
                    assert!(path.starts_with(dir.path()), "{what}: {path:?}");
                }
                Err(other) => panic!("{what}: {other:?}"),
                Ok(_) => panic!("{what}: a newer format version opened"),
            }
            assert_eq!(
                dir_contents(dir.path()),
                before,
                "{what}: the store changed"
            );
        }
        let err = Store::open(dir.path(), config(&clock)).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&format!("format version {newer}"))
                && text.contains(&format!("up to {FORMAT_VERSION}")),
            "{what}: {text}"
        );

        // verify says so, without counting it as damage.
        let report = deadletter::verify(dir.path()).unwrap();
        let newer_files = report.newer_versions();
        assert_eq!(newer_files.len(), 1, "{what}: {report:?}");
        assert_eq!(newer_files[0].1, newer, "{what}");
        assert_eq!(report.problems(), 0, "{what}");
        assert!(!report.is_clean(), "{what}");
        assert_eq!(report.supported_version, FORMAT_VERSION);
        if let Some(seg) = report
            .segments
            .iter()
            .find(|s| s.header == HeaderStatus::UnsupportedVersion)
        {
            assert_eq!((seg.version, seg.records), (Some(newer), 0), "{what}");
        }
        assert_eq!(
            dir_contents(dir.path()),
            before,
            "{what}: verify changed the store"
        );
    }
}

/// The current-version fixture writer: writes the scenario into
/// `$DEADLETTER_WRITE_FIXTURE/store` (which must be `tests/fixtures/v{FORMAT_VERSION}` and
/// must not exist yet) and a README saying what wrote it.
#[test]
#[ignore = "writes a fixture store: DEADLETTER_WRITE_FIXTURE=tests/fixtures/vN"]
fn write_fixture() {
    let target = std::env::var_os("DEADLETTER_WRITE_FIXTURE")
        .map(PathBuf::from)
        .expect("set DEADLETTER_WRITE_FIXTURE=tests/fixtures/v<FORMAT_VERSION>");
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join(target);
    let name = format!("v{FORMAT_VERSION}");
    assert_eq!(
        target.file_name().and_then(|n| n.to_str()),
        Some(name.as_str()),
        "this build writes format version {FORMAT_VERSION}: its fixture is tests/fixtures/{name}"
    );
    assert!(
        !target.exists(),
        "{} exists: a fixture, once written, is never rewritten",
        target.display()
    );
    let store = target.join("store");
    write_scenario(&store).unwrap();
    std::fs::remove_file(store.join("LOCK")).unwrap();
    let readme = format!(
        "# Format version {FORMAT_VERSION} fixture\n\n\
         `store/` was written in on-disk format version {FORMAT_VERSION} by `write_scenario` in\n\
         `tests/format_compat.rs` (run through its `write_fixture` test). It holds the same\n\
         scenario as every other fixture; `tests/format_compat.rs` opens it and checks its\n\
         exact contents. Never rewrite it: the stores users have look like this one.\n"
    );
    std::fs::write(target.join("README.md"), readme).unwrap();
}

/// The store's files and their bytes, without the lock file: an open that is refused still
/// takes the lock, and writes into it who holds it (for the error another process gets).
fn dir_contents(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut files = common::dir_contents(dir);
    files.remove("LOCK");
    files
}
