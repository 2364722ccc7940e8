//! Contestant `sqlite`: the common "durable queue in a table" design.
//!
//! One SQLite database (bundled via rusqlite) in WAL mode:
//!
//! * `messages(id, status, attempts, visible_at, enqueued_at, last_error,
//!   payload)` with an index on `visible_at`; a lease is one
//!   `UPDATE ... WHERE id IN (oldest visible) RETURNING ...` that marks the
//!   rows leased and pushes `visible_at` past the lease timeout, so expired
//!   leases come back by themselves;
//! * `dlq(id, payload, error_kind, error, attempts, failed_at)` with an index
//!   on `(error_kind, failed_at)` for filtered listing and per-kind counts.
//!
//! `synchronous=FULL` when durable (the WAL is fsynced at every commit), `OFF`
//! otherwise. All statements are cached; batches run in one transaction. The
//! connection sits behind a mutex: SQLite serialises writers anyway, and one
//! shared connection beats several contending on the database lock.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, OptionalExtension};

use crate::contestant::{BenchResult, Contestant, DlqEntry, DlqStats, Failure, Id, Leased};

/// Lease timeout: far longer than any benchmark run.
const LEASE_MS: i64 = 300_000;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS messages (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    status      INTEGER NOT NULL,            -- 0 ready, 1 leased
    attempts    INTEGER NOT NULL DEFAULT 0,
    visible_at  INTEGER NOT NULL,            -- ms since epoch
    enqueued_at INTEGER NOT NULL,
    last_error  TEXT,
    payload     BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_visible ON messages(visible_at);
CREATE TABLE IF NOT EXISTS dlq (
    id          INTEGER PRIMARY KEY,         -- the message id
    payload     BLOB NOT NULL,
    error_kind  TEXT NOT NULL,
    error       TEXT NOT NULL,
    attempts    INTEGER NOT NULL,
    failed_at   INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS dlq_kind ON dlq(error_kind, failed_at);
";

const INSERT: &str = "INSERT INTO messages (status, attempts, visible_at, enqueued_at, payload)
     VALUES (0, 0, ?1, ?1, ?2)";
const LEASE: &str = "UPDATE messages SET status = 1, attempts = attempts + 1, visible_at = ?1
     WHERE id IN (SELECT id FROM messages WHERE visible_at <= ?2
                  ORDER BY visible_at, id LIMIT ?3)
     RETURNING id, payload, attempts";
const DELETE: &str = "DELETE FROM messages WHERE id = ?1";
const RETRY: &str =
    "UPDATE messages SET status = 0, visible_at = ?1, last_error = ?2 WHERE id = ?3";
const TO_DLQ: &str = "INSERT INTO dlq (id, payload, error_kind, error, attempts, failed_at)
     SELECT id, payload, ?1, ?2, attempts, ?3 FROM messages WHERE id = ?4";
const STATS: &str = "SELECT error_kind, COUNT(*) FROM dlq GROUP BY error_kind";
const LIST_KIND: &str = "SELECT id, payload, error_kind, error, attempts FROM dlq
     WHERE error_kind = ?1 ORDER BY failed_at, id LIMIT ?2";
const LIST_ALL: &str =
    "SELECT id, payload, error_kind, error, attempts FROM dlq ORDER BY id LIMIT ?1";
const GET: &str = "SELECT id, payload, error_kind, error, attempts FROM dlq WHERE id = ?1";
const REPLAY: &str = "INSERT INTO messages (id, status, attempts, visible_at, enqueued_at, payload)
     SELECT id, 0, 0, ?1, ?1, payload FROM dlq WHERE id = ?2";
const DLQ_DELETE: &str = "DELETE FROM dlq WHERE id = ?1";
const PENDING: &str = "SELECT COUNT(*) FROM messages";

/// The `sqlite` store.
pub struct Sqlite {
    conn: Mutex<Connection>,
}

/// Opens (creating if needed) a `sqlite` store in `dir`.
pub fn open(dir: &Path, durable: bool) -> BenchResult<Box<dyn Contestant>> {
    let conn = Connection::open(dir.join("queue.sqlite3"))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", if durable { "FULL" } else { "OFF" })?;
    conn.execute_batch(SCHEMA)?;
    conn.set_prepared_statement_cache_capacity(32);
    Ok(Box::new(Sqlite {
        conn: Mutex::new(conn),
    }))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn row_id(id: Id) -> BenchResult<i64> {
    Ok(i64::try_from(id.0)?)
}

fn dlq_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<DlqEntry> {
    Ok(DlqEntry {
        id: Id(row.get::<_, i64>(0)? as u128),
        payload: row.get(1)?,
        error_kind: row.get(2)?,
        error: row.get(3)?,
        attempts: row.get(4)?,
    })
}

impl Sqlite {
    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Contestant for Sqlite {
    fn enqueue(&self, payload: &[u8]) -> BenchResult<()> {
        let conn = self.lock();
        conn.prepare_cached(INSERT)?
            .execute(params![now_ms(), payload])?;
        Ok(())
    }

    fn enqueue_batch(&self, payloads: &[&[u8]]) -> BenchResult<()> {
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached(INSERT)?;
            let now = now_ms();
            for p in payloads {
                stmt.execute(params![now, p])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn lease(&self, max: usize) -> BenchResult<Vec<Leased>> {
        let conn = self.lock();
        let now = now_ms();
        let mut stmt = conn.prepare_cached(LEASE)?;
        let rows = stmt.query_map(params![now + LEASE_MS, now, max as i64], |row| {
            Ok(Leased {
                id: Id(row.get::<_, i64>(0)? as u128),
                payload: row.get(1)?,
                attempt: row.get(2)?,
            })
        })?;
        let mut out = rows.collect::<rusqlite::Result<Vec<_>>>()?;
        out.sort_unstable_by_key(|l| l.id);
        Ok(out)
    }

    fn ack(&self, ids: &[Id]) -> BenchResult<()> {
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached(DELETE)?;
            for id in ids {
                stmt.execute([row_id(*id)?])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn nack(&self, id: Id, failure: &Failure<'_>) -> BenchResult<()> {
        let rid = row_id(id)?;
        let mut conn = self.lock();
        match failure {
            Failure::Transient { error, retry_after } => {
                let visible_at = now_ms() + retry_after.as_millis() as i64;
                conn.prepare_cached(RETRY)?
                    .execute(params![visible_at, error, rid])?;
            }
            Failure::Permanent { kind, error } => {
                let tx = conn.transaction()?;
                tx.prepare_cached(TO_DLQ)?
                    .execute(params![kind, error, now_ms(), rid])?;
                tx.prepare_cached(DELETE)?.execute([rid])?;
                tx.commit()?;
            }
        }
        Ok(())
    }

    fn dlq_stats(&self) -> BenchResult<DlqStats> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(STATS)?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
        let mut by_kind = BTreeMap::new();
        let mut total = 0;
        for row in rows {
            let (kind, n) = row?;
            total += n as u64;
            by_kind.insert(kind, n as u64);
        }
        Ok(DlqStats { total, by_kind })
    }

    fn dlq_list(&self, kind: Option<&str>, limit: usize) -> BenchResult<Vec<DlqEntry>> {
        let conn = self.lock();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let out = match kind {
            Some(k) => conn
                .prepare_cached(LIST_KIND)?
                .query_map(params![k, limit], dlq_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?,
            None => conn
                .prepare_cached(LIST_ALL)?
                .query_map([limit], dlq_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?,
        };
        Ok(out)
    }

    fn dlq_get(&self, id: Id) -> BenchResult<Option<DlqEntry>> {
        let conn = self.lock();
        let entry = conn
            .prepare_cached(GET)?
            .query_row([row_id(id)?], dlq_row)
            .optional()?;
        Ok(entry)
    }

    fn dlq_replay(&self, ids: &[Id]) -> BenchResult<usize> {
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        let mut moved = 0;
        {
            let mut insert = tx.prepare_cached(REPLAY)?;
            let mut delete = tx.prepare_cached(DLQ_DELETE)?;
            let now = now_ms();
            for id in ids {
                let rid = row_id(*id)?;
                if insert.execute(params![now, rid])? == 1 {
                    delete.execute([rid])?;
                    moved += 1;
                }
            }
        }
        tx.commit()?;
        Ok(moved)
    }

    fn pending(&self) -> BenchResult<u64> {
        let conn = self.lock();
        let n: i64 = conn.prepare_cached(PENDING)?.query_row([], |r| r.get(0))?;
        Ok(n as u64)
    }
}
