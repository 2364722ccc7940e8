//! Settles what a killed server leaves inconsistent between a queue's consumer and its
//! work-queue stream.
//!
//! nats-server 2.9 writes a consumer's state and a stream's removals to disk lazily and
//! separately, so a server killed with SIGKILL can come back with one ahead of the other:
//!
//! - **Leftovers**: messages at or below the consumer's ack floor (acknowledged: acked, or
//!   terminated after their move to the DLQ) that the stream still holds, because the
//!   removal was lost. The consumer never delivers them again; they only inflate the
//!   stream. They are purged.
//! - **Phantoms**: deliveries the consumer still counts as pending (the acknowledgement
//!   was lost) of messages the stream no longer holds (the removal was kept). A 2.9 server
//!   keeps trying to redeliver them, and while it does, a pull request can go unanswered
//!   even though a message is ready: the queue stalls. Each phantom is acknowledged through
//!   its acknowledgement subject (`$JS.ACK.{stream}.{consumer}.{delivered}.{stream
//!   sequence}.{consumer sequence}.{time}.{pending}`, the subject the server gives every
//!   delivery as its reply), which is what its lost acknowledgement would have done. The
//!   consumer sequence is given as 0: the server then takes the pending delivery's own,
//!   and an acknowledgement of a sequence that is not pending changes nothing.
//!
//! Both repairs only touch sequences the stream has no message for, or the consumer has
//! already acknowledged, so they can never remove or skip a message that still has to be
//! delivered. They run from `stats` and when a waiting lease finds nothing (at most once
//! per [`REPAIR_EVERY`] per queue handle).

use std::time::Duration;

use async_nats::jetstream::consumer;
use async_nats::jetstream::stream::{LastRawMessageErrorKind, State, Stream};
use deadletter::Result;

use crate::client::{acks, backend};
use crate::names::CONSUMER;
use crate::namespace::JetStream;

/// The least time between two repairs started by idle leases of one queue handle.
pub(crate) const REPAIR_EVERY: Duration = Duration::from_secs(2);

/// The most sequences one repair probes for phantoms (the gap between the ack floor and
/// the last delivered message is what a crash left, normally a handful).
const MAX_PROBES: u64 = 10_000;

/// What one repair changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Repaired {
    /// Whether leftovers below the ack floor were purged.
    pub(crate) purged_leftovers: bool,
    /// How many phantom deliveries were acknowledged.
    pub(crate) phantoms: u64,
}

impl Repaired {
    pub(crate) fn changed(&self) -> bool {
        self.purged_leftovers || self.phantoms > 0
    }
}

impl JetStream {
    /// Purges leftovers and acknowledges phantoms of the queue whose stream is `stream`
    /// (holding `subject`), given the consumer's and the stream's current state.
    pub(crate) async fn repair_queue(
        &self,
        stream: &Stream<()>,
        subject: &str,
        consumer: &consumer::Info,
        state: &State,
    ) -> Result<Repaired> {
        let mut repaired = Repaired::default();
        let floor = consumer.ack_floor.stream_sequence;
        if state.messages > 0 && state.first_sequence <= floor {
            stream
                .purge()
                .filter(subject.to_string())
                .sequence(floor + 1)
                .await
                .map_err(|e| backend("remove acknowledged messages the server kept", e))?;
            repaired.purged_leftovers = true;
        }
        // Messages the stream holds that are not waiting for a first delivery: an upper
        // bound of the real pending deliveries. More pending than that means phantoms.
        let held = state.messages.saturating_sub(consumer.num_pending);
        if (consumer.num_ack_pending as u64) <= held {
            return Ok(repaired);
        }
        let last = consumer.delivered.stream_sequence;
        let first = floor + 1;
        for sequence in first..=last.min(first.saturating_add(MAX_PROBES)) {
            match stream.get_raw_message(sequence).await {
                Ok(_) => {}
                Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => {
                    let subject = format!(
                        "$JS.ACK.{}.{CONSUMER}.1.{sequence}.0.0.0",
                        consumer.stream_name
                    );
                    self.inner
                        .conn
                        .client
                        .publish(subject, acks::ack())
                        .await
                        .map_err(|e| backend("acknowledge a delivery the server kept", e))?;
                    repaired.phantoms += 1;
                }
                Err(e) => return Err(backend("read a queue message", e)),
            }
        }
        if repaired.phantoms > 0 {
            self.inner
                .conn
                .client
                .flush()
                .await
                .map_err(|e| backend("acknowledge a delivery the server kept", e))?;
        }
        Ok(repaired)
    }
}
