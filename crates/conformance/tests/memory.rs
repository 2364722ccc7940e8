//! The conformance suite on the in-memory backend, which implements only the core traits:
//! the worker pool runs on it through `CoreOnly`, that is through `WorkerQueue`'s
//! defaults, so every scenario here checks those defaults too.

use deadletter::{CoreOnly, QueueOptions, Result};
use deadletter_conformance::memory::{Memory, MemoryQueue};
use deadletter_conformance::TestBackend;

struct InMemory(Memory);

impl TestBackend for InMemory {
    type Queue = CoreOnly<MemoryQueue>;
    fn queue(&self, name: &str, options: QueueOptions) -> Result<CoreOnly<MemoryQueue>> {
        self.0.queue_with(name, options).map(CoreOnly)
    }
}

deadletter_conformance::conformance_tests!(InMemory(Memory::new()));
