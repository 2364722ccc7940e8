//! A queue's own messages: listed by state (ready, delayed, retrying, in flight) with the
//! DLQ's filters and paging, one got by id, counted per state, on a live store and on a
//! read-only snapshot; an operator's retry now, delay, move to the DLQ and delete, each
//! refusing what makes no sense with the store left as it was, and each as it was after a
//! reopen.

use std::sync::mpsc;
use std::time::Duration;

use deadletter::audit::{AuditAction, HistoryEvent};
use deadletter::clock::ManualClock;
use deadletter::dlq::Cursor;
use deadletter::queue::{
    EnqueueOptions, FailureReport, MessageAction, QueuedState, MOVED_BY_OPERATOR,
};
use deadletter::{Config, Error, Failure, Filter, Message, Page, Queue, Store, WorkerPool};

use crate::helpers::{config, options};

const T0: u64 = 1_700_000_000_000;

/// A queue holding one message in each state, at `T0 + 10 s`: returns the ids of the
/// ready, delayed, retrying and in-flight one.
fn four_states(q: &Queue, clock: &ManualClock) -> [u64; 4] {
    let ready = q
        .enqueue_with(b"ready", &EnqueueOptions::new().attribute("region", "eu"))
        .unwrap();
    let delayed = q
        .enqueue_with(
            b"delayed",
            &EnqueueOptions::new().delay(Duration::from_secs(60)),
        )
        .unwrap();
    let retrying = q.enqueue(b"retrying").unwrap();
    let in_flight = q.enqueue(b"in flight").unwrap();
    // Lease "ready", "retrying" and "in flight"; give "ready" back at once.
    let leased = q.lease_for(3, Duration::from_secs(30)).unwrap();
    let by_id = |id: u64| leased.iter().find(|m| m.id() == id).unwrap();
    q.release(by_id(ready), Duration::ZERO).unwrap();
    let timeout = Failure::transient("Timeout", "upstream took 30 s");
    let report = FailureReport::new(&timeout).worker("w-7");
    q.retry(by_id(retrying), &report, T0 + 120_000).unwrap();
    clock.advance(10_000);
    [ready, delayed, retrying, in_flight]
}

fn ids(list: &[deadletter::queue::QueuedMessage]) -> Vec<u64> {
    list.iter().map(|m| m.id).collect()
}

#[test]
fn every_state_is_listed_with_what_it_waits_for() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue_with("orders", options(5)).unwrap();
    let [ready, delayed, retrying, in_flight] = four_states(&q, &clock);

    let all = q.messages(None, &Filter::all(), Page::first(10)).unwrap();
    assert_eq!(ids(&all), [ready, delayed, retrying, in_flight]);
    let states: Vec<QueuedState> = all.iter().map(|m| m.state).collect();
    assert_eq!(states, QueuedState::ALL);

    let r = &all[0];
    assert_eq!((r.payload.as_slice(), r.attempts), (&b"ready"[..], 1));
    assert_eq!(r.attributes["region"], "eu");
    assert!(r.visible_at_ms.unwrap() <= T0 + 10_000 && r.failures.is_empty());
    let d = &all[1];
    assert_eq!((d.visible_at_ms, d.attempts), (Some(T0 + 60_000), 0));
    let t = &all[2];
    assert_eq!(t.visible_at_ms, Some(T0 + 120_000), "the next attempt time");
    let last = t.last_failure().unwrap();
    assert_eq!(
        (last.error_kind.as_str(), last.error_message.as_str()),
        ("Timeout", "upstream took 30 s")
    );
    assert_eq!((last.worker.as_deref(), last.number), (Some("w-7"), 1));
    let f = &all[3];
    assert_eq!(f.lease_expires_at_ms, Some(T0 + 30_000));
    assert_eq!((f.visible_at_ms, f.holder.as_deref()), (None, None));

    for (state, id) in QueuedState::ALL
        .into_iter()
        .zip([ready, delayed, retrying, in_flight])
    {
        let one = q
            .messages(Some(state), &Filter::all(), Page::first(10))
            .unwrap();
        assert_eq!(ids(&one), [id], "{state}");
        assert_eq!(
            q.message(id).unwrap(),
            all[ids(&all).iter().position(|&x| x == id).unwrap()]
        );
    }
    let counts = q.message_counts();
    assert_eq!(
        (
            counts.ready,
            counts.delayed,
            counts.retrying,
            counts.in_flight
        ),
        (1, 1, 1, 1)
    );
    // The delay ends: the delayed message is ready now.
    clock.set(T0 + 60_000);
    assert_eq!(q.message(delayed).unwrap().state, QueuedState::Ready);
    assert_eq!(q.message_counts().ready, 2);
}

