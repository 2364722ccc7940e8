"""What a Python user would build instead on SQLite (Python's sqlite3, WAL journal): a
queue table and a DLQ table, written for the benchmark.

Durable is `synchronous=FULL`, which in WAL mode syncs the WAL at every commit; not
durable is `synchronous=OFF` (no sync at all). Each call is its own transaction (autocommit,
isolation_level=None, explicit BEGIN/COMMIT for the calls that write more than one
statement), as a one-message call must be to be acknowledged. The DLQ has an index on
(error_kind, id) for filtered lists. The worker protocol is the one the Rust comparison
harness gives every engine without a pool of its own (crates/compare, `pool::batch_pool`):
a lease of up to 256 messages in one commit, the batch's successes acked in one commit,
each failure reported in one commit (a retry, which keeps the attempt's error in the
message's history, or the move to the DLQ with that history).
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Callable

SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    payload BLOB NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    visible_at INTEGER NOT NULL,
    leased_until INTEGER NOT NULL DEFAULT 0,
    enqueued_at INTEGER NOT NULL,
    history TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX IF NOT EXISTS messages_ready ON messages (queue, visible_at, id);
CREATE TABLE IF NOT EXISTS dlq (
    id INTEGER PRIMARY KEY,
    queue TEXT NOT NULL,
    payload BLOB NOT NULL,
    error_kind TEXT NOT NULL,
    error_message TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    history TEXT NOT NULL,
    enqueued_at INTEGER NOT NULL,
    failed_at INTEGER NOT NULL,
    reprocessed INTEGER NOT NULL DEFAULT 0,
    reprocess_success INTEGER
);
CREATE INDEX IF NOT EXISTS dlq_kind ON dlq (error_kind, id);
"""


def now_ms() -> int:
    return int(time.time() * 1000)


class SqliteQueue:
    def __init__(self, path: str, durable: bool):
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        mode = self.db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        assert mode == "wal", mode
        self.db.execute(f"PRAGMA synchronous={'FULL' if durable else 'OFF'}")
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    def enqueue(self, queue: str, payload: bytes) -> int:
        t = now_ms()
        cur = self.db.execute(
            "INSERT INTO messages (queue, payload, visible_at, enqueued_at) VALUES (?, ?, ?, ?)",
            (queue, payload, t, t),
        )
        return cur.lastrowid

    def enqueue_batch(self, queue: str, payloads: list[bytes]) -> None:
        t = now_ms()
        self.db.execute("BEGIN")
        self.db.executemany(
            "INSERT INTO messages (queue, payload, visible_at, enqueued_at) VALUES (?, ?, ?, ?)",
            [(queue, p, t, t) for p in payloads],
        )
        self.db.execute("COMMIT")

    def lease(self, queue: str, n: int, visibility_ms: int = 30_000) -> list[tuple]:
        t = now_ms()
        self.db.execute("BEGIN IMMEDIATE")
        rows = self.db.execute(
            "UPDATE messages SET attempts = attempts + 1, leased_until = ? WHERE id IN "
            "(SELECT id FROM messages WHERE queue = ? AND visible_at <= ? AND leased_until <= ? "
            "ORDER BY visible_at, id LIMIT ?) RETURNING id, payload, attempts, enqueued_at, history",
            (t + visibility_ms, queue, t, t, n),
        ).fetchall()
        self.db.execute("COMMIT")
        return rows

    def ack_all(self, ids: list[int]) -> None:
        if not ids:
            return
        self.db.execute("BEGIN")
        self.db.executemany("DELETE FROM messages WHERE id = ?", [(i,) for i in ids])
        self.db.execute("COMMIT")

    def retry(self, msg_id: int, history: str, delay_ms: int) -> None:
        # One commit: the attempt's error kept with the message, visible again later.
        self.db.execute(
            "UPDATE messages SET visible_at = ?, leased_until = 0, history = ? WHERE id = ?",
            (now_ms() + delay_ms, history, msg_id),
        )

    def dead_letter(self, queue: str, row: tuple, kind: str, message: str, history: str) -> None:
        msg_id, payload, attempts, enqueued_at, _ = row
        self.db.execute("BEGIN")
        self.db.execute(
            "INSERT INTO dlq (id, queue, payload, error_kind, error_message, attempts, history, "
            "enqueued_at, failed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (msg_id, queue, payload, kind, message, attempts, history, enqueued_at, now_ms()),
        )
        self.db.execute("DELETE FROM messages WHERE id = ?", (msg_id,))
        self.db.execute("COMMIT")

    def run_worker(self, queue: str, handler: Callable[[bytes], None], max_attempts: int) -> None:
        """Leases batches and handles them until the queue is empty (the failure flow)."""
        while True:
            rows = self.lease(queue, 256)
            if not rows:
                return
            done = []
            for row in rows:
                try:
                    handler(row[1])
                    done.append(row[0])
                except Exception as e:
                    kind, text = type(e).__name__, str(e)
                    h = json.loads(row[4])
                    h.append({"number": row[2], "at_ms": now_ms(), "kind": kind, "message": text})
                    if row[2] >= max_attempts:
                        self.dead_letter(queue, row, kind, text, json.dumps(h))
                    else:
                        self.retry(row[0], json.dumps(h), 0)
            self.ack_all(done)

    def dlq_fill(self, queue: str, entries: list[tuple[bytes, str, str]]) -> None:
        t = now_ms()
        self.db.execute("BEGIN")
        self.db.executemany(
            "INSERT INTO dlq (queue, payload, error_kind, error_message, attempts, history, "
            "enqueued_at, failed_at) VALUES (?, ?, ?, ?, 3, '[]', ?, ?)",
            [(queue, p, k, m, t, t) for p, k, m in entries],
        )
        self.db.execute("COMMIT")

    def dlq_stats(self) -> dict:
        total, pending, ok, failed, oldest, newest = self.db.execute(
            "SELECT COUNT(*), COALESCE(SUM(reprocessed = 0), 0), "
            "COALESCE(SUM(reprocessed = 1 AND reprocess_success = 1), 0), "
            "COALESCE(SUM(reprocessed = 1 AND reprocess_success = 0), 0), "
            "MIN(failed_at), MAX(failed_at) FROM dlq"
        ).fetchone()
        kinds = dict(self.db.execute("SELECT error_kind, COUNT(*) FROM dlq GROUP BY error_kind"))
        return {
            "total": total,
            "pending": pending,
            "reprocessed_ok": ok,
            "reprocessed_failed": failed,
            "oldest": oldest,
            "newest": newest,
            "by_error_kind": kinds,
        }

    def dlq_list(self, kind: str, limit: int) -> list[tuple]:
        return self.db.execute(
            "SELECT id, queue, payload, error_kind, error_message, attempts, history, "
            "enqueued_at, failed_at, reprocessed FROM dlq WHERE error_kind = ? AND reprocessed = 0 "
            "ORDER BY id LIMIT ?",
            (kind, limit),
        ).fetchall()

    def dlq_replay_all(self) -> int:
        """Every pending entry back to its queue with fresh attempts, in one commit."""
        t = now_ms()
        self.db.execute("BEGIN")
        n = self.db.execute(
            "INSERT INTO messages (id, queue, payload, visible_at, enqueued_at) "
            "SELECT id, queue, payload, ?, enqueued_at FROM dlq WHERE reprocessed = 0",
            (t,),
        ).rowcount
        self.db.execute("DELETE FROM dlq WHERE reprocessed = 0")
        self.db.execute("COMMIT")
        return n
