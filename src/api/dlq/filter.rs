//! Which entries an operation applies to ([`Filter`]) and which page of a listing
//! ([`Page`]). A filter is checked against the index first (kind, worker, time, attempts,
//! status) and reads an entry's envelope only for what only the envelope holds (message
//! text, tags, attributes).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::api::core::types::{DeadLetter, EntryStatus, MessageId};
use crate::engine::fingerprint::Fingerprint;
use crate::engine::state::{EntrySummary, State};

/// Which entries an operation applies to ([`Dlq::list`](crate::Dlq::list),
/// [`Dlq::analyze`](crate::Dlq::analyze), [`Dlq::replay`](crate::Dlq::replay),
/// [`Dlq::delete_matching`](crate::Dlq::delete_matching)). Empty fields match everything;
/// each setter adds a condition that must hold too.
///
/// ```
/// use deadletter::{Config, Failure, Filter, Page, Store};
/// use deadletter::clock::ManualClock;
/// use deadletter::queue::{EnqueueOptions, FailureReport};
///
/// # let dir = tempfile::tempdir().unwrap();
/// let t0 = 1_700_000_000_000;
/// let clock = ManualClock::new(t0);
/// let store = Store::open(&dir, Config::fast().clock(clock.clone()))?;
/// let orders = store.queue("orders")?;
/// let failures = [("eu", "Timeout", "w1"), ("us", "Invalid", "w1"), ("eu", "Invalid", "w2")];
/// for (region, kind, worker) in failures {
///     orders.enqueue_with(region, &EnqueueOptions::new().attribute("region", region))?;
///     let msg = orders.lease(1)?.remove(0);
///     let failure = Failure::permanent(kind, format!("{kind} in {region}"));
///     let report = FailureReport::new(&failure).worker(worker).tag("team", "billing");
///     orders.dead_letter(&msg, &report)?;
///     clock.advance(60_000);
/// }
///
/// let dlq = orders.dlq();
/// let count = |filter: Filter| dlq.list(&filter, Page::first(100)).map(|v| v.len());
/// assert_eq!(count(Filter::all())?, 3);
/// assert_eq!(count(Filter::error_kind("Invalid"))?, 2);
/// assert_eq!(count(Filter::error_kind("Invalid").worker("w2"))?, 1);
/// assert_eq!(count(Filter::all().attribute("region", "eu"))?, 2);
/// assert_eq!(count(Filter::all().message_contains("in us"))?, 1);
/// assert_eq!(count(Filter::all().payload_contains("e"))?, 2); // the two "eu" payloads
/// assert_eq!(count(Filter::all().matching(|e| e.payload.ends_with(b"s")))?, 1);
/// assert_eq!(count(Filter::all().tag("team", "billing").pending_only())?, 3);
/// // Dead-lettered in the first two minutes: [since, until).
/// assert_eq!(count(Filter::all().between(Some(t0), Some(t0 + 120_000)))?, 2);
/// assert_eq!(count(Filter::all().attempts(Some(2), None))?, 0); // each had one delivery
///
/// // The same filter selects what to delete (or replay, or analyse).
/// assert_eq!(dlq.delete_matching(&Filter::error_kind("Timeout"))?, 1);
/// assert_eq!(dlq.len(), 2);
/// # Ok::<(), deadletter::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Filter {
    /// Error kind, exactly.
    pub error_kind: Option<String>,
    /// A substring of the error message.
    pub message_contains: Option<String>,
    /// Dead-lettered at or after this time (ms).
    pub since_ms: Option<u64>,
    /// Dead-lettered before this time (ms).
    pub until_ms: Option<u64>,
    /// At least this many deliveries.
    pub min_attempts: Option<u32>,
    /// At most this many deliveries.
    pub max_attempts: Option<u32>,
    /// Worker name, exactly.
    pub worker: Option<String>,
    /// Tags that must all be present with these values.
    pub tags: BTreeMap<String, String>,
    /// Attributes that must all be present with these values.
    pub attributes: BTreeMap<String, String>,
    /// Only pending entries (true) or only reprocessed ones (false).
    pub pending: Option<bool>,
    /// A substring of the payload (its bytes, wherever they are in the payload).
    #[serde(default)]
    pub payload_contains: Option<String>,
    /// A check of the caller's own on the whole envelope (such as a regular expression the
    /// command-line tool compiles). Not part of the filter's serde form.
    #[serde(skip)]
    pub predicate: Option<EntryPredicate>,
    /// Failure fingerprint (error kind and message template), exactly.
    #[serde(default)]
    pub fingerprint: Option<Fingerprint>,
}

