//! What the dashboard serves: any [`Source`] of queues and DLQs. A [`Store`] is one (the
//! dashboard of a store directory); another backend is one through a small adapter (the
//! `deadletter` command serves a JetStream namespace this way).
//!
//! The dashboard needs the names of the queues, each DLQ by name (the backend's
//! [`DeadLetterQueue`] handle: list, get, stats, replay, delete), the numbers of every
//! queue ([`Metrics`], also served as Prometheus text at `/metrics`), the time now, and
//! a line saying what it serves; where it can, its guarded replays and the worker pools
//! attached to its queues.

use deadletter::metrics::Metrics;
use deadletter::pool::Workers;
use deadletter::queue::MessageId;
use deadletter::replay::{GuardedReplay, GuardedReplayOptions};
use deadletter::{DeadLetterQueue, Error, Store};

/// Queues and DLQs the dashboard can serve.
pub trait Source: Send + Sync + 'static {
    /// The backend's DLQ handle.
    type Dlq: DeadLetterQueue;
    /// What is served, for people: a store's directory, a namespace's URL.
    fn describe(&self) -> String;
    /// The names of every queue, in creation order.
    fn queue_names(&self) -> Result<Vec<String>, Error>;
    /// The DLQ named `name` (such as `orders-dlq`), or the DLQ of queue `name`.
    fn dlq(&self, name: &str) -> Result<Self::Dlq, Error>;
    /// The numbers of every queue and its DLQ.
    fn metrics(&self) -> Result<Metrics, Error>;
    /// The time now (ms since the epoch) by the backend's clock.
    fn now_ms(&self) -> u64;
    /// Its guarded replays, on a backend that keeps them (a store keeps them in its log);
    /// `None` on one that keeps none: the dashboard then offers none.
    fn guarded(&self) -> Option<&dyn GuardedReplays> {
        None
    }
    /// The worker pools attached to each queue and the queues' recent rates, where they
    /// can be known: `None` on a backend that keeps no list of its consumers, an error
    /// (such as [`Error::NoOwner`]) when the process that knows them could not be asked.
    fn workers(&self) -> Option<Result<Workers, Error>> {
        None
    }
}

/// What the operator asks of a running guarded replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardedStep {
    /// Release nothing more until resumed.
    Pause,
    /// Go on.
    Resume,
    /// Stop for good.
    Cancel,
}

/// Guarded replays of a backend that keeps them.
pub trait GuardedReplays {
    /// Every guarded replay, oldest first.
    fn guarded_list(&self) -> Result<Vec<GuardedReplay>, Error>;
    /// Starts one over entries `ids` of DLQ `dlq`.
    fn guarded_start(
        &self,
        dlq: &str,
        ids: &[MessageId],
        options: &GuardedReplayOptions,
    ) -> Result<GuardedReplay, Error>;
    /// Pauses, resumes or cancels replay `id`.
    fn guarded_step(&self, id: u64, step: GuardedStep) -> Result<GuardedReplay, Error>;
}

impl GuardedReplays for Store {
    fn guarded_list(&self) -> Result<Vec<GuardedReplay>, Error> {
        Ok(self.guarded_replays())
    }
    fn guarded_start(
        &self,
        dlq: &str,
        ids: &[MessageId],
        options: &GuardedReplayOptions,
    ) -> Result<GuardedReplay, Error> {
        self.dlq(dlq)?.replay_guarded_ids(ids, options)
    }
    fn guarded_step(&self, id: u64, step: GuardedStep) -> Result<GuardedReplay, Error> {
        match step {
            GuardedStep::Pause => self.pause_guarded_replay(id),
            GuardedStep::Resume => self.resume_guarded_replay(id),
            GuardedStep::Cancel => self.cancel_guarded_replay(id),
        }
    }
}

impl Source for Store {
    type Dlq = deadletter::Dlq;
    fn describe(&self) -> String {
        self.dir().display().to_string()
    }
    fn queue_names(&self) -> Result<Vec<String>, Error> {
        Ok(Store::queue_names(self))
    }
    fn dlq(&self, name: &str) -> Result<deadletter::Dlq, Error> {
        Store::dlq(self, name)
    }
    fn metrics(&self) -> Result<Metrics, Error> {
        Ok(self.metrics_snapshot())
    }
    fn now_ms(&self) -> u64 {
        self.config().clock.now_ms()
    }
    fn guarded(&self) -> Option<&dyn GuardedReplays> {
        Some(self)
    }
    /// The store's own pools when it holds the store; a snapshot sees none (they run in
    /// the process that holds it), so it answers `None`.
    fn workers(&self) -> Option<Result<Workers, Error>> {
        (!self.is_read_only()).then(|| Ok(Store::workers(self)))
    }
}