#[test]
fn the_dlq_filters_and_paging_apply_to_queued_messages() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue_with("jobs", options(5)).unwrap();
    let all: Vec<u64> = (0..30)
        .map(|i| {
            let region = if i % 3 == 0 { "eu" } else { "us" };
            let opts = EnqueueOptions::new().attribute("region", region);
            q.enqueue_with(format!("job-{i}"), &opts).unwrap()
        })
        .collect();
    // Ten pages of three, each after the last id of the one before.
    let mut page = Page::first(3);
    let mut seen = Vec::new();
    loop {
        let list = q.messages(None, &Filter::all(), page).unwrap();
        let Some(last) = list.last() else { break };
        page = Page::after(last.id, 3);
        seen.extend(ids(&list));
    }
    assert_eq!(seen, all);
    // The page before a cursor, oldest first; a cursor places by id alone.
    let cursor = Cursor {
        dead_lettered_at_ms: 0,
        id: all[10],
    };
    let before = q
        .messages(None, &Filter::all(), Page::before_cursor(cursor, 4))
        .unwrap();
    assert_eq!(ids(&before), all[6..10]);
    // Attributes, payload text, attempts and enqueue time.
    let eu = Filter::all().attribute("region", "eu");
    assert_eq!(q.message_ids(None, &eu, None).unwrap().len(), 10);
    let grep = Filter::all().payload_contains("job-2");
    assert_eq!(q.message_ids(None, &grep, None).unwrap().len(), 11); // job-2, job-20..29
    let leased = q.lease(2).unwrap();
    let twice = Filter::all().attempts(Some(1), None);
    assert_eq!(
        q.message_ids(None, &twice, None).unwrap(),
        leased.iter().map(Message::id).collect::<Vec<_>>()
    );
    assert!(q
        .message_ids(None, &Filter::all().between(Some(T0 + 1), None), None)
        .unwrap()
        .is_empty());
    // A filter on the last failure matches only messages that failed.
    let f = Failure::transient("Http503", "unavailable");
    q.retry(&leased[0], &FailureReport::new(&f), T0 + 5_000)
        .unwrap();
    let kind = Filter::error_kind("Http503");
    assert_eq!(q.message_ids(None, &kind, None).unwrap(), [leased[0].id()]);
    assert_eq!(
        q.message_ids(
            Some(QueuedState::Retrying),
            &Filter::all().message_contains("unavail"),
            None
        )
        .unwrap(),
        [leased[0].id()]
    );
    // What describes DLQ entries only is refused.
    for filter in [Filter::all().tag("team", "x"), Filter::all().pending_only()] {
        let e = q.messages(None, &filter, Page::first(5)).unwrap_err();
        assert!(matches!(e, Error::InvalidConfig(_)), "{e}");
    }
}

