//! Delivery: leasing visible messages (each delivery counted in the log before it is
//! handed out), waiting for one, and checking that an outcome reported for a message is
//! about its current lease.
//!
//! A lease takes the earliest visible message by (visible-at, enqueue order). On the way
//! it expires messages whose TTL passed, dead-letters a message whose earlier delivery
//! ended without an outcome and that has used all its attempts (kind `ConsumerDied` or
//! `LeaseExpired`), and holds back suspects (messages in flight when the process died) so
//! that at most one of them is delivered at a time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{generation_of, FailureReport, Message, Queue};
use crate::api::types::{Failure, MessageId};
use crate::engine::record::{Decoded, Op};
use crate::engine::state::{Msg, Place, State};
use crate::engine::wire;
use crate::engine::{op_entry, Batch};
use crate::error::{Error, Result};

impl Queue {
    /// Leases up to `max` visible messages for the queue's visibility timeout.
    pub fn lease(&self, max: usize) -> Result<Vec<Message>> {
        let vis = self.store.queue_options(self.id).visibility_timeout;
        self.lease_for(max, vis)
    }

    /// Leases up to `max` visible messages for `visibility`. Each delivery is counted in the
    /// log before this returns. A message whose earlier delivery ended without an outcome
    /// and that has used all its attempts goes to the DLQ instead of being delivered.
    pub fn lease_for(&self, max: usize, visibility: Duration) -> Result<Vec<Message>> {
        self.lease_inner(max, visibility, None, false)
    }

    /// Leases up to `max` visible messages for `visibility`, strictly in the order leases
    /// take them. Where [`Queue::lease_for`] skips a message it must hold back (a suspect,
    /// in flight when the process died, waits while another suspect is out) and hands out
    /// the ones behind it, this stops before it: the messages returned are always the
    /// queue's next ones. For consumers that must keep the queue's order, such as a
    /// forwarder to another system; after a restart they get the suspects one at a time.
    pub fn lease_in_order(&self, max: usize, visibility: Duration) -> Result<Vec<Message>> {
        self.lease_inner(max, visibility, None, true)
    }

    /// Acknowledges `done` and leases up to `max` more messages in one write sharing one
    /// fsync: a consumer's loop at half the durable cost of [`Queue::ack`] then
    /// [`Queue::lease`]. If the ack is refused (the lease was lost), nothing is leased.
    pub fn ack_and_lease(&self, done: &Message, max: usize) -> Result<Vec<Message>> {
        let vis = self.store.queue_options(self.id).visibility_timeout;
        self.lease_inner(max, vis, Some(done), false)
    }