/// A caller's check of an entry ([`Filter::matching`]): compared by identity (two filters
/// are equal when they hold the same check).
#[derive(Clone)]
pub struct EntryPredicate(Arc<dyn Fn(&DeadLetter) -> bool + Send + Sync>);

impl EntryPredicate {
    /// Wraps a check.
    pub fn new(check: impl Fn(&DeadLetter) -> bool + Send + Sync + 'static) -> Self {
        EntryPredicate(Arc::new(check))
    }

    /// Runs the check.
    pub fn check(&self, entry: &DeadLetter) -> bool {
        (self.0)(entry)
    }
}

impl std::fmt::Debug for EntryPredicate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EntryPredicate(..)")
    }
}

impl PartialEq for EntryPredicate {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for EntryPredicate {}

impl Filter {
    /// Matches every entry.
    pub fn all() -> Self {
        Self::default()
    }
    /// Matches one error kind.
    pub fn error_kind(kind: impl Into<String>) -> Self {
        Filter {
            error_kind: Some(kind.into()),
            ..Self::default()
        }
    }
    setters! {
        /// Also requires a substring of the error message.
        message_contains(s: impl Into<String>) => message_contains = Some(s.into());
        /// Also requires dead-lettering in `[since, until)`.
        between(since_ms: Option<u64>, until_ms: Option<u64>)
            => since_ms = since_ms, until_ms = until_ms;
        /// Also requires a number of deliveries in `[min, max]`.
        attempts(min: Option<u32>, max: Option<u32>) => min_attempts = min, max_attempts = max;
        /// Also requires the final failure to be reported by `worker`.
        worker(worker: impl Into<String>) => worker = Some(worker.into());
        /// Only pending entries.
        pending_only() => pending = Some(true);
        /// Also requires the payload to contain `text` (its UTF-8 bytes).
        payload_contains(text: impl Into<String>) => payload_contains = Some(text.into());
        /// Also requires `check` to accept the entry: a search the filter has no field for,
        /// such as a regular expression (the library has no regex engine; the command-line
        /// tool and the dashboard bring one). Checked last, on the whole envelope.
        matching(check: impl Fn(&DeadLetter) -> bool + Send + Sync + 'static)
            => predicate = Some(EntryPredicate::new(check));
        /// Also requires a failure fingerprint ([`Fingerprint`]).
        fingerprint(fingerprint: Fingerprint) => fingerprint = Some(fingerprint);
    }
    /// Also requires a tag.
    pub fn tag(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.tags.insert(key.into(), value.into());
        self
    }
    /// Also requires an attribute.
    pub fn attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.attributes.insert(key.into(), value.into());
        self
    }

    /// This filter narrowed to what a purge of entries older than `cutoff_ms` removes:
    /// dead-lettered before the cutoff, and reprocessed only unless `include_pending`.
    /// `None` when nothing can match (the filter asks for pending entries only, and
    /// pending entries are kept).
    pub fn purge_cutoff(&self, cutoff_ms: u64, include_pending: bool) -> Option<Filter> {
        let mut f = self.clone();
        f.until_ms = Some(f.until_ms.map_or(cutoff_ms, |t| t.min(cutoff_ms)));
        if !include_pending {
            if f.pending == Some(true) {
                return None;
            }
            f.pending = Some(false);
        }
        Some(f)
    }

    pub(super) fn needs_envelope(&self) -> bool {
        self.message_contains.is_some()
            || self.payload_contains.is_some()
            || self.predicate.is_some()
            || !self.tags.is_empty()
            || !self.attributes.is_empty()
    }

