//! Backends: the contract a queue and its DLQ keep, whatever holds them, in two layers.
//!
//! - **The core** (`contract`): [`Delivery`], [`MessageQueue`] and [`DeadLetterQueue`],
//!   the operations users call. A backend implements these and nothing else: the
//!   conformance suite, a user's own code and the [`WorkerPool`] run on it unchanged
//!   (the `deadletter-jetstream` package implements them on NATS JetStream; the
//!   conformance crate holds a small in-memory one).
//! - **The worker pool's batching** (`batching`): [`WorkerQueue`], which the pool
//!   requires: reservations of several messages, start records, acks carried by the next
//!   reservation, failure reports made durable together ([`WriteMark`]). Every method has
//!   a default built on the core, so a backend opts in with an empty impl, and
//!   [`CoreOnly`] runs the pool on any core backend through those defaults. A backend
//!   overrides them for speed; the embedded store does (`embedded`).
//!
//! The traits are used through generics: every call is statically dispatched, each
//! message is the backend's own type (for the embedded store, a view of the log's memory
//! map, never copied or boxed), and the embedded [`Queue`], [`Message`] and [`Dlq`]
//! implement them by calling their own methods, so the embedded store pays nothing for
//! the abstraction. The batch operations of the core (`lease(n)`, `ack_all`,
//! `enqueue_batch`) let any consumer lease in batches and commit acks in groups.
//!
//! The traits are synchronous, like the pool (threads): a backend built on an async client
//! runs its own runtime behind them.
//!
//! [`WorkerPool`]: crate::WorkerPool
//! [`Queue`]: crate::Queue
//! [`Message`]: crate::Message
//! [`Dlq`]: crate::Dlq

/// Trait methods that only forward: `Type: fn name(&self, arg: T) -> R;` calls the
/// inherent `Type::name(self, arg)`, and `.0: fn ...` calls `self.0.name(arg)` (a
/// wrapper's inner queue), with the same arguments.
macro_rules! forward {
    (@fns $call:tt $(fn $name:ident $(<$g:ident: $bound:path>)?
        (&self $(, $arg:ident: $ty:ty)*) $(-> $ret:ty)?;)*) => {
        $(
            #[inline]
            fn $name $(<$g: $bound>)? (&self $(, $arg: $ty)*) $(-> $ret)? {
                forward!(@call $call self, $name, $($arg),*)
            }
        )*
    };
    (@call [inherent $t:ident] $self:ident, $name:ident, $($arg:ident),*) => {
        $t::$name($self $(, $arg)*)
    };
    (@call [inner] $self:ident, $name:ident, $($arg:ident),*) => {
        $self.0.$name($($arg),*)
    };
    ($t:ident: $($fns:tt)*) => {
        forward!(@fns [inherent $t] $($fns)*);
    };
    (.0: $($fns:tt)*) => {
        forward!(@fns [inner] $($fns)*);
    };
}

mod batching;
mod contract;
mod embedded;

pub use batching::{CoreOnly, WorkerQueue, WriteMark};
pub use contract::{DeadLetterQueue, Delivery, MessageQueue};
