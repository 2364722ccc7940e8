//! Reading a stream in order through a short-lived consumer: how a DLQ and the fleet DLQ
//! are browsed without changing anything.
//!
//! The consumer is ephemeral (no acknowledgements, in memory, removed when the scan ends
//! and by the server after 30 s idle if the scan dies). Each answer the server owes is
//! bounded by `answer_timeout`, like a request: a server that dies after a fetch was sent
//! gives an error, never a scan that waits forever.

use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};
use async_nats::jetstream::{self, stream::Stream};
use deadletter::{Error, Result};
use futures_util::StreamExt;

use crate::client::backend;

/// Calls `visit` with each message of `stream` on `filter_subject`, with its stream
/// sequence, in order from sequence `from`, until `visit` returns false or the messages
/// run out. `op` names the scan in errors.
pub(crate) async fn scan_stream<I>(
    stream: &Stream<I>,
    filter_subject: String,
    from: u64,
    answer_timeout: Duration,
    op: &'static str,
    mut visit: impl FnMut(u64, &jetstream::Message) -> Result<bool>,
) -> Result<()> {
    let config = pull::Config {
        filter_subject,
        deliver_policy: if from > 1 {
            DeliverPolicy::ByStartSequence {
                start_sequence: from,
            }
        } else {
            DeliverPolicy::All
        },
        ack_policy: AckPolicy::None,
        inactive_threshold: Duration::from_secs(30),
        memory_storage: true,
        ..Default::default()
    };
    let mut consumer = stream
        .create_consumer(config)
        .await
        .map_err(|e| backend(op, e))?;
    let name = consumer
        .info()
        .await
        .map_err(|e| backend(op, e))?
        .name
        .clone();
    let result = async {
        loop {
            let mut batch = consumer
                .fetch()
                .max_messages(256)
                .messages()
                .await
                .map_err(|e| backend(op, e))?;
            let (mut got, mut more) = (0, false);
            loop {
                let next = tokio::time::timeout(answer_timeout, batch.next())
                    .await
                    .map_err(|_| {
                        Error::backend("jetstream", op, "no answer from the server in time")
                    })?;
                let Some(m) = next else { break };
                let m = m.map_err(|e| backend(op, e))?;
                got += 1;
                let info = m.info().map_err(|e| backend(op, e))?;
                let (sequence, pending) = (info.stream_sequence, info.pending);
                more = pending > 0;
                if !visit(sequence, &m)? {
                    return Ok(());
                }
            }
            if got == 0 || !more {
                return Ok(());
            }
        }
    }
    .await;
    let _ = stream.delete_consumer(&name).await;
    result
}
