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
use crate::api::core::types::{Failure, MessageId};
use crate::engine::record::{Decoded, Op};
use crate::engine::state::{IdHashSet, Msg, Place, State};
use crate::engine::wire;
use crate::engine::{bad_content, op_entry, Batch, Settle};
use crate::error::{Error, Result};

/// What a delivery records: a lease, or a reservation (see [`Queue::reserve_wait`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Lease,
    Reserve,
}

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
        Ok(self
            .lease_inner(max, visibility, &[], Mode::Lease, false)?
            .0)
    }

    /// Leases up to `max` visible messages for `visibility`, strictly in the order leases
    /// take them. Where [`Queue::lease_for`] skips a message it must hold back (a suspect,
    /// in flight when the process died, waits while another suspect is out) and hands out
    /// the ones behind it, this stops before it: the messages returned are always the
    /// queue's next ones. For consumers that must keep the queue's order, such as a
    /// forwarder to another system; after a restart they get the suspects one at a time.
    pub fn lease_in_order(&self, max: usize, visibility: Duration) -> Result<Vec<Message>> {
        Ok(self.lease_inner(max, visibility, &[], Mode::Lease, true)?.0)
    }

    /// Acknowledges `done` and leases up to `max` more messages in one write sharing one
    /// fsync: a consumer's loop at half the durable cost of [`Queue::ack`] then
    /// [`Queue::lease`]. If the ack is refused (the lease was lost), nothing is leased.
    pub fn ack_and_lease(&self, done: &Message, max: usize) -> Result<Vec<Message>> {
        let vis = self.store.queue_options(self.id).visibility_timeout;
        Ok(self
            .lease_inner(max, vis, std::slice::from_ref(done), Mode::Lease, false)?
            .0)
    }

    /// Reserves up to `max` visible messages for a consumer that handles them one after
    /// the other, waiting up to `timeout` for the first. Like a lease, each reservation is
    /// a delivery counted in the log before this returns (durable under
    /// `Durability::Always`); unlike a lease, one whose handler has not started
    /// ([`Queue::start`]) when the process dies, or when its lease ends or it is released,
    /// is taken back: ready again, its delivery uncounted, not a suspect. So a batch
    /// reserved together with a message that kills the process does not share its blame.
    ///
    /// It waits once: a wake-up (a commit, the next retry coming due, or
    /// [`Store::wake_consumers`](crate::Store::wake_consumers)) ends the wait, and the
    /// answer may then be empty before `timeout`. That is how a stopping worker pool gets
    /// its idle workers back at once instead of after their poll interval.
    pub fn reserve_wait(&self, max: usize, timeout: Duration) -> Result<Vec<Message>> {
        let vis = self.store.queue_options(self.id).visibility_timeout;
        let give_up = Instant::now() + timeout;
        let (got, _) = self.lease_inner(max, vis, &[], Mode::Reserve, false)?;
        if !got.is_empty() || !self.wait_visible(give_up) {
            return Ok(got);
        }
        Ok(self.lease_inner(max, vis, &[], Mode::Reserve, false)?.0)
    }

    /// Acknowledges `done` and reserves up to `max` more messages (see
    /// [`Queue::reserve_wait`]) in one write sharing one fsync. An ack refused because its
    /// lease was lost (the message was redelivered meanwhile) is skipped and counted in
    /// the second value; the others stand.
    pub fn ack_and_reserve(&self, done: &[Message], max: usize) -> Result<(Vec<Message>, u64)> {
        let vis = self.store.queue_options(self.id).visibility_timeout;
        self.lease_inner(max, vis, done, Mode::Reserve, false)
    }

    /// Starts the handler of `next`, a reserved message, and acknowledges `done` in the
    /// same write. From here `next`'s delivery stands, as a lease's does. The write
    /// reaches the operating system before this returns (under `Durability::Always`; it
    /// is not fsynced: the reservation was, and what the start guards against is the
    /// process dying, which leaves what the operating system holds), so a handler that
    /// kills the process is counted. Returns the acks refused because their lease was
    /// lost, and whether `next` could start (false: its reservation ended meanwhile).
    pub fn start(&self, next: &Message, done: &[Message]) -> Result<(u64, bool)> {
        let (lost, started) = self.start_all(std::slice::from_ref(next), done)?;
        Ok((lost, started.first().copied().unwrap_or(false)))
    }

    /// Starts the handlers of several reserved messages at once (one record), as
    /// [`Queue::start`] does for one: the async pool, whose handlers run concurrently.
    /// Returns the acks refused and, per message, whether it could start.
    pub(crate) fn start_all(&self, next: &[Message], done: &[Message]) -> Result<(u64, Vec<bool>)> {
        let now = self.store.now();
        let (outcome, _) = self.store.commit_as(Settle::Written, |st| {
            let (mut batch, lost) = self.ack_entries(st, done, now)?;
            let started: Vec<bool> = next
                .iter()
                .map(|m| {
                    self.check_lease(st, m).is_ok()
                        && st.extras.get(&m.id).is_some_and(|e| e.awaiting_start)
                })
                .collect();
            let ids: Vec<MessageId> = next
                .iter()
                .zip(&started)
                .filter(|(_, &ok)| ok)
                .map(|(m, _)| m.id)
                .collect();
            if !ids.is_empty() {
                batch.push(op_entry(Op::Start { at: now, ids })?);
            }
            Ok((batch, (lost, started)))
        })?;
        Ok(outcome)
    }

    /// Gives reserved messages whose handler has not started back: ready again at once,
    /// their delivery uncounted. Messages whose reservation already ended are skipped.
    pub fn release_unstarted(&self, msgs: &[Message]) -> Result<()> {
        let now = self.store.now();
        self.store.commit_with(|st| {
            let mut batch: Batch<'static> = Vec::new();
            for m in msgs {
                if self.check_lease(st, m).is_ok()
                    && st.extras.get(&m.id).is_some_and(|e| e.awaiting_start)
                {
                    batch.push(op_entry(Op::Release {
                        id: m.id,
                        visible_at: now,
                    })?);
                }
            }
            Ok((batch, ()))
        })
    }

    /// The ack record of `done` (none when empty), skipping the messages whose lease was
    /// lost, and their number.
    fn ack_entries(&self, st: &State, done: &[Message], now: u64) -> Result<(Batch<'static>, u64)> {
        let ids: Vec<MessageId> = done
            .iter()
            .filter(|m| self.check_lease(st, m).is_ok())
            .map(|m| m.id)
            .collect();
        let lost = (done.len() - ids.len()) as u64;
        let batch = if ids.is_empty() {
            Vec::new()
        } else {
            vec![op_entry(Op::Ack { at: now, ids })?]
        };
        Ok((batch, lost))
    }

    /// Waits until a message of this queue may be visible or `give_up`; false once
    /// `give_up` has passed.
    fn wait_visible(&self, give_up: Instant) -> bool {
        let mut st = self.store.engine().lock();
        let Some((until, wait)) = self.next_look(&st, give_up) else {
            return false;
        };
        if wait {
            self.store.engine().wait_ready(&mut st, until);
        }
        true
    }

    /// When a consumer that found nothing looks again, unless a wake-up comes first: the
    /// time the queue's next message becomes visible (at most a minute away), never past
    /// `give_up`; `None` once `give_up` has passed. The flag is false when a message is
    /// visible now (one held back, a suspect while another is out): no wait is needed.
    pub(crate) fn next_look(&self, st: &State, give_up: Instant) -> Option<(Instant, bool)> {
        let now_instant = Instant::now();
        if now_instant >= give_up {
            return None;
        }
        let now = self.store.now();
        let wait_ms = st
            .next_visible_at(self.id)
            .map(|t| t.saturating_sub(now))
            .unwrap_or(u64::MAX);
        let until = give_up.min(now_instant + Duration::from_millis(wait_ms.clamp(1, 60_000)));
        Some((until, wait_ms > 0))
    }

    /// Leases (or reserves) up to `max` messages after acknowledging `acks`, in one write.
    /// Under [`Mode::Lease`] an ack whose lease was lost refuses the whole call; under
    /// [`Mode::Reserve`] it is skipped and counted (the second value).
    fn lease_inner(
        &self,
        max: usize,
        visibility: Duration,
        acks: &[Message],
        mode: Mode,
        in_order: bool,
    ) -> Result<(Vec<Message>, u64)> {
        if max == 0 && acks.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let now = self.store.now();
        let options = self.store.queue_options(self.id);
        let deadline = now + visibility.as_millis().max(1) as u64;
        let mut st = self.store.engine().lock();
        if mode == Mode::Lease {
            for done in acks {
                self.check_lease(&st, done)?;
            }
        }
        let (mut batch, lost) = self.ack_entries(&st, acks, now)?;
        st.expire_leases(self.id, now);
        let mut ids = Vec::new();
        // The message acked in this write is taken already: if its lease just expired (it
        // was acked late but before anyone else took it), it is ready now in the index, and
        // leasing it again here would spend a slot on a message the ack removes.
        // A set: a batch of acks and a batch of reservations would make a list quadratic.
        let mut popped: IdHashSet<MessageId> = acks.iter().map(|m| m.id).collect();
        let mut held_back = Vec::new();
        // The messages acked in this write are no longer in flight.
        let mut suspect_busy = st.suspect_in_flight(self.id, |id| popped.contains(&id));
        while ids.len() < max {
            let Some(id) = st.pop_visible(self.id, now) else {
                break;
            };
            if !popped.insert(id) {
                // A second ready-list entry of a message taken in this call.
                continue;
            }
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
            if m.place() == Place::ReadyAfterLostLease && m.attempts >= options.max_attempts {
                let (n, max) = (m.attempts, options.max_attempts);
                let failure = if extra.is_some_and(|e| e.lease_cut_by_restart) {
                    let why = "(no ack or failure was reported)";
                    let text = format!("the process died during delivery {n} of {max} {why}");
                    Failure::transient("ConsumerDied", text)
                } else {
                    let why = "ended without an ack or failure before its lease expired";
                    Failure::transient("LeaseExpired", format!("delivery {n} of {max} {why}"))
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
            let (at, ids) = (now, ids.clone());
            batch.push(op_entry(match mode {
                Mode::Lease => Op::Lease { at, deadline, ids },
                Mode::Reserve => Op::Reserve { at, deadline, ids },
            })?);
        }
        if batch.is_empty() {
            return Ok((Vec::new(), lost));
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
        self.store.finish(Settle::Durable, effects)?;
        let msgs = leased
            .into_iter()
            .map(|(id, m, generation)| self.load_message(id, m, generation, now))
            .collect::<Result<_>>()?;
        Ok((msgs, lost))
    }

    /// Like [`Queue::lease`], but waits up to `timeout` for a message to become visible.
    pub fn lease_wait(&self, max: usize, timeout: Duration) -> Result<Vec<Message>> {
        let vis = self.store.queue_options(self.id).visibility_timeout;
        let give_up = Instant::now() + timeout;
        loop {
            let got = self.lease_for(max, vis)?;
            if !got.is_empty() || !self.wait_visible(give_up) {
                return Ok(got);
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
            _ => return Err(bad_content(m.payload_pos)),
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
                if m.place() == Place::Leased
                    && m.attempts == msg.attempt
                    && m.queue() == self.id
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
