//! Compaction's view of the index: every log record the index points to, and whether it
//! still does.

use super::State;
use crate::engine::envelope::MessageId;

impl State {
    /// Every log record the index points to, with what points to it, by position: the
    /// records compaction must keep (or relocate) for the index to stay readable. A record
    /// may be referred to more than once (an imported DLQ entry's payload record is also
    /// its envelope, and the history of a message replayed from it): compaction counts,
    /// and copies, it once.
    pub fn live_refs(&self) -> Vec<LiveRef> {
        let r = |pos, id, kind| LiveRef { pos, id, kind };
        let mut refs = Vec::with_capacity(self.msgs.len() + self.dead.len());
        refs.extend(
            self.msgs
                .iter()
                .map(|(id, m)| r(m.payload_pos, id, RefKind::Payload)),
        );
        refs.extend(
            self.dead
                .iter()
                .map(|(&id, d)| r(d.envelope_pos, id, RefKind::Envelope)),
        );
        let histories = self
            .extras
            .iter()
            .filter_map(|(&id, e)| Some((e.history_pos?, id)));
        refs.extend(histories.map(|(pos, id)| r(pos, id, RefKind::History)));
        refs.sort_unstable_by_key(|r| r.pos);
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
