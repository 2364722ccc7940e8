//! Time travel: a DLQ as it was at a past time ([`Dlq::as_of`]), read-only. Its list (with
//! the usual [`Filter`] and [`Page`]) and counts are those the DLQ showed then, for any
//! time from the store's audit horizon on ([`crate::Store::audit_horizon`]); an earlier
//! time is [`Error::BeforeHorizon`], naming the earliest one answered.
//!
//! An entry of the past is what the store keeps of it (its lineage, or tombstone): the
//! failure's kind, message (at most 512 bytes), fingerprint, worker, deliveries and
//! status, not its payload, tags or attributes. A filter on those is
//! [`Error::NotKept`].
//!
//! A `DlqAsOf` is computed once, in one pass over the lineages and tombstones (at most
//! [`crate::audit::AuditLimits::tombstones`] of them) under the index lock, and then answers
//! from its own copy: later changes to the store do not change it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::browse::status;
use super::{Cursor, Dlq, Filter, Page};
use crate::api::core::types::{EntryStatus, MessageId};
use crate::engine::fingerprint::Fingerprint;
use crate::engine::state::PastEntry;
use crate::error::{Error, Result};

/// One entry of a DLQ at a past time: what the store keeps of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PastDlqEntry {
    /// Its id.
    pub id: MessageId,
    /// When it was dead-lettered (its place in the DLQ's order).
    pub dead_lettered_at_ms: u64,
    /// Error kind.
    pub error_kind: String,
    /// Error message (at most 512 bytes).
    pub error_message: String,
    /// Failure fingerprint.
    pub fingerprint: Fingerprint,
    /// The worker that reported the failure.
    pub worker: Option<String>,
    /// Deliveries counted.
    pub attempts: u32,
    /// Replay generation.
    pub generation: u32,
    /// Its status at that time.
    pub status: EntryStatus,
}

/// Counts of a DLQ at a past time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PastDlqStats {
    /// The DLQ's name.
    pub name: String,
    /// The time they are counted at (ms).
    pub as_of_ms: u64,
    /// Entries in the DLQ.
    pub total: u64,
    /// Entries pending.
    pub pending: u64,
    /// Entries marked reprocessed and still kept.
    pub reprocessed: u64,
    /// Age of the oldest entry, at that time.
    pub oldest_age_ms: Option<u64>,
    /// Age of the newest entry, at that time.
    pub newest_age_ms: Option<u64>,
    /// Entries per error kind.
    pub by_error_kind: BTreeMap<String, u64>,
    /// Entries per worker (`""` when unknown).
    pub by_worker: BTreeMap<String, u64>,
    /// Entries per failure fingerprint.
    pub by_fingerprint: BTreeMap<Fingerprint, u64>,
}

/// A DLQ as it was at a past time ([`Dlq::as_of`]): read-only.
#[derive(Debug, Clone)]
pub struct DlqAsOf {
    name: String,
    as_of_ms: u64,
    /// In browse order (dead-lettering time, id).
    entries: Vec<PastDlqEntry>,
}

impl Dlq {
    /// This DLQ as it was at `at_ms` (ms since the epoch): its list and counts then, from
    /// what the store keeps (lineage, tombstones; see [`crate::Config::audit`]).
    /// [`Error::BeforeHorizon`] for a time before the earliest one the store answers for.
    pub fn as_of(&self, at_ms: u64) -> Result<DlqAsOf> {
        let (horizon, past) = {
            let st = self.store.engine().lock();
            (st.audit.horizon(), st.dlq_as_of(self.queue, at_ms))
        };
        if at_ms < horizon {
            return Err(Error::BeforeHorizon {
                asked_ms: at_ms,
                earliest_ms: horizon,
            });
        }
        let entries = past.into_iter().map(Self::past_entry).collect();
        Ok(DlqAsOf {
            name: self.name(),
            as_of_ms: at_ms,
            entries,
        })
    }

    /// The public form of `p`.
    fn past_entry(p: PastEntry) -> PastDlqEntry {
        let f = p.failed;
        PastDlqEntry {
            id: p.id,
            dead_lettered_at_ms: f.dead_at,
            error_kind: f.error_kind,
            error_message: f.message,
            fingerprint: f.fingerprint,
            worker: f.worker,
            attempts: f.attempts,
            generation: f.generation,
            status: status(p.status),
        }
    }
}

