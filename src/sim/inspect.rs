//! A census of a store: every message the index knows, where it is, and its payload read
//! back from the log, plus cross-checks of the index's own views of the same facts. Used
//! by the simulation test to compare a reopened store with its model.

use std::collections::BTreeMap;

use crate::api::core::store::Store;
use crate::api::core::types::MessageId;
use crate::engine::record::Decoded;
use crate::engine::state::{DeadStatus, Place};
use crate::engine::{bad_content, wire};
use crate::error::{Error, Result};

/// Where a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Where {
    /// In its queue, waiting (visible now or later).
    Ready,
    /// In its queue, leased.
    Leased,
    /// In its queue's DLQ.
    Dead,
}

/// One message as the store sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The queue it is in (for a DLQ entry: the queue whose DLQ holds it).
    pub queue: String,
    /// Where.
    pub place: Where,
    /// Deliveries counted.
    pub attempts: u32,
    /// The payload, read back from the log (for a DLQ entry, through [`crate::Dlq::get`]).
    pub payload: Vec<u8>,
    /// For a DLQ entry: true while pending (not marked reprocessed).
    pub pending: Option<bool>,
    /// For a DLQ entry: when it was dead-lettered, per its envelope.
    pub dead_at_ms: Option<u64>,
}

/// Every message of `store`, by id. Reads each payload back from the log, so damaged data
/// shows up here as an error (it must be a typed [`Error::Corruption`]). Also checks that
/// the index agrees with itself: each DLQ entry is in its DLQ's browse order and nowhere
/// else, and per-queue counters match the messages. A disagreement is returned as
/// [`Error::InvalidState`] with a message id (0 for a counter mismatch).
pub fn census(store: &Store) -> Result<BTreeMap<MessageId, Entry>> {
    let (msgs, names, dead, dlq_orders, counters) = {
        let st = store.engine().lock();
        let msgs: Vec<_> = st.msgs.iter().map(|(id, m)| (id, *m)).collect();
        let names: Vec<String> = st.queues.iter().map(|q| q.name.clone()).collect();
        if let Some(id) = st.summary_mismatch() {
            return Err(Error::InvalidState {
                id,
                expected: "a DLQ summary that agrees with the index",
            });
        }
        let dead: BTreeMap<MessageId, DeadStatus> =
            st.dead.iter().map(|(&id, d)| (id, d.status)).collect();
        let orders: Vec<Vec<MessageId>> = st
            .queues
            .iter()
            .map(|q| q.dlq_order.keys().map(|&(_, id)| id).collect())
            .collect();
        let counters: Vec<(u64, u64)> = st
            .queues
            .iter()
            .map(|q| (q.counters.ready, q.counters.in_flight))
            .collect();
        (msgs, names, dead, orders, counters)
    };
    let mismatch = |id, expected| Error::InvalidState { id, expected };
    let mut out = BTreeMap::new();
    let mut ready_count = vec![0u64; names.len()];
    let mut leased_count = vec![0u64; names.len()];
    for (id, m) in msgs {
        let q = m.queue() as usize;
        let queue = names
            .get(q)
            .cloned()
            .ok_or_else(|| mismatch(id, "in a declared queue"))?;
        let in_order = dlq_orders[q].contains(&id);
        let place = match m.place() {
            Place::Ready | Place::ReadyAfterLostLease => Where::Ready,
            Place::Leased => Where::Leased,
            Place::Dead => Where::Dead,
        };
        if (place == Where::Dead) != in_order || (place == Where::Dead) != dead.contains_key(&id) {
            return Err(mismatch(id, "in exactly one of its queue and its DLQ"));
        }
        match place {
            Where::Ready => ready_count[q] += 1,
            Where::Leased => leased_count[q] += 1,
            Where::Dead => {}
        }
        let (payload, pending, dead_at_ms) = if place == Where::Dead {
            let entry = store.dlq(&queue)?.get(id)?;
            let at = entry.dlq.dead_lettered_at_ms;
            (
                entry.payload,
                Some(dead[&id] == DeadStatus::Pending),
                Some(at),
            )
        } else {
            let rec = store.engine().read_record(m.payload_pos)?;
            match wire::decode(rec.version(), &rec) {
                Ok(Decoded::Put(put)) => (put.payload.to_vec(), None, None),
                _ => return Err(bad_content(m.payload_pos)),
            }
        };
        out.insert(
            id,
            Entry {
                queue,
                place,
                attempts: m.attempts,
                payload,
                pending,
                dead_at_ms,
            },
        );
    }
    for (q, order) in dlq_orders.iter().enumerate() {
        for id in order {
            if out.get(id).is_none_or(|e| e.place != Where::Dead) {
                return Err(mismatch(*id, "a DLQ entry with an index entry"));
            }
        }
        if counters[q] != (ready_count[q], leased_count[q]) {
            return Err(mismatch(0, "counted as the queue's counters say"));
        }
    }
    Ok(out)
}
