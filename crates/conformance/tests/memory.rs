//! The conformance suite on the in-memory backend, which implements only the core traits:
//! the worker pool runs on it through `CoreOnly`, that is through `WorkerQueue`'s
//! defaults, so every scenario here checks those defaults too.

use deadletter::backend::CoreOnly;
use deadletter::queue::QueueOptions;
use deadletter::Result;
use deadletter_conformance::memory::{Memory, MemoryDlq, MemoryQueue};
use deadletter_conformance::TestBackend;

struct InMemory(Memory);

impl TestBackend for InMemory {
    type Queue = CoreOnly<MemoryQueue>;
    fn queue(&self, name: &str, options: QueueOptions) -> Result<CoreOnly<MemoryQueue>> {
        self.0.queue_with(name, options).map(CoreOnly)
    }
    fn dlq(&self, name: &str) -> Result<MemoryDlq> {
        self.0.dlq(name)
    }
    fn reopen(&self) -> Result<()> {
        // The queues live in this process: nothing to let go of.
        Ok(())
    }
}

deadletter_conformance::conformance_tests!(InMemory(Memory::new()));
