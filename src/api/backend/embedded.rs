//! The embedded store's implementations of the backend traits: [`Message`], [`Queue`]
//! and [`Dlq`] call their own inherent methods (one-line forwards, inlined), and
//! [`Queue`] overrides every batching default of [`WorkerQueue`] with its reservations,
//! start records and group-committed failure reports.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::api::backend::batching::{WorkerQueue, WriteMark};
use crate::api::backend::contract::{DeadLetterQueue, Delivery, MessageQueue};
use crate::api::core::alert::DlqAlert;
use crate::api::core::types::{DeadLetter, MessageId};
use crate::api::dlq::{
    Analysis, DeadLetterSummary, Dlq, DlqStats, FailureTimeline, Filter, FingerprintStats, Page,
    ReplayOptions, ReplayReport,
};
use crate::api::queue::{
    EnqueueOptions, FailureOutcome, FailureReport, Message, Queue, QueueStats,
};
use crate::engine::Settle;
use crate::error::Result;

impl Delivery for Message {
    #[inline]
    fn id(&self) -> MessageId {
        Message::id(self)
    }
    #[inline]
    fn queue(&self) -> &str {
        Message::queue(self)
    }
    #[inline]
    fn attempt(&self) -> u32 {
        Message::attempt(self)
    }
    #[inline]
    fn payload(&self) -> &[u8] {
        Message::payload(self)
    }
    #[inline]
    fn enqueued_at_ms(&self) -> u64 {
        Message::enqueued_at_ms(self)
    }
    #[inline]
    fn attributes(&self) -> &BTreeMap<String, String> {
        Message::attributes(self)
    }
}

impl MessageQueue for Queue {
    type Message = Message;
    type Dlq = Dlq;

