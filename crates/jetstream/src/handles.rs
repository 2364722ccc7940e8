//! The handles a [`JetStream`] connection opens: queues ([`JetStreamQueue`]) and DLQs
//! ([`JetStreamDlq`]), above the namespace they belong to.

use deadletter::queue::QueueOptions;
use deadletter::{Error, Result};

use crate::dlq::JetStreamDlq;
use crate::namespace::JetStream;
use crate::queue::JetStreamQueue;

impl JetStream {
    /// Opens queue `name` with the default queue options, creating it if new.
    pub fn queue(&self, name: &str) -> Result<JetStreamQueue> {
        self.queue_with(name, self.inner.options.queue_defaults.clone())
    }

    /// Opens queue `name` with `options`, creating it if new. Its lease length
    /// (`visibility_timeout`) is the ack wait of the queue's consumer, shared by every
    /// process: the last process to open the queue with another length changes it for all.
    pub fn queue_with(&self, name: &str, options: QueueOptions) -> Result<JetStreamQueue> {
        if options.max_attempts == 0 {
            return Err(Error::InvalidConfig("max_attempts of zero".into()));
        }
        if options.max_pending.is_some() {
            // Refused rather than ignored: a limit the caller counts on must not be silently
            // absent.
            return Err(Error::InvalidConfig(
                "max_pending limits an embedded store's queue; on JetStream, limit the \
                 queue's stream (max_msgs with discard new) on the server"
                    .into(),
            ));
        }
        let info = self.inner.conn.run(self.open_queue(name, &options, true))?;
        Ok(JetStreamQueue::new(self.clone(), info, options))
    }

    /// An existing queue, or `Error::UnknownQueue`, with the default queue options; its
    /// consumer's lease length is left as the workers set it (a tool that reads a queue
    /// must not change how long the workers' leases last).
    pub fn existing_queue(&self, name: &str) -> Result<JetStreamQueue> {
        if !self.queue_names()?.iter().any(|q| q == name) {
            return Err(Error::UnknownQueue(name.to_string()));
        }
        let options = self.inner.options.queue_defaults.clone();
        let info = self
            .inner
            .conn
            .run(self.open_queue(name, &options, false))?;
        Ok(JetStreamQueue::new(self.clone(), info, options))
    }

    /// The DLQ named `name` (such as `"orders-dlq"`), or the DLQ of queue `name`.
    pub fn dlq(&self, name: &str) -> Result<JetStreamDlq> {
        for queue in self.queue_names()? {
            if self.dlq_name(&queue) == name || queue == name {
                return Ok(self.existing_queue(&queue)?.dlq_handle());
            }
        }
        Err(Error::UnknownQueue(name.to_string()))
    }
}