    /// The checks answered by the index alone, with the filter's strings resolved to the
    /// index's ids in `st` (resolve again after unlocking: ids are only ever added).
    pub(super) fn index_query(&self, st: &State) -> IndexQuery {
        // A string the index never saw matches no entry.
        let mut never = false;
        let mut resolve = |id: Option<u32>| {
            never |= id.is_none();
            id.unwrap_or(0)
        };
        let kind = self.error_kind.as_ref().map(|k| resolve(st.strings.get(k)));
        // Worker 0 is "no worker", which a worker filter never matches.
        let worker = self
            .worker
            .as_ref()
            .map(|w| resolve(st.strings.get(w).filter(|&w| w != 0)));
        let fingerprint = self
            .fingerprint
            .map(|fp| resolve(st.fingerprints.dense(fp)));
        IndexQuery {
            never,
            kind,
            worker,
            fingerprint,
            since_ms: self.since_ms.unwrap_or(0),
            until_ms: self.until_ms,
            min_attempts: self.min_attempts.unwrap_or(0),
            max_attempts: self.max_attempts.unwrap_or(u32::MAX),
            pending: self.pending,
        }
    }

    /// True when `entry` matches every field of the filter: the whole check on an
    /// envelope, for backends that have no index to check first. The fingerprint is the
    /// entry's own when it carries one, else computed from its failure without frames.
    pub fn matches(&self, entry: &DeadLetter) -> bool {
        let f = &entry.failure;
        let own_fingerprint = || {
            entry
                .fingerprint
                .unwrap_or_else(|| Fingerprint::of_failure(f, 0))
        };
        let at = entry.dlq.dead_lettered_at_ms;
        let attempts = entry.metadata.delivery_count;
        let pending = entry.status == EntryStatus::Pending;
        self.error_kind.as_ref().is_none_or(|k| *k == f.error_kind)
            && self
                .worker
                .as_ref()
                .is_none_or(|w| entry.dlq.worker.as_ref() == Some(w))
            && self.since_ms.is_none_or(|t| at >= t)
            && self.until_ms.is_none_or(|t| at < t)
            && self.min_attempts.is_none_or(|n| attempts >= n)
            && self.max_attempts.is_none_or(|n| attempts <= n)
            && self.pending.is_none_or(|p| p == pending)
            && self.fingerprint.is_none_or(|fp| fp == own_fingerprint())
            && self.matches_envelope(entry)
    }

    /// The checks that need the envelope.
    pub(super) fn matches_envelope(&self, e: &DeadLetter) -> bool {
        let message = &e.failure.error_message;
        let payload = |needle: &String| contains(&e.payload, needle.as_bytes());
        self.message_contains
            .as_ref()
            .is_none_or(|s| message.contains(s.as_str()))
            && self.payload_contains.as_ref().is_none_or(payload)
            && self.tags.iter().all(|(k, v)| e.dlq.tags.get(k) == Some(v))
            && self
                .attributes
                .iter()
                .all(|(k, v)| e.metadata.attributes.get(k) == Some(v))
            && self.predicate.as_ref().is_none_or(|p| p.check(e))
    }
}

/// The part of a [`Filter`] the index answers, resolved to the index's interned ids
/// ([`Filter::index_query`]): checked against an entry's [`EntrySummary`] alone.
#[derive(Debug, Clone, Copy)]
pub(super) struct IndexQuery {
    /// A string of the filter is unknown to the index: nothing matches.
    never: bool,
    kind: Option<u32>,
    worker: Option<u32>,
    fingerprint: Option<u32>,
    since_ms: u64,
    until_ms: Option<u64>,
    min_attempts: u32,
    max_attempts: u32,
    pending: Option<bool>,
}

impl IndexQuery {
    /// True when no entry can match.
    pub(super) fn never(&self) -> bool {
        self.never
    }

    /// The first key of the browse order that can match (by the filter's start time).
    pub(super) fn start(&self) -> (u64, MessageId) {
        (self.since_ms, 0)
    }

    /// True when no entry dead-lettered at `at` or later can match (the browse order is
    /// by time, so a forward walk can stop there).
    pub(super) fn past_end(&self, at: u64) -> bool {
        self.until_ms.is_some_and(|t| at >= t)
    }

    /// True when no entry dead-lettered before `at` can match (a backward walk stops).
    pub(super) fn before_start(&self, at: u64) -> bool {
        at < self.since_ms
    }

