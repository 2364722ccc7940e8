//! Replays with new payloads: each payload through a function (`replay_transformed`),
//! with its dry run; corrected payloads in one batch (`replay_corrected_batch`), refused
//! for an entry replayed since the generation they were made from; a failing function or
//! a refused entry leaves that entry in the DLQ as it was.

use deadletter::audit::{AuditAction, HistoryEvent};
use deadletter::clock::ManualClock;
use deadletter::dlq::DeadLetter;
use deadletter::replay::Correction;
use deadletter::{Error, Filter, Page, ReplayOptions};

use crate::common::{self, T0};
use crate::helpers::{fail_one, fast, options};

/// Upper-cases a payload that is all ASCII letters, digits and dashes; refuses the rest.
fn upper(p: &[u8]) -> Result<Vec<u8>, String> {
    match p.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-') {
        true => Ok(p.to_ascii_uppercase()),
        false => Err(format!("not an order id: {}", String::from_utf8_lossy(p))),
    }
}

fn entries(dlq: &deadletter::Dlq) -> Vec<DeadLetter> {
    dlq.list(&Filter::all(), Page::first(100)).unwrap()
}

#[test]
fn a_transform_replays_what_it_changed_and_leaves_what_it_failed_on() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(fast(&clock));
    let q = store.queue_with("orders", options(3)).unwrap();
    q.enqueue_batch(&["ord-1", "ORD-2", "ord;3", "ord-4"])
        .unwrap();
    let ids: Vec<u64> = (0..4).map(|_| fail_one(&q, "BadId")).collect();
    let dlq = q.dlq();
    let before = entries(&dlq);

    // The dry run: every payload before and after, nothing changed.
    let plan = dlq
        .replay_transformed(&Filter::all(), &ReplayOptions::to_origin().dry_run(), upper)
        .unwrap();
    assert!(plan.dry_run);
    assert_eq!(plan.replayed, [ids[0], ids[1], ids[3]]);
    assert_eq!(plan.unchanged, [ids[1]]);
    assert_eq!(plan.transformed(), 2);
    assert_eq!(
        plan.failed,
        [(ids[2], "not an order id: ord;3".to_string())]
    );
    let changes: Vec<(&[u8], &[u8])> = plan
        .payloads
        .iter()
        .map(|c| (&c.before[..], &c.after[..]))
        .collect();
    assert_eq!(
        changes,
        [
            (&b"ord-1"[..], &b"ORD-1"[..]),
            (b"ORD-2", b"ORD-2"),
            (b"ord-4", b"ORD-4")
        ]
    );
    assert!(plan.payloads[1].is_unchanged());
    assert_eq!(entries(&dlq), before);
    assert!(q.is_empty());

    // For real: the consumer gets the new payloads; the failed one stays as it was.
    let options = ReplayOptions::to_origin().detail("upper-cased order ids");
    let done = dlq
        .replay_transformed(&Filter::all(), &options, upper)
        .unwrap();
    assert!(!done.dry_run && done.payloads.is_empty());
    assert_eq!(done.replayed, [ids[0], ids[1], ids[3]]);
    assert_eq!(done.unchanged, [ids[1]]);
    assert_eq!(done.failed.len(), 1);
    assert_eq!(entries(&dlq), vec![before[2].clone()]);
    let got: Vec<(u64, Vec<u8>)> = q
        .lease(10)
        .unwrap()
        .iter()
        .map(|m| (m.id(), m.payload().to_vec()))
        .collect();
    assert_eq!(
        got,
        [
            (ids[0], b"ORD-1".to_vec()),
            (ids[1], b"ORD-2".to_vec()),
            (ids[3], b"ORD-4".to_vec())
        ]
    );

    // Failing again, a transformed entry keeps the payload it replaced; the unchanged one
    // replaced nothing.
    clock.advance(2_000);
    for _ in 0..3 {
        fail_one(&q, "StillBad");
    }
    let again = |id| dlq.get(id).unwrap();
    assert_eq!(again(ids[0]).payload, b"ORD-1");
    assert_eq!(
        again(ids[0]).replaced_payload.as_deref(),
        Some(&b"ord-1"[..])
    );
    assert_eq!(again(ids[0]).generation, 1);
    assert_eq!(again(ids[1]).replaced_payload, None);

    // One audit record names the three replayed, none the one left, with the detail the
    // options gave; each message's history shows it at its replay.
    let trail = store.audit_trail(100);
    let replay = trail
        .iter()
        .find(|a| a.action == AuditAction::Replay)
        .unwrap();
    assert_eq!(replay.ids.len(), 3);
    assert!(!replay.ids.contains(ids[2]));
    assert_eq!(replay.detail.as_deref(), Some("upper-cased order ids"));
    let replays: Vec<(bool, Option<String>)> = store
        .history(ids[0])
        .unwrap()
        .steps
        .into_iter()
        .filter_map(|s| match s.event {
            HistoryEvent::Replayed {
                corrected, detail, ..
            } => Some((corrected, detail)),
            _ => None,
        })
        .collect();
    assert_eq!(replays, [(true, Some("upper-cased order ids".to_string()))]);
}

