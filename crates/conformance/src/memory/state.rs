//! The in-memory backend's data: every queue of a [`Memory`] namespace, its messages and
//! its DLQ, behind one lock, with the operations on them.
//!
//! Invariants:
//! - a message is in its queue's `messages` or in a DLQ's `entries`, never both, and a
//!   move between them happens under the lock, so nobody sees it half done;
//! - a delivery is counted (`Stored::delivered`) before the lease that hands it out
//!   returns, and holds a token; an outcome is accepted only with the token of the
//!   message's current lease;
//! - a lease that ran out is settled before any operation on its queue looks at it: back
//!   to waiting, or to the DLQ (`LeaseExpired`) when it was the last allowed attempt;
//! - alert hooks are checked after every change and called with the lock released.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use deadletter::dlq::{
    Attempt, Cursor, DeadLetter, DlqAlert, DlqMetadata, EntryStatus, FailureInfo, OriginalMetadata,
    EXPIRED_KIND,
};
use deadletter::queue::{
    EnqueueOptions, FailureOutcome, FailureReport, MessageId, NameProblem, QueueOptions,
};
use deadletter::{Error, Failure, Filter, ReplayOptions, Result};

/// Failed attempts an entry keeps (the newest; older ones are counted as dropped), as the
/// embedded store's default.
const MAX_HISTORY: usize = 10;
/// How long a DLQ entry is kept, as the other backends' default.
const RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);
/// How long an idempotency key makes a repeated enqueue a no-op.
const IDEMPOTENCY_WINDOW: Duration = Duration::from_secs(3600);

/// A namespace of queues and DLQs held in this process's memory: the in-memory backend.
/// Cheap to clone; every clone and every handle shares the same queues. Nothing outlives
/// the process: "durable" means visible to every handle once a call returns.
#[derive(Clone, Default)]
pub struct Memory {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Signalled when a message may have become deliverable.
    changed: Condvar,
}

type AlertFn = Arc<dyn Fn(&DlqAlert) + Send + Sync>;

#[derive(Default)]
pub(crate) struct State {
    queues: BTreeMap<String, QueueState>,
    last_id: MessageId,
    last_token: u64,
    hooks: Vec<Hook>,
}

struct Hook {
    queue: String,
    threshold: u64,
    above: bool,
    callback: AlertFn,
}

/// One queue: its messages, its DLQ's entries, its counters.
#[derive(Default)]
struct QueueState {
    messages: BTreeMap<MessageId, Stored>,
    entries: BTreeMap<MessageId, DeadLetter>,
    counts: Counts,
    /// Idempotency keys: the message each named, and when.
    keys: HashMap<String, (MessageId, u64)>,
}

#[derive(Default, Clone, Copy)]
pub(crate) struct Counts {
    pub(crate) enqueued: u64,
    pub(crate) acked: u64,
    pub(crate) retried: u64,
    pub(crate) dead_lettered: u64,
    pub(crate) expired: u64,
    pub(crate) refused: u64,
    pub(crate) replayed: u64,
    pub(crate) deleted: u64,
    pub(crate) reprocessed_ok: u64,
    pub(crate) reprocessed_failed: u64,
    pub(crate) retention_expired: u64,
}

/// A message in its queue, waiting or leased.
struct Stored {
    payload: Arc<[u8]>,
    attributes: Arc<BTreeMap<String, String>>,
    enqueued_at_ms: u64,
    expires_at_ms: Option<u64>,
    visible_at_ms: u64,
    /// Deliveries counted, the ones before a replay that kept the count included.
    delivered: u32,
    generation: u32,
    lease: Option<Lease>,
    history: Vec<Attempt>,
    dropped: u32,
    first_received_at_ms: Option<u64>,
    replaced_payload: Option<Vec<u8>>,
    /// The queue whose DLQ it was replayed from.
    replayed_from: Option<String>,
}

struct Lease {
    token: u64,
    until_ms: u64,
    /// The limit of the handle that leased it: the last attempt ends in the DLQ.
    max_attempts: u32,
}

