//! The conformance suite on JetStream: each scenario in a fresh namespace on the machine's
//! NATS server (`DEADLETTER_NATS_URL`, default `nats://127.0.0.1:4222`), deleted after.

use deadletter::{QueueOptions, Result};
use deadletter_conformance::TestBackend;
use deadletter_jetstream::{JetStream, JetStreamQueue};

mod common;

struct Namespace {
    js: JetStream,
}

impl Namespace {
    fn fresh() -> Self {
        Namespace {
            js: common::fresh_namespace(&common::server_url()),
        }
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = self.js.delete_namespace();
    }
}

impl TestBackend for Namespace {
    type Queue = JetStreamQueue;
    fn queue(&self, name: &str, options: QueueOptions) -> Result<JetStreamQueue> {
        self.js.queue_with(name, options)
    }
    fn refuses_stale_outcomes(&self) -> bool {
        // The server acknowledges a message by its stream sequence, whichever delivery
        // the acknowledgement came from.
        false
    }
}

deadletter_conformance::conformance_tests!(Namespace::fresh());