impl DlqAsOf {
    /// The DLQ's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The time it shows (ms).
    pub fn as_of_ms(&self) -> u64 {
        self.as_of_ms
    }

    /// Entries then.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the DLQ was empty then.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entry `id` as it was then, if it was in the DLQ.
    pub fn get(&self, id: MessageId) -> Option<&PastDlqEntry> {
        self.entries.iter().find(|e| e.id == id)
    }

    /// The entries matching `filter` then, oldest first, one page at a time (as
    /// [`Dlq::list`]). A filter on what the past does not keep (payload, tags,
    /// attributes, a predicate over the envelope) is [`Error::NotKept`]; `Page::after` an
    /// id that was not in the DLQ then is [`Error::NotFound`].
    pub fn list(&self, filter: &Filter, page: Page) -> Result<Vec<PastDlqEntry>> {
        check_filter(filter)?;
        let cursor = |e: &PastDlqEntry| Cursor {
            dead_lettered_at_ms: e.dead_lettered_at_ms,
            id: e.id,
        };
        let matching = self.entries.iter().filter(|e| matches(filter, e));
        if let Some(before) = page.before_cursor {
            let mut out: Vec<PastDlqEntry> =
                matching.filter(|e| cursor(e) < before).cloned().collect();
            let skip = out.len().saturating_sub(page.limit);
            return Ok(out.split_off(skip));
        }
        let after = |id| self.get(id).map(cursor).ok_or(Error::NotFound(id));
        let start = match page.after_cursor {
            Some(c) => Some(c),
            None => page.after.map(after).transpose()?,
        };
        Ok(matching
            .filter(|e| start.is_none_or(|s| cursor(e) > s))
            .take(page.limit)
            .cloned()
            .collect())
    }

    /// The counts then.
    pub fn stats(&self) -> PastDlqStats {
        let times = self.entries.iter().map(|e| e.dead_lettered_at_ms);
        let age = |t: u64| self.as_of_ms.saturating_sub(t);
        let mut s = PastDlqStats {
            name: self.name.clone(),
            as_of_ms: self.as_of_ms,
            total: self.entries.len() as u64,
            oldest_age_ms: times.clone().min().map(age),
            newest_age_ms: times.max().map(age),
            ..PastDlqStats::default()
        };
        for e in &self.entries {
            match e.status {
                EntryStatus::Pending => s.pending += 1,
                EntryStatus::Reprocessed { .. } => s.reprocessed += 1,
            }
            *s.by_error_kind.entry(e.error_kind.clone()).or_default() += 1;
            let worker = e.worker.clone().unwrap_or_default();
            *s.by_worker.entry(worker).or_default() += 1;
            *s.by_fingerprint.entry(e.fingerprint).or_default() += 1;
        }
        s
    }
}

/// Refuses a filter on what the past does not keep.
fn check_filter(f: &Filter) -> Result<()> {
    let what = if f.payload_contains.is_some() {
        "payloads"
    } else if !f.tags.is_empty() {
        "tags"
    } else if !f.attributes.is_empty() {
        "attributes"
    } else if f.predicate.is_some() {
        "a predicate over the envelope"
    } else {
        return Ok(());
    };
    Err(Error::NotKept(what.to_string()))
}

/// True when past entry `e` matches `filter` (the fields the past keeps).
fn matches(f: &Filter, e: &PastDlqEntry) -> bool {
    let at = e.dead_lettered_at_ms;
    f.error_kind.as_ref().is_none_or(|k| *k == e.error_kind)
        && f.message_contains
            .as_ref()
            .is_none_or(|s| e.error_message.contains(s.as_str()))
        && f.worker
            .as_ref()
            .is_none_or(|w| e.worker.as_ref() == Some(w))
        && f.since_ms.is_none_or(|t| at >= t)
        && f.until_ms.is_none_or(|t| at < t)
        && f.min_attempts.is_none_or(|n| e.attempts >= n)
        && f.max_attempts.is_none_or(|n| e.attempts <= n)
        && f.pending
            .is_none_or(|p| p == (e.status == EntryStatus::Pending))
        && f.fingerprint.is_none_or(|fp| fp == e.fingerprint)
}
