//! Guarded replay end to end: a canary that fails again stops the replay, a fixed handler
//! gets every entry back through growing waves, the replay resumes after a reopen and after
//! its process was killed, its releases are its starter's replays in the audit trail (and
//! the DLQ's past, `Dlq::as_of`, sees each wave leave), and the rate limit holds on the
//! store's clock.

mod common;

use std::time::Duration;

use common::crash::{self, ChildSpec};
use common::T0;
use deadletter::audit::{Actor, AuditAction, HistoryEvent};
use deadletter::clock::{Clock, ManualClock};
use deadletter::pool::Retry;
use deadletter::queue::FailureReport;
use deadletter::replay::{GuardedReplayOptions, GuardedReplayState};
use deadletter::{Config, Failure, Filter, Message, Queue, ReplayOptions, Store, WorkerPool};

/// `n` messages in the DLQ of `orders`, dead-lettered by a bug.
fn dead_letters(store: &Store, n: usize) -> Queue {
    let q = store.queue("orders").unwrap();
    let payloads: Vec<String> = (0..n).map(|i| format!("ORD-{i}")).collect();
    q.enqueue_batch(&payloads).unwrap();
    let bug = Failure::permanent("ParseError", "the parser had a bug");
    for msg in q.lease(n).unwrap() {
        q.dead_letter(&msg, &FailureReport::new(&bug)).unwrap();
    }
    assert_eq!(q.dlq().len(), n as u64);
    q
}

fn options() -> GuardedReplayOptions {
    GuardedReplayOptions::new(ReplayOptions::to_origin().reset_attempts())
        .canary(5)
        .growth(2.0)
        .max_failure_ratio(0.2)
}

fn pool(q: &Queue, fixed: bool, attempts: u32) -> deadletter::pool::RunningPool<Queue> {
    WorkerPool::new(q)
        .workers(2)
        .retry(Retry::fixed(Duration::from_secs(60)).max_attempts(attempts))
        .start(move |_m: &Message| {
            if fixed {
                Ok(())
            } else {
                Err(Failure::transient(
                    "ParseError",
                    "the parser still has a bug",
                ))
            }
        })
        .unwrap()
}

#[test]
fn a_canary_that_fails_again_stops_the_replay_and_nothing_more_goes_out() {
    for attempts in [1, 3] {
        // With one attempt a failure goes back to the DLQ; with three it is scheduled for a
        // retry: both are "failed again".
        let clock = ManualClock::new(T0);
        let (_dir, store) = common::temp_store(common::config_at(&clock));
        let q = dead_letters(&store, 50);
        let replay = q.dlq().replay_guarded(&Filter::all(), &options()).unwrap();
        assert_eq!((replay.replayed, replay.left, replay.selected), (5, 45, 50));
        let workers = pool(&q, false, attempts);
        workers.run_until_idle().unwrap();
        let report = store.guarded_replay(replay.id).unwrap();
        assert_eq!(
            report.state,
            GuardedReplayState::Stopped {
                wave: 0,
                failed: 5,
                handled: 5
            },
            "{attempts} attempts"
        );
        assert_eq!(
            (
                report.replayed,
                report.failed_again,
                report.succeeded,
                report.left
            ),
            (5, 5, 0, 45)
        );
        let back_in_dlq = if attempts == 1 { 50 } else { 45 };
        assert_eq!(q.dlq().len(), back_in_dlq);
        // Stopped is stopped: time passing and drives release nothing.
        clock.advance(3_600_000);
        store.drive_guarded_replays().unwrap();
        assert_eq!(store.guarded_replay(replay.id).unwrap().replayed, 5);
        assert!(store.resume_guarded_replay(replay.id).is_err());
        drop(workers);
    }
}

