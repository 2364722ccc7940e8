//! The forwarder: an edge store's queues and DLQs sent to a JetStream server when the link
//! is up, losing nothing across disconnects, restarts and crashes.
//!
//! A [`Forwarder`] runs over a local [`Store`]. For each forwarded queue it leases the
//! queue's next messages in order ([`Queue::lease_in_order`]), publishes them to the
//! central namespace's edge stream (`{ns}-edge`, subject `{ns}.edge.{origin}.q.{queue}`)
//! and acknowledges them locally only after the server acknowledged their publishes. For
//! each forwarded DLQ it publishes the oldest entries, whole envelopes (subject
//! `{ns}.edge.{origin}.dlq.{queue}`), and deletes them locally after the acknowledgement.
//!
//! Invariants:
//! - **the local queue is the position.** A message leaves it only after the server stored
//!   it; a crash at any point leaves it in the queue (leased, so it comes back at the next
//!   open) and it is published again;
//! - **each message is stored once.** Every publish carries a deduplication id (origin,
//!   queue, id, replay generation: see `publication`), so what is published again within
//!   the stream's duplicate window (default one hour) is a duplicate the server drops;
//! - **each queue's order is kept.** Messages are leased in queue order and published in
//!   windows over a connection that is never re-established (`link`): the server stores a
//!   prefix of a window, and the rest is published again, in order, over the next link.
//!   Unacknowledged messages are kept leased (their leases extended) across a disconnect,
//!   so nothing overtakes them;
//! - **back-pressure.** At most `max_in_flight` publishes await their acknowledgements;
//!   while the link is down nothing is leased, and the store keeps accepting messages up
//!   to its queues' limits (`QueueOptions::max_pending`);
//! - **what the server cannot take** (a message over its `max_payload`) goes to the local
//!   DLQ as `ForwardRefused`, counted, and the queue goes on; such a DLQ entry stays in the
//!   local DLQ, counted, and is skipped;
//! - **backoff.** A failed connect or publish drops the link; the next connect waits a
//!   delay that doubles from `backoff_min` to `backoff_max` and starts again after a
//!   success.
//!
//! A delivery is counted when a message is leased, so a forwarder killed again and again
//! with messages in flight uses their attempts: give forwarded queues a `max_attempts`
//! that no number of restarts reaches, or their messages go to the DLQ as `ConsumerDied`
//! (and are then forwarded as DLQ entries if the DLQ is).

mod central;
mod link;
mod options;
mod publication;
mod status;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadletter::queue::{FailureReport, MessageId};
use deadletter::{Error, Failure, Filter, Message, Page, Queue, Result, Store};

use async_nats::jetstream::AckKind;
use deadletter::queue::EnqueueOptions;
use futures_util::StreamExt;

use crate::client::{backend, now_ms};
use crate::names::{self, Names};
use crate::wire::{self, headers};

pub use central::{FleetDlq, FleetEntry};
use link::{Link, Publication};
pub use options::ForwardOptions;
use status::Counters;
pub use status::{ForwardStatus, LinkState, QueueLag};

/// One forwarded queue: its handle, and the messages leased and not yet acknowledged by
/// the server (kept across a disconnect, in order).
struct Lane {
    index: usize,
    queue: Queue,
    messages: bool,
    dlq: bool,
    held: Vec<Message>,
    leased_at: Instant,
    /// DLQ entries the server cannot take (larger than its `max_payload`): left in the
    /// local DLQ, counted as errors, and skipped from then on.
    refused_entries: std::collections::BTreeSet<MessageId>,
}

/// Why a round stopped.
enum Stop {
    /// The link failed: connect again after the backoff.
    Link(Error),
    /// The local store failed: the forwarder returns the error.
    Local(Error),
}

/// Forwards local queues and DLQs to a JetStream server (see the module documentation).
///
/// ```no_run
/// use std::sync::atomic::AtomicBool;
/// use deadletter::{Config, Store};
/// use deadletter::queue::QueueOptions;
/// use deadletter_jetstream::{ForwardOptions, Forwarder};
///
/// # fn main() -> deadletter::Result<()> {
/// let store = Store::open("/var/lib/device/queue", Config::default())?;
/// store.queue_with("readings", QueueOptions::default().max_attempts(u32::MAX))?;
/// let options = ForwardOptions::new("nats://cloud.example:4222", "fleet", "device-17")
///     .queue("readings")
///     .dlq("readings");
/// let mut forwarder = Forwarder::new(&store, options)?;
/// let stop = AtomicBool::new(false);
/// forwarder.run(&stop)?; // until `stop` is set (from another thread)
/// # Ok(()) }
/// ```
pub struct Forwarder {
    store: Store,
    options: ForwardOptions,
    names: Names,
    lanes: Vec<Lane>,
    counters: Arc<Counters>,
    backoff: Duration,
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder")
            .field("origin", &self.options.origin)
            .field("namespace", &self.options.namespace)
            .finish()
    }
}