    fn name(&self) -> &str {
        Queue::name(self)
    }
    fn dlq(&self) -> Dlq {
        Queue::dlq(self)
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
    #[inline]
    fn enqueue_with(
        &self,
        payload: impl AsRef<[u8]>,
        options: &EnqueueOptions,
    ) -> Result<MessageId> {
        Queue::enqueue_with(self, payload, options)
    }
    #[inline]
    fn enqueue_batch<P: AsRef<[u8]>>(&self, payloads: &[P]) -> Result<Vec<MessageId>> {
        Queue::enqueue_batch(self, payloads)
    }
    #[inline]
    fn lease(&self, max: usize) -> Result<Vec<Message>> {
        Queue::lease(self, max)
    }
    #[inline]
    fn lease_wait(&self, max: usize, timeout: Duration) -> Result<Vec<Message>> {
        Queue::lease_wait(self, max, timeout)
    }
    #[inline]
    fn ack_all(&self, msgs: &[Message]) -> Result<()> {
        Queue::ack_all(self, msgs)
    }
    #[inline]
    fn ack_and_lease(&self, done: &Message, max: usize) -> Result<Vec<Message>> {
        Queue::ack_and_lease(self, done, max)
    }
    #[inline]
    fn extend(&self, msg: &Message, visibility: Duration) -> Result<()> {
        Queue::extend(self, msg, visibility)
    }
    #[inline]
    fn retry(
        &self,
        msg: &Message,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> Result<FailureOutcome> {
        Queue::retry(self, msg, report, retry_at_ms)
    }
    #[inline]
    fn dead_letter(&self, msg: &Message, report: &FailureReport<'_>) -> Result<()> {
        Queue::dead_letter(self, msg, report)
    }
    fn stats(&self) -> Result<QueueStats> {
        Ok(Queue::stats(self))
    }
}

impl WorkerQueue for Queue {
    fn worker_handle(&self) -> Self {
        Queue::worker_handle(self)
    }
    #[inline]
    fn reserve_wait(&self, max: usize, timeout: Duration) -> Result<Vec<Message>> {
        Queue::reserve_wait(self, max, timeout)
    }
    #[inline]
    fn ack_and_reserve(&self, done: &[Message], max: usize) -> Result<(Vec<Message>, u64)> {
        Queue::ack_and_reserve(self, done, max)
    }
    #[inline]
    fn wants_starts(&self) -> bool {
        self.store().engine().waits_for_sync()
    }
    #[inline]
    fn start(&self, next: &Message, done: &[Message]) -> Result<(u64, bool)> {
        Queue::start(self, next, done)
    }
    #[inline]
    fn release_unstarted(&self, msgs: &[Message]) -> Result<()> {
        Queue::release_unstarted(self, msgs)
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
        self.sync_to(mark.position())
    }
    fn wake_consumers(&self) {
        self.store().wake_consumers()
    }
    fn observe_handler(&self, duration: Duration) {
        Queue::observe_handler(self, duration)
    }
    fn observe_handlers(&self, durations: &[Duration]) {
        Queue::observe_handlers(self, durations)
    }
}

impl DeadLetterQueue for Dlq {
    fn name(&self) -> String {
        Dlq::name(self)
    }
    fn queue_name(&self) -> &str {
        Dlq::queue_name(self)
    }
    fn len(&self) -> Result<u64> {
        Ok(Dlq::len(self))
    }
    fn list(&self, filter: &Filter, page: Page) -> Result<Vec<DeadLetter>> {
        Dlq::list(self, filter, page)
    }
    fn list_summaries(&self, filter: &Filter, page: Page) -> Result<Vec<DeadLetterSummary>> {
        Dlq::list_summaries(self, filter, page)
    }
    fn fingerprints(&self) -> Result<Vec<FingerprintStats>> {
        Ok(Dlq::fingerprints(self))
    }
    fn purge_matching(
        &self,
        filter: &Filter,
        older_than: Duration,
        include_pending: bool,
    ) -> Result<u64> {
        Dlq::purge_matching(self, filter, older_than, include_pending)
    }
    fn get(&self, id: MessageId) -> Result<DeadLetter> {
        Dlq::get(self, id)
    }
    fn summary(&self, id: MessageId) -> Result<DeadLetterSummary> {
        Dlq::summary(self, id)
    }
    fn ids(&self, filter: &Filter, limit: Option<usize>) -> Result<Vec<MessageId>> {
        Dlq::ids(self, filter, limit)
    }
    fn stats(&self) -> Result<DlqStats> {
        Ok(Dlq::stats(self))
    }
    fn analyze(&self, filter: &Filter) -> Result<Analysis> {
        Dlq::analyze(self, filter)
    }
    fn failure_timeline(&self, until_ms: u64, hours: u32) -> Result<FailureTimeline> {
        Dlq::failure_timeline(self, until_ms, hours)
    }
    fn replay(&self, filter: &Filter, options: &ReplayOptions) -> Result<ReplayReport> {
        Dlq::replay(self, filter, options)
    }
    fn replay_ids(&self, ids: &[MessageId], options: &ReplayOptions) -> Result<ReplayReport> {
        Dlq::replay_ids(self, ids, options)
    }
    fn replay_one(&self, id: MessageId, options: &ReplayOptions) -> Result<()> {
        Dlq::replay_one(self, id, options)
    }
    fn replay_corrected(
        &self,
        id: MessageId,
        payload: impl AsRef<[u8]>,
        options: &ReplayOptions,
    ) -> Result<()> {
        Dlq::replay_corrected(self, id, payload, options)
    }
    fn mark_reprocessed(&self, id: MessageId, success: bool) -> Result<()> {
        Dlq::mark_reprocessed(self, id, success)
    }
    fn delete(&self, id: MessageId) -> Result<()> {
        Dlq::delete(self, id)
    }
    fn delete_matching(&self, filter: &Filter) -> Result<u64> {
        Dlq::delete_matching(self, filter)
    }
    fn purge(&self, older_than: Duration, include_pending: bool) -> Result<u64> {
        Dlq::purge(self, older_than, include_pending)
    }
    fn on_threshold(
        &self,
        threshold: u64,
        callback: impl Fn(&DlqAlert) + Send + Sync + 'static,
    ) -> Result<()> {
        Dlq::on_threshold(self, threshold, callback)
    }
}
