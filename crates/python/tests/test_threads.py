"""Threads calling one store: concurrent durable enqueues (sharing fsyncs, since every call
releases the GIL) and concurrent consumers, each message delivered to exactly one."""

import threading

import deadletter


def test_concurrent_producers_and_consumers_on_one_store(tmp_path):
    path = tmp_path / "s"
    producers, per = 8, 250
    with deadletter.Store(path) as store:
        q = store.queue("work")
        ids = []
        lock = threading.Lock()

        def produce(p):
            mine = [q.enqueue(f"{p}-{i}") for i in range(per)]
            with lock:
                ids.extend(mine)

        threads = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(ids) == len(set(ids)) == producers * per
        assert len(q) == producers * per

        seen = []

        def consume():
            while True:
                batch = q.lease(16)
                if not batch:
                    return
                q.ack_all(batch)
                with lock:
                    seen.extend(m.text for m in batch)

        consumers = [threading.Thread(target=consume) for _ in range(4)]
        for t in consumers:
            t.start()
        for t in consumers:
            t.join()
        assert len(seen) == len(set(seen)) == producers * per
        assert q.stats()["acked"] == producers * per

    with deadletter.Store(path) as again:
        q = again.queue("work")
        assert len(q) == 0 and q.stats()["acked"] == producers * per


def test_queue_handles_from_many_threads_share_the_store(fast_store):
    errors = []

    def work(n):
        try:
            q = fast_store.queue(f"q{n % 3}")
            for i in range(200):
                q.enqueue(str(i))
            q.dlq.stats()
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(fast_store.queue_names()) == ["q0", "q1", "q2"]
    assert sum(len(fast_store.queue(f"q{n}")) for n in range(3)) == 9 * 200