    fn lease_inner(
        &self,
        max: usize,
        visibility: Duration,
        ack: Option<&Message>,
        in_order: bool,
    ) -> Result<Vec<Message>> {
        if max == 0 && ack.is_none() {
            return Ok(Vec::new());
        }
        let now = self.store.now();
        let options = self.store.queue_options(self.id);
        let deadline = now + visibility.as_millis().max(1) as u64;
        let mut st = self.store.engine().lock();
        let mut batch: Batch<'static> = Vec::new();
        if let Some(done) = ack {
            self.check_lease(&st, done)?;
            batch.push(op_entry(Op::Ack {
                at: now,
                ids: vec![done.id],
            })?);
        }
        st.expire_leases(self.id, now);
        let mut ids = Vec::new();
        // The message acked in this write is taken already: if its lease just expired (it
        // was acked late but before anyone else took it), it is ready now in the index, and
        // leasing it again here would spend a slot on a message the ack removes.
        let mut popped: Vec<MessageId> = ack.map(|m| m.id).into_iter().collect();
        let mut held_back = Vec::new();
        // The message acked in this write is no longer in flight.
        let mut suspect_busy = st.suspect_in_flight(self.id, ack.map(|m| m.id));
        while ids.len() < max {
            let Some(id) = st.pop_visible(self.id, now) else {
                break;
            };
            if popped.contains(&id) {
                // A second ready-list entry of a message taken in this call.
                continue;
            }
            popped.push(id);
            if st.suspects.contains(&id) {
                // Messages in flight when the process died are tried one at a time, so the
                // one that kills the process cannot take the others down with it.
                if suspect_busy {
                    held_back.push(id);
                    if in_order {
                        break;
                    }
                    continue;
                }
            }
            let Some(m) = st.msgs.get(&id).copied() else {
                continue;
            };
            let extra = st.extras.get(&id);
            if extra
                .and_then(|e| e.expires_at)
                .is_some_and(|t| t <= self.store.expiry_now())
            {
                let op = self.expire_op(&st, id, m, now, &options)?;
                batch.push(op_entry(op)?);
                continue;
            }
            if m.place == Place::ReadyAfterLostLease && m.attempts >= options.max_attempts {
                let cut = extra.is_some_and(|e| e.lease_cut_by_restart);
                let failure = if cut {
                    Failure::transient(
                        "ConsumerDied",
                        format!(
                            "the process died during delivery {} of {} (no ack or failure was reported)",
                            m.attempts, options.max_attempts
                        ),
                    )
                } else {
                    Failure::transient(
                        "LeaseExpired",
                        format!(
                            "delivery {} of {} ended without an ack or failure before its lease expired",
                            m.attempts, options.max_attempts
                        ),
                    )
                };
                let report = FailureReport::new(&failure);
                let op = self.dead_letter_op(&st, id, m, &report, now, false)?;
                batch.push(op_entry(op)?);
                continue;
            }
            // Only a suspect actually delivered holds the others back: one that expired or
            // went to the DLQ above is not in flight.
            suspect_busy |= st.suspects.contains(&id);
            ids.push(id);
        }
        for &id in &held_back {
            st.push_back_ready(id);
        }
        if !ids.is_empty() {
            batch.push(op_entry(Op::Lease {
                at: now,
                deadline,
                ids: ids.clone(),
            })?);
        }
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let effects = match self.store.engine().write_locked(&mut st, batch) {
            Ok(e) => e,
            Err(e) => {
                for id in popped.into_iter().filter(|id| !held_back.contains(id)) {
                    st.push_back_ready(id);
                }
                return Err(e);
            }
        };
        let leased: Vec<(MessageId, Msg, u32)> = ids
            .iter()
            .filter_map(|id| st.msgs.get(id).map(|m| (*id, *m, generation_of(&st, *id))))
            .collect();
        drop(st);
        self.store.finish(effects)?;
        leased
            .into_iter()
            .map(|(id, m, generation)| self.load_message(id, m, generation, now))
            .collect()
    }

    /// Like [`Queue::lease`], but waits up to `timeout` for a message to become visible.
    pub fn lease_wait(&self, max: usize, timeout: Duration) -> Result<Vec<Message>> {
        let vis = self.store.queue_options(self.id).visibility_timeout;
        let give_up = Instant::now() + timeout;
        loop {
            let got = self.lease_for(max, vis)?;
            if !got.is_empty() {
                return Ok(got);
            }
            let now_instant = Instant::now();
            if now_instant >= give_up {
                return Ok(got);
            }
            let mut st = self.store.engine().lock();
            let now = self.store.now();
            let wait_ms = st
                .next_visible_at(self.id)
                .map(|t| t.saturating_sub(now))
                .unwrap_or(u64::MAX);
            let until = give_up.min(now_instant + Duration::from_millis(wait_ms.clamp(1, 60_000)));
            if wait_ms > 0 {
                self.store.engine().wait_ready(&mut st, until);
            }
        }
    }

    fn load_message(
        &self,
        id: MessageId,
        m: Msg,
        generation: u32,
        leased_at: u64,
    ) -> Result<Message> {
        let record = self.store.engine().read_record(m.payload_pos)?;
        let version = record.version();
        let decoded =
            wire::decode(version, &record).map(|d| (d, wire::put_payload(version, &record)));
        let (meta, payload) = match decoded {
            Ok((Decoded::Put(put), Ok(range))) => (put.meta, range),
            _ => return Err(self.store.engine().bad_content(m.payload_pos)),
        };
        Ok(Message {
            id,
            queue: Arc::clone(&self.name),
            attempt: m.attempts,
            generation,
            enqueued_at_ms: meta.enqueued_at,
            leased_at_ms: leased_at,
            attributes: meta.attributes,
            record,
            payload,
        })
    }

    /// The message's entry if `msg` is its current lease.
    pub(super) fn check_lease(&self, st: &State, msg: &Message) -> Result<Msg> {
        match st.msgs.get(&msg.id) {
            Some(m)
                if m.place == Place::Leased
                    && m.attempts == msg.attempt
                    && m.queue == self.id
                    && generation_of(st, msg.id) == msg.generation =>
            {
                Ok(*m)
            }
            Some(_) => Err(Error::InvalidState {
                id: msg.id,
                expected: "leased by this delivery",
            }),
            None => Err(Error::NotFound(msg.id)),
        }
    }
}
