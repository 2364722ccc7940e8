//! [`Holds`]: what this process knows of a queue's deliveries that the server may forget
//! when it is killed: which messages a worker of this process holds right now, and which
//! ones a handler here finished with success.
//!
//! A server that is killed and restarted can come back having forgotten that a delivery
//! is pending (it redelivers the message while a worker still handles it) and having
//! forgotten an acknowledgement it had confirmed (it redelivers a message whose handler
//! succeeded). Both are settled here, for the deliveries of this process:
//!
//! - **held**: a message (id, generation) leased by this process, with the deadline of
//!   its lease. Another delivery of it while the lease runs is not handed to a second
//!   worker: the holder's outcome (ack, retry, move to the DLQ) settles the message, since
//!   an acknowledgement names the stream message, not the delivery. Once the deadline
//!   passes (a holder that hangs or forgot the message), a new delivery is handed out, as
//!   the server would.
//! - **succeeded**: the last [`SUCCEEDED_KEPT`] messages whose handler succeeded here
//!   (recorded before their ack is sent). A later delivery of one of them is only acked
//!   again: never handled twice, never dead-lettered as a lost lease.
//! - **unadmitted**: how many deliveries of a message this process fetched but handed to
//!   no handler because their batch could not be admitted (a lookup timed out while the
//!   server, or a cluster's stream leader, was away). The server counted each; the next
//!   delivery's attempt does not (see `queue`'s `admit`), so a message whose deliveries
//!   were fetched during an outage is not dead-lettered as a lost lease before its
//!   handler ran `max_attempts` times.
//!
//! Invariants: a key is held by at most one unexpired lease; `succeeded` and
//! `unadmitted` hold at most [`SUCCEEDED_KEPT`] keys each (the oldest are forgotten
//! first).

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Instant;

use parking_lot::Mutex;

/// A message of a queue in one generation: (id, generation).
pub(crate) type Key = (u64, u32);

/// How many successes a queue handle remembers. A server killed loses at most the
/// acknowledgements of its last moments, so only the newest successes can come back.
pub(crate) const SUCCEEDED_KEPT: usize = 65_536;

/// See the module documentation.
#[derive(Default)]
pub(crate) struct Holds {
    held: Mutex<HashMap<Key, Instant>>,
    succeeded: Mutex<Succeeded>,
    unadmitted: Mutex<Unadmitted>,
}

#[derive(Default)]
struct Unadmitted {
    counts: HashMap<Key, u32>,
    order: VecDeque<Key>,
}

#[derive(Default)]
struct Succeeded {
    keys: HashSet<Key>,
    order: VecDeque<Key>,
}

impl Holds {
    /// Holds `key` until `deadline`; false when another lease of this process holds it
    /// and has not expired (the delivery must not be handed out).
    pub(crate) fn try_hold(&self, key: Key, now: Instant, deadline: Instant) -> bool {
        let mut held = self.held.lock();
        match held.get_mut(&key) {
            Some(until) if *until > now => false,
            Some(until) => {
                *until = deadline;
                true
            }
            None => {
                held.insert(key, deadline);
                true
            }
        }
    }

    /// Moves the deadline of a held `key` (a lease extended); nothing if not held.
    pub(crate) fn extend(&self, key: Key, deadline: Instant) {
        if let Some(until) = self.held.lock().get_mut(&key) {
            *until = (*until).max(deadline);
        }
    }

    /// Stops holding `key` (its outcome was sent, or it was never handed out).
    pub(crate) fn release(&self, key: Key) {
        self.held.lock().remove(&key);
    }

    /// Records that the handler of `key` succeeded, and stops holding it.
    pub(crate) fn succeeded(&self, key: Key) {
        self.release(key);
        let mut s = self.succeeded.lock();
        if s.keys.insert(key) {
            s.order.push_back(key);
            while s.order.len() > SUCCEEDED_KEPT {
                if let Some(old) = s.order.pop_front() {
                    s.keys.remove(&old);
                }
            }
        }
    }

    /// Whether the handler of `key` succeeded in this process (among the newest
    /// [`SUCCEEDED_KEPT`]).
    pub(crate) fn has_succeeded(&self, key: Key) -> bool {
        self.succeeded.lock().keys.contains(&key)
    }

    /// Records a delivery of `key` that was fetched but not admitted (see the module
    /// documentation).
    pub(crate) fn not_admitted(&self, key: Key) {
        let mut u = self.unadmitted.lock();
        let count = u.counts.entry(key).or_insert(0);
        *count += 1;
        if *count == 1 {
            u.order.push_back(key);
            while u.order.len() > SUCCEEDED_KEPT {
                if let Some(old) = u.order.pop_front() {
                    u.counts.remove(&old);
                }
            }
        }
    }

    /// The deliveries of `key` this process fetched and did not admit.
    pub(crate) fn unadmitted(&self, key: Key) -> u32 {
        self.unadmitted
            .lock()
            .counts
            .get(&key)
            .copied()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_held_message_is_not_held_twice_until_its_lease_ends() {
        let holds = Holds::default();
        let t = Instant::now();
        let lease = Duration::from_secs(2);
        assert!(holds.try_hold((1, 0), t, t + lease));
        assert!(!holds.try_hold((1, 0), t + Duration::from_secs(1), t + lease));
        // Another generation is another message.
        assert!(holds.try_hold((1, 1), t, t + lease));
        holds.extend((1, 0), t + Duration::from_secs(5));
        assert!(!holds.try_hold((1, 0), t + Duration::from_secs(3), t + lease));
        // Past the deadline the next delivery takes it.
        assert!(holds.try_hold(
            (1, 0),
            t + Duration::from_secs(6),
            t + Duration::from_secs(8)
        ));
        holds.release((1, 0));
        assert!(holds.try_hold((1, 0), t, t + lease));
    }

    #[test]
    fn successes_are_remembered_up_to_the_bound() {
        let holds = Holds::default();
        let t = Instant::now();
        assert!(holds.try_hold((7, 0), t, t + Duration::from_secs(2)));
        holds.succeeded((7, 0));
        assert!(holds.has_succeeded((7, 0)));
        // Released: a later delivery is not refused as held (it is acked again).
        assert!(holds.try_hold((7, 0), t, t + Duration::from_secs(2)));
        for id in 100..100 + SUCCEEDED_KEPT as u64 {
            holds.succeeded((id, 0));
        }
        assert!(!holds.has_succeeded((7, 0)), "the oldest is forgotten");
        assert!(holds.has_succeeded((100, 0)));
        assert!(holds.has_succeeded((99 + SUCCEEDED_KEPT as u64, 0)));
    }

    #[test]
    fn unadmitted_deliveries_are_counted_per_message_up_to_the_bound() {
        let holds = Holds::default();
        assert_eq!(holds.unadmitted((3, 0)), 0);
        holds.not_admitted((3, 0));
        holds.not_admitted((3, 0));
        holds.not_admitted((3, 1));
        assert_eq!(holds.unadmitted((3, 0)), 2);
        assert_eq!(
            holds.unadmitted((3, 1)),
            1,
            "another generation counts apart"
        );
        for id in 100..100 + SUCCEEDED_KEPT as u64 {
            holds.not_admitted((id, 0));
        }
        assert_eq!(holds.unadmitted((3, 0)), 0, "the oldest is forgotten");
        assert_eq!(holds.unadmitted((100, 0)), 1);
    }
}