#[test]
fn a_fixed_handler_gets_every_entry_back_through_growing_waves() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(common::config_at(&clock));
    let q = dead_letters(&store, 50);
    let replay = q.dlq().replay_guarded(&Filter::all(), &options()).unwrap();
    let workers = pool(&q, true, 3);
    workers.run_until_idle().unwrap();
    let report = store.guarded_replay(replay.id).unwrap();
    assert_eq!(report.state, GuardedReplayState::Completed);
    assert_eq!(
        (
            report.replayed,
            report.succeeded,
            report.failed_again,
            report.left
        ),
        (50, 50, 0, 0)
    );
    // Waves of 5, 10, 20, then the 15 left.
    assert_eq!((report.wave, report.wave_size), (3, 40));
    assert!(q.dlq().is_empty());
    assert_eq!(q.stats().counts.acked, 50);
}

#[test]
fn a_wave_releases_only_once_the_one_before_was_handled() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(common::config_at(&clock));
    let q = dead_letters(&store, 20);
    let replay = q.dlq().replay_guarded(&Filter::all(), &options()).unwrap();
    let canary = q.lease(100).unwrap();
    assert_eq!(canary.len(), 5);
    // Four handled, one still running: nothing more goes out.
    for m in &canary[..4] {
        q.ack(m).unwrap();
    }
    store.drive_guarded_replays().unwrap();
    assert_eq!(store.guarded_replay(replay.id).unwrap().replayed, 5);
    assert!(q.lease(100).unwrap().is_empty());
    // One of five failed again (20%, not above the limit): the next wave of 10 goes out.
    q.retry(
        &canary[4],
        &FailureReport::new(&Failure::transient("T", "once")),
        T0,
    )
    .unwrap();
    let report = store.guarded_replay(replay.id).unwrap();
    assert_eq!(
        (report.wave, report.replayed, report.failed_again),
        (1, 15, 1)
    );
}

#[test]
fn pause_resume_and_cancel_are_the_operators() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(common::config_at(&clock));
    let q = dead_letters(&store, 30);
    let replay = q.dlq().replay_guarded(&Filter::all(), &options()).unwrap();
    // A second one on the same DLQ is refused while this one is active.
    let second = q.dlq().replay_guarded(&Filter::all(), &options());
    assert!(matches!(
        second,
        Err(deadletter::Error::GuardedReplayConflict { .. })
    ));
    store.pause_guarded_replay(replay.id).unwrap();
    for m in q.lease(100).unwrap() {
        q.ack(&m).unwrap();
    }
    let paused = store.guarded_replay(replay.id).unwrap();
    assert_eq!(
        (paused.state, paused.replayed, paused.succeeded),
        (GuardedReplayState::Paused, 5, 5)
    );
    let resumed = store.resume_guarded_replay(replay.id).unwrap();
    assert_eq!(resumed.replayed, 15);
    let cancelled = store.cancel_guarded_replay(replay.id).unwrap();
    assert_eq!(cancelled.state, GuardedReplayState::Cancelled);
    for m in q.lease(100).unwrap() {
        q.ack(&m).unwrap();
    }
    let end = store.guarded_replay(replay.id).unwrap();
    assert_eq!((end.replayed, end.succeeded, end.left), (15, 15, 15));
    assert_eq!(q.dlq().len(), 15);
    assert!(matches!(
        store.guarded_replay(99),
        Err(deadletter::Error::UnknownGuardedReplay(99))
    ));
}

#[test]
fn a_plan_it_cannot_follow_is_refused_and_writes_nothing() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(common::config_at(&clock));
    let q = dead_letters(&store, 3);
    let delayed = ReplayOptions::to_origin().delay(std::time::Duration::from_secs(1));
    let bad = [
        options().canary(0),
        options().growth(0.5),
        options().max_failure_ratio(1.5),
        options().rate(0),
        // Waves release entries when they come: no delay, no dry run.
        GuardedReplayOptions::new(delayed),
        GuardedReplayOptions::new(ReplayOptions::to_origin().dry_run()),
    ];
    for options in &bad {
        let refused = q.dlq().replay_guarded(&Filter::all(), options);
        assert!(
            matches!(refused, Err(deadletter::Error::InvalidConfig(_))),
            "{options:?}: {refused:?}"
        );
    }
    assert!(store.guarded_replays().is_empty());
    assert_eq!((q.dlq().len(), q.len()), (3, 0));
}

