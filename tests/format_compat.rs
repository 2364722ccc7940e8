//! The format of every release stays readable: the store each released format version
//! wrote opens with today's code, with exactly the contents it was written with, and takes
//! new records.
//!
//! `tests/fixtures/vN/store` is a small store in format version N, written by
//! [`write_scenario`] (see its README). Version 1 is the format of release 0.1.0: its
//! fixture is frozen, and opens in every later release. The next release's version (v2) gets
//! a fixture of its own, written again as that version grows until the release freezes it
//! (see "The format rule" in `docs/FORMAT.md`).
//!
//! - `every_fixture_opens_with_its_exact_contents`: for each fixture, a copy is opened; every
//!   queue's and DLQ's counters, every message in the index, every pending message's
//!   payload, attempts and attributes, every DLQ entry's envelope, field by field, the
//!   failure history, every lineage and the audit trail, and every guarded replay are what
//!   the scenario left. Then more records are written (enqueue, lease, ack, retry,
//!   dead-letter, replay, a compaction), the store is reopened, and old and new records are
//!   checked again.
//! - `a_newer_format_version_is_refused_untouched`: a copy whose segment, or whose
//!   checkpoint, says `FORMAT_VERSION + 1` (header and checksum rewritten) is refused with
//!   `Error::UnsupportedFormat` naming both versions, and not a byte of it changes;
//!   `verify` reports it.
//! - `a_pre_release_store_is_refused_untouched`: the same for a store of a development
//!   build before release 0.1.0 (another magic number, versions 1 to 6).
//! - `write_fixture` (ignored): the fixture writer, for the current version while it is
//!   not released:
//!   `DEADLETTER_WRITE_FIXTURE=tests/fixtures/vN cargo test -p deadletter --all-features --test format_compat -- --ignored write_fixture`

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{copy_dir, T0};

use deadletter::audit::{AuditAction, AuditEntry, IdSet};
use deadletter::clock::{Clock, ManualClock};
use deadletter::dlq::{
    Attempt, DeadLetter, DeadLetterSummary, DlqMetadata, DlqStats, EntryStatus, FailureInfo,
    OriginalMetadata,
};
use deadletter::queue::{EnqueueOptions, FailureOutcome, FailureReport, QueueOptions, QueueStats};
use deadletter::recovery::RecoveryMode;
use deadletter::replay::{GuardedReplayOptions, GuardedReplayState};
use deadletter::sim::{DebugMessage, Place, StoreHooks};
use deadletter::store::{CompactionOptions, Durability, FORMAT_VERSION};
use deadletter::verify::HeaderStatus;
use deadletter::{Config, Error, Failure, Filter, Page, ReplayOptions, Store};

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
        // Every segment of the one size, so that a fixture written again has the layout
        // its checks (and `Config::for_existing_store`) expect.
        .first_segment_size(SEGMENT_SIZE)
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