#[test]
fn selections_span_many_chunks_and_a_rare_match_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), crate::helpers::fast(&clock)).unwrap();
    let q = store.queue("bulk").unwrap();
    let payloads: Vec<String> = (0..3_000).map(|i| format!("p-{i:05}")).collect();
    let all = q.enqueue_batch(&payloads).unwrap();
    store.queue("other").unwrap().enqueue(b"p-02999").unwrap();
    assert_eq!(q.message_ids(None, &Filter::all(), None).unwrap(), all);
    assert_eq!(
        q.message_ids(None, &Filter::all(), Some(700)).unwrap(),
        all[..700]
    );
    // One match at the end: the walk reads on past many rejected chunks.
    let rare = Filter::all().payload_contains("p-02999");
    assert_eq!(q.message_ids(None, &rare, None).unwrap(), [all[2999]]);
    let page = q.messages(None, &rare, Page::first(5)).unwrap();
    assert_eq!(ids(&page), [all[2999]]);
    // A page of 300 from the middle, backwards from a cursor.
    let cursor = Cursor {
        dead_lettered_at_ms: 0,
        id: all[2000],
    };
    let before = q
        .messages(None, &Filter::all(), Page::before_cursor(cursor, 300))
        .unwrap();
    assert_eq!(ids(&before), all[1700..2000]);
}

#[test]
fn retry_now_and_delay_move_a_waiting_message_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let [ready, delayed, retrying, in_flight] = {
        let store = Store::open(dir.path(), config(&clock)).unwrap();
        let q = store.queue_with("orders", options(5)).unwrap();
        let ids = four_states(&q, &clock);
        let [ready, delayed, retrying, _] = ids;

        assert_eq!(
            q.retry_now(&[retrying, delayed]).unwrap(),
            [retrying, delayed]
        );
        for id in [retrying, delayed] {
            let m = q.message(id).unwrap();
            assert_eq!(
                (m.state, m.visible_at_ms),
                (QueuedState::Ready, Some(T0 + 10_000))
            );
        }
        // Its failures are kept, its attempts counted: the next delivery is the second.
        assert_eq!(q.message(retrying).unwrap().failures.len(), 1);
        let next = q.lease(3).unwrap();
        let again = next.iter().find(|m| m.id() == retrying).unwrap();
        assert_eq!(again.attempt(), 2);
        for m in &next {
            q.release(m, Duration::ZERO).unwrap();
        }
        // Delay the ready one by an hour: it is delayed (it never failed), the retried
        // one retrying (it did).
        let hour = T0 + 10_000 + 3_600_000;
        q.delay_until(&[ready, retrying], hour).unwrap();
        assert_eq!(q.message(ready).unwrap().state, QueuedState::Delayed);
        assert_eq!(q.message(retrying).unwrap().state, QueuedState::Retrying);
        assert_eq!(q.message(ready).unwrap().visible_at_ms, Some(hour));
        let leased: Vec<u64> = q.lease(5).unwrap().iter().map(Message::id).collect();
        assert_eq!(leased, [delayed], "the delayed ones wait");
        // Audited: the retry now, and the delay with its end.
        let trail = store.audit_trail(10);
        let actions: Vec<AuditAction> = trail.iter().map(|e| e.action).collect();
        assert_eq!(actions, [AuditAction::RetryNow, AuditAction::Delay]);
        assert!(trail[0].ids.contains(retrying) && trail[0].ids.contains(delayed));
        assert_eq!(trail[1].actor, "library");
        let detail = trail[1].detail.as_deref().unwrap();
        assert!(detail.contains(&hour.to_string()), "{detail}");
        ids
    };
    // The same after a reopen (the log replayed), and after one from a checkpoint.
    for compact in [true, false] {
        let store = Store::open(dir.path(), config(&clock)).unwrap();
        let q = store.existing_queue("orders").unwrap();
        let state = |id| q.message(id).unwrap().state;
        assert_eq!(state(ready), QueuedState::Delayed);
        assert_eq!(state(retrying), QueuedState::Retrying);
        // Leases are released by a reopen.
        assert_eq!(state(delayed), QueuedState::Ready);
        assert_eq!(state(in_flight), QueuedState::Ready);
        assert_eq!(
            q.message(ready).unwrap().visible_at_ms,
            Some(T0 + 3_610_000)
        );
        if compact {
            store.compact_now().unwrap();
        }
    }
}