#[test]
fn a_reopen_in_the_middle_resumes_the_replay_where_the_log_left_it() {
    let clock = ManualClock::new(T0);
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let store = Store::open(dir.path(), common::config_at(&clock)).unwrap();
        let q = dead_letters(&store, 40);
        let replay = q.dlq().replay_guarded(&Filter::all(), &options()).unwrap();
        let canary = q.lease(100).unwrap();
        for m in &canary[..3] {
            q.ack(m).unwrap();
        }
        // Two of the canary are leased when the store goes away.
        replay.id
    };
    for compact in [false, true] {
        let store = Store::open(dir.path(), common::config_at(&clock)).unwrap();
        let report = store.guarded_replay(id).unwrap();
        assert_eq!(report.state, GuardedReplayState::Running);
        assert_eq!(
            (report.replayed, report.succeeded, report.waiting),
            (5, 3, 2)
        );
        if compact {
            // From a checkpoint, after compaction dropped the records: the same.
            store.compact_now().unwrap();
        }
    }
    let store = Store::open(dir.path(), common::config_at(&clock)).unwrap();
    let q = store.queue("orders").unwrap();
    let workers = pool(&q, true, 3);
    workers.run_until_idle().unwrap();
    let report = store.guarded_replay(id).unwrap();
    assert_eq!(report.state, GuardedReplayState::Completed);
    assert_eq!((report.replayed, report.succeeded), (40, 40));
    drop(workers);
    drop(q);
    drop(store);
    // And a completed replay stays completed.
    let store = Store::open(dir.path(), common::config_at(&clock)).unwrap();
    assert_eq!(
        store.guarded_replay(id).unwrap().state,
        GuardedReplayState::Completed
    );
}

#[test]
fn its_releases_are_its_starters_replays_in_the_audit_trail_the_lineage_and_the_past() {
    let clock = ManualClock::new(T0);
    let (dir, store) = common::temp_store(common::config_at(&clock));
    let q = dead_letters(&store, 12);
    // A second later ana starts it (the canary goes out at once), and a second after that
    // the canary is acked (the next wave goes out at once).
    clock.advance(1000);
    let ana = store.with_actor(Actor::new("ana@ops-1").unwrap());
    let replay = ana
        .dlq("orders-dlq")
        .unwrap()
        .replay_guarded(&Filter::all(), &options())
        .unwrap();
    assert_eq!(replay.started_by, "ana@ops-1");
    clock.advance(1000);
    // The canary (5) and, driven by the acks on the library's handle, the next wave (7).
    for _ in 0..2 {
        for m in q.lease(100).unwrap() {
            q.ack(&m).unwrap();
        }
    }
    let report = store.guarded_replay(replay.id).unwrap();
    assert_eq!(
        (report.state, report.replayed, report.succeeded),
        (GuardedReplayState::Completed, 12, 12)
    );
    // One audit entry per release, each a replay by who started it, together every entry.
    let replays: Vec<_> = store
        .audit_trail(100)
        .into_iter()
        .filter(|e| e.action == AuditAction::Replay)
        .collect();
    assert_eq!(replays.len(), 2, "{replays:?}");
    assert!(replays.iter().all(|e| e.actor == "ana@ops-1"));
    assert_eq!(
        replays.iter().map(|e| e.ids.len()).collect::<Vec<_>>(),
        [5, 7]
    );
    // The DLQ's past: all 12 before the canary went out, the 7 of the next wave while the
    // canary ran, none once that wave went out.
    let dlq = store.dlq("orders-dlq").unwrap();
    let sizes: Vec<usize> = [999, 1000, 1999, 2000]
        .iter()
        .map(|t| dlq.as_of(T0 + t).unwrap().len())
        .collect();
    assert_eq!(sizes, [12, 7, 7, 0]);
    // And each message's life shows its replay by ana, after a compaction and a reopen too.
    store.compact_now().unwrap();
    drop((dlq, q, ana, store));
    let store = Store::open(dir.path(), common::config_at(&clock)).unwrap();
    let id = replays[1].ids.iter().next().unwrap();
    let life = store.history(id).unwrap();
    let replayed: Vec<_> = life
        .steps
        .iter()
        .filter(|s| matches!(s.event, HistoryEvent::Replayed { .. }))
        .collect();
    assert_eq!(replayed.len(), 1, "{life:?}");
    assert_eq!(replayed[0].actor.as_deref(), Some("ana@ops-1"));
    assert!(matches!(
        &replayed[0].event,
        HistoryEvent::Replayed { from_dlq, to_queue, generation: 1, corrected: false, .. }
            if from_dlq == "orders-dlq" && to_queue == "orders"
    ));
}