/// The scenario the fixture holds, written with today's API (the fixture writer).
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
    // its third segment.
    let archive = store.queue("archive")?;
    let batch: Vec<Vec<u8>> = (0..20).map(|i| filler("archive", i, 3000)).collect();
    assert_eq!(
        archive.enqueue_batch(&batch)?,
        (42..62).collect::<Vec<u64>>()
    );
    let leased = archive.lease_for(20, vis)?;
    assert_eq!(leased.len(), 20);
    archive.ack_all(&leased)?;
    clock.set(T_END);

    // H. refunds, an hour later (ids 62, 63; 62 with an idempotency key, still live when
    // the store is opened) and two guarded replays of its DLQ: the first (62) stops at its
    // canary, which fails again; the second (63, then 62) is paused with its canary
    // released and waiting. Then a second compaction expires the TTLs, writes the second
    // checkpoint (with the guarded replays) and deletes the first segment.
    let refunds = store.queue("refunds")?;
    let ref1 = EnqueueOptions::new()
        .attribute("customer", "c-200")
        .idempotency_key("REF-1");
    assert_eq!(refunds.enqueue_with(REFUND_1, &ref1)?, 62);
    assert_eq!(refunds.enqueue(REFUND_2)?, 63);
    let rejected = Failure::permanent("RefundRejected", "amount over the limit");
    let report = FailureReport::new(&rejected)
        .duration(ms(15))
        .worker("worker-d");
    for msg in refunds.lease_for(2, vis)? {
        refunds.dead_letter(&msg, &report)?;
    }
    let once = GuardedReplayOptions::default()
        .canary(1)
        .max_failure_ratio(0.0)
        .selection("fixture: REF-1 again");
    let stopped = refunds.dlq().replay_guarded_ids(&[62], &once)?;
    assert_eq!((stopped.id, stopped.replayed), (1, 1));
    let m = refunds.lease_for(1, vis)?;
    assert_eq!((m[0].id(), m[0].attempt()), (62, 2));
    refunds.dead_letter(&m[0], &report)?;
    let stopped = store.guarded_replay(stopped.id)?;
    assert!(
        matches!(stopped.state, GuardedReplayState::Stopped { .. }),
        "{stopped:?}"
    );
    let waves = GuardedReplayOptions::default()
        .canary(1)
        .rate(5)
        .selection("fixture: REF-2, then REF-1");
    let paused = refunds.dlq().replay_guarded_ids(&[63, 62], &waves)?;
    assert_eq!((paused.id, paused.replayed, paused.left), (2, 1, 1));
    store.pause_guarded_replay(paused.id)?;
    let second = store.compact_now()?;
    assert_eq!((second.expired_to_dlq, second.expired_dropped), (1, 1));
    assert!(second.segments_deleted >= 1, "{second:?}");

    // I. the log after the last checkpoint: an enqueue, a DLQ entry marked failed, and a
    // lease, extended, that the close loses.
    let ord8 = EnqueueOptions::new().attribute("customer", "c-104");
    assert_eq!(orders.enqueue_with(order(8), &ord8)?, 64);
    emails.dlq().mark_reprocessed(34, false)?;
    let m = payments.lease_for(1, vis)?;
    assert_eq!(m[0].id(), 33);
    payments.extend(&m[0], Duration::from_secs(60))?;

    // J. A worker pool's batch: payments' last ready message (id 32) reserved and not
    // started, emails' (id 36) reserved and started; the close takes the first back
    // uncounted and leaves the second a suspect.
    let reserved = payments.reserve_wait(5, Duration::ZERO)?;
    assert_eq!(reserved.iter().map(|m| m.id()).collect::<Vec<_>>(), [32]);
    let started = emails.reserve_wait(5, Duration::ZERO)?;
    assert_eq!(started.iter().map(|m| m.id()).collect::<Vec<_>>(), [36]);
    assert_eq!(emails.start(&started[0], &[])?, (0, true));

    // K. A guarded replay of audit's DLQ whose selection has left it (id 0 was acked,
    // 999999 never existed): its canary skips both, and it completes having released
    // nothing. The paused replay of refunds resumes, and is cancelled.
    let guarded = GuardedReplayOptions::default()
        .canary(1)
        .rate(5)
        .max_failure_ratio(0.5)
        .selection("fixture: entries gone");
    let replay = audit.dlq().replay_guarded_ids(&[0, 999_999], &guarded)?;
    assert_eq!(replay.state, GuardedReplayState::Completed);
    store.resume_guarded_replay(paused.id)?;
    store.cancel_guarded_replay(paused.id)?;
    drop((audit, orders, emails, payments, archive, refunds, dlq));
    store.close()
}

/// The payloads of the refunds (ids 62 and 63).
const REFUND_1: &[u8] = b"refund=REF-1;amount=12.00";
const REFUND_2: &[u8] = b"refund=REF-2;amount=99.00";

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
        "the current format version has its fixture"
    );
    for (version, release) in RELEASED {
        assert!(
            out.iter().any(|(v, _)| v == version),
            "the fixture of release {release} (format version {version}) is gone"
        );
    }
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
/// Messages whose lease the close cut are ready at once (visible-at 0) and suspects, and so
/// is a started reservation (36); a reservation not started (32) is taken back: ready at
/// once, its delivery uncounted.
fn scenario_index() -> Vec<DebugMessage> {
    use Place::{Dead, Ready, ReadyAfterLostLease as Lost};
    vec![
        index_entry(17, "audit", Ready, 1, T0 + 2 * SEC, 0),
        index_entry(18, "audit", Lost, 1, 0, 0),
        index_entry(19, "audit", Lost, 1, 0, 0),
        index_entry(21, "orders", Dead, 4, T0 + 27 * SEC, 1),
        index_entry(22, "orders", Dead, 1, T0 + SEC, 0),
        index_entry(23, "orders", Ready, 0, T0 + 601 * SEC, 0),
        index_entry(32, "payments", Ready, 1, 0, 0),
        index_entry(33, "payments", Lost, 2, 0, 0),
        index_entry(34, "emails", Dead, 5, T0 + 23 * SEC, 0),
        index_entry(35, "emails", Dead, 0, T_END, 0),
        index_entry(36, "emails", Lost, 1, 0, 0),
        index_entry(38, "orders", Dead, 1, T0 + 26 * SEC, 0),
        index_entry(40, "orders", Ready, 0, T0 + 27 * SEC, 1),
        index_entry(41, "payments", Dead, 1, T0 + 26 * SEC, 0),
        index_entry(62, "refunds", Dead, 2, T_END, 1),
        index_entry(63, "refunds", Ready, 1, T_END, 1),
        index_entry(64, "orders", Ready, 0, T_END, 0),
    ]
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
        62 => REFUND_1.to_vec(),
        63 => REFUND_2.to_vec(),
        64 => order(8).into_bytes(),
        _ => panic!("message {id} is not in the scenario"),
    }
}

