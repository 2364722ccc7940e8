"""The design deadletter replaces, written for the benchmark: the pure-Python dead letter
queue of seed 000 ("Dead Letter Queue em Python Puro"), one JSON file per message in a
directory, as the post writes it.

Faithful to the post: the entry's fields (id as uuid4, message, error, attempts,
failed_at in ISO 8601, reprocessed), `json.dumps(entry, indent=2)` written with
`Path.write_text` under a lock, `list_pending` and `stats` by scanning and parsing every
file, `mark_reprocessed` by rewriting the file, `purge` of reprocessed entries, and the
`Pipeline` whose retry loop calls the handler up to `max_retries` times before the DLQ
write. Two changes, both for the benchmark: `retry_delay` is a parameter that the
benchmark sets to 0 (the post sleeps `retry_delay * attempt` between attempts, which
would only measure `time.sleep`), and `durable=True` adds what the design needs to
survive a power cut, which the post does not do: an fsync of the file and of the
directory after each write (a new file's name is only durable once its directory is).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Optional


class DeadLetterQueue:
    """Stores the messages whose processing failed, one JSON file each."""

    def __init__(self, storage_dir: str = ".dlq", durable: bool = False):
        self.storage = Path(storage_dir)
        self.storage.mkdir(exist_ok=True)
        self._lock = threading.Lock()
        self.durable = durable

    def _write(self, filepath: Path, entry: dict) -> None:
        filepath.write_text(json.dumps(entry, indent=2))
        if self.durable:
            fd = os.open(filepath, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            dfd = os.open(self.storage, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)

    def enqueue(self, message: dict, error: str, attempts: int = 1) -> str:
        """Quarantines a message with its metadata."""
        entry = {
            "id": str(uuid.uuid4()),
            "message": message,
            "error": error,
            "attempts": attempts,
            "failed_at": datetime.now(timezone.utc).isoformat(),
            "reprocessed": False,
        }
        filepath = self.storage / f"{entry['id']}.json"
        with self._lock:
            self._write(filepath, entry)
        return entry["id"]

    def list_pending(self) -> list[dict]:
        """Every entry not yet replayed, oldest first."""
        pending = []
        for f in self.storage.glob("*.json"):
            entry = json.loads(f.read_text())
            if not entry.get("reprocessed"):
                pending.append(entry)
        return sorted(pending, key=lambda e: e["failed_at"])

    def get_entry(self, entry_id: str) -> Optional[dict]:
        filepath = self.storage / f"{entry_id}.json"
        if filepath.exists():
            return json.loads(filepath.read_text())
        return None

    def mark_reprocessed(self, entry_id: str, success: bool) -> None:
        """Marks an entry reprocessed (success or permanent failure)."""
        filepath = self.storage / f"{entry_id}.json"
        if not filepath.exists():
            return
        entry = json.loads(filepath.read_text())
        entry["reprocessed"] = True
        entry["reprocessed_at"] = datetime.now(timezone.utc).isoformat()
        entry["reprocess_success"] = success
        with self._lock:
            self._write(filepath, entry)

    def stats(self) -> dict:
        """Total, pending, reprocessed ok and failed, counts by error: a scan of every file."""
        total = 0
        pending = 0
        reprocessed_ok = 0
        reprocessed_fail = 0
        errors: dict[str, int] = {}
        for f in self.storage.glob("*.json"):
            entry = json.loads(f.read_text())
            total += 1
            if entry.get("reprocessed"):
                if entry.get("reprocess_success"):
                    reprocessed_ok += 1
                else:
                    reprocessed_fail += 1
            else:
                pending += 1
            err = entry.get("error", "unknown")
            errors[err] = errors.get(err, 0) + 1
        return {
            "total": total,
            "pending": pending,
            "reprocessed_ok": reprocessed_ok,
            "reprocessed_fail": reprocessed_fail,
            "error_types": errors,
        }

    def purge(self, older_than_hours: Optional[float] = None) -> None:
        """Removes reprocessed entries (only those older than the cutoff, if given)."""
        cutoff = None
        if older_than_hours is not None:
            cutoff = time.time() - (older_than_hours * 3600)
        for f in self.storage.glob("*.json"):
            entry = json.loads(f.read_text())
            if not entry.get("reprocessed"):
                continue
            if cutoff is not None:
                failed_ts = datetime.fromisoformat(entry["failed_at"]).timestamp()
                if failed_ts > cutoff:
                    continue
            f.unlink()


class Pipeline:
    """Calls a handler with retries and sends what still fails to the DLQ."""

    def __init__(
        self,
        handler: Callable[[dict], Any],
        dlq: DeadLetterQueue,
        max_retries: int = 3,
        retry_delay: float = 1.0,
    ):
        self.handler = handler
        self.dlq = dlq
        self.max_retries = max_retries
        self.retry_delay = retry_delay

    def process(self, message: dict) -> bool:
        last_error = None
        for attempt in range(1, self.max_retries + 1):
            try:
                self.handler(message)
                return True
            except Exception as e:
                last_error = str(e)
                if attempt < self.max_retries:
                    if self.retry_delay:
                        time.sleep(self.retry_delay * attempt)
                    continue
        self.dlq.enqueue(message, last_error, attempts=self.max_retries)
        return False
