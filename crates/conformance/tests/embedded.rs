//! The conformance suite on the embedded store: each scenario on a fresh store in a
//! temporary directory, durable (`Durability::Always`, the default).

use deadletter::{Config, Queue, QueueOptions, Result, Store};
use deadletter_conformance::TestBackend;

struct Embedded {
    _dir: tempfile::TempDir,
    store: Store,
}

impl Embedded {
    fn fresh() -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = Store::open(dir.path(), Config::default()).expect("open store");
        Embedded { _dir: dir, store }
    }
}

impl TestBackend for Embedded {
    type Queue = Queue;
    fn queue(&self, name: &str, options: QueueOptions) -> Result<Queue> {
        self.store.queue_with(name, options)
    }
}

deadletter_conformance::conformance_tests!(Embedded::fresh());
