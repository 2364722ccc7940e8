//! The conformance suite on the embedded store: each scenario on a fresh store in a
//! temporary directory, durable (`Durability::Always`, the default).

use std::sync::Mutex;

use deadletter::queue::QueueOptions;
use deadletter::{Config, Dlq, Queue, Result, Store};
use deadletter_conformance::TestBackend;

struct Embedded {
    dir: tempfile::TempDir,
    /// `None` only while [`TestBackend::reopen`] runs.
    store: Mutex<Option<Store>>,
}

impl Embedded {
    fn fresh() -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = Store::open(dir.path(), Config::default()).expect("open store");
        Embedded {
            dir,
            store: Mutex::new(Some(store)),
        }
    }

    fn store(&self) -> Store {
        let store = self.store.lock().unwrap();
        store.clone().expect("the store is open")
    }
}

impl TestBackend for Embedded {
    type Queue = Queue;
    fn queue(&self, name: &str, options: QueueOptions) -> Result<Queue> {
        self.store().queue_with(name, options)
    }
    fn dlq(&self, name: &str) -> Result<Dlq> {
        self.store().dlq(name)
    }
    fn reopen(&self) -> Result<()> {
        let mut store = self.store.lock().unwrap();
        // Closed before the directory is opened again: the scenario holds no other
        // handle, so the directory's lock is free (`Error::Locked` otherwise).
        if let Some(open) = store.take() {
            open.close()?;
        }
        *store = Some(Store::open(self.dir.path(), Config::default())?);
        Ok(())
    }
}

deadletter_conformance::conformance_tests!(Embedded::fresh());
