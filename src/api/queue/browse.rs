//! Browsing a queue's own messages (not its DLQ): listing them by state, getting one, and
//! counting them per state. Nothing here writes or changes a counter.
//!
//! A message's state is derived from the index as it is, at the store's clock: a leased
//! message is in flight; a waiting one visible now is ready; one visible later is
//! retrying when it failed before (it has a failure history: a retry record, or the
//! envelope it was replayed from with its attempts kept), delayed otherwise. So a listing
//! adds no bookkeeping to enqueue, lease or ack: it walks the message index under the
//! lock (a pass over the store's messages per chunk of a page, no log read), then reads
//! the payload record (and the failure history) of the messages it returns without the
//! lock. A listing is in id order, which is enqueue order; the filters and paging are the
//! DLQ's ([`Filter`], [`Page`]), with the fields that describe a queued message (see
//! [`Queue::messages`]).
//!
//! In flight, the holder is named when a worker pool of this process holds the message
//! (`core::holders`); a read-only snapshot, or a lease taken by another process or by a
//! plain `lease` call, has none.

use std::collections::{BTreeMap, BinaryHeap};

use serde::{Deserialize, Serialize};

use super::Queue;
use crate::api::core::types::{Attempt, MessageId};
use crate::api::dlq::{contains, put_part, Filter, Page};
use crate::engine::state::{Msg, Place, State};
use crate::error::{Error, Result};

/// Most messages a page picks under one hold of the index lock at first.
const CHUNK: usize = 256;
/// Fewest messages picked at once when the filter reads payload records too.
const MIN_READ_CHUNK: usize = 16;
/// Most messages picked under one hold of the lock: a walk whose filter rejects most of
/// what it reads doubles its chunk each round up to this, and a selection of ids (which
/// reads nothing unless its filter does) takes this many per pass, so that neither makes a
/// pass over the store's messages for every few it keeps.
const MAX_CHUNK: usize = 65_536;

/// Where a message of a queue is, as [`Queue::messages`] lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueuedState {
    /// Waiting and visible now: the next lease may take it.
    Ready,
    /// Waiting, visible later, and it never failed (a delayed enqueue, a lease given back
    /// with a delay, an operator's delay).
    Delayed,
    /// Waiting for its next attempt after a failed delivery: visible at that time.
    Retrying,
    /// Leased: a consumer runs it until its lease expires.
    InFlight,
}

impl QueuedState {
    /// Every state, in the order listings and counts show them.
    pub const ALL: [QueuedState; 4] = [
        QueuedState::Ready,
        QueuedState::Delayed,
        QueuedState::Retrying,
        QueuedState::InFlight,
    ];

    /// Its name: `ready`, `delayed`, `retrying`, `in_flight`.
    pub fn as_str(self) -> &'static str {
        match self {
            QueuedState::Ready => "ready",
            QueuedState::Delayed => "delayed",
            QueuedState::Retrying => "retrying",
            QueuedState::InFlight => "in_flight",
        }
    }

    /// The state of message `id` (entry `m`) at `now`; `None` for a DLQ entry.
    pub(crate) fn of(st: &State, id: MessageId, m: &Msg, now: u64) -> Option<QueuedState> {
        Some(match m.place() {
            Place::Dead => return None,
            Place::Leased => QueuedState::InFlight,
            _ if m.visible_at <= now => QueuedState::Ready,
            _ if st.extras.get(&id).is_some_and(|e| e.history_pos.is_some()) => {
                QueuedState::Retrying
            }
            _ => QueuedState::Delayed,
        })
    }
}

impl std::fmt::Display for QueuedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for QueuedState {
    type Err = Error;
    /// `ready`, `delayed`, `retrying`, `in_flight` (or `in-flight`).
    fn from_str(s: &str) -> Result<QueuedState> {
        let s = s.replace('-', "_");
        QueuedState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "unknown message state {s:?}: expected ready, delayed, retrying or in_flight"
                ))
            })
    }
}

/// A message of a queue as [`Queue::messages`] and [`Queue::message`] show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct QueuedMessage {
    /// Its id.
    pub id: MessageId,
    /// Its queue.
    pub queue: String,
    /// Where it is.
    pub state: QueuedState,
    /// Deliveries counted so far.
    pub attempts: u32,
    /// Its replay generation (0 for a message never replayed from a DLQ).
    pub generation: u32,
    /// When it was enqueued (ms).
    pub enqueued_at_ms: u64,
    /// While it waits: when it is (or was) visible; for a retrying message, the time of
    /// its next attempt. `None` in flight.
    pub visible_at_ms: Option<u64>,
    /// In flight: when its lease expires (it is delivered again after that unless its
    /// consumer reports an outcome or extends it).
    pub lease_expires_at_ms: Option<u64>,
    /// In flight: the worker of a pool in this process that runs it (`name-N`), when one
    /// does. A hint: it may have finished a moment later.
    pub holder: Option<String>,
    /// When its time to live ends, if it has one.
    pub expires_at_ms: Option<u64>,
    /// The caller's attributes.
    pub attributes: BTreeMap<String, String>,
    /// The payload.
    pub payload: Vec<u8>,
    /// Its failed deliveries kept, oldest first (the last one is the last error).
    pub failures: Vec<Attempt>,
}

