"""Type hints of the native module deadletter._deadletter (re-exported by `deadletter`)."""

from __future__ import annotations

from os import PathLike
from types import TracebackType
from typing import Any, Callable, Iterable, Literal, Optional, Protocol, TypedDict, Union

FORMAT_VERSION: int

class Codec(Protocol):
    """A payload codec: any object with these two methods (or the string "json")."""

    def encode(self, value: Any) -> bytes: ...
    def decode(self, payload: bytes) -> Any: ...

Payload = Union[bytes, bytearray, memoryview, str]
CodecArg = Union[Literal["json"], Codec, None]

class QueueStats(TypedDict):
    name: str
    dlq_name: str
    ready: int
    in_flight: int
    enqueued: int
    acked: int
    retried: int
    dead_lettered: int
    expired: int
    deleted: int
    dlq_size: int
    oldest_ready_at_ms: Optional[int]
    refused: int

class DlqStats(TypedDict):
    name: str
    total: int
    pending: int
    reprocessed: int
    reprocessed_ok: int
    reprocessed_failed: int
    replayed: int
    deleted: int
    expired: int
    oldest_age_ms: Optional[int]
    newest_age_ms: Optional[int]
    by_error_kind: dict[str, int]
    by_worker: dict[str, int]
    by_fingerprint: dict[str, int]

class FingerprintGroup(TypedDict):
    fingerprint: str
    error_kind: str
    template: str
    count: int
    first_seen_ms: int
    last_seen_ms: int
    example_id: int
    last_day_by_hour: list[int]

class ReplayReport(TypedDict):
    replayed: list[int]
    failed: list[tuple[int, str]]
    dry_run: bool

class Attempt(TypedDict):
    number: int
    at_ms: int
    error_kind: str
    error_message: str
    details: Optional[str]
    duration_ms: int
    worker: Optional[str]

class PoolCounters(TypedDict):
    processed: int
    retried: int
    dead_lettered: int
    in_flight: int
    panics: int
    lost_leases: int

class ShutdownReport(PoolCounters):
    drained: bool

class Store:
    """A store: one directory holding any number of queues and their DLQs."""

    def __init__(
        self,
        path: Union[str, PathLike[str]],
        *,
        durable: bool = True,
        sync_interval: Optional[float] = None,
        read_only: bool = False,
        max_message_size: Optional[int] = None,
        segment_size: Optional[int] = None,
        dlq_name_pattern: Optional[str] = None,
        environment: Optional[str] = None,
        code_version: Optional[str] = None,
        include_stack_traces: Optional[bool] = None,
        max_attempts: Optional[int] = None,
        visibility_timeout: Optional[float] = None,
        control_socket: bool = False,
    ) -> None: ...
    @classmethod
    def open(cls, path: Union[str, PathLike[str]], **kwargs: Any) -> Store: ...
    def queue(
        self,
        name: str,
        *,
        create: bool = True,
        max_attempts: Optional[int] = None,
        visibility_timeout: Optional[float] = None,
        default_ttl: Optional[float] = None,
        max_pending: Optional[int] = None,
    ) -> Queue: ...
    def dlq(self, name: str) -> Dlq: ...
    def queue_names(self) -> list[str]: ...
    def sync(self) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def path(self) -> str: ...
    def __enter__(self) -> Store: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

