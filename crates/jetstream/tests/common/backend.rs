//! The conformance suite's backend on JetStream: each scenario in a fresh namespace of its
//! own on a server (the shared one, or a cluster of the test's own), deleted after.

use std::sync::Mutex;

use deadletter::queue::QueueOptions;
use deadletter::Result;
use deadletter_conformance::TestBackend;
use deadletter_jetstream::{JetStream, JetStreamDlq, JetStreamOptions, JetStreamQueue};

/// A fresh namespace on a server, as a [`TestBackend`].
pub struct Namespace {
    url: String,
    js: Mutex<JetStream>,
}

impl Namespace {
    /// A fresh namespace on the shared server.
    pub fn fresh() -> Self {
        let url = super::server_url();
        let js = super::fresh_namespace(&url);
        Namespace {
            url,
            js: Mutex::new(js),
        }
    }

    /// A fresh namespace on the server at `url`, with `options` but for the namespace.
    pub fn fresh_with(url: &str, options: JetStreamOptions) -> Result<Self> {
        let mut options = options;
        options.namespace = super::unique_namespace("t");
        let js = JetStream::connect_with(url, options)?;
        Ok(Namespace {
            url: url.to_string(),
            js: Mutex::new(js),
        })
    }

    pub fn js(&self) -> JetStream {
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
