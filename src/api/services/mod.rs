//! Services started on a store from outside it, each returning a guard (public as
//! `deadletter::services`, documented there): the compaction schedule, the guarded-replay
//! driver and the control socket. They sit above the operations they run and below only
//! the facade (`api::open`); the write path reaches the driver only through the hook it
//! registers on the store.

mod compactor;
pub mod control;
mod replay_driver;
mod thread;

pub use compactor::Compactor;
pub use control::server::ControlServer;
pub use replay_driver::GuardedReplayDriver;
