//! The embedded store's implementations of the backend traits: [`Message`], [`Queue`]
//! and [`Dlq`] call their own inherent methods (one-line forwards, inlined), and
//! [`Queue`] overrides every batching default of [`WorkerQueue`] with its reservations,
//! start records and group-committed failure reports.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::api::backend::batching::{WorkerQueue, WriteMark};
use crate::api::backend::contract::{DeadLetterQueue, Delivery, MessageQueue};
use crate::api::core::alert::DlqAlert;
use crate::api::core::pools::{PoolAttachment, PoolPresence};
use crate::api::core::types::{DeadLetter, MessageId};
use crate::api::dlq::{
    Analysis, Correction, DeadLetterSummary, Dlq, DlqStats, FailureTimeline, Filter,
    FingerprintStats, Page, ReplayOptions, ReplayReport, TransformReport,
};
use crate::api::queue::{
    EnqueueOptions, FailureOutcome, FailureReport, Message, Queue, QueueStats,
};
use crate::engine::Settle;
use crate::error::Result;

impl Delivery for Message {
    forward! { Message:
        fn id(&self) -> MessageId;
        fn queue(&self) -> &str;
        fn attempt(&self) -> u32;
        fn payload(&self) -> &[u8];
        fn enqueued_at_ms(&self) -> u64;
        fn attributes(&self) -> &BTreeMap<String, String>;
    }
}

impl MessageQueue for Queue {
    type Message = Message;
    type Dlq = Dlq;

    forward! { Queue:
        fn name(&self) -> &str;
        fn dlq(&self) -> Dlq;
        fn enqueue_with(&self, payload: impl AsRef<[u8]>, options: &EnqueueOptions)
            -> Result<MessageId>;
        fn enqueue_batch<P: AsRef<[u8]>>(&self, payloads: &[P]) -> Result<Vec<MessageId>>;
        fn lease(&self, max: usize) -> Result<Vec<Message>>;
        fn lease_wait(&self, max: usize, timeout: Duration) -> Result<Vec<Message>>;
        fn ack_all(&self, msgs: &[Message]) -> Result<()>;
        fn ack_and_lease(&self, done: &Message, max: usize) -> Result<Vec<Message>>;
        fn extend(&self, msg: &Message, visibility: Duration) -> Result<()>;
        fn retry(&self, msg: &Message, report: &FailureReport<'_>, retry_at_ms: u64)
            -> Result<FailureOutcome>;
        fn dead_letter(&self, msg: &Message, report: &FailureReport<'_>) -> Result<()>;
    }
    fn with_policy(&self, max_attempts: u32, lease: Duration) -> Result<Self> {
        let options = self
            .options()
            .max_attempts(max_attempts)
            .visibility_timeout(lease);
        self.store().queue_with(Queue::name(self), options)
    }
    #[inline]
    fn now_ms(&self) -> u64 {
        self.store().now()
    }
    fn stats(&self) -> Result<QueueStats> {
        Ok(Queue::stats(self))
    }
}

impl WorkerQueue for Queue {
    forward! { Queue:
        fn worker_handle(&self) -> Self;
        fn reserve_wait(&self, max: usize, timeout: Duration) -> Result<Vec<Message>>;
        fn ack_and_reserve(&self, done: &[Message], max: usize) -> Result<(Vec<Message>, u64)>;
        fn start(&self, next: &Message, done: &[Message]) -> Result<(u64, bool)>;
        fn release_unstarted(&self, msgs: &[Message]) -> Result<()>;
        fn observe_handler(&self, duration: Duration);
        fn observe_handlers(&self, durations: &[Duration]);
    }
    #[inline]
    fn wants_starts(&self) -> bool {
        self.store().engine().waits_for_sync()
    }
    fn retry_deferred(
        &self,
        msg: &Message,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> Result<(FailureOutcome, WriteMark)> {
        let (outcome, pos) =
            self.report_failure(Settle::Written, msg, report, Some(retry_at_ms))?;
        Ok((outcome, WriteMark::at(pos)))
    }
    fn dead_letter_deferred(&self, msg: &Message, report: &FailureReport<'_>) -> Result<WriteMark> {
        let (_, pos) = self.report_failure(Settle::Written, msg, report, None)?;
        Ok(WriteMark::at(pos))
    }
    fn make_durable(&self, mark: WriteMark) -> Result<()> {
        if mark.is_durable() {
            return Ok(());
        }
        self.store().sync_to(mark.position())
    }
    fn wake_consumers(&self) {
        self.store().wake_consumers()
    }
    fn declare_handler_durations(&self) {
        Queue::declare_handler_durations(self)
    }
    fn attach_pool(&self, pool: Arc<PoolPresence>) -> Option<PoolAttachment> {
        Some(self.store().attach_pool(pool))
    }
}

impl DeadLetterQueue for Dlq {
    forward! { Dlq:
        fn name(&self) -> String;
        fn queue_name(&self) -> &str;
        fn list(&self, filter: &Filter, page: Page) -> Result<Vec<DeadLetter>>;
        fn list_summaries(&self, filter: &Filter, page: Page) -> Result<Vec<DeadLetterSummary>>;
        fn purge_matching(&self, filter: &Filter, older_than: Duration, include_pending: bool)
            -> Result<u64>;
        fn get(&self, id: MessageId) -> Result<DeadLetter>;
        fn summary(&self, id: MessageId) -> Result<DeadLetterSummary>;
        fn ids(&self, filter: &Filter, limit: Option<usize>) -> Result<Vec<MessageId>>;
        fn analyze(&self, filter: &Filter) -> Result<Analysis>;
        fn failure_timeline(&self, until_ms: u64, hours: u32) -> Result<FailureTimeline>;
        fn replay(&self, filter: &Filter, options: &ReplayOptions) -> Result<ReplayReport>;
        fn replay_ids(&self, ids: &[MessageId], options: &ReplayOptions) -> Result<ReplayReport>;
        fn replay_one(&self, id: MessageId, options: &ReplayOptions) -> Result<()>;
        fn replay_corrected(&self, id: MessageId, payload: impl AsRef<[u8]>,
            options: &ReplayOptions) -> Result<()>;
        fn mark_reprocessed(&self, id: MessageId, success: bool) -> Result<()>;
        fn delete(&self, id: MessageId) -> Result<()>;
        fn delete_matching(&self, filter: &Filter) -> Result<u64>;
        fn purge(&self, older_than: Duration, include_pending: bool) -> Result<u64>;
        fn on_threshold(&self, threshold: u64,
            callback: impl Fn(&DlqAlert) + Send + Sync + 'static) -> Result<()>;
    }
    fn len(&self) -> Result<u64> {
        Ok(Dlq::len(self))
    }
    fn fingerprints(&self) -> Result<Vec<FingerprintStats>> {
        Ok(Dlq::fingerprints(self))
    }
    fn stats(&self) -> Result<DlqStats> {
        Ok(Dlq::stats(self))
    }
    fn replay_corrected_batch(
        &self,
        corrections: &[Correction],
        options: &ReplayOptions,
    ) -> Result<ReplayReport> {
        Dlq::replay_corrected_batch(self, corrections, options)
    }
    fn replay_transformed_ids<F, E>(
        &self,
        ids: &[MessageId],
        options: &ReplayOptions,
        transform: F,
    ) -> Result<TransformReport>
    where
        F: FnMut(&[u8]) -> std::result::Result<Vec<u8>, E>,
        E: std::fmt::Display,
    {
        Dlq::replay_transformed_ids(self, ids, options, transform)
    }
}