class Queue:
    """A queue: enqueue, lease, ack, retry, dead-letter; safe to share between threads."""

    @property
    def name(self) -> str: ...
    @property
    def dlq(self) -> Dlq: ...
    def enqueue(
        self,
        payload: Any,
        *,
        codec: CodecArg = None,
        attributes: Optional[dict[str, str]] = None,
        ttl: Optional[float] = None,
        delay: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> int: ...
    def enqueue_batch(self, payloads: Iterable[Any], *, codec: CodecArg = None) -> list[int]: ...
    def lease(self, max: int = 1, *, visibility: Optional[float] = None) -> list[Message]: ...
    def lease_wait(self, max: int = 1, *, timeout: float = 1.0) -> list[Message]: ...
    def ack(self, message: Message) -> None: ...
    def ack_all(self, messages: list[Message]) -> None: ...
    def retry(
        self, message: Message, error_kind: str, error_message: str = "", *, delay: float = 0.0
    ) -> Literal["retried", "dead_lettered"]: ...
    def dead_letter(self, message: Message, error_kind: str, error_message: str = "") -> None: ...
    def release(self, message: Message, *, delay: float = 0.0) -> None: ...
    def extend(self, message: Message, visibility: float) -> None: ...
    def stats(self) -> QueueStats: ...
    def __len__(self) -> int: ...

class Message:
    """A delivered message."""

    @property
    def id(self) -> int: ...
    @property
    def queue(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def payload(self) -> bytes: ...
    @property
    def text(self) -> Optional[str]: ...
    def json(self) -> Any: ...
    def decode(self, codec: Union[Literal["json"], Codec]) -> Any: ...
    @property
    def attributes(self) -> dict[str, str]: ...
    @property
    def enqueued_at_ms(self) -> int: ...
    @property
    def leased_at_ms(self) -> int: ...

class Filter:
    """Which DLQ entries an operation applies to (every criterion given must hold)."""

    def __init__(
        self,
        *,
        error_kind: Optional[str] = None,
        message_contains: Optional[str] = None,
        since_ms: Optional[int] = None,
        until_ms: Optional[int] = None,
        min_attempts: Optional[int] = None,
        max_attempts: Optional[int] = None,
        worker: Optional[str] = None,
        tags: Optional[dict[str, str]] = None,
        attributes: Optional[dict[str, str]] = None,
        pending: Optional[bool] = None,
        payload_contains: Optional[str] = None,
        fingerprint: Optional[str] = None,
    ) -> None: ...

class DeadLetter:
    """A DLQ entry: the payload byte for byte and its whole failure history.

    An entry of `Dlq.list` or `Dlq.peek` decodes its envelope (attempts, details, stack
    trace, attributes, tags, context, worker, enqueued and failed times, replaced payload)
    the first time one of those is read, once, from the bytes the listing read: it never
    touches the store, and reads the same after the entry left the DLQ."""

    @property
    def id(self) -> int: ...
    @property
    def queue(self) -> str: ...
    @property
    def dlq_name(self) -> str: ...
    @property
    def payload(self) -> bytes: ...
    @property
    def text(self) -> Optional[str]: ...
    def json(self) -> Any: ...
    def decode(self, codec: Union[Literal["json"], Codec]) -> Any: ...
    @property
    def replaced_payload(self) -> Optional[bytes]: ...
    @property
    def error_kind(self) -> str: ...
    @property
    def error_message(self) -> str: ...
    @property
    def details(self) -> Optional[str]: ...
    @property
    def stack_trace(self) -> Optional[str]: ...
    @property
    def attempts(self) -> list[Attempt]: ...
    @property
    def delivery_count(self) -> int: ...
    @property
    def enqueued_at_ms(self) -> int: ...
    @property
    def failed_at_ms(self) -> int: ...
    @property
    def dead_lettered_at_ms(self) -> int: ...
    @property
    def worker(self) -> Optional[str]: ...
    @property
    def attributes(self) -> dict[str, str]: ...
    @property
    def tags(self) -> dict[str, str]: ...
    @property
    def context(self) -> dict[str, str]: ...
    @property
    def status(self) -> Literal["pending", "reprocessed"]: ...
    @property
    def reprocess_success(self) -> Optional[bool]: ...
    @property
    def generation(self) -> int: ...
    @property
    def fingerprint(self) -> Optional[str]: ...

class Dlq:
    """A dead letter queue: browse (changes nothing), stats, fingerprints, replay, purge."""

    @property
    def name(self) -> str: ...
    def list(
        self, filter: Optional[Filter] = None, *, limit: int = 100, after: Optional[int] = None
    ) -> list[DeadLetter]: ...
    def ids(self, filter: Optional[Filter] = None, *, limit: Optional[int] = None) -> list[int]: ...
    def peek(self, n: int = 10) -> list[DeadLetter]: ...
    def get(self, id: int) -> DeadLetter: ...
    def stats(self) -> DlqStats: ...
    def fingerprints(self) -> list[FingerprintGroup]: ...
    def replay(
        self,
        filter: Optional[Filter] = None,
        *,
        to: Optional[str] = None,
        reset_attempts: bool = False,
        force: bool = False,
        limit: Optional[int] = None,
        dry_run: bool = False,
        delay: Optional[float] = None,
    ) -> ReplayReport: ...
    def replay_ids(
        self,
        ids: list[int],
        *,
        to: Optional[str] = None,
        reset_attempts: bool = False,
        force: bool = False,
        delay: Optional[float] = None,
    ) -> ReplayReport: ...
    def replay_one(
        self,
        id: int,
        *,
        to: Optional[str] = None,
        reset_attempts: bool = False,
        force: bool = False,
        delay: Optional[float] = None,
    ) -> None: ...
    def replay_corrected(
        self,
        id: int,
        payload: Any,
        *,
        codec: CodecArg = None,
        to: Optional[str] = None,
        reset_attempts: bool = False,
        force: bool = False,
        delay: Optional[float] = None,
    ) -> None: ...
    def mark_reprocessed(self, id: int, success: bool) -> None: ...
    def delete(self, id: int) -> None: ...
    def delete_matching(self, filter: Filter) -> int: ...
    def purge(self, older_than: float = 0.0, *, include_pending: bool = False) -> int: ...
    def __len__(self) -> int: ...

class WorkerPool:
    """A running worker pool calling handler(message) on its threads."""

    def __init__(
        self,
        queue: Queue,
        handler: Callable[[Message], object],
        *,
        workers: int = 1,
        max_attempts: int = 5,
        backoff: Literal["exponential", "linear", "fixed"] = "exponential",
        delay: float = 0.1,
        max_delay: float = 300.0,
        jitter: bool = True,
        lease: float = 30.0,
        name: str = "worker",
    ) -> None: ...
    def run_until_idle(self) -> None: ...
    @property
    def counters(self) -> PoolCounters: ...
    def shutdown(self, timeout: float = 5.0) -> ShutdownReport: ...
    def __enter__(self) -> WorkerPool: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

class DeadletterError(Exception): ...
class StorageError(DeadletterError): ...
class DiskFull(StorageError): ...
class StorePoisoned(StorageError): ...
class StoreLocked(DeadletterError): ...
class ReadOnlyStore(DeadletterError): ...
class CorruptionError(DeadletterError): ...
class UnsupportedFormat(DeadletterError): ...
class TooLarge(DeadletterError): ...
class InvalidQueueName(DeadletterError): ...
class NameClash(DeadletterError): ...
class UnknownQueue(DeadletterError): ...
class NotFound(DeadletterError): ...
class InvalidState(DeadletterError): ...
class AlreadyReprocessed(DeadletterError): ...
class QueueFull(DeadletterError): ...
class InvalidConfig(DeadletterError): ...
class CodecError(DeadletterError): ...
class StoreClosed(DeadletterError): ...
