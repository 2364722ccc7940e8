"""The worker pool with Python handlers: success, transient failures retried, Permanent
straight to the DLQ, exceptions as transient failures with their traceback, handlers on
the pool's threads with the GIL released in between, and the pool's life."""

import threading
import time

import pytest

import deadletter


class InvalidEmail(deadletter.Permanent):
    pass


def test_success_transient_and_permanent(tmp_path):
    with deadletter.Store(tmp_path / "s", include_stack_traces=True) as store:
        q = store.queue("mail")
        q.enqueue_batch(["ok-1", "ok-2", "flaky", "perm", "subclass", "boom", "typed"])
        calls = {}
        lock = threading.Lock()

        def handle(msg):
            with lock:
                calls[msg.text] = calls.get(msg.text, 0) + 1
            if msg.text == "flaky" and msg.attempt < 3:
                raise TimeoutError("upstream timed out")
            if msg.text == "perm":
                raise deadletter.Permanent("no such user", kind="UnknownUser")
            if msg.text == "subclass":
                raise InvalidEmail("invalid address 'x@'")
            if msg.text == "boom":
                raise ValueError("handler bug")
            if msg.text == "typed":
                raise deadletter.Transient("try later", kind="RateLimited")
            return "ignored"

        with deadletter.WorkerPool(q, handle, workers=3, max_attempts=4, delay=0.001) as pool:
            pool.run_until_idle()
            c = pool.counters
        assert c["processed"] == 3  # ok-1, ok-2, flaky on its third attempt
        assert c["dead_lettered"] == 4
        assert calls["flaky"] == 3 and calls["perm"] == 1 and calls["subclass"] == 1
        assert calls["boom"] == 4 and calls["typed"] == 4
        entries = {e.text: e for e in q.dlq.list()}
        assert set(entries) == {"perm", "subclass", "boom", "typed"}
        assert entries["perm"].error_kind == "UnknownUser"
        assert entries["perm"].error_message == "no such user"
        assert entries["subclass"].error_kind == "InvalidEmail"
        assert entries["boom"].error_kind == "ValueError"
        assert entries["boom"].error_message == "handler bug"
        assert len(entries["boom"].attempts) == 4
        assert "handle" in entries["boom"].stack_trace  # the handler's frame
        assert entries["typed"].error_kind == "RateLimited"
        assert entries["perm"].worker.startswith("worker-")
        assert len(q) == 0


def test_base_exceptions_in_a_handler_are_failures_too(fast_store):
    q = fast_store.queue("q")
    q.enqueue_batch(["exit", "interrupt"])

    def handle(msg):
        if msg.text == "exit":
            raise SystemExit(3)
        raise KeyboardInterrupt

    with deadletter.WorkerPool(q, handle, max_attempts=2, delay=0.001) as pool:
        pool.run_until_idle()
    assert sorted(e.error_kind for e in q.dlq.list()) == ["KeyboardInterrupt", "SystemExit"]


def test_handlers_run_on_several_threads_while_python_runs(fast_store):
    q = fast_store.queue("q")
    q.enqueue_batch([str(i) for i in range(40)])
    threads = set()
    running = []
    peak = [0]
    lock = threading.Lock()

    def handle(msg):
        with lock:
            threads.add(threading.get_ident())
            running.append(1)
            peak[0] = max(peak[0], len(running))
        time.sleep(0.005)  # releases the GIL, as real I/O does
        with lock:
            running.pop()

    with deadletter.WorkerPool(q, handle, workers=4) as pool:
        # The main thread keeps running Python while the pool works.
        spins = 0
        while pool.counters["processed"] < 40:
            spins += 1
            time.sleep(0.001)
        pool.run_until_idle()
    assert threading.get_ident() not in threads
    assert len(threads) >= 2 and peak[0] >= 2
    assert spins > 0


def test_shutdown_returns_the_counters_and_the_store_closes_a_running_pool(tmp_path):
    store = deadletter.Store(tmp_path / "s", durable=False)
    q = store.queue("q")
    q.enqueue_batch(["a"] * 10)
    pool = deadletter.WorkerPool(q, lambda m: None, workers=2)
    pool.run_until_idle()
    report = pool.shutdown()
    assert report["processed"] == 10 and report["drained"]
    assert pool.shutdown()["processed"] == 10  # a second call: the same counters
    with pytest.raises(deadletter.StoreClosed):
        pool.run_until_idle()

    running = deadletter.WorkerPool(q, lambda m: time.sleep(0.01), workers=2)
    q.enqueue_batch(["b"] * 5)
    store.close()  # stops the pool first, then closes
    with pytest.raises(deadletter.StoreClosed):
        running.run_until_idle()
    with pytest.raises(deadletter.StoreClosed):
        deadletter.WorkerPool(q, lambda m: None)


def test_a_pool_dropped_while_running_stops(fast_store):
    q = fast_store.queue("q")
    q.enqueue_batch(["x"] * 20)
    seen = []
    pool = deadletter.WorkerPool(q, lambda m: seen.append(m.id), workers=2)
    pool.run_until_idle()
    del pool  # joined with the GIL released: no deadlock
    assert len(seen) == 20


def test_the_handler_sees_message_fields(fast_store):
    q = fast_store.queue("q")
    q.enqueue({"n": 1}, codec="json", attributes={"k": "v"})
    got = []
    with deadletter.WorkerPool(q, lambda m: got.append((m.json(), m.attributes, m.attempt))) as p:
        p.run_until_idle()
    assert got == [({"n": 1}, {"k": "v"}, 1)]
