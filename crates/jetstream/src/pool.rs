//! The worker pool's batching protocol on JetStream: [`WorkerQueue`] for
//! [`JetStreamQueue`], so that `deadletter::WorkerPool` runs at the speed of the server's
//! own pulls and acks.
//!
//! - **A reservation is one pull request** of up to the pool's batch size
//!   ([`MAX_RESERVATION`] at most) that waits for the first message and returns as soon as
//!   no more are pending (a no-wait pull with an expiry): no polling, and a batch costs
//!   one round trip, its DLQ checks overlapped in a second (`queue`'s `admit`).
//! - **Acks of a batch are sent together** and confirmed together: one round trip for the
//!   batch, followed by the next reservation.
//! - **A message whose handler did not start** when the pool stopped is given back
//!   uncounted: the history record counts the delivery as deferred (as a delayed message
//!   that came too early is), then a negative acknowledgement without delay.
//! - **A server that is away** (restarting, unreachable) never stops the pool: a
//!   reservation that fails returns nothing after a short pause, an ack that is not
//!   confirmed is counted as a lost lease (the server delivers the message again, and
//!   its next delivery in this process is only acked again: its handler succeeded), and a
//!   failure report that cannot be written is reported to the pool as a lost lease too
//!   (the next delivery reports again). Errors other than the backend's own (a message
//!   in a state the pool cannot have made) still stop it.
//!
//! The price of batches: a delivery is counted by the server when it is sent, so a worker
//! *process* that dies holding a batch is charged one attempt for each message in it whose
//! handler had not started (the embedded store, which records starts, charges none).
//! [`MAX_RESERVATION`] bounds that to 64 messages per worker.

use std::time::Duration;

use deadletter::backend::{WorkerQueue, WriteMark};
use deadletter::queue::{FailureOutcome, FailureReport};
use deadletter::{Error, MessageQueue, Result};

use crate::client::acks;
use crate::message::JetStreamMessage;
use crate::queue::JetStreamQueue;

/// The most messages one reservation takes (see the module documentation).
pub const MAX_RESERVATION: usize = 64;

/// How long a reservation that failed because the server is away pauses before it returns
/// nothing (the pool then asks again).
const AWAY_PAUSE: Duration = Duration::from_millis(100);

/// True for an error of the server or the connection (the operation may succeed later).
fn is_away(e: &Error) -> bool {
    matches!(e, Error::Backend { .. })
}

impl JetStreamQueue {
    /// Acks `done` together, each confirmed by the server; returns how many were not
    /// confirmed (their messages come back after the visibility timeout).
    async fn ack_batch(&self, done: &[JetStreamMessage]) -> Result<u64> {
        let conn = &self.backend().inner.conn;
        self.record_successes(done);
        let confirmations = done
            .iter()
            .map(|m| conn.ack_confirmed(&m.reply, acks::ack()));
        let results = futures_util::future::join_all(confirmations).await;
        let mut lost = 0;
        for (m, r) in done.iter().zip(results) {
            match r {
                Ok(()) => self.count_reprocessed(m).await?,
                Err(e) if is_away(&e) => {
                    self.info().unconfirmed.lock().insert((m.id, m.generation));
                    lost += 1;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(lost)
    }

    /// A reservation of up to `max` messages: see the module documentation.
    async fn reserve_async(
        &self,
        max: usize,
        wait: Option<Duration>,
    ) -> Result<Vec<JetStreamMessage>> {
        let max = max.clamp(1, MAX_RESERVATION);
        match self.lease_async(max, wait).await {
            Ok(msgs) => Ok(msgs),
            Err(e) if is_away(&e) => {
                tokio::time::sleep(wait.unwrap_or(AWAY_PAUSE).min(AWAY_PAUSE)).await;
                Ok(Vec::new())
            }
            Err(e) => Err(e),
        }
    }

    /// Gives `msg` back uncounted: its delivery is recorded as deferred in its history,
    /// then it is made visible again at once.
    async fn release_async(&self, msg: &JetStreamMessage) -> Result<()> {
        let js = self.backend();
        let mut history = js.read_history(msg.id, msg.generation).await?;
        history.deferred = history.deferred.max(msg.deferred) + 1;
        js.write_history(msg.id, &history).await?;
        // Released before the NAK: its redelivery must find it free.
        self.release_hold(msg);
        js.ack_retrying(&msg.reply, msg.epoch, acks::nak(Duration::ZERO))
            .await
    }
}

/// A failure report the server did not take: reported to the pool as a lost lease, since
/// the message is delivered again and that delivery reports again.
fn report_lost(msg: &JetStreamMessage, e: Error) -> Error {
    if is_away(&e) {
        Error::InvalidState {
            id: msg.id,
            expected: "a failure report the server confirms (it was away: delivered again)",
        }
    } else {
        e
    }
}

impl WorkerQueue for JetStreamQueue {
    fn reserve_wait(&self, max: usize, timeout: Duration) -> Result<Vec<JetStreamMessage>> {
        let wait = (!timeout.is_zero()).then_some(timeout);
        self.backend().inner.conn.run(self.reserve_async(max, wait))
    }

    fn ack_and_reserve(
        &self,
        done: &[JetStreamMessage],
        max: usize,
    ) -> Result<(Vec<JetStreamMessage>, u64)> {
        self.backend().inner.conn.run(async {
            let lost = self.ack_batch(done).await?;
            let more = if max > 0 {
                self.reserve_async(max, None).await?
            } else {
                Vec::new()
            };
            Ok((more, lost))
        })
    }

    fn release_unstarted(&self, msgs: &[JetStreamMessage]) -> Result<()> {
        self.backend().inner.conn.run(async {
            let released =
                futures_util::future::join_all(msgs.iter().map(|m| self.release_async(m))).await;
            for m in msgs {
                self.release_hold(m);
            }
            for r in released {
                match r {
                    Ok(()) => {}
                    // Not given back: it comes back after its lease, counted.
                    Err(e) if is_away(&e) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        })
    }

    fn retry_deferred(
        &self,
        msg: &JetStreamMessage,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> Result<(FailureOutcome, WriteMark)> {
        match self.retry(msg, report, retry_at_ms) {
            Ok(outcome) => Ok((outcome, WriteMark::DURABLE)),
            Err(e) => Err(report_lost(msg, e)),
        }
    }

    fn dead_letter_deferred(
        &self,
        msg: &JetStreamMessage,
        report: &FailureReport<'_>,
    ) -> Result<WriteMark> {
        match self.dead_letter(msg, report) {
            Ok(()) => Ok(WriteMark::DURABLE),
            Err(e) => Err(report_lost(msg, e)),
        }
    }
}
