//! Compaction's view of the index: every log record the index points to, and whether it
//! still does.

use super::State;
use crate::engine::envelope::MessageId;

impl State {
    /// Every log record the index points to, with what points to it: the records
    /// compaction must keep (or relocate) for the index to stay readable.
    pub fn live_refs(&self) -> Vec<LiveRef> {
        let mut refs = Vec::with_capacity(self.msgs.len() + self.dead.len());
        for (id, m) in self.msgs.iter() {
            refs.push(LiveRef {
                pos: m.payload_pos,
                id,
                kind: RefKind::Payload,
            });
        }
        for (&id, d) in &self.dead {
            refs.push(LiveRef {
                pos: d.envelope_pos,
                id,
                kind: RefKind::Envelope,
            });
        }
        for (&id, e) in &self.extras {
            if let Some(pos) = e.history_pos {
                refs.push(LiveRef {
                    pos,
                    id,
                    kind: RefKind::History,
                });
            }
        }
        refs
    }

    /// True while the index still points to `r.pos` as `r` says.
    pub fn still_refers(&self, r: &LiveRef) -> bool {
        match r.kind {
            RefKind::Payload => self.msgs.get(&r.id).is_some_and(|m| m.payload_pos == r.pos),
            RefKind::Envelope => self
                .dead
                .get(&r.id)
                .is_some_and(|d| d.envelope_pos == r.pos),
            RefKind::History => self
                .extras
                .get(&r.id)
                .is_some_and(|e| e.history_pos == Some(r.pos)),
        }
    }
}

/// What points to a live record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefKind {
    /// A message's payload record.
    Payload,
    /// A DLQ entry's envelope (its dead-letter record).
    Envelope,
    /// A message's failure history (its latest retry record).
    History,
}

/// A live record and the message that needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveRef {
    /// The record's position.
    pub pos: u64,
    /// The message.
    pub id: MessageId,
    /// How the message uses it.
    pub kind: RefKind,
}
