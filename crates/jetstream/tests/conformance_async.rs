//! The conformance suite on the JetStream backend's async handles: each scenario in a
//! fresh namespace on the machine's NATS server (as `tests/conformance.rs`), every queue
//! and DLQ call awaited through `AsyncJetStreamQueue` and `AsyncJetStreamDlq` on a tokio
//! runtime of the test's own (`deadletter_conformance::through_async`), not on the
//! connection's.

mod common;

use common::backend::Namespace;
use deadletter::queue::QueueOptions;
use deadletter::Result;
use deadletter_conformance::through_async::{runtime, AsyncDriven, AsyncDrivenDlq, Runtime};
use deadletter_conformance::TestBackend;
use deadletter_jetstream::{AsyncJetStreamDlq, AsyncJetStreamQueue};

/// A fresh namespace whose queues are driven through their async handles.
struct AsyncNamespace {
    namespace: Namespace,
    rt: Runtime,
}

impl AsyncNamespace {
    fn fresh() -> Self {
        AsyncNamespace {
            namespace: Namespace::fresh(),
            rt: runtime(),
        }
    }
}

impl TestBackend for AsyncNamespace {
    type Queue = AsyncDriven<AsyncJetStreamQueue>;
    fn queue(&self, name: &str, options: QueueOptions) -> Result<Self::Queue> {
        let queue = self.namespace.queue(name, options)?;
        Ok(AsyncDriven::new(&queue, &self.rt))
    }
    fn dlq(&self, name: &str) -> Result<AsyncDrivenDlq<AsyncJetStreamDlq>> {
        let dlq = self.namespace.dlq(name)?;
        Ok(AsyncDrivenDlq::new(&dlq, &self.rt))
    }
    fn reopen(&self) -> Result<()> {
        self.namespace.reopen()
    }
    fn refuses_stale_outcomes(&self) -> bool {
        self.namespace.refuses_stale_outcomes()
    }
    fn counts_replays_as_enqueued(&self) -> bool {
        self.namespace.counts_replays_as_enqueued()
    }
}

deadletter_conformance::conformance_tests!(AsyncNamespace::fresh());
