"""deadletter: an embedded, persistent, log-structured queue engine with a first-class
dead letter queue (DLQ), from Python.

Open a directory as a :class:`Store`, get a :class:`Queue` from it, enqueue messages
(bytes, str, or any object with ``codec="json"``), and run a :class:`WorkerPool` that calls
a Python function for each message. A handler that returns acknowledges its message; one
that raises :class:`Permanent` sends it to the queue's :class:`Dlq` at once; any other
exception is a transient failure, retried with backoff and dead-lettered after the last
attempt with its whole history (every attempt, the traceback, the payload byte for byte).

Every engine call releases the GIL, so Python threads and the pool's handlers run while
the engine writes and fsyncs. By default every write is on disk before the call returns.

    import deadletter

    with deadletter.Store("./data") as store:
        orders = store.queue("orders")
        orders.enqueue({"orderId": "ORD-1"}, codec="json")

        def handle(msg):
            if "orderId" not in msg.json():
                raise deadletter.Permanent("no orderId", kind="InvalidOrder")

        with deadletter.WorkerPool(orders, handle, workers=4) as pool:
            pool.run_until_idle()
        print(orders.dlq.stats())
"""

from __future__ import annotations

import atexit
import threading
import weakref
from typing import Optional

from . import _deadletter
from ._deadletter import (
    FORMAT_VERSION,
    AlreadyReprocessed,
    CodecError,
    CorruptionError,
    DeadLetter,
    DeadletterError,
    DiskFull,
    Dlq,
    Filter,
    InvalidConfig,
    InvalidQueueName,
    InvalidState,
    Message,
    NameClash,
    NotFound,
    Queue,
    QueueFull,
    ReadOnlyStore,
    StorageError,
    Store,
    StoreClosed,
    StoreLocked,
    StorePoisoned,
    TooLarge,
    UnknownQueue,
    UnsupportedFormat,
)

__version__ = "0.1.0"

__all__ = [
    "FORMAT_VERSION",
    "AlreadyReprocessed",
    "CodecError",
    "CorruptionError",
    "DeadLetter",
    "DeadletterError",
    "DiskFull",
    "Dlq",
    "Filter",
    "InvalidConfig",
    "InvalidQueueName",
    "InvalidState",
    "Message",
    "NameClash",
    "NotFound",
    "Permanent",
    "Queue",
    "QueueFull",
    "ReadOnlyStore",
    "StorageError",
    "Store",
    "StoreClosed",
    "StoreLocked",
    "StorePoisoned",
    "TooLarge",
    "Transient",
    "UnknownQueue",
    "UnsupportedFormat",
    "WorkerPool",
]


class Permanent(Exception):
    """Raised by a handler: the message can never succeed, send it to the DLQ at once.

    ``kind`` is the error kind recorded with the entry (the class name by default, so a
    subclass such as ``class InvalidEmail(deadletter.Permanent)`` names itself); the
    message is ``str(exception)``.
    """

    def __init__(self, message: str = "", *, kind: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind or type(self).__name__


class Transient(Exception):
    """Raised by a handler: this attempt failed, try again after the pool's backoff.

    Any other exception is transient too; this class only lets a handler choose the
    recorded error ``kind`` (the class name by default).
    """

    def __init__(self, message: str = "", *, kind: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind or type(self).__name__


_live_pools: "weakref.WeakSet[WorkerPool]" = weakref.WeakSet()
_live_lock = threading.Lock()


class WorkerPool(_deadletter.WorkerPool):
    """A running worker pool over one queue: ``workers`` threads each lease messages and
    call ``handler(message)``, holding the GIL only for the call.

    Use it as a context manager (leaving the block shuts it down) or call
    :meth:`shutdown`. Pools still running when the interpreter exits are shut down first.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        with _live_lock:
            _live_pools.add(self)


@atexit.register
def _shutdown_pools() -> None:
    # The pools' threads call into Python: stop them before the interpreter goes away.
    with _live_lock:
        pools = list(_live_pools)
    for pool in pools:
        try:
            pool.shutdown(5.0)
        except Exception:
            pass