/// What a lease hands out: a copy of the message's parts, and the lease's token.
pub(crate) struct Leased {
    pub(crate) id: MessageId,
    pub(crate) token: u64,
    pub(crate) attempt: u32,
    pub(crate) payload: Arc<[u8]>,
    pub(crate) attributes: Arc<BTreeMap<String, String>>,
    pub(crate) enqueued_at_ms: u64,
}

/// Counts of one queue and its DLQ, as `stats` reports them.
pub(crate) struct Snapshot {
    pub(crate) ready: u64,
    pub(crate) in_flight: u64,
    pub(crate) oldest_ready_at_ms: Option<u64>,
    pub(crate) counts: Counts,
    pub(crate) entries: Vec<DeadLetter>,
}

/// Milliseconds since the Unix epoch, by the system clock.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The DLQ name of queue `queue`.
pub(crate) fn dlq_name(queue: &str) -> String {
    format!("{queue}-dlq")
}

impl Memory {
    /// An empty namespace.
    pub fn new() -> Memory {
        Memory::default()
    }

    /// Runs `f` on the state under the lock; then wakes waiting consumers and calls the
    /// alert hooks whose DLQ crossed its threshold, with the lock released.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut State) -> Result<R>) -> Result<R> {
        self.run(true, f)
    }

    /// [`Memory::with`], waking waiting consumers only when `wake` (a lease makes nothing
    /// deliverable: waking them would have them wake each other for ever).
    fn run<R>(&self, wake: bool, f: impl FnOnce(&mut State) -> Result<R>) -> Result<R> {
        let mut st = self.lock();
        let out = f(&mut st);
        let fired = st.check_alerts();
        drop(st);
        if wake {
            self.shared.changed.notify_all();
        }
        for (callback, alert) in fired {
            callback(&alert);
        }
        out
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Leases up to `max` messages of `queue`, waiting up to `timeout` for the first.
    pub(crate) fn lease_wait(
        &self,
        queue: &str,
        options: &QueueOptions,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Leased>> {
        let give_up = std::time::Instant::now() + timeout;
        loop {
            let got = self.run(false, |st| st.lease(queue, options, max, now_ms()))?;
            let left = give_up.saturating_duration_since(std::time::Instant::now());
            if !got.is_empty() || left.is_zero() || max == 0 {
                return Ok(got);
            }
            // Woken by any change; a backoff or a lease ending needs no change, so look
            // again at least every 10 ms.
            let st = self.lock();
            let _ = self
                .shared
                .changed
                .wait_timeout(st, left.min(Duration::from_millis(10)));
        }
    }

    /// Registers an alert hook on `queue`'s DLQ; checks it at once.
    pub(crate) fn add_hook(&self, queue: &str, threshold: u64, callback: AlertFn) -> Result<()> {
        self.with(|st| {
            st.hooks.push(Hook {
                queue: queue.to_string(),
                threshold: threshold.max(1),
                above: false,
                callback,
            });
            Ok(())
        })
    }
}

impl State {
    /// Opens queue `name`, creating it if new. A name that is, or whose DLQ's name would
    /// be, another queue's DLQ name or queue name is refused.
    pub(crate) fn declare(&mut self, name: &str) -> Result<()> {
        if self.queues.contains_key(name) {
            return Ok(());
        }
        if let Some(problem) = NameProblem::of(name) {
            return Err(Error::InvalidQueueName {
                name: name.to_string(),
                problem,
            });
        }
        let clash = self
            .queues
            .keys()
            .find(|q| dlq_name(q) == name || dlq_name(name) == **q);
        if let Some(existing) = clash {
            return Err(Error::NameClash {
                name: name.to_string(),
                existing: existing.clone(),
            });
        }
        self.queues.insert(name.to_string(), QueueState::default());
        Ok(())
    }

    fn queue(&mut self, name: &str) -> Result<&mut QueueState> {
        self.queues
            .get_mut(name)
            .ok_or_else(|| Error::UnknownQueue(name.to_string()))
    }

    /// The queue holding DLQ `name`, if any (the DLQ of queue `name` too).
    pub(crate) fn queue_of_dlq(&self, name: &str) -> Option<String> {
        self.queues
            .keys()
            .find(|q| dlq_name(q) == name || *q == name)
            .cloned()
    }

    /// Enqueues `payloads` with `options` to `queue`: all of them, or none when the
    /// queue's limit of pending messages would be passed.
    pub(crate) fn enqueue(
        &mut self,
        queue: &str,
        queue_options: &QueueOptions,
        payloads: &[&[u8]],
        options: &EnqueueOptions,
    ) -> Result<Vec<MessageId>> {
        let now = now_ms();
        let first = self.last_id + 1;
        let q = self.queue(queue)?;
        q.keys
            .retain(|_, (_, at)| now < *at + IDEMPOTENCY_WINDOW.as_millis() as u64);
        if let Some(key) = &options.idempotency_key {
            if let Some(&(id, _)) = q.keys.get(key) {
                return Ok(vec![id; payloads.len()]);
            }
        }
        if let Some(limit) = queue_options.max_pending {
            if q.messages.len() as u64 + payloads.len() as u64 > limit {
                q.counts.refused += payloads.len() as u64;
                return Err(Error::QueueFull {
                    queue: queue.to_string(),
                    limit,
                });
            }
        }
        let ttl = options.ttl.or(queue_options.default_ttl);
        let visible_at_ms = now + options.delay.map_or(0, |d| d.as_millis() as u64);
        let attributes = Arc::new(options.attributes.clone());
        let ids: Vec<MessageId> = (first..first + payloads.len() as u64).collect();
        for (&id, payload) in ids.iter().zip(payloads) {
            q.messages.insert(
                id,
                Stored {
                    payload: Arc::from(*payload),
                    attributes: Arc::clone(&attributes),
                    enqueued_at_ms: now,
                    expires_at_ms: ttl.map(|t| now + t.as_millis() as u64),
                    visible_at_ms,
                    delivered: 0,
                    generation: 0,
                    lease: None,
                    history: Vec::new(),
                    dropped: 0,
                    first_received_at_ms: None,
                    replaced_payload: None,
                    replayed_from: None,
                },
            );
        }
        q.counts.enqueued += ids.len() as u64;
        if let (Some(key), Some(&id)) = (&options.idempotency_key, ids.first()) {
            q.keys.insert(key.clone(), (id, now));
        }
        self.last_id += ids.len() as u64;
        Ok(ids)
    }

    /// Settles what time ended in `queue`: leases that ran out (back to waiting, or to
    /// the DLQ on their last attempt) and DLQ entries past their retention.
    fn settle(&mut self, queue: &str, now: u64) -> Result<()> {
        let q = self.queue(queue)?;
        let ran_out: Vec<(MessageId, bool)> = q
            .messages
            .iter()
            .filter_map(|(&id, m)| {
                let lease = m.lease.as_ref()?;
                (lease.until_ms <= now).then_some((id, m.delivered >= lease.max_attempts))
            })
            .collect();
        let before = q.entries.len();
        q.entries
            .retain(|_, e| e.dlq.expires_at_ms.is_none_or(|at| now < at));
        q.counts.retention_expired += (before - q.entries.len()) as u64;
        for (id, last) in ran_out {
            if last {
                let lost = self.queue(queue)?.messages[&id].delivered;
                let failure = Failure::transient(
                    "LeaseExpired",
                    format!(
                        "delivery {lost} ended without an ack or failure before its lease expired"
                    ),
                );
                let report = FailureReport::new(&failure);
                let attempt = report.attempt(lost, now);
                self.move_to_dlq(queue, id, &report, Some(attempt), now)?;
            } else if let Some(m) = self.queue(queue)?.messages.get_mut(&id) {
                let until = m.lease.take().map_or(now, |l| l.until_ms);
                m.visible_at_ms = until;
            }
        }
        Ok(())
    }

    /// Leases up to `max` visible messages of `queue`, oldest visible first; expires the
    /// ones whose time to live passed instead of handing them out.
    fn lease(
        &mut self,
        queue: &str,
        options: &QueueOptions,
        max: usize,
        now: u64,
    ) -> Result<Vec<Leased>> {
        self.settle(queue, now)?;
        let q = self.queue(queue)?;
        let mut visible: Vec<(u64, MessageId)> = q
            .messages
            .iter()
            .filter(|(_, m)| m.lease.is_none() && m.visible_at_ms <= now)
            .map(|(&id, m)| (m.visible_at_ms, id))
            .collect();
        visible.sort_unstable();
        let mut out = Vec::new();
        for (_, id) in visible {
            if out.len() == max {
                break;
            }
            let expired = self.queue(queue)?.messages[&id]
                .expires_at_ms
                .is_some_and(|at| at <= now);
            if expired {
                self.expire(queue, id, options.expired_to_dlq, now)?;
                continue;
            }
            self.last_token += 1;
            let token = self.last_token;
            let m = self
                .queue(queue)?
                .messages
                .get_mut(&id)
                .ok_or(Error::NotFound(id))?;
            m.delivered += 1;
            m.first_received_at_ms.get_or_insert(now);
            m.lease = Some(Lease {
                token,
                until_ms: now + options.visibility_timeout.as_millis() as u64,
                max_attempts: options.max_attempts,
            });
            out.push(Leased {
                id,
                token,
                attempt: m.delivered,
                payload: Arc::clone(&m.payload),
                attributes: Arc::clone(&m.attributes),
                enqueued_at_ms: m.enqueued_at_ms,
            });
        }
        Ok(out)
    }

    /// A message whose time to live passed: to the DLQ (kind [`EXPIRED_KIND`]) or dropped.
    fn expire(&mut self, queue: &str, id: MessageId, to_dlq: bool, now: u64) -> Result<()> {
        self.queue(queue)?.counts.expired += 1;
        if to_dlq {
            let failure = Failure::permanent(EXPIRED_KIND, "the message's time to live passed");
            self.move_to_dlq(queue, id, &FailureReport::new(&failure), None, now)
        } else {
            self.queue(queue)?.messages.remove(&id);
            Ok(())
        }
    }

    /// The message of `queue` that delivery (`id`, `token`) holds, or the error a stale
    /// outcome gets.
    fn delivered(&mut self, queue: &str, id: MessageId, token: u64) -> Result<&mut Stored> {
        let m = self
            .queue(queue)?
            .messages
            .get_mut(&id)
            .ok_or(Error::NotFound(id))?;
        match &m.lease {
            Some(l) if l.token == token => Ok(m),
            _ => Err(Error::InvalidState {
                id,
                expected: "leased by this delivery",
            }),
        }
    }

    /// Acks deliveries of `queue`: all of them, or none if one is refused.
    pub(crate) fn ack(&mut self, queue: &str, deliveries: &[(MessageId, u64)]) -> Result<()> {
        for &(id, token) in deliveries {
            self.delivered(queue, id, token)?;
        }
        for &(id, _) in deliveries {
            let q = self.queue(queue)?;
            let origin = q.messages.remove(&id).and_then(|m| m.replayed_from);
            q.counts.acked += 1;
            if let Some(origin) = origin {
                self.queue(&origin)?.counts.reprocessed_ok += 1;
            }
        }
        Ok(())
    }

    /// Extends a delivery's lease to `visibility` from now.
    pub(crate) fn extend(
        &mut self,
        queue: &str,
        (id, token): (MessageId, u64),
        visibility: Duration,
    ) -> Result<()> {
        let until = now_ms() + visibility.as_millis() as u64;
        if let Some(lease) = &mut self.delivered(queue, id, token)?.lease {
            lease.until_ms = until;
        }
        Ok(())
    }

    /// Reports a failed delivery: to the DLQ when permanent or on the last attempt
    /// (`retry_at_ms` is `None` for a move asked for), else visible again at `retry_at_ms`.
    pub(crate) fn fail(
        &mut self,
        queue: &str,
        (id, token): (MessageId, u64),
        report: &FailureReport<'_>,
        retry_at_ms: Option<u64>,
        max_attempts: u32,
    ) -> Result<FailureOutcome> {
        let now = now_ms();
        let m = self.delivered(queue, id, token)?;
        let attempt = report.attempt(m.delivered, now);
        match retry_at_ms {
            Some(at) if !report.failure.is_permanent() && m.delivered < max_attempts => {
                push_attempt(&mut m.history, &mut m.dropped, attempt);
                m.lease = None;
                m.visible_at_ms = at.max(now + 1);
                let visible_at_ms = m.visible_at_ms;
                self.queue(queue)?.counts.retried += 1;
                Ok(FailureOutcome::Retried { visible_at_ms })
            }
            _ => {
                self.move_to_dlq(queue, id, report, Some(attempt), now)?;
                Ok(FailureOutcome::DeadLettered)
            }
        }
    }

    /// Moves message `id` of `queue` to its DLQ with its whole envelope; `attempt` is the
    /// failed delivery to add to its history, if any.
    fn move_to_dlq(
        &mut self,
        queue: &str,
        id: MessageId,
        report: &FailureReport<'_>,
        attempt: Option<Attempt>,
        now: u64,
    ) -> Result<()> {
        let q = self.queue(queue)?;
        let mut m = q.messages.remove(&id).ok_or(Error::NotFound(id))?;
        if let Some(a) = attempt {
            push_attempt(&mut m.history, &mut m.dropped, a);
        }
        let mut metadata = OriginalMetadata::new(id, queue, m.enqueued_at_ms)
            .delivery_count(m.delivered)
            .attributes((*m.attributes).clone());
        metadata.first_received_at_ms = m.first_received_at_ms;
        let f = report.failure;
        let mut failure = FailureInfo::new(f.kind.clone(), f.message.clone(), now)
            .attempts(m.history)
            .attempts_dropped(m.dropped)
            .context(f.context().clone());
        failure.details = f.details().map(str::to_string);
        failure.stack_trace = f.stack_trace().map(str::to_string);
        let mut dlq = DlqMetadata::new(now)
            .tags(report.tags.clone())
            .expires_at_ms(now + RETENTION.as_millis() as u64);
        dlq.worker = report.worker.map(str::to_string);
        let mut entry = DeadLetter::new(m.payload.to_vec(), metadata, failure, dlq)
            .generation(m.generation)
            .dlq_name(dlq_name(queue));
        entry.replaced_payload = m.replaced_payload;
        q.entries.insert(id, entry);
        q.counts.dead_lettered += 1;
        if let Some(origin) = m.replayed_from {
            self.queue(&origin)?.counts.reprocessed_failed += 1;
        }
        Ok(())
    }

    /// The counts of `queue` and a copy of its DLQ's entries.
    pub(crate) fn snapshot(&mut self, queue: &str) -> Result<Snapshot> {
        let now = now_ms();
        self.settle(queue, now)?;
        let q = self.queue(queue)?;
        let waiting: Vec<u64> = q
            .messages
            .values()
            .filter(|m| m.lease.is_none())
            .map(|m| m.visible_at_ms)
            .collect();
        Ok(Snapshot {
            ready: waiting.len() as u64,
            in_flight: (q.messages.len() - waiting.len()) as u64,
            oldest_ready_at_ms: waiting.into_iter().min(),
            counts: q.counts,
            entries: q.entries.values().cloned().collect(),
        })
    }

    /// The entries of `queue`'s DLQ matching `filter`, in browse order ([`Cursor`]'s).
    pub(crate) fn entries(&mut self, queue: &str, filter: &Filter) -> Result<Vec<DeadLetter>> {
        self.settle(queue, now_ms())?;
        let mut out: Vec<DeadLetter> = self
            .queue(queue)?
            .entries
            .values()
            .filter(|e| filter.matches(e))
            .cloned()
            .collect();
        out.sort_by_key(Cursor::of);
        Ok(out)
    }

    /// Entry `id` of `queue`'s DLQ.
    pub(crate) fn entry(&mut self, queue: &str, id: MessageId) -> Result<&mut DeadLetter> {
        self.settle(queue, now_ms())?;
        self.queue(queue)?
            .entries
            .get_mut(&id)
            .ok_or(Error::NotFound(id))
    }

    /// Replays entry `id` of `queue`'s DLQ (with `payload` instead of its own, for a
    /// corrected replay), or refuses it as [`ReplayOptions`] says; a dry run changes
    /// nothing.
    pub(crate) fn replay(
        &mut self,
        queue: &str,
        id: MessageId,
        options: &ReplayOptions,
        payload: Option<&[u8]>,
    ) -> Result<()> {
        let entry = self.entry(queue, id)?;
        if matches!(entry.status, EntryStatus::Reprocessed { .. }) && !options.force {
            return Err(Error::AlreadyReprocessed(id));
        }
        let target = options.target.clone().unwrap_or_else(|| queue.to_string());
        self.declare(&target)?;
        if options.dry_run {
            return Ok(());
        }
        let q = self.queue(queue)?;
        let e = q.entries.remove(&id).ok_or(Error::NotFound(id))?;
        q.counts.replayed += 1;
        let keep = !options.reset_attempts;
        let now = now_ms();
        let replaced_payload = match payload {
            Some(_) => Some(e.payload.clone()),
            None => e.replaced_payload,
        };
        let stored = Stored {
            payload: Arc::from(payload.unwrap_or(&e.payload)),
            attributes: Arc::new(e.metadata.attributes),
            enqueued_at_ms: e.metadata.enqueued_at_ms,
            expires_at_ms: None,
            visible_at_ms: now + options.delay.as_millis() as u64,
            delivered: if keep { e.metadata.delivery_count } else { 0 },
            generation: e.generation + 1,
            lease: None,
            history: if keep { e.failure.attempts } else { Vec::new() },
            dropped: if keep { e.failure.attempts_dropped } else { 0 },
            first_received_at_ms: e.metadata.first_received_at_ms.filter(|_| keep),
            replaced_payload,
            replayed_from: Some(queue.to_string()),
        };
        self.queue(&target)?.messages.insert(id, stored);
        Ok(())
    }

    /// Marks entry `id` of `queue`'s DLQ reprocessed outside the queue, with its outcome.
    pub(crate) fn mark(&mut self, queue: &str, id: MessageId, success: bool) -> Result<()> {
        let entry = self.entry(queue, id)?;
        entry.status = EntryStatus::Reprocessed {
            success,
            at_ms: now_ms(),
        };
        let counts = &mut self.queue(queue)?.counts;
        if success {
            counts.reprocessed_ok += 1;
        } else {
            counts.reprocessed_failed += 1;
        }
        Ok(())
    }

    /// Deletes the entries `ids` of `queue`'s DLQ; returns how many there were.
    pub(crate) fn delete(&mut self, queue: &str, ids: &[MessageId]) -> Result<u64> {
        let q = self.queue(queue)?;
        let before = q.entries.len();
        for id in ids {
            q.entries.remove(id);
        }
        let n = (before - q.entries.len()) as u64;
        q.counts.deleted += n;
        Ok(n)
    }

    /// The alerts whose DLQ crossed its threshold since the last check, and their
    /// callbacks.
    fn check_alerts(&mut self) -> Vec<(AlertFn, DlqAlert)> {
        let mut fired = Vec::new();
        for hook in &mut self.hooks {
            let size = self
                .queues
                .get(&hook.queue)
                .map_or(0, |q| q.entries.len() as u64);
            let above = size >= hook.threshold;
            if above != hook.above {
                hook.above = above;
                let alert = DlqAlert::new(dlq_name(&hook.queue), size, hook.threshold, above);
                fired.push((Arc::clone(&hook.callback), alert));
            }
        }
        fired
    }
}

/// Adds a failed attempt to a history, keeping the newest [`MAX_HISTORY`].
fn push_attempt(history: &mut Vec<Attempt>, dropped: &mut u32, attempt: Attempt) {
    history.push(attempt);
    if history.len() > MAX_HISTORY {
        history.remove(0);
        *dropped += 1;
    }
}