#[test]
fn move_to_dlq_and_delete_take_waiting_messages_out_with_the_operator_named() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let actor = deadletter::audit::Actor::new("ana@ops").unwrap();
    let q = store
        .with_actor(actor)
        .queue_with("orders", options(5))
        .unwrap();
    let [ready, delayed, retrying, _] = four_states(&q, &clock);

    q.move_to_dlq(&[retrying], "the partner API is gone for good")
        .unwrap();
    let entry = q.dlq().get(retrying).unwrap();
    assert_eq!(entry.failure.error_kind, MOVED_BY_OPERATOR);
    assert!(
        entry.failure.error_message.contains("ana@ops"),
        "{}",
        entry.failure.error_message
    );
    assert!(entry.failure.error_message.contains("gone for good"));
    assert_eq!(entry.failure.context["actor"], "ana@ops");
    // Its failed delivery is in the envelope's history.
    assert_eq!(entry.failure.attempts.len(), 1);
    assert_eq!(entry.failure.attempts[0].error_kind, "Timeout");

    q.delete_messages(&[ready, delayed]).unwrap();
    for id in [ready, delayed, retrying] {
        assert!(q.message(id).is_err());
    }
    // Both are in the audit trail, by the operator, the move with its reason.
    let trail = store.audit_trail(10);
    let moved = trail
        .iter()
        .find(|e| e.action == AuditAction::MoveToDlq)
        .unwrap();
    assert_eq!(
        (moved.actor.as_str(), moved.ids.contains(retrying)),
        ("ana@ops", true)
    );
    assert_eq!(
        moved.detail.as_deref(),
        Some("the partner API is gone for good")
    );
    let deleted = trail
        .iter()
        .find(|e| e.action == AuditAction::DeleteMessage)
        .unwrap();
    assert!(deleted.ids.contains(ready) && deleted.ids.contains(delayed));
    assert_eq!(
        (deleted.actor.as_str(), deleted.detail.as_deref()),
        ("ana@ops", None)
    );
    // A deleted message's life ends with the operator's delete.
    let life = store.history(ready).unwrap();
    let last = &life.steps.last().unwrap();
    assert!(
        matches!(
            &last.event,
            HistoryEvent::Audited {
                action: AuditAction::DeleteMessage,
                ..
            }
        ),
        "{life:?}"
    );
    assert_eq!(last.actor.as_deref(), Some("ana@ops"));
    let stats = q.stats();
    assert_eq!(
        (stats.counts.ready, stats.counts.deleted, stats.dlq_size),
        (0, 2, 1)
    );
    assert_eq!(q.message_counts().in_flight, 1);
    drop((q, store));
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.existing_queue("orders").unwrap();
    assert_eq!(
        (q.len(), q.dlq().len()),
        (1, 1),
        "the in-flight one, released by the reopen"
    );
}