#[test]
fn the_rate_limit_holds_on_the_stores_clock() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(common::config_at(&clock));
    let q = dead_letters(&store, 100);
    let rate = 20;
    let replay = q
        .dlq()
        .replay_guarded(&Filter::all(), &options().canary(10).rate(rate))
        .unwrap();
    let mut released_at = Vec::new();
    let mut steps = 0;
    while store.guarded_replay(replay.id).unwrap().is_active() {
        for m in q.lease(100).unwrap() {
            released_at.push(clock.now_ms());
            q.ack(&m).unwrap();
        }
        clock.advance(5);
        store.drive_guarded_replays().unwrap();
        steps += 1;

        assert!(steps < 100_000, "the replay never finished");
    }
    for m in q.lease(100).unwrap() {
        released_at.push(clock.now_ms());
        q.ack(&m).unwrap();
    }
    assert_eq!(released_at.len(), 100);
    let span = released_at[99] - released_at[0];
    let measured = 99.0 * 1000.0 / span as f64;
    println!("rate limit {rate}/s: measured {measured:.2}/s over {span} ms of store time");
    assert!(
        (measured - f64::from(rate)).abs() <= 0.1 * f64::from(rate),
        "measured {measured}/s"
    );
    // No two releases closer than the limit allows.
    for pair in released_at.windows(2) {
        assert!(pair[1] - pair[0] >= 1000 / u64::from(rate) - 5, "{pair:?}");
    }
}

/// The child of the SIGKILL test: holds the store with a worker pool whose handler works,
/// and says each message it handled.
#[test]
fn child_guarded_replay_process() {
    let Some(params) = crash::child("child_guarded_replay_process") else {
        return;
    };
    let store = Store::open(params.path("dir"), Config::default()).expect("child opens the store");
    let q = store.queue("orders").expect("queue");
    let workers = WorkerPool::new(&q)
        .workers(1)
        .start(|m: &Message| {
            crash::say(format_args!("DONE {}", m.id()));
            std::thread::sleep(Duration::from_millis(5));
            Ok(())
        })
        .expect("pool");
    workers.run_until_idle().expect("drain");
    crash::say("IDLE");
    std::thread::sleep(Duration::from_secs(600));
}

#[test]
fn a_replay_whose_process_was_killed_resumes_in_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let id = {
        let store = Store::open(dir.path(), Config::default()).unwrap();
        let q = dead_letters(&store, 200);
        let options = options().canary(10).max_failure_ratio(0.5);
        q.dlq().replay_guarded(&Filter::all(), &options).unwrap().id
    };
    // The child drives the replay with its pool, and is killed once it handled 40.
    let mut child = ChildSpec::new("child_guarded_replay_process")
        .param("dir", dir.path().display())
        .spawn(scratch.path());
    let done = std::cell::Cell::new(0);
    child.wait_for(
        |line| {
            done.set(done.get() + usize::from(line.starts_with("DONE")));
            done.get() == 40
        },
        Duration::from_secs(120),
    );
    child.kill();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    let middle = store.guarded_replay(id).unwrap();
    println!("after the kill: {middle:?}");
    assert_eq!(middle.state, GuardedReplayState::Running);
    assert!(middle.replayed > 10 && middle.left > 0, "{middle:?}");
    let q = store.queue("orders").unwrap();
    let workers = pool(&q, true, 3);
    workers.run_until_idle().unwrap();
    let end = store.guarded_replay(id).unwrap();
    assert_eq!(end.state, GuardedReplayState::Completed, "{end:?}");
    assert_eq!((end.replayed, end.succeeded + end.failed_again), (200, 200));
    assert!(q.dlq().is_empty());
}