/// A handle that reads a forwarder's status from any thread.
#[derive(Clone)]
pub struct ForwardStatusHandle {
    store: Store,
    origin: String,
    lanes: Arc<[(String, bool)]>,
    counters: Arc<Counters>,
}

impl ForwardStatusHandle {
    /// The forwarder's report now.
    pub fn status(&self) -> ForwardStatus {
        self.counters
            .report(&self.origin, &self.store, &self.lanes, now_ms())
    }
}

impl Forwarder {
    /// A forwarder of `store`'s queues and DLQs named in `options`. Checks the names and
    /// opens the queues (creating those not used yet); connects only when run.
    pub fn new(store: &Store, options: ForwardOptions) -> Result<Forwarder> {
        let names = Names::new(&options.namespace)?;
        names::validate_origin(&options.origin)?;
        if options.queues.is_empty() && options.dlqs.is_empty() {
            return Err(Error::InvalidConfig(
                "a forwarder needs at least one queue or DLQ to forward".into(),
            ));
        }
        let mut order: Vec<&String> = Vec::new();
        for name in options.queues.iter().chain(&options.dlqs) {
            names::validate_queue(name)?;
            if !order.contains(&name) {
                order.push(name);
            }
        }
        let lanes = order
            .iter()
            .enumerate()
            .map(|(index, name)| {
                Ok(Lane {
                    index,
                    queue: store.queue(name)?,
                    messages: options.queues.contains(name),
                    dlq: options.dlqs.contains(name),
                    held: Vec::new(),
                    leased_at: Instant::now(),
                    refused_entries: Default::default(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let counters = Arc::new(Counters::new(lanes.len()));
        Ok(Forwarder {
            store: store.clone(),
            backoff: options.backoff_min,
            options,
            names,
            lanes,
            counters,
        })
    }

    /// The forwarder's report now.
    pub fn status(&self) -> ForwardStatus {
        self.status_handle().status()
    }

    /// A handle that reads the report from another thread while the forwarder runs.
    pub fn status_handle(&self) -> ForwardStatusHandle {
        ForwardStatusHandle {
            store: self.store.clone(),
            origin: self.options.origin.clone(),
            lanes: self
                .lanes
                .iter()
                .map(|l| (l.queue.name().to_string(), l.dlq))
                .collect(),
            counters: Arc::clone(&self.counters),
        }
    }

    /// Forwards until `stop` is set. Link failures are retried with backoff and never
    /// returned; an error of the local store is.
    pub fn run(&mut self, stop: &AtomicBool) -> Result<()> {
        self.run_inner(stop, false)
    }

    /// Forwards until every forwarded queue and DLQ is empty (messages delayed to later
    /// included: it waits for them), or until `stop` is set.
    pub fn run_until_drained(&mut self, stop: &AtomicBool) -> Result<()> {
        self.run_inner(stop, true)
    }

    fn run_inner(&mut self, stop: &AtomicBool, until_drained: bool) -> Result<()> {
        let mut link: Option<Link> = None;
        while !stop.load(Ordering::Relaxed) {
            let Some(current) = &link else {
                self.counters.link(LinkState::Connecting);
                match Link::open(&self.options, &self.names) {
                    Ok(l) => {
                        self.counters.link(LinkState::Up);
                        link = Some(l);
                    }
                    Err(e) => self.link_failed(e, stop)?,
                }
                continue;
            };
            match self.round(current) {
                Ok(0) => {
                    if until_drained && self.drained() {
                        return Ok(());
                    }
                    pause(self.options.idle_wait, stop);
                }
                Ok(_) => {}
                Err(Stop::Link(e)) => {
                    link = None;
                    self.link_failed(e, stop)?;
                }
                Err(Stop::Local(e)) => return Err(e),
            }
        }
        Ok(())
    }

    /// Counts a failure, keeps the held leases alive, and waits out the backoff.
    fn link_failed(&mut self, e: Error, stop: &AtomicBool) -> Result<()> {
        self.counters.error(&e);
        self.keep_leases()?;
        pause(self.backoff, stop);
        self.backoff = (self.backoff * 2).min(self.options.backoff_max);
        Ok(())
    }

    /// True when nothing is left to forward.
    fn drained(&self) -> bool {
        self.lanes.iter().all(|l| {
            let s = l.queue.stats();
            l.held.is_empty()
                && (!l.messages || s.counts.ready + s.counts.in_flight == 0)
                && (!l.dlq || s.dlq_size <= l.refused_entries.len() as u64)
        })
    }

    /// One pass over every lane; returns what it forwarded.
    fn round(&mut self, link: &Link) -> std::result::Result<usize, Stop> {
        let mut moved = self.take_returns(link)?;
        for i in 0..self.lanes.len() {
            if self.lanes[i].messages {
                moved += self.forward_messages(link, i)?;
            }
            if self.lanes[i].dlq {
                moved += self.forward_entries(link, i)?;
            }
        }
        if moved > 0 {
            self.backoff = self.options.backoff_min;
        }
        Ok(moved)
    }

    fn forward_messages(&mut self, link: &Link, i: usize) -> std::result::Result<usize, Stop> {
        let (max, lease) = (self.options.max_in_flight, self.options.lease);
        let lane = &mut self.lanes[i];
        if lane.held.is_empty() {
            lane.held = lane.queue.lease_in_order(max, lease).map_err(Stop::Local)?;
            lane.leased_at = Instant::now();
        }
        if lane.held.is_empty() {
            return Ok(0);
        }
        let window = lane
            .held
            .iter()
            .map(|m| publication::of_message(&self.names, &self.options.origin, m))
            .collect::<Result<Vec<Publication>>>()
            .map_err(Stop::Local)?;
        let result = link.publish_window(window);
        let done: Vec<Message> = lane.held.drain(..result.acknowledged).collect();
        ack_forwarded(&lane.queue, &done).map_err(Stop::Local)?;
        let dup = result.duplicates as u64;
        self.counters
            .forwarded(lane.index, done.len() as u64 - dup, dup, now_ms());
        if let (Some(_), Some(e)) = (result.too_large, &result.error) {
            // The first held message can never be forwarded: it goes to the local DLQ
            // with the reason, and the ones behind it go on.
            let m = lane.held.remove(0);
            let why = format!(
                "message {} of queue {:?} cannot be forwarded: {e}",
                m.id(),
                m.queue()
            );
            let failure = Failure::permanent("ForwardRefused", why.clone());
            lane.queue
                .dead_letter(&m, &FailureReport::new(&failure).worker("forwarder"))
                .map_err(Stop::Local)?;
            self.counters.refused(why);
            return Ok(done.len() + 1);
        }
        match result.error {
            Some(e) => Err(Stop::Link(e)),
            None => Ok(done.len()),
        }
    }

    fn forward_entries(&mut self, link: &Link, i: usize) -> std::result::Result<usize, Stop> {
        let lane = &mut self.lanes[i];
        let dlq = lane.queue.dlq();
        let max = self.options.max_in_flight;
        let mut entries = dlq
            .list(
                &Filter::all(),
                Page::first(max + lane.refused_entries.len()),
            )
            .map_err(Stop::Local)?;
        entries.retain(|e| !lane.refused_entries.contains(&e.metadata.id));
        entries.truncate(max);
        if entries.is_empty() {
            return Ok(0);
        }
        let queue = lane.queue.name();
        let window = entries
            .iter()
            .map(|e| publication::of_entry(&self.names, &self.options.origin, queue, e))
            .collect::<Result<Vec<Publication>>>()
            .map_err(Stop::Local)?;
        let result = link.publish_window(window);
        for e in &entries[..result.acknowledged] {
            match dlq.delete(e.metadata.id) {
                // Deleted meanwhile (by an operator, or retention): nothing to do.
                Ok(()) | Err(Error::NotFound(_)) => {}
                Err(e) => return Err(Stop::Local(e)),
            }
        }
        let dup = result.duplicates as u64;
        self.counters
            .forwarded_dlq(result.acknowledged as u64 - dup, dup, now_ms());
        if let (Some(k), Some(e)) = (result.too_large, &result.error) {
            let id = entries[k].metadata.id;
            lane.refused_entries.insert(id);
            self.counters.refused(format!(
                "DLQ entry {id} of queue {queue:?} cannot be forwarded (it stays in the local DLQ): {e}"
            ));
            return Ok(result.acknowledged + 1);
        }
        match result.error {
            Some(e) => Err(Stop::Link(e)),
            None => Ok(result.acknowledged),
        }
    }

    /// Enqueues the entries the fleet DLQ replayed to this origin into their queues, each
    /// with an idempotency key naming its return, then acknowledges it: a crash between
    /// the two enqueues it once (within the store's idempotency window). A return into a
    /// full queue waits (unacknowledged) for a later round.
    fn take_returns(&mut self, link: &Link) -> std::result::Result<usize, Stop> {
        let Some(consumer) = &link.returns else {
            return Ok(0);
        };
        let read = async {
            let mut batch = consumer
                .fetch()
                .max_messages(64)
                .messages()
                .await
                .map_err(|e| backend("read returns", e))?;
            let mut out = Vec::new();
            while let Some(m) = batch.next().await {
                out.push(m.map_err(|e| backend("read returns", e))?);
            }
            Ok(out)
        };
        // A fetch whose answer never comes (the server died after the request, and this
        // connection never comes back) would wait forever: bounded like any request.
        let fetched = link
            .conn
            .run(async {
                tokio::time::timeout(self.options.request_timeout, read)
                    .await
                    .unwrap_or_else(|_| {
                        Err(Error::backend(
                            "jetstream",
                            "read returns",
                            "no answer from the server in time",
                        ))
                    })
            })
            .map_err(Stop::Link)?;
        let mut taken = 0;
        for m in fetched {
            let sequence = m
                .info()
                .map_err(|e| Stop::Link(backend("read returns", e)))?
                .stream_sequence;
            let queue = m
                .headers
                .as_ref()
                .and_then(|h| h.get(headers::QUEUE))
                .map(|v| v.as_str().to_string());
            let entry = wire::decode_entry(&m.payload, m.subject.as_str());
            let (Some(queue), Ok(entry)) = (queue, entry) else {
                // Not a return this package wrote: counted, and removed so it does not
                // come back forever.
                self.counters.error(&Error::Codec(format!(
                    "return {sequence} has no queue or no valid envelope"
                )));
                let _ = link.conn.run(m.ack_with(AckKind::Term));
                continue;
            };
            let mut options =
                EnqueueOptions::new().idempotency_key(format!("edge-return-{sequence}"));
            for (k, v) in &entry.metadata.attributes {
                options = options.attribute(k, v);
            }
            let enqueued = self
                .store
                .queue(&queue)
                .and_then(|q| q.enqueue_with(&entry.payload, &options));
            match enqueued {
                Ok(_) => {}
                Err(Error::QueueFull { .. }) => break,
                Err(e) => return Err(Stop::Local(e)),
            }
            link.conn
                .run(m.double_ack())
                .map_err(|e| Stop::Link(backend("acknowledge a return", e)))?;
            self.counters.returned(1);
            taken += 1;
        }
        Ok(taken)
    }

    /// Extends the leases of held messages that have used half of theirs, so that a long
    /// disconnect does not put them back behind the messages that follow them.
    fn keep_leases(&mut self) -> Result<()> {
        let lease = self.options.lease;
        for lane in &mut self.lanes {
            if lane.held.is_empty() || lane.leased_at.elapsed() < lease / 2 {
                continue;
            }
            for m in &lane.held {
                match lane.queue.extend(m, lease) {
                    Ok(()) => {}
                    // The lease ran out already: the message is ready again, in the
                    // queue, and is forwarded from there.
                    Err(Error::InvalidState { .. } | Error::NotFound(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            lane.leased_at = Instant::now();
        }
        Ok(())
    }
}

/// Acknowledges forwarded messages locally; one whose lease was lost (it ran out) stays in
/// the queue and is forwarded again, a duplicate the server drops.
fn ack_forwarded(queue: &Queue, done: &[Message]) -> Result<()> {
    if done.is_empty() {
        return Ok(());
    }
    match queue.ack_all(done) {
        Err(Error::InvalidState { .. } | Error::NotFound(_)) => {
            for m in done {
                match queue.ack(m) {
                    Ok(()) | Err(Error::InvalidState { .. } | Error::NotFound(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        }
        other => other,
    }
}

/// Sleeps `d`, waking early when `stop` is set.
fn pause(d: Duration, stop: &AtomicBool) {
    let until = Instant::now() + d;
    while !stop.load(Ordering::Relaxed) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
}
