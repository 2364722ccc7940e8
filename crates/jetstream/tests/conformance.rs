//! The conformance suite on JetStream: each scenario in a fresh namespace on the machine's
//! NATS server (`DEADLETTER_NATS_URL`, default `nats://127.0.0.1:4250`, the server `.ci/run` starts), deleted after.

use std::sync::Mutex;

use deadletter::queue::QueueOptions;
use deadletter::Result;
use deadletter_conformance::TestBackend;
use deadletter_jetstream::{JetStream, JetStreamDlq, JetStreamQueue};

mod common;

struct Namespace {
    url: String,
    js: Mutex<JetStream>,
}

impl Namespace {
    fn fresh() -> Self {
        let url = common::server_url();
        let js = Mutex::new(common::fresh_namespace(&url));
        Namespace { url, js }
    }

    fn js(&self) -> JetStream {
        self.js.lock().unwrap().clone()
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = self.js().delete_namespace();
    }
}

impl TestBackend for Namespace {
    type Queue = JetStreamQueue;
    fn queue(&self, name: &str, options: QueueOptions) -> Result<JetStreamQueue> {
        self.js().queue_with(name, options)
    }
    fn dlq(&self, name: &str) -> Result<JetStreamDlq> {
        self.js().dlq(name)
    }
    fn reopen(&self) -> Result<()> {
        // A new connection to the same namespace, as another process would make.
        let mut js = self.js.lock().unwrap();
        *js = JetStream::connect_with(&self.url, js.options().clone())?;
        Ok(())
    }
    fn refuses_stale_outcomes(&self) -> bool {
        // The server acknowledges a message by its stream sequence, whichever delivery
        // the acknowledgement came from.
        false
    }
    fn counts_replays_as_enqueued(&self) -> bool {
        // `enqueued` is the queue stream's last sequence, and a replay publishes to it.
        true
    }
}

deadletter_conformance::conformance_tests!(Namespace::fresh());
