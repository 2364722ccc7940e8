//! [`MemoryQueue`] and [`MemoryMessage`]: the in-memory backend's queue handle and
//! delivery, implementing the core traits [`MessageQueue`] and [`Delivery`] only.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use deadletter::queue::{
    EnqueueOptions, FailureOutcome, FailureReport, MessageId, QueueOptions, QueueStats,
};
use deadletter::{Delivery, Error, MessageQueue, Result};

use crate::memory::dlq::MemoryDlq;
use crate::memory::state::{dlq_name, now_ms, Leased, Memory};

/// A delivery of a message of a [`MemoryQueue`]: its parts, and the token of the lease
/// that handed it out (an outcome with another delivery's token is refused).
#[derive(Clone)]
pub struct MemoryMessage {
    queue: Arc<str>,
    leased: Arc<Leased>,
}

impl std::fmt::Debug for MemoryMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryMessage")
            .field("id", &self.leased.id)
            .field("attempt", &self.leased.attempt)
            .finish()
    }
}

impl MemoryMessage {
    fn delivery(&self) -> (MessageId, u64) {
        (self.leased.id, self.leased.token)
    }
}

impl Delivery for MemoryMessage {
    fn id(&self) -> MessageId {
        self.leased.id
    }
    fn queue(&self) -> &str {
        &self.queue
    }
    fn attempt(&self) -> u32 {
        self.leased.attempt
    }
    fn payload(&self) -> &[u8] {
        &self.leased.payload
    }
    fn enqueued_at_ms(&self) -> u64 {
        self.leased.enqueued_at_ms
    }
    fn attributes(&self) -> &BTreeMap<String, String> {
        &self.leased.attributes
    }
}

/// A queue of a [`Memory`] namespace. Cheap to clone; its options (retry limit, lease
/// length, time to live, limit of pending messages) are this handle's.
#[derive(Clone)]
pub struct MemoryQueue {
    memory: Memory,
    name: Arc<str>,
    options: QueueOptions,
}

impl std::fmt::Debug for MemoryQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryQueue")
            .field("name", &self.name)
            .finish()
    }
}

impl Memory {
    /// Opens queue `name` with the default options, creating it if new.
    pub fn queue(&self, name: &str) -> Result<MemoryQueue> {
        self.queue_with(name, QueueOptions::default())
    }

    /// Opens queue `name` with `options`, creating it if new.
    pub fn queue_with(&self, name: &str, options: QueueOptions) -> Result<MemoryQueue> {
        if options.max_attempts == 0 {
            return Err(Error::InvalidConfig("max_attempts of zero".into()));
        }
        self.with(|st| st.declare(name))?;
        Ok(MemoryQueue {
            memory: self.clone(),
            name: name.into(),
            options,
        })
    }
}

impl MemoryQueue {
    fn message(&self, leased: Leased) -> MemoryMessage {
        MemoryMessage {
            queue: Arc::clone(&self.name),
            leased: Arc::new(leased),
        }
    }

    fn lease_for(&self, max: usize, timeout: Duration) -> Result<Vec<MemoryMessage>> {
        let leased = self
            .memory
            .lease_wait(&self.name, &self.options, max, timeout)?;
        Ok(leased.into_iter().map(|l| self.message(l)).collect())
    }

    fn enqueue_all(&self, payloads: &[&[u8]], options: &EnqueueOptions) -> Result<Vec<MessageId>> {
        self.memory
            .with(|st| st.enqueue(&self.name, &self.options, payloads, options))
    }
}

impl MessageQueue for MemoryQueue {
    type Message = MemoryMessage;
    type Dlq = MemoryDlq;

    fn name(&self) -> &str {
        &self.name
    }
    fn dlq(&self) -> MemoryDlq {
        MemoryDlq::new(self.memory.clone(), Arc::clone(&self.name))
    }
    fn with_policy(&self, max_attempts: u32, lease: Duration) -> Result<Self> {
        let options = self
            .options
            .clone()
            .max_attempts(max_attempts)
            .visibility_timeout(lease);
        self.memory.queue_with(&self.name, options)
    }
    fn now_ms(&self) -> u64 {
        now_ms()
    }
    fn enqueue_with(
        &self,
        payload: impl AsRef<[u8]>,
        options: &EnqueueOptions,
    ) -> Result<MessageId> {
        Ok(self.enqueue_all(&[payload.as_ref()], options)?[0])
    }
    fn enqueue_batch<P: AsRef<[u8]>>(&self, payloads: &[P]) -> Result<Vec<MessageId>> {
        let payloads: Vec<&[u8]> = payloads.iter().map(AsRef::as_ref).collect();
        self.enqueue_all(&payloads, &EnqueueOptions::default())
    }
    fn lease(&self, max: usize) -> Result<Vec<MemoryMessage>> {
        self.lease_for(max, Duration::ZERO)
    }
    fn lease_wait(&self, max: usize, timeout: Duration) -> Result<Vec<MemoryMessage>> {
        self.lease_for(max, timeout)
    }
    fn ack_all(&self, msgs: &[MemoryMessage]) -> Result<()> {
        let deliveries: Vec<_> = msgs.iter().map(MemoryMessage::delivery).collect();
        self.memory.with(|st| st.ack(&self.name, &deliveries))
    }
    fn extend(&self, msg: &MemoryMessage, visibility: Duration) -> Result<()> {
        self.memory
            .with(|st| st.extend(&self.name, msg.delivery(), visibility))
    }
    fn retry(
        &self,
        msg: &MemoryMessage,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> Result<FailureOutcome> {
        let max = self.options.max_attempts;
        self.memory
            .with(|st| st.fail(&self.name, msg.delivery(), report, Some(retry_at_ms), max))
    }
    fn dead_letter(&self, msg: &MemoryMessage, report: &FailureReport<'_>) -> Result<()> {
        let max = self.options.max_attempts;
        self.memory
            .with(|st| st.fail(&self.name, msg.delivery(), report, None, max))
            .map(|_| ())
    }
    fn stats(&self) -> Result<QueueStats> {
        let snap = self.memory.with(|st| st.snapshot(&self.name))?;
        let c = snap.counts;
        let mut s = QueueStats::new(&*self.name, dlq_name(&self.name));
        s.counts.ready = snap.ready;
        s.counts.in_flight = snap.in_flight;
        s.counts.enqueued = c.enqueued;
        s.counts.acked = c.acked;
        s.counts.retried = c.retried;
        s.counts.dead_lettered = c.dead_lettered;
        s.counts.expired = c.expired;
        s.counts.deleted = c.deleted;
        s.dlq_size = snap.entries.len() as u64;
        s.oldest_ready_at_ms = snap.oldest_ready_at_ms;
        s.refused = c.refused;
        Ok(s)
    }
}
