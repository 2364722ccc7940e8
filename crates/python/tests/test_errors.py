"""Every engine error a program may catch arrives as its own exception class; bad
arguments are TypeError/ValueError/OverflowError; nothing crashes the interpreter."""

import math

import pytest

import deadletter


def test_every_class_derives_from_deadletter_error():
    for name in deadletter.__all__:
        obj = getattr(deadletter, name)
        if isinstance(obj, type) and issubclass(obj, Exception) and obj not in (
            deadletter.Permanent,
            deadletter.Transient,
        ):
            assert issubclass(obj, deadletter.DeadletterError), name
    assert issubclass(deadletter.DiskFull, deadletter.StorageError)


def test_a_second_open_is_locked(store, tmp_path):
    with pytest.raises(deadletter.StoreLocked) as err:
        deadletter.Store(tmp_path / "store")
    assert err.value.path.endswith("store")


def test_unknown_queue_bad_names_and_clashes(store):
    with pytest.raises(deadletter.UnknownQueue):
        store.queue("nope", create=False)
    with pytest.raises(deadletter.InvalidQueueName):
        store.queue("")
    with pytest.raises(deadletter.InvalidQueueName):
        store.queue("bad\nname")
    store.queue("orders")
    with pytest.raises(deadletter.NameClash):
        store.queue("orders-dlq")


def test_not_found_and_invalid_state(store):
    q = store.queue("q")
    with pytest.raises(deadletter.NotFound) as err:
        q.dlq.get(12345)
    assert err.value.id == 12345
    q.enqueue("x")
    [m] = q.lease()
    q.ack(m)
    with pytest.raises(deadletter.DeadletterError):
        q.ack(m)  # its lease ended with the first ack


def test_too_large(tmp_path):
    with deadletter.Store(tmp_path / "s", max_message_size=1024) as s:
        with pytest.raises(deadletter.TooLarge):
            s.queue("q").enqueue(b"x" * 2048)


def test_queue_full(store):
    q = store.queue("q", max_pending=2)
    q.enqueue_batch(["a", "b"])
    with pytest.raises(deadletter.QueueFull):
        q.enqueue("c")


def test_bad_arguments_are_python_errors_not_crashes(store):
    q = store.queue("q")
    for bad in (-1.0, math.nan, math.inf, 1e300):
        with pytest.raises(ValueError):
            q.enqueue("x", ttl=bad)
        with pytest.raises(ValueError):
            q.lease_wait(1, timeout=bad)
    with pytest.raises(OverflowError):
        q.lease(-1)
    with pytest.raises(TypeError):
        q.ack("not a message")
    with pytest.raises(TypeError):
        q.enqueue_batch(5)
    with pytest.raises(ValueError):
        deadletter.Filter(fingerprint="not-hex")
    with pytest.raises(TypeError):
        deadletter.Filter(error_kind=3)
    with pytest.raises(ValueError):
        deadletter.WorkerPool(q, lambda m: None, backoff="random")
    with pytest.raises(ValueError):
        deadletter.WorkerPool(q, lambda m: None, workers=0)
    with pytest.raises(TypeError):
        deadletter.WorkerPool(q, "not callable")
    with pytest.raises(deadletter.InvalidConfig):
        store.queue("q2", max_attempts=0)


def test_a_corrupt_json_payload_is_a_codec_error(store):
    q = store.queue("q")
    q.enqueue(b"{not json")
    [m] = q.lease()
    with pytest.raises(deadletter.CodecError):
        m.json()


def test_not_a_store_directory(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(deadletter.DeadletterError):
        deadletter.Store(tmp_path / "file")
