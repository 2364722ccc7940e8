//! Who holds a leased message in this process: the worker pools running on the store's
//! queues register themselves here (in memory, never in the log), so that a listing of a
//! queue's in-flight messages can name the worker that runs each one.
//!
//! Nothing on the write path touches this: a pool registers once when it starts, and a
//! listing asks the registered pools about the messages it shows. Invariants: an entry is
//! a weak reference, so a stopped pool's entry answers nothing and is dropped at the next
//! registration; what a pool answers is what it holds at that instant (a message it acks
//! a moment later is still named), so a holder is a hint, as the listing says.

use std::sync::Weak;

use parking_lot::Mutex;

use crate::engine::envelope::MessageId;
use crate::engine::record::QueueId;

/// A running pool, as the registry asks it.
pub(crate) trait Holder: Send + Sync {
    /// The worker of this pool that holds message `id` now, if one does.
    fn holder_of(&self, id: MessageId) -> Option<String>;
}

/// The pools of a store's process, each with the queue it works on, held weakly.
#[derive(Default)]
pub(crate) struct Holders {
    pools: Mutex<Vec<(QueueId, Weak<dyn Holder>)>>,
}

impl Holders {
    /// Registers a pool working on `queue`; entries of pools that stopped are dropped.
    pub(crate) fn register(&self, queue: QueueId, pool: Weak<dyn Holder>) {
        let mut pools = self.pools.lock();
        pools.retain(|(_, p)| p.strong_count() > 0);
        pools.push((queue, pool));
    }

    /// The worker of a running pool on `queue` that holds `id`, if one does.
    pub(crate) fn holder_of(&self, queue: QueueId, id: MessageId) -> Option<String> {
        let pools: Vec<_> = self
            .pools
            .lock()
            .iter()
            .filter(|(q, _)| *q == queue)
            .filter_map(|(_, p)| p.upgrade())
            .collect();
        pools.iter().find_map(|p| p.holder_of(id))
    }
}