#[test]
fn what_makes_no_sense_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue_with("orders", options(5)).unwrap();
    let other = store.queue("invoices").unwrap();
    let [ready, delayed, retrying, in_flight] = four_states(&q, &clock);
    let elsewhere = other.enqueue(b"invoice").unwrap();
    let dead = other.enqueue(b"doomed").unwrap();
    let m = other
        .lease(2)
        .unwrap()
        .into_iter()
        .find(|m| m.id() == dead)
        .unwrap();
    other
        .dead_letter(&m, &FailureReport::new(&Failure::permanent("Bad", "bad")))
        .unwrap();
    let before = store.storage_stats().end_position;
    let refused = |action: MessageAction, id: u64| {
        let e = q.apply_action(&action, &[retrying, id], true).unwrap_err();
        assert!(
            matches!(e, Error::InvalidState { id: x, .. } | Error::NotFound(x) if x == id),
            "{action:?} {id}: {e}"
        );
        e.to_string()
    };
    let move_ = || MessageAction::MoveToDlq {
        reason: "because".into(),
    };
    for action in [
        MessageAction::RetryNow,
        MessageAction::DelayUntil(T0 + 999_000),
        move_(),
        MessageAction::Delete,
    ] {
        assert!(refused(action.clone(), in_flight).contains("in flight"));
        assert!(refused(action.clone(), elsewhere).contains("another queue"));
        assert!(refused(action.clone(), dead).contains("DLQ entry"));
        refused(action, 987_654);
    }
    assert!(refused(MessageAction::RetryNow, ready).contains("visible already"));
    // A delay to the past and a move without a reason are refused whole.
    let past = q.delay_until(&[delayed], T0).unwrap_err();
    assert!(matches!(past, Error::InvalidConfig(_)), "{past}");
    let no_reason = q.move_to_dlq(&[delayed], "  ").unwrap_err();
    assert!(matches!(no_reason, Error::InvalidConfig(_)), "{no_reason}");
    assert_eq!(
        store.storage_stats().end_position,
        before,
        "nothing was written"
    );
    assert!(store.audit_trail(10).is_empty());
    assert_eq!(q.message(retrying).unwrap().state, QueuedState::Retrying);

    // Not strict: the others are changed, the refused ones reported.
    let report = q
        .apply_action(
            &MessageAction::RetryNow,
            &[retrying, in_flight, delayed, retrying],
            false,
        )
        .unwrap();
    assert_eq!(report.applied, [retrying, delayed]);
    assert_eq!(report.refused.len(), 1);
    assert_eq!(report.refused[0].0, in_flight);
}

#[test]
fn a_read_only_snapshot_lists_and_refuses_changes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue_with("orders", options(5)).unwrap();
    let [ready, delayed, retrying, in_flight] = four_states(&q, &clock);
    store.sync().unwrap();

    let snapshot =
        Store::open_read_only(dir.path(), Config::default().clock(clock.clone())).unwrap();
    let sq = snapshot.existing_queue("orders").unwrap();
    let listed = sq.messages(None, &Filter::all(), Page::first(10)).unwrap();
    assert_eq!(ids(&listed), [ready, delayed, retrying, in_flight]);
    assert_eq!(
        listed,
        q.messages(None, &Filter::all(), Page::first(10)).unwrap()
    );
    // The lease stays as the log has it: its holder may be alive.
    assert_eq!(sq.message(in_flight).unwrap().state, QueuedState::InFlight);
    assert_eq!(sq.message_counts(), q.message_counts());
    let e = sq.retry_now(&[retrying]).unwrap_err();
    assert!(matches!(e, Error::ReadOnly { .. }), "{e}");
}

#[test]
fn an_in_flight_message_names_the_pool_worker_that_runs_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Config::fast()).unwrap();
    let q = store.queue("emails").unwrap();
    let id = q.enqueue(b"slow").unwrap();
    let (started, wait) = mpsc::channel::<()>();
    let (finish, done) = mpsc::channel::<()>();
    let done = std::sync::Mutex::new(done);
    let started = std::sync::Mutex::new(started);
    let pool = WorkerPool::new(&q)
        .workers(2)
        .name("mailer")
        .start(move |_: &Message| {
            let _ = started.lock().unwrap().send(());
            let _ = done.lock().unwrap().recv_timeout(Duration::from_secs(30));
            Ok(())
        })
        .unwrap();
    wait.recv_timeout(Duration::from_secs(30)).unwrap();
    let m = q.message(id).unwrap();
    assert_eq!(m.state, QueuedState::InFlight);
    let holder = m.holder.expect("a holder");
    assert!(holder == "mailer-0" || holder == "mailer-1", "{holder}");
    finish.send(()).unwrap();
    pool.run_until_idle().unwrap();
    drop(pool);
    assert!(q.message(id).is_err(), "acked");
}