#[test]
fn corrections_in_a_batch_name_their_generation() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(fast(&clock));
    let q = store.queue_with("orders", options(3)).unwrap();
    q.enqueue_batch(&["a", "b", "c", "d"]).unwrap();
    let ids: Vec<u64> = (0..4).map(|_| fail_one(&q, "Bad")).collect();
    let dlq = q.dlq();
    // Entry c is replayed and fails again: a correction made from generation 0 is stale.
    dlq.replay_one(ids[2], &ReplayOptions::to_origin()).unwrap();
    fail_one(&q, "Bad");
    assert_eq!(dlq.get(ids[2]).unwrap().generation, 1);
    // Entry d is marked reprocessed: refused without force.
    dlq.mark_reprocessed(ids[3], true).unwrap();
    let corrections = [
        Correction::new(ids[0], "A").generation(0),
        Correction::new(ids[1], "b"),
        Correction::new(ids[2], "C").generation(0),
        Correction::new(ids[3], "D"),
        Correction::new(99, "nobody"),
    ];

    let dry = dlq
        .replay_corrected_batch(&corrections, &ReplayOptions::to_origin().dry_run())
        .unwrap();
    assert_eq!(dry.replayed, [ids[0], ids[1]]);
    assert_eq!(dlq.len(), 4);

    let report = dlq
        .replay_corrected_batch(&corrections, &ReplayOptions::to_origin())
        .unwrap();
    assert_eq!(report.replayed, [ids[0], ids[1]]);
    let reasons: Vec<(u64, &str)> = report
        .failed
        .iter()
        .map(|(id, r)| (*id, r.as_str()))
        .collect();
    assert_eq!(reasons.len(), 3);
    assert!(reasons[0].1.contains("replayed since"), "{reasons:?}");
    assert_eq!(reasons[1].1, Error::AlreadyReprocessed(ids[3]).to_string());
    assert_eq!(reasons[2].1, Error::NotFound(99).to_string());
    let got: Vec<Vec<u8>> = q
        .lease(10)
        .unwrap()
        .iter()
        .map(|m| m.payload().to_vec())
        .collect();
    assert_eq!(got, [b"A".to_vec(), b"b".to_vec()]);
    assert_eq!(dlq.len(), 2);
    assert_eq!(dlq.get(ids[2]).unwrap().payload, b"c");

    // One correction over the size limit fails alone.
    let big = vec![b'x'; store.config().max_message_size + 1];
    let report = dlq
        .replay_corrected_batch(
            &[Correction::new(ids[2], big), Correction::new(ids[3], "D")],
            &ReplayOptions::to_origin().force(),
        )
        .unwrap();
    assert_eq!(report.replayed, [ids[3]]);
    assert!(report.failed[0].1.contains("bytes"), "{:?}", report.failed);
}

#[test]
fn a_corrected_replay_with_the_same_payload_replaces_nothing() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(fast(&clock));
    let q = store.queue_with("orders", options(3)).unwrap();
    q.enqueue("same").unwrap();
    let id = fail_one(&q, "Bad");
    q.dlq()
        .replay_corrected(id, "same", &ReplayOptions::to_origin())
        .unwrap();
    fail_one(&q, "Bad");
    let e = q.dlq().get(id).unwrap();
    assert_eq!(
        (e.payload.as_slice(), &e.replaced_payload),
        (&b"same"[..], &None)
    );
    // A dry run of a corrected replay changes nothing either.
    q.dlq()
        .replay_corrected(id, "other", &ReplayOptions::to_origin().dry_run())
        .unwrap();
    assert_eq!(q.dlq().get(id).unwrap(), e);
}
