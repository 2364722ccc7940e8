"""The entries of `Dlq.list` and `Dlq.peek` decode their envelopes on first use: every
attribute equals what `Dlq.get` returns for the same entry, under filters the index
answers and filters that read envelopes, and an entry keeps its bytes, so it reads the
same after the entry left the DLQ and the store was closed."""

import threading
import time

import deadletter

ATTRIBUTES = [
    "id", "queue", "dlq_name", "payload", "text", "replaced_payload", "error_kind",
    "error_message", "details", "stack_trace", "attempts", "delivery_count",
    "enqueued_at_ms", "failed_at_ms", "dead_lettered_at_ms", "worker", "attributes", "tags",
    "context", "status", "reprocess_success", "generation", "fingerprint",
]


def fields(entry):
    return {name: getattr(entry, name) for name in ATTRIBUTES}


def fill(store):
    """Entries with a history (a retry before the dead letter), attributes, a worker's
    traceback, one dead again after a corrected replay and one marked reprocessed."""
    q = store.queue("mail", max_attempts=2)
    for i in range(6):
        q.enqueue({"to": f"user{i}@x.com"}, codec="json", attributes={"batch": str(i % 2)})
    for m in q.lease(6):
        q.retry(m, "Timeout", f"smtp timeout for user{m.id}")
    again = []
    while len(again) < 6:  # visible again from the next millisecond
        time.sleep(0.002)
        again += q.lease(6 - len(again))
    for m in again:
        q.dead_letter(m, "InvalidEmail" if m.id % 2 else "Bounce", f"cannot send to user{m.id}")

    def handler(msg):
        raise deadletter.Permanent("still bouncing", kind="Bounce")

    dlq = q.dlq
    first, second = dlq.ids(limit=2)
    dlq.replay_corrected(first, {"to": "fixed@x.com"}, codec="json")
    with deadletter.WorkerPool(q, handler, workers=1) as pool:
        pool.run_until_idle()
    dlq.mark_reprocessed(second, False)
    return dlq


def test_listed_entries_equal_the_whole_entries(tmp_path):
    with deadletter.Store(tmp_path / "s", durable=False, include_stack_traces=True) as store:
        dlq = fill(store)
        filters = [
            None,
            deadletter.Filter(error_kind="InvalidEmail"),
            deadletter.Filter(pending=True),
            deadletter.Filter(message_contains="user3"),  # reads envelopes
            deadletter.Filter(attributes={"batch": "1"}),  # reads envelopes
        ]
        seen = set()
        for f in filters:
            listed = dlq.list(f, limit=100)
            assert listed, f
            for entry in listed:
                assert fields(entry) == fields(dlq.get(entry.id)), (f, entry)
                seen.add(entry.id)
        assert len(seen) == 6
        peeked = dlq.peek(3)
        assert [fields(e) for e in peeked] == [fields(dlq.get(e.id)) for e in peeked]
        corrected = next(e for e in dlq.list() if e.replaced_payload is not None)
        assert corrected.json() == {"to": "fixed@x.com"}
        assert corrected.error_message == "still bouncing" and corrected.stack_trace
        assert [a["error_kind"] for a in corrected.attempts][-1] == "Bounce"
        assert any(e.status == "reprocessed" and e.reprocess_success is False for e in dlq.list())


def test_a_listed_entry_reads_the_same_after_it_left_and_the_store_closed(tmp_path):
    store = deadletter.Store(tmp_path / "s", durable=False)
    dlq = fill(store)
    listed = dlq.list()
    expected = [fields(dlq.get(e.id)) for e in listed]
    # Half of them read before, half only after their entries are gone.
    for e in listed[::2]:
        assert e.attempts
    for e in listed:
        dlq.delete(e.id)
    assert len(dlq) == 0
    store.close()
    assert [fields(e) for e in listed] == expected


def test_threads_reading_one_listed_entry_see_one_envelope(tmp_path):
    with deadletter.Store(tmp_path / "s", durable=False) as store:
        dlq = fill(store)
        entry = dlq.list(deadletter.Filter(error_kind="InvalidEmail"), limit=1)[0]
        expected = fields(dlq.get(entry.id))
        got = []
        threads = [threading.Thread(target=lambda: got.append(fields(entry))) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert got == [expected] * 8