impl QueuedMessage {
    /// The last failed delivery (its error kind and message, time and worker), if any.
    pub fn last_failure(&self) -> Option<&Attempt> {
        self.failures.last()
    }
}

/// How many messages of a queue are in each state ([`Queue::message_counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MessageCounts {
    /// Waiting and visible now.
    pub ready: u64,
    /// Waiting for a later time, never failed.
    pub delayed: u64,
    /// Waiting for their next attempt.
    pub retrying: u64,
    /// Leased.
    pub in_flight: u64,
}

impl MessageCounts {
    /// The count of `state`.
    pub fn of(&self, state: QueuedState) -> u64 {
        match state {
            QueuedState::Ready => self.ready,
            QueuedState::Delayed => self.delayed,
            QueuedState::Retrying => self.retrying,
            QueuedState::InFlight => self.in_flight,
        }
    }
}

/// What loading one message needs, copied out of the index.
#[derive(Clone, Copy)]
pub(super) struct Pick {
    pub(super) id: MessageId,
    pub(super) msg: Msg,
    pub(super) state: QueuedState,
    history_pos: Option<u64>,
    generation: u32,
    expires_at: Option<u64>,
}

impl Queue {
    /// Messages of this queue (not of its DLQ) in `state` (`None`: every state) matching
    /// `filter`, in id order (enqueue order), one page at a time. No side effects.
    ///
    /// The filter's fields that describe a queued message apply: attempts (deliveries so
    /// far), attributes, the payload's text, and the error kind, error message and worker
    /// of its last failure (a message that never failed matches none of these three);
    /// `since`/`until` bound its enqueue time. Tags, status, fingerprint and predicate
    /// describe DLQ entries and are refused ([`Error::InvalidConfig`]). The page's cursors
    /// and `after` place it by id (a cursor's time is not used), so a page starts after
    /// its id whether or not that message is still there.
    ///
    /// ```
    /// use std::time::Duration;
    /// use deadletter::{Config, Failure, Filter, Page, Store};
    /// use deadletter::queue::{EnqueueOptions, FailureReport, QueuedState};
    ///
    /// # let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(&dir, Config::fast())?;
    /// let orders = store.queue("orders")?;
    /// orders.enqueue(b"now")?;
    /// orders.enqueue_with(b"later", &EnqueueOptions::new().delay(Duration::from_secs(60)))?;
    /// orders.enqueue(b"waiting")?;
    /// orders.enqueue(b"waiting too")?;
    /// let leased = orders.lease(1)?.remove(0); // "now"
    /// let timeout = Failure::transient("Timeout", "no answer");
    /// orders.retry(&leased, &FailureReport::new(&timeout), u64::MAX / 2)?;
    ///
    /// let retrying = orders.messages(Some(QueuedState::Retrying), &Filter::all(), Page::first(10))?;
    /// assert_eq!(retrying[0].payload, b"now");
    /// assert_eq!(retrying[0].last_failure().unwrap().error_kind, "Timeout");
    /// let counts = orders.message_counts();
    /// assert_eq!((counts.ready, counts.delayed, counts.retrying), (2, 1, 1));
    /// # Ok::<(), deadletter::Error>(())
    /// ```
    pub fn messages(
        &self,
        state: Option<QueuedState>,
        filter: &Filter,
        page: Page,
    ) -> Result<Vec<QueuedMessage>> {
        check_filter(filter)?;
        let mut out = Vec::with_capacity(page.limit.min(CHUNK));
        let backwards = page.before_cursor.is_some();
        let from = match (page.before_cursor, page.after_cursor, page.after) {
            (Some(c), _, _) => Some(c.id),
            (None, Some(c), _) => Some(c.id),
            (None, None, after) => after,
        };
        self.walk(state, filter, from, backwards, page.limit, CHUNK, |m| {
            out.push(m);
            true
        })?;
        if backwards {
            out.reverse();
        }
        Ok(out)
    }

