//! The async API (feature `async`): the embedded store's queues, DLQs and worker pool as
//! futures, a thin layer over the blocking API rather than a second one.
//!
//! - `committed`: [`Committed`], the future of every write, over the engine's deferred
//!   durability (each write is the blocking operation with its fsync wait handed to the
//!   log's commit thread, which completes the future);
//! - `contract`: [`AsyncMessageQueue`] and [`AsyncDeadLetterQueue`], the core traits as
//!   futures, which the embedded handles and other backends' async handles implement;
//! - `queue`, `dlq`: [`AsyncQueue`] and [`AsyncDlq`], the handles;
//! - `pool`: [`AsyncWorkerPool`], async handlers on tokio tasks, with the thread pool's
//!   failure policy.
//!
//! The core is runtime-agnostic (std futures and wakers: the commit thread and the
//! engine's ready signal wake tasks on any executor); tokio is used for timers (a waiting
//! lease sleeps until the next retry comes due) and by the pool for its tasks.

mod committed;
mod contract;
mod dlq;
mod pool;
mod queue;

pub use committed::Committed;
pub use contract::{AsyncDeadLetterQueue, AsyncMessageQueue};
pub use dlq::AsyncDlq;
pub use pool::{AsyncHandler, AsyncWorkerPool};
pub use queue::AsyncQueue;