    /// True when the entry dead-lettered at `at` with summary `s` passes every check the
    /// index answers.
    #[inline]
    pub(super) fn matches(&self, at: u64, s: &EntrySummary) -> bool {
        !self.never
            && at >= self.since_ms
            && self.until_ms.is_none_or(|t| at < t)
            && self.kind.is_none_or(|k| k == s.kind)
            && self.worker.is_none_or(|w| w == s.worker)
            && self.fingerprint.is_none_or(|f| f == s.fingerprint)
            && s.attempts >= self.min_attempts
            && s.attempts <= self.max_attempts
            && self.pending.is_none_or(|p| p == s.pending)
    }
}

/// True when `needle` occurs in `haystack` (an empty needle occurs everywhere).
pub(crate) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// A place in a DLQ's browse order (oldest first: by dead-lettering time, then id). It
/// stays meaningful when the entry it was taken from, or any other, is replayed, deleted
/// or added: a page that starts after (or ends before) a cursor is the entries on that
/// side of it at the time of the call. [`Cursor::of`] takes one from a listed entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Cursor {
    /// The entry's dead-lettering time (ms).
    pub dead_lettered_at_ms: u64,
    /// The entry's id.
    pub id: MessageId,
}

impl Cursor {
    /// The place of `entry` in its DLQ's browse order.
    pub fn of(entry: &DeadLetter) -> Cursor {
        Cursor {
            dead_lettered_at_ms: entry.dlq.dead_lettered_at_ms,
            id: entry.id(),
        }
    }
}

/// A page of a listing, oldest first: the first entries, the entries after an entry or a
/// [`Cursor`], or the entries just before a cursor (the previous page).
///
/// ```
/// use deadletter::{Config, Failure, Filter, Page, Store};
/// use deadletter::dlq::Cursor;
/// use deadletter::queue::FailureReport;
///
/// # let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(&dir, Config::fast())?;
/// let jobs = store.queue("jobs")?;
/// jobs.enqueue_batch(&(0..25).map(|i| format!("job-{i}")).collect::<Vec<_>>())?;
/// let broken = Failure::permanent("Broken", "cannot run");
/// for msg in jobs.lease(25)? {
///     jobs.dead_letter(&msg, &FailureReport::new(&broken))?;
/// }
///
/// // Ten at a time, each page starting after the last entry of the one before.
/// let dlq = jobs.dlq();
/// let mut page = Page::first(10);
/// let mut sizes = Vec::new();
/// loop {
///     let entries = dlq.list(&Filter::all(), page)?;
///     let Some(last) = entries.last() else { break };
///     page = Page::after(last.id(), 10);
///     sizes.push(entries.len());
/// }
/// assert_eq!(sizes, [10, 10, 5]);
///
/// // Cursors stay right when the entries they were taken from are gone.
/// let second = dlq.list(&Filter::all(), Page::first(20))?.split_off(10);
/// let (first, last) = (Cursor::of(&second[0]), Cursor::of(&second[9]));
/// dlq.delete(second[0].id())?;
/// dlq.delete(second[9].id())?;
/// let next = dlq.list(&Filter::all(), Page::after_cursor(last, 10))?;
/// assert_eq!(next[0].id(), second[9].id() + 1);
/// let previous = dlq.list(&Filter::all(), Page::before_cursor(first, 10))?;
/// assert_eq!(previous.len(), 10);
/// assert_eq!(previous[9].id(), second[0].id() - 1);
/// # Ok::<(), deadletter::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Page {
    /// Start after this entry (`None`: from the oldest). The entry must still be in the
    /// DLQ; a [`Cursor`] need not.
    pub after: Option<MessageId>,
    /// Start after this place (takes precedence over `after`).
    pub after_cursor: Option<Cursor>,
    /// The entries just before this place (the previous page), still oldest first. Takes
    /// precedence over both `after` fields.
    pub before_cursor: Option<Cursor>,
    /// At most this many entries.
    pub limit: usize,
}

impl Page {
    /// The first `limit` entries.
    pub fn first(limit: usize) -> Self {
        Page {
            after: None,
            after_cursor: None,
            before_cursor: None,
            limit,
        }
    }
    /// `limit` entries after `id`.
    pub fn after(id: MessageId, limit: usize) -> Self {
        Page {
            after: Some(id),
            ..Page::first(limit)
        }
    }
    /// `limit` entries after `cursor`.
    pub fn after_cursor(cursor: Cursor, limit: usize) -> Self {
        Page {
            after_cursor: Some(cursor),
            ..Page::first(limit)
        }
    }
    /// The `limit` entries just before `cursor`, oldest first.
    pub fn before_cursor(cursor: Cursor, limit: usize) -> Self {
        Page {
            before_cursor: Some(cursor),
            ..Page::first(limit)
        }
    }
}