    /// The ids of the messages in `state` matching `filter` (up to `limit`), in id order:
    /// what an operator's bulk action selects.
    pub fn message_ids(
        &self,
        state: Option<QueuedState>,
        filter: &Filter,
        limit: Option<usize>,
    ) -> Result<Vec<MessageId>> {
        check_filter(filter)?;
        let mut ids = Vec::new();
        let limit = limit.unwrap_or(usize::MAX);
        self.walk(state, filter, None, false, limit, MAX_CHUNK, |m| {
            ids.push(m.id);
            true
        })?;
        Ok(ids)
    }

    /// One message of this queue by id, with its payload, attributes, state and failure
    /// history (its whole life, DLQ steps included, is [`Store::history`](crate::Store::history)).
    /// [`Error::NotFound`] for an id the store does not hold; [`Error::InvalidState`] for
    /// a DLQ entry or a message of another queue.
    pub fn message(&self, id: MessageId) -> Result<QueuedMessage> {
        let pick = {
            let st = self.store.engine().lock();
            self.pick(&st, id, self.store.now())?
        };
        match self.load(pick)? {
            Some(m) => Ok(m),
            // Removed while its record was read (acked, and the record compacted away).
            None => Err(Error::NotFound(id)),
        }
    }

    /// How many messages of this queue are in each state now: one pass over the store's
    /// messages under the index lock (no log read).
    pub fn message_counts(&self) -> MessageCounts {
        let now = self.store.now();
        let st = self.store.engine().lock();
        let mut counts = MessageCounts::default();
        for (id, m) in st.msgs.iter() {
            if m.queue() != self.id {
                continue;
            }
            match QueuedState::of(&st, id, m, now) {
                Some(QueuedState::Ready) => counts.ready += 1,
                Some(QueuedState::Delayed) => counts.delayed += 1,
                Some(QueuedState::Retrying) => counts.retrying += 1,
                Some(QueuedState::InFlight) => counts.in_flight += 1,
                None => {}
            }
        }
        counts
    }

    /// What loading message `id` needs, if it is a message of this queue (not a DLQ
    /// entry).
    pub(super) fn pick(&self, st: &State, id: MessageId, now: u64) -> Result<Pick> {
        let m = *st.msgs.get(&id).ok_or(Error::NotFound(id))?;
        let Some(state) = QueuedState::of(st, id, &m, now) else {
            return Err(Error::InvalidState {
                id,
                expected: "a message in a queue (it is a DLQ entry: see the DLQ's calls)",
            });
        };
        if m.queue() != self.id {
            return Err(Error::InvalidState {
                id,
                expected: "a message of this queue (it is in another queue)",
            });
        }
        let extra = st.extras.get(&id);
        Ok(Pick {
            id,
            msg: m,
            state,
            history_pos: extra.and_then(|e| e.history_pos),
            generation: extra.map_or(0, |e| e.generation),
            expires_at: extra.and_then(|e| e.expires_at),
        })
    }

    /// Calls `visit` with each message in `state` matching `filter` whose id is after
    /// `from` (before it, backwards), in id order (descending backwards), until `limit`
    /// were visited or it returns false. The index is read in chunks of at most `chunk`
    /// (at first; see [`MAX_CHUNK`]), each one pass over the messages keeping the nearest
    /// ids, so writers wait for one pass at a time and never while the log is read.
    #[allow(clippy::too_many_arguments)]
    fn walk(
        &self,
        state: Option<QueuedState>,
        filter: &Filter,
        mut from: Option<MessageId>,
        backwards: bool,
        limit: usize,
        chunk: usize,
        mut visit: impl FnMut(QueuedMessage) -> bool,
    ) -> Result<()> {
        let reads = needs_read(filter);
        let min = filter.min_attempts.unwrap_or(0);
        let max = filter.max_attempts.unwrap_or(u32::MAX);
        let mut visited = 0;
        let mut round: u32 = 0;
        while visited < limit {
            let remaining = limit - visited;
            let want = if reads {
                // Doubled each round: the filter may reject most of what is read.
                let first = remaining.clamp(MIN_READ_CHUNK, chunk);
                first
                    .saturating_mul(1 << round.min(16))
                    .min(MAX_CHUNK.max(first))
            } else {
                remaining.min(chunk)
            };
            round += 1;
            let now = self.store.now();
            let chunk = {
                let st = self.store.engine().lock();
                // The `want` nearest ids past `from`: a heap whose top is the farthest.
                let mut nearest: BinaryHeap<(u64, MessageId)> = BinaryHeap::new();
                for (id, m) in st.msgs.iter() {
                    let past = match from {
                        None => true,
                        Some(f) if backwards => id < f,
                        Some(f) => id > f,
                    };
                    if !past || m.queue() != self.id || m.attempts < min || m.attempts > max {
                        continue;
                    }
                    let Some(s) = QueuedState::of(&st, id, m, now) else {
                        continue;
                    };
                    if state.is_some_and(|wanted| wanted != s) {
                        continue;
                    }
                    // Nearest first: ascending ids forwards, descending backwards.
                    let key = if backwards { u64::MAX - id } else { id };
                    if nearest.len() < want {
                        nearest.push((key, id));
                    } else if nearest.peek().is_some_and(|&(top, _)| key < top) {
                        nearest.pop();
                        nearest.push((key, id));
                    }
                }
                let ids: Vec<MessageId> = nearest
                    .into_sorted_vec()
                    .into_iter()
                    .map(|(_, id)| id)
                    .collect();
                let picks: Vec<Pick> = ids
                    .iter()
                    .filter_map(|&id| self.pick(&st, id, now).ok())
                    .collect();
                (picks, ids.len() < want, ids.last().copied())
            };
            let (picks, exhausted, last) = chunk;
            for pick in picks {
                let Some(m) = self.load(pick)? else { continue };
                if !matches_read(filter, &m) {
                    continue;
                }
                visited += 1;
                if !visit(m) || visited >= limit {
                    return Ok(());
                }
            }
            if exhausted {
                return Ok(());
            }
            from = last;
        }
        Ok(())
    }