/// The counters of a queue, all but the derived `oldest_ready_at_ms` (not stored: the
/// head of the ready lists): ready, in flight, enqueued, acked, retried, dead-lettered,
/// expired, deleted, DLQ size.
fn queue_counts(s: &QueueStats) -> [u64; 9] {
    [
        s.counts.ready,
        s.counts.in_flight,
        s.counts.enqueued,
        s.counts.acked,
        s.counts.retried,
        s.counts.dead_lettered,
        s.counts.expired,
        s.counts.deleted,
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
        deadletter::dlq::EXPIRED_KIND,
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

/// Entry 62: dead-lettered, released by a guarded replay's canary, delivered again and
/// dead-lettered again (generation 1, both attempts kept).
fn entry_62() -> DeadLetter {
    let (kind, message) = ("RefundRejected", "amount over the limit");
    let failure = FailureInfo::new(kind, message, T_END).attempts(vec![
        attempt(1, T_END, kind, message, 15, "worker-d"),
        attempt(2, T_END, kind, message, 15, "worker-d"),
    ]);
    let metadata = OriginalMetadata::new(62, "refunds", T_END)
        .first_received_at_ms(T_END)
        .delivery_count(2)
        .attributes(attrs(&[("customer", "c-200")]));
    DeadLetter::new(
        REFUND_1.to_vec(),
        metadata,
        failure,
        dlq_meta(T_END, Some("worker-d")),
    )
    .generation(1)
    .dlq_name("refunds-dlq")
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
        let computed = deadletter::dlq::Fingerprint::of_failure(&e.failure, 0);
        assert_eq!(e.fingerprint.take(), Some(computed), "entry {}", e.id());
    }
    entries
}

/// Checks everything the scenario left in `store`, opened at `T_END + 60 s`.
fn check_scenario(store: &Store, ctx: &str) {
    assert_eq!(
        store.queue_names(),
        ["audit", "orders", "emails", "payments", "archive", "refunds"],
        "{ctx}"
    );
    assert_eq!(store.debug_messages(), scenario_index(), "{ctx}");
    for m in scenario_index() {
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
    assert_eq!(queue("refunds"), [1, 0, 2, 0, 0, 3, 0, 0, 1], "{ctx}");

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
        counts(&[("SmtpError", 1), (deadletter::dlq::EXPIRED_KIND, 1)])
    );
    assert_eq!(emails.by_worker, counts(&[("", 1), ("worker-a", 1)]));
    let payments = dlq("payments-dlq");
    assert_eq!(dlq_counts(&payments), [1, 1, 0, 0, 0, 0, 0, 0], "{ctx}");
    assert_eq!(payments.by_error_kind, counts(&[("PaymentDeclined", 1)]));
    // The guarded replays released 62 and 63; 62 came back (failed again).
    let refunds = dlq("refunds-dlq");
    assert_eq!(dlq_counts(&refunds), [1, 1, 0, 0, 1, 2, 0, 0], "{ctx}");
    assert_eq!(refunds.by_error_kind, counts(&[("RefundRejected", 1)]));
    assert_eq!(refunds.by_worker, counts(&[("worker-d", 1)]));
    for empty in ["audit-dlq", "archive-dlq"] {
        assert_eq!(dlq_counts(&dlq(empty)), [0; 8], "{ctx}: {empty}");
    }

    check_entries(store, &[entry_22(), entry_38(), entry_21()], ctx);
    check_guarded(store, ctx);
}

/// The guarded replays of steps H and K, field by field: the first stopped at its canary
/// (62 failed again), the second cancelled with its canary (63) released and waiting, the
/// third completed having skipped its whole selection.
fn check_guarded(store: &Store, ctx: &str) {
    let replays: Vec<_> = store
        .guarded_replays()
        .into_iter()
        .map(|r| {
            (
                (r.id, r.dlq, r.target, r.selection, r.started_by, r.state),
                (
                    r.selected,
                    r.replayed,
                    r.succeeded,
                    r.failed_again,
                    r.removed,
                ),
                (
                    r.waiting,
                    r.skipped,
                    r.left,
                    r.wave,
                    r.wave_size,
                    r.wave_released,
                ),
                (r.canary, r.growth, r.max_failure_ratio, r.rate_per_sec),
                (r.reset_attempts, r.started_at_ms, r.updated_at_ms),
            )
        })
        .collect();
    let head = |id, dlq: &str, selection: &str, state| {
        let by = "library".to_string();
        (id, dlq.to_string(), None, selection.to_string(), by, state)
    };
    let stopped = GuardedReplayState::Stopped {
        wave: 0,
        failed: 1,
        handled: 1,
    };
    assert_eq!(
        replays,
        [
            (
                head(1, "refunds-dlq", "fixture: REF-1 again", stopped),
                (1, 1, 0, 1, 0),
                (0, 0, 0, 0, 1, 1),
                (1, 2.0, 0.0, None),
                (false, T_END, T_END),
            ),
            (
                head(
                    2,
                    "refunds-dlq",
                    "fixture: REF-2, then REF-1",
                    GuardedReplayState::Cancelled
                ),
                (2, 1, 0, 0, 0),
                (1, 0, 1, 0, 1, 1),
                (1, 2.0, 0.1, Some(5)),
                (false, T_END, T_END),
            ),
            (
                head(
                    3,
                    "audit-dlq",
                    "fixture: entries gone",
                    GuardedReplayState::Completed
                ),
                (2, 0, 0, 0, 0),
                (0, 2, 0, 0, 1, 0),
                (1, 2.0, 0.5, Some(5)),
                (false, T_END, T_END),
            ),
        ],
        "{ctx}"
    );
}

/// The failure history: the store keeps every dead-lettering, so each DLQ's history adds
/// up to its queue's dead-lettered count, whatever left the DLQ since.
fn check_history(store: &Store, ctx: &str) {
    for name in store.queue_names() {
        let dlq = store.dlq(&name).unwrap();
        let t = dlq
            .failure_timeline(T1, deadletter::dlq::HISTORY_HOURS)
            .unwrap();
        let total = t.buckets.iter().sum::<u64>() + t.earlier;
        let dead_lettered = store
            .existing_queue(&name)
            .unwrap()
            .stats()
            .counts
            .dead_lettered;
        assert_eq!(total, dead_lettered, "{ctx}: history of {name}");
    }
}

/// Lineage and the audit trail: the store keeps what operators did to its DLQs (the
/// scenario's handles are the library's, the store's own removals are the store's) and the
/// life of each message that was in one, through the scenario's compactions: the
/// tombstone of a deleted entry (39), generations and a corrected replay (21), a store's
/// TTL expiry (35), a replay (40), an import (41), guarded replays (62). The fingerprints
/// are those the store kept when each entry was dead-lettered.
fn check_lineage(store: &Store, ctx: &str) {
    let expected: [(u64, &[&str]); 6] = [
        (
            21,
            &[
                r#"InDlq { dlq: "orders-dlq" }, replays 1, dropped 0"#,
                r#"+1000 - Enqueued { queue: "orders" }"#,
                r#"+13000 - DeadLettered { dlq: "orders-dlq", generation: 0, attempts: 3, error_kind: "ConnectionReset", message: "connection reset by peer", fingerprint: Fingerprint(c3c4a67a3c4191f4), worker: Some("worker-a") }"#,
                r#"+27000 library Replayed { from_dlq: "orders-dlq", to_queue: "orders", generation: 1, corrected: true, detail: None }"#,
                r#"+27000 - DeadLettered { dlq: "orders-dlq", generation: 1, attempts: 4, error_kind: "ValidationError", message: "sku-9 is discontinued", fingerprint: Fingerprint(344abd80026caf1b), worker: Some("worker-b") }"#,
            ],
        ),
        (
            35,
            &[
                r#"InDlq { dlq: "emails-dlq" }, replays 0, dropped 0"#,
                r#"+25000 - Enqueued { queue: "emails" }"#,
                r#"+3700000 store DeadLettered { dlq: "emails-dlq", generation: 0, attempts: 0, error_kind: "expired", message: "the message's time to live passed", fingerprint: Fingerprint(d23f8d7797c042b8), worker: None }"#,
            ],
        ),
        (
            39,
            &[
                r#"Removed { how: Some(Deleted), at_ms: 1700000026000 }, replays 0, dropped 0"#,
                r#"+26000 - Enqueued { queue: "orders" }"#,
                r#"+26000 - DeadLettered { dlq: "orders-dlq", generation: 0, attempts: 1, error_kind: "FraudSuspected", message: "velocity check failed", fingerprint: Fingerprint(8daa578c418d2545), worker: Some("worker-c") }"#,
                r#"+26000 library Removed { how: Deleted }"#,
            ],
        ),
        (
            40,
            &[
                r#"Queued { queue: "orders" }, replays 1, dropped 0"#,
                r#"+26000 - Enqueued { queue: "orders" }"#,
                r#"+26000 - DeadLettered { dlq: "orders-dlq", generation: 0, attempts: 1, error_kind: "PaymentDeclined", message: "card expired", fingerprint: Fingerprint(38dfb08df1f90e7a), worker: Some("worker-c") }"#,
                r#"+27000 library Replayed { from_dlq: "orders-dlq", to_queue: "orders", generation: 1, corrected: false, detail: None }"#,
            ],
        ),
        (
            41,
            &[
                r#"InDlq { dlq: "payments-dlq" }, replays 0, dropped 0"#,
                r#"+26000 - Enqueued { queue: "payments" }"#,
                r#"+26000 library Imported { dlq: "payments-dlq", original_id: 40, error_kind: "PaymentDeclined", message: "card expired" }"#,
            ],
        ),
        (
            62,
            &[
                r#"InDlq { dlq: "refunds-dlq" }, replays 1, dropped 0"#,
                r#"+3700000 - Enqueued { queue: "refunds" }"#,
                r#"+3700000 - DeadLettered { dlq: "refunds-dlq", generation: 0, attempts: 1, error_kind: "RefundRejected", message: "amount over the limit", fingerprint: Fingerprint(e99b3bafa489ded9), worker: Some("worker-d") }"#,
                r#"+3700000 library Replayed { from_dlq: "refunds-dlq", to_queue: "refunds", generation: 1, corrected: false, detail: None }"#,
                r#"+3700000 - DeadLettered { dlq: "refunds-dlq", generation: 1, attempts: 2, error_kind: "RefundRejected", message: "amount over the limit", fingerprint: Fingerprint(e99b3bafa489ded9), worker: Some("worker-d") }"#,
            ],
        ),
    ];
    for (id, lines) in expected {
        assert_eq!(history_lines(store, id), lines, "{ctx}: history of {id}");
    }
    let at = |s: u64| T0 + s * SEC;
    let entry = |t: u64, actor: &str, action, ids: &[u64]| {
        AuditEntry::new(t, actor, action, IdSet::of(ids))
    };
    use AuditAction::{Delete, Import, MarkReprocessed, Replay, TtlExpiry};
    assert_eq!(
        store.audit_trail(100),
        [
            entry(at(26), "library", MarkReprocessed, &[38]),
            entry(at(26), "library", Delete, &[39]),
            entry(at(26), "library", Import, &[41]),
            entry(at(27), "library", Replay, &[40]),
            entry(at(27), "library", Replay, &[21]),
            entry(T_END, "library", Replay, &[62]),
            entry(T_END, "library", Replay, &[63]),
            entry(T_END, "store", TtlExpiry, &[37]),
            entry(T_END, "store", TtlExpiry, &[35]),
            entry(T_END, "library", MarkReprocessed, &[34]),
        ],
        "{ctx}"
    );
}

/// The history of message `id` in lines: where it is, how often it was replayed and how
/// many steps were dropped, then each step as its time (ms after `T0`), actor and event.
fn history_lines(store: &Store, id: u64) -> Vec<String> {
    let h = store.history(id).unwrap();
    let head = format!(
        "{:?}, replays {}, dropped {}",
        h.state, h.replays, h.steps_dropped
    );
    let steps = h.steps.iter().map(|s| {
        let actor = s.actor.as_deref().unwrap_or("-");
        format!("+{} {actor} {:?}", s.at_ms - T0, s.event)
    });
    std::iter::once(head).chain(steps).collect()
}

/// Time travel: every DLQ as of now shows what its list shows, and the store knows its
/// DLQs from the start (its horizon is 0), which were empty before the scenario.
fn check_as_of(store: &Store, ctx: &str) {
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
        let empty = dlq.as_of(T0 - 1).unwrap();
        assert!(
            empty
                .list(&Filter::all(), Page::first(100))
                .unwrap()
                .is_empty(),
            "{ctx}: {name}"
        );
    }
    assert_eq!(horizon, 0, "{ctx}");
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
    assert_eq!(entries(store, "refunds-dlq"), [entry_62()], "{ctx}");
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

fn continue_scenario(store: &Store) {
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
            (64, 1, T_END, attrs(&[("customer", "c-104")])),
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
    assert_eq!(drain(&emails), [delivered(36, 2)]);
    // The guarded replay that was cancelled left its canary in refunds; the idempotency key
    // of 62 is still live.
    let refunds = store.queue("refunds").unwrap();
    assert_eq!(drain(&refunds), [delivered(63, 2)]);
    let ref1 = EnqueueOptions::new().idempotency_key("REF-1");
    assert_eq!(refunds.enqueue_with(REFUND_1, &ref1).unwrap(), 62);

    let dlq = orders.dlq();
    dlq.replay_one(22, &ReplayOptions::to_origin().reset_attempts())
        .unwrap();
    let m = orders.lease_for(1, vis).unwrap();
    assert_eq!((m[0].id(), m[0].attempt()), (22, 1));
    assert_eq!(m[0].attributes(), &attrs(&[("customer", "c-102")]));
    orders.ack(&m[0]).unwrap();

    let fresh = store.queue("fresh").unwrap();
    let with_attr = EnqueueOptions::new().attribute("k", "v");
    assert_eq!(fresh.enqueue_with("new-1", &with_attr).unwrap(), 65);
    assert_eq!(fresh.enqueue_batch(&["new-2", "new-3"]).unwrap(), [66, 67]);
    assert_eq!(orders.enqueue(order(9)).unwrap(), 68);
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
        index_entry(62, "refunds", Dead, 2, T_END, 1),
        index_entry(64, "orders", Ready, 1, T1 + 10 * SEC, 0),
        index_entry(65, "fresh", Ready, 0, T1, 0),
        index_entry(66, "fresh", Ready, 0, T1, 0),
        index_entry(67, "fresh", Ready, 0, T1, 0),
        index_entry(68, "orders", Ready, 0, T1, 0),
    ];
    assert_eq!(store.debug_messages(), index, "{ctx}");
    for (id, payload) in [
        (62, String::from_utf8(REFUND_1.to_vec()).unwrap()),
        (64, order(8)),
        (65, "new-1".into()),
        (66, "new-2".into()),
        (67, "new-3".into()),
        (68, order(9)),
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
    assert_eq!(queue("refunds"), [0, 0, 2, 1, 0, 3, 0, 0, 1], "{ctx}");
    let fresh = store.existing_queue("fresh").unwrap();
    let m = fresh.lease_for(3, Duration::from_secs(30)).unwrap();
    let attributes: Vec<_> = m.iter().map(|m| (m.id(), m.attributes().clone())).collect();
    assert_eq!(
        attributes,
        [
            (65, attrs(&[("k", "v")])),
            (66, attrs(&[])),
            (67, attrs(&[]))
        ],
        "{ctx}"
    );
}

#[test]
fn every_fixture_opens_with_its_exact_contents() {
    for (version, fixture) in fixtures() {
        let ctx = format!("fixture v{version}");
        let dir = copy_of(&fixture);
        // Its identity: from version 2 on, every segment and checkpoint names the store's
        // id, and the segments are numbered in order; version 1 has none.
        let before = deadletter::verify::verify(dir.path()).unwrap();
        assert!(before.is_clean(), "{ctx}: {before:?}");
        if version >= 2 {
            let id = before
                .store_id
                .clone()
                .expect("a version-2 store has an id");
            let seqs: Vec<Option<u64>> = before.segments.iter().map(|s| s.seq).collect();
            let first = seqs[0].unwrap();
            let expected: Vec<Option<u64>> = (first..first + seqs.len() as u64).map(Some).collect();
            assert_eq!(seqs, expected, "{ctx}");
            assert!(before
                .segments
                .iter()
                .all(|s| s.store_id.as_ref() == Some(&id)));
            assert!(before
                .checkpoints
                .iter()
                .all(|c| c.store_id.as_ref() == Some(&id)));
        } else {
            assert_eq!(before.store_id, None, "{ctx}");
        }
        // A tool that did not write the store finds its segment size.
        let found = Config::for_existing_store(dir.path());
        assert_eq!(found.segment_size, SEGMENT_SIZE, "{ctx}");
        let clock = ManualClock::new(T1);
        let store = Store::open(dir.path(), config(&clock)).unwrap();
        assert!(store.recovery_report().torn_tail.is_none(), "{ctx}");
        check_scenario(&store, &ctx);
        check_history(&store, &ctx);
        check_lineage(&store, &ctx);
        check_as_of(&store, &ctx);
        // Reading changed nothing: a second open finds the same.
        store.close().unwrap();
        let store = Store::open(dir.path(), config(&clock)).unwrap();
        check_scenario(&store, &format!("{ctx}, reopened"));

        continue_scenario(&store);
        store.close().unwrap();
        let store = Store::open(dir.path(), config(&clock)).unwrap();
        check_continued(&store, &format!("{ctx}, continued"));
        drop(store);

        // What was written since is in the current version; nothing is damaged.
        let report = deadletter::verify::verify(dir.path()).unwrap();
        assert!(report.is_clean(), "{ctx}: {report:?}");
        // A store of version 1 got an id at its first writable open (its new segments and
        // checkpoints carry it); a store of version 2 kept its own.
        let id = report.store_id.clone().expect("the store has an id");
        if version >= 2 {
            assert_eq!(Some(&id), before.store_id.as_ref(), "{ctx}");
        }
        for s in report.segments.iter().filter(|s| s.version >= Some(2)) {
            assert_eq!(s.store_id.as_ref(), Some(&id), "{ctx}: {s:?}");
        }
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
/// checksum (CRC-32 of the header's bytes before it, at the end of the header: its length
/// is at 10, 32 bytes in version 1, 56 in version 2).
fn bump_segment_version(path: &Path, version: u16) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[8..10].copy_from_slice(&version.to_le_bytes());
    let len = u16::from_le_bytes([bytes[10], bytes[11]]) as usize;
    let crc = crc32fast::hash(&bytes[..len - 4]);
    bytes[len - 4..len].copy_from_slice(&crc.to_le_bytes());
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

/// Opens the store in `dir` in both recovery modes, and checks that each open is refused
/// with `Error::UnsupportedFormat` naming `found` and this build's version (`pre_release`
/// as given), and that nothing in the directory changed; then that `verify` changes nothing
/// either and counts no problem, though the store is not clean. Returns the error's text
/// and the report.
fn refused_untouched(
    dir: &Path,
    what: &str,
    found: u16,
    pre_release: bool,
) -> (String, deadletter::verify::VerifyReport) {
    let before = dir_contents(dir);
    let clock = ManualClock::new(T1);
    // The default segment size differs from the store's: an open that went ahead would
    // grow the active segment. Neither recovery mode opens it.
    for config in [
        Config::default().clock(clock.clone()),
        config(&clock).recovery(RecoveryMode::Quarantine),
    ] {
        match Store::open(dir, config) {
            Err(Error::UnsupportedFormat {
                path,
                found: f,
                supported,
                pre_release: p,
            }) => {
                assert_eq!(
                    (f, supported, p),
                    (found, FORMAT_VERSION, pre_release),
                    "{what}"
                );
                assert!(path.starts_with(dir), "{what}: {path:?}");
            }
            Err(other) => panic!("{what}: {other:?}"),
            Ok(_) => panic!("{what}: the store opened"),
        }
        assert_eq!(dir_contents(dir), before, "{what}: the store changed");
    }
    let text = Store::open(dir, config(&clock)).unwrap_err().to_string();
    // verify says so, without counting it as damage.
    let report = deadletter::verify::verify(dir).unwrap();
    assert_eq!(report.problems(), 0, "{what}: {report:?}");
    assert!(!report.is_clean(), "{what}");
    assert_eq!(report.supported_version, FORMAT_VERSION);
    assert_eq!(
        dir_contents(dir),
        before,
        "{what}: verify changed the store"
    );
    (text, report)
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
        let (text, report) = refused_untouched(dir.path(), what, newer, false);
        assert!(
            text.contains(&format!("format version {newer}"))
                && text.contains(&format!("up to {FORMAT_VERSION}")),
            "{what}: {text}"
        );
        let newer_files = report.newer_versions();
        assert_eq!(newer_files.len(), 1, "{what}: {report:?}");
        assert_eq!(newer_files[0].1, newer, "{what}");
        assert!(report.pre_release_files().is_empty(), "{what}");
        if let Some(seg) = report
            .segments
            .iter()
            .find(|s| s.header == HeaderStatus::UnsupportedVersion)
        {
            assert_eq!((seg.version, seg.records), (Some(newer), 0), "{what}");
        }
    }
}

/// Rewrites `path` as a development build before release 0.1.0 would have written its
/// header: that build's magic (segments `DLTRSEG\0`, checkpoints `DLTRCKPT`), its format
/// version, and the checksum over it (development segments and checkpoints kept theirs
/// where ours are).
fn as_pre_release(path: &Path, version: u16) {
    let mut bytes = std::fs::read(path).unwrap();
    if bytes.starts_with(b"DLTRSEGM") {
        bytes[0..8].copy_from_slice(b"DLTRSEG\0");
        // A development build's header had 32 bytes, its checksum at 28.
        bytes[10..12].copy_from_slice(&32u16.to_le_bytes());
        std::fs::write(path, bytes).unwrap();
        bump_segment_version(path, version);
    } else {
        assert!(bytes.starts_with(b"DLTRCHKP"), "{}", path.display());
        bytes[0..8].copy_from_slice(b"DLTRCKPT");
        std::fs::write(path, bytes).unwrap();
        bump_checkpoint_version(path, version);
    }
}

/// A store of a development build before release 0.1.0 (whose headers also say versions 1
/// to 6, of another format) is recognised as such: refused with the typed error in both
/// recovery modes, whether a segment or a checkpoint says so, never read as this format
/// nor reported as damage, and left as it was.
#[test]
fn a_pre_release_store_is_refused_untouched() {
    let (_, fixture) = fixtures().pop().unwrap();
    let files: Vec<String> = common::dir_contents(&fixture)
        .into_keys()
        .filter(|n| n.ends_with(".seg") || n.starts_with("checkpoint-"))
        .collect();
    let last_segment = files.iter().filter(|n| n.ends_with(".seg")).max().unwrap();
    let checkpoint = files.iter().find(|n| n.starts_with("checkpoint-")).unwrap();
    for version in [1, 3, 6] {
        let cases: [(&str, Vec<&String>); 3] = [
            ("every file", files.iter().collect()),
            ("the active segment", vec![last_segment]),
            ("a checkpoint", vec![checkpoint]),
        ];
        for (what, rewritten) in cases {
            let what = format!("{what}, development format {version}");
            let dir = copy_of(&fixture);
            for f in rewritten {
                as_pre_release(&dir.path().join(f), version);
            }
            let (text, report) = refused_untouched(dir.path(), &what, version, true);
            assert!(
                text.contains("development build") && text.contains("before release 0.1.0"),
                "{what}: {text}"
            );
            let listed = report.pre_release_files();
            assert!(!listed.is_empty(), "{what}: {report:?}");
            assert!(listed.iter().all(|(_, v)| *v == version), "{what}");
            assert!(report.newer_versions().is_empty(), "{what}");
        }
    }
}

/// The format versions of releases, with the release that froze each: their fixtures are
/// never written again. The current version, until its release, is not listed: its fixture
/// is written again as the format grows.
const RELEASED: &[(u16, &str)] = &[(1, "0.1.0")];

/// The fixture writer: writes the scenario into `$DEADLETTER_WRITE_FIXTURE/store` (which
/// must be `tests/fixtures/v{FORMAT_VERSION}`) and a README saying what it is. It refuses to
/// touch the fixture of a released version.
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
    let release = RELEASED.iter().find(|(v, _)| *v == FORMAT_VERSION);
    if target.exists() {
        assert!(
            release.is_none(),
            "{} is the fixture of a released format: it is never written again",
            target.display()
        );
        std::fs::remove_dir_all(&target).unwrap();
    }
    let store = target.join("store");
    write_scenario(&store).unwrap();
    std::fs::remove_file(store.join("LOCK")).unwrap();
    // The checkpoint reserve is zeros that nothing reads (an open makes it again).
    std::fs::remove_file(store.join("checkpoint.tmp")).unwrap();
    let status = match release {
        Some((_, release)) => format!(
            "the format of release {release}.\n\n\
             **Frozen.** Never rewrite it: every later release opens it, with these exact\n\
             contents."
        ),
        None => "the format of the next release.\n\n\
             **Not released yet.** The format may change until that release: write the\n\
             fixture again (the command below) as it grows. Once the release is tagged, list\n\
             the version in `RELEASED` (`tests/format_compat.rs`): from then on it is frozen."
            .to_string(),
    };
    let readme = format!(
        "# Format version {FORMAT_VERSION} fixture\n\n\
         `store/` is a small store in on-disk format version {FORMAT_VERSION}, {status}\n\n\
         `tests/format_compat.rs` opens a copy and checks its exact contents; the unit tests\n\
         of `src/engine/wire/` read its records and checkpoints byte by byte.\n\n\
         It was written by `write_scenario` in `tests/format_compat.rs`, through its\n\
         `write_fixture` test:\n\n\
         ```sh\n\
         DEADLETTER_WRITE_FIXTURE=tests/fixtures/v{FORMAT_VERSION} cargo test -p deadletter --all-features \\\n    \
         --test format_compat -- --ignored write_fixture\n\
         ```\n\n\
         The scenario is deterministic (a manual clock, fixed payloads, explicit durations\n\
         and workers, no background compaction, no retry jitter), and it holds what the\n\
         format can hold: several queues; messages with attributes, a TTL, a delay and an\n\
         idempotency key; leases (acked, released, extended, cut by the close); DLQ entries\n\
         with a bounded history and dropped attempts, details, stack traces, context and\n\
         tags, marked reprocessed, expired, deleted (a tombstone) and imported; replays\n\
         with generations, one with a corrected payload; guarded replays (stopped, paused,\n\
         resumed, cancelled, completed); the audit trail; per-hour failure history; a\n\
         worker pool's reservations (started and not); relocated records; two checkpoints\n\
         and records after the newer one, in two sealed segments and the active one, with\n\
         its tail hint (`*.tmp`). The checkpoint reserve (`checkpoint.tmp`, zeros) is left\n\
         out: nothing reads it, and an open makes it again.\n"
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
