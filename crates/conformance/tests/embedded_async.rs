//! The conformance suite on the embedded store's async API (feature `async`): each
//! scenario on a fresh durable store, every queue and DLQ call awaited through
//! `deadletter::async_api` (`deadletter_conformance::through_async`).

use std::sync::Mutex;

use deadletter::async_api::{AsyncDlq, AsyncQueue};
use deadletter::queue::QueueOptions;
use deadletter::{Config, Result, Store};
use deadletter_conformance::through_async::{runtime, AsyncDriven, AsyncDrivenDlq, Runtime};
use deadletter_conformance::TestBackend;

struct EmbeddedAsync {
    dir: tempfile::TempDir,
    rt: Runtime,
    /// `None` only while [`TestBackend::reopen`] runs.
    store: Mutex<Option<Store>>,
}

impl EmbeddedAsync {
    fn fresh() -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = Store::open(dir.path(), Config::default()).expect("open store");
        EmbeddedAsync {
            dir,
            rt: runtime(),
            store: Mutex::new(Some(store)),
        }
    }

    fn store(&self) -> Store {
        let store = self.store.lock().unwrap();
        store.clone().expect("the store is open")
    }
}

impl TestBackend for EmbeddedAsync {
    type Queue = AsyncDriven<AsyncQueue>;
    fn queue(&self, name: &str, options: QueueOptions) -> Result<Self::Queue> {
        Ok(AsyncDriven::new(
            &self.store().queue_with(name, options)?,
            &self.rt,
        ))
    }
    fn dlq(&self, name: &str) -> Result<AsyncDrivenDlq<AsyncDlq>> {
        Ok(AsyncDrivenDlq::new(&self.store().dlq(name)?, &self.rt))
    }
    fn reopen(&self) -> Result<()> {
        let mut store = self.store.lock().unwrap();
        if let Some(open) = store.take() {
            open.close()?;
        }
        *store = Some(Store::open(self.dir.path(), Config::default())?);
        Ok(())
    }
}

deadletter_conformance::conformance_tests!(EmbeddedAsync::fresh());