    /// Reads message `p`'s payload record and failure history. `None` when it left the
    /// store meanwhile and its records are gone (a compaction after its ack).
    pub(super) fn load(&self, p: Pick) -> Result<Option<QueuedMessage>> {
        let engine = self.store.engine();
        let read = (|| {
            let mut reader = engine.reader();
            let (version, body) = reader.read(p.msg.payload_pos)?;
            let (meta, payload, _) = put_part(p.msg.payload_pos, version, body)?;
            let history = engine.read_history(p.history_pos)?;
            Ok::<_, Error>((meta, payload, history))
        })();
        let (meta, payload, history) = match read {
            Ok(parts) => parts,
            Err(e) => {
                // Still there, at the same place: the error is real.
                let st = engine.lock();
                let same = st.msgs.get(&p.id).is_some_and(|m| *m == p.msg);
                return if same { Err(e) } else { Ok(None) };
            }
        };
        let in_flight = p.state == QueuedState::InFlight;
        let holder = if in_flight {
            self.store.holders().holder_of(self.id, p.id)
        } else {
            None
        };
        Ok(Some(QueuedMessage {
            id: p.id,
            queue: self.name.to_string(),
            state: p.state,
            attempts: p.msg.attempts,
            generation: p.generation,
            enqueued_at_ms: meta.enqueued_at,
            visible_at_ms: (!in_flight).then_some(p.msg.visible_at),
            lease_expires_at_ms: in_flight.then_some(p.msg.visible_at),
            holder,
            expires_at_ms: p.expires_at,
            attributes: meta.attributes,
            payload,
            failures: history.attempts,
        }))
    }
}

/// Refuses the filter fields that describe DLQ entries only.
fn check_filter(filter: &Filter) -> Result<()> {
    let refused = [
        ("tags", !filter.tags.is_empty()),
        ("status", filter.pending.is_some()),
        ("fingerprint", filter.fingerprint.is_some()),
        ("predicate", filter.predicate.is_some()),
    ];
    match refused.iter().find(|(_, set)| *set) {
        Some((field, _)) => Err(Error::InvalidConfig(format!(
            "a filter by {field} selects DLQ entries, not messages waiting in a queue"
        ))),
        None => Ok(()),
    }
}

/// True when `filter` checks what only the message's records hold.
fn needs_read(filter: &Filter) -> bool {
    filter.error_kind.is_some()
        || filter.message_contains.is_some()
        || filter.worker.is_some()
        || filter.since_ms.is_some()
        || filter.until_ms.is_some()
        || filter.payload_contains.is_some()
        || !filter.attributes.is_empty()
}

/// The checks of `filter` on what the message's records hold (the index checked the
/// others).
fn matches_read(filter: &Filter, m: &QueuedMessage) -> bool {
    let last = m.last_failure();
    let at = m.enqueued_at_ms;
    filter
        .error_kind
        .as_ref()
        .is_none_or(|k| last.is_some_and(|a| a.error_kind == *k))
        && filter
            .message_contains
            .as_ref()
            .is_none_or(|s| last.is_some_and(|a| a.error_message.contains(s.as_str())))
        && filter
            .worker
            .as_ref()
            .is_none_or(|w| last.is_some_and(|a| a.worker.as_ref() == Some(w)))
        && filter.since_ms.is_none_or(|t| at >= t)
        && filter.until_ms.is_none_or(|t| at < t)
        && filter
            .payload_contains
            .as_ref()
            .is_none_or(|s| contains(&m.payload, s.as_bytes()))
        && filter
            .attributes
            .iter()
            .all(|(k, v)| m.attributes.get(k) == Some(v))
}
