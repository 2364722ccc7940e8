//! [`Committed`], the future every async write returns, and the one door to the engine's
//! deferred durability ([`Store::deferred`]): the blocking operation runs at once on the
//! calling thread with its fsync wait moved to the log's commit thread, and the future
//! completes when that fsync does.
//!
//! Invariants:
//! - the operation has been applied (or refused) when the method returning a `Committed`
//!   returns, whether or not the future is ever polled;
//! - a `Committed` yields `Ok` only once every record the operation wrote is durable (by
//!   the store's durability setting: under `Interval` and `Never` at once).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::api::core::store::Store;
use crate::error::Result;
use crate::storage::log::DurableWait;

/// The future of an async write: the operation's result, handed out once the group
/// commit's fsync covering its records has completed, without a thread waiting for it
/// (the store's commit thread runs the fsync, shared by every writer waiting then, and
/// wakes the task).
///
/// **The write is made when the call returns, not when the future is first polled.**
///
/// **Cancel-safety.** Dropping a `Committed` cancels nothing: the operation stands in the
/// store (an enqueued message will be delivered, an ack removed its message, a replayed
/// entry is back in its queue), and its records become durable with the next fsync (the
/// commit thread runs it whether or not anyone still waits), so a power cut in between
/// may lose them, exactly as it may lose a blocking call's records before it returned.
/// What is lost is only the knowledge that it is durable, and the result (an enqueue's
/// id). A dropped lease's messages stay leased until their visibility timeout, their
/// delivery counted.
#[must_use = "the write is made; await the future to know it is durable"]
#[derive(Debug)]
pub struct Committed<T> {
    result: Option<Result<T>>,
    wait: DurableWait,
}

impl<T> Committed<T> {
    /// A write whose result is known and needs no wait (a refusal, a read).
    pub(crate) fn ready(result: Result<T>) -> Committed<T> {
        Committed {
            result: Some(result),
            wait: DurableWait::ready(Ok(())),
        }
    }
}

impl<T: Unpin> Future for Committed<T> {
    type Output = Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let this = &mut *self;
        match this.result.take() {
            Some(Err(e)) => return Poll::Ready(Err(e)),
            kept => this.result = kept,
        }
        match Pin::new(&mut this.wait).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(synced) => {
                let result = this.result.take().unwrap_or(Err(crate::Error::Poisoned));
                Poll::Ready(synced.and(result))
            }
        }
    }
}

impl Store {
    /// Runs `op`, a blocking operation of this store, with its durable wait deferred:
    /// see [`Committed`].
    pub(crate) fn deferred<T>(&self, op: impl FnOnce() -> Result<T>) -> Committed<T> {
        let (result, wait) = self.engine().deferring(op);
        match result {
            Ok(value) => Committed {
                result: Some(Ok(value)),
                wait,
            },
            Err(e) => Committed::ready(Err(e)),
        }
    }

    /// A future that completes once the log is durable up to `pos` (0: at once), for
    /// writes settled as [`Settle::Written`](crate::engine::Settle::Written).
    pub(crate) fn durable_at(&self, pos: u64) -> Committed<()> {
        if pos == 0 {
            return Committed::ready(Ok(()));
        }
        Committed {
            result: Some(Ok(())),
            wait: self.engine().log().durable_at(pos),
        }
    }
}
