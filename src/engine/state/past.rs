//! A DLQ as it was at a past time, from what the index keeps: the lineage of every message
//! still in the store that was in a DLQ (every DLQ entry has one), and the tombstones of
//! those gone.
//!
//! An entry was in the DLQ of queue `q` at time `t` when a step at or before `t` put it
//! there (a dead-lettering, an import) and no step at or before `t` took it out (a replay,
//! a removal). Its status then is that of the last mark at or before `t`. The answer is
//! exact for every `t` at or after the audit log's horizon (see
//! [`super::AuditLog::horizon`]); the caller refuses earlier times.

use super::{DeadStatus, Event, Failed, Lineage, State};
use crate::engine::envelope::MessageId;
use crate::engine::record::QueueId;

/// One entry of a DLQ at a past time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PastEntry {
    /// Its id.
    pub id: MessageId,
    /// What its lineage kept of the failure that put it there.
    pub failed: Failed,
    /// Its status at that time.
    pub status: DeadStatus,
}

/// Where a lineage left its message at time `t`: in the DLQ of its last failure's queue
/// (with its status), or not in a DLQ.
fn at_time(lineage: &Lineage, t: u64) -> Option<(&Failed, DeadStatus)> {
    let mut open: Option<(&Failed, DeadStatus)> = None;
    for step in &lineage.steps {
        if step.at > t {
            break;
        }
        match &step.event {
            Event::DeadLettered(f) | Event::Imported { failed: f, .. } => {
                open = Some((&**f, DeadStatus::Pending));
            }
            Event::Replayed { .. } | Event::Removed(_) => open = None,
            Event::Marked { success } => {
                if let Some((_, status)) = open.as_mut() {
                    *status = DeadStatus::Reprocessed(*success, step.at);
                }
            }
        }
    }
    open
}

impl State {
    /// The entries of `queue`'s DLQ at time `t`, in browse order (dead-lettering time, id).
    pub fn dlq_as_of(&self, queue: QueueId, t: u64) -> Vec<PastEntry> {
        let mut out = Vec::new();
        let mut take = |id: MessageId, lineage: &Lineage| {
            if let Some((failed, status)) = at_time(lineage, t).filter(|(f, _)| f.queue == queue) {
                out.push(PastEntry {
                    id,
                    failed: failed.clone(),
                    status,
                });
            }
        };
        for (id, lineage) in self.audit.lineages() {
            take(id, lineage);
        }
        for tombstone in self.audit.tombstones() {
            take(tombstone.id, &tombstone.lineage);
        }
        out.sort_by_key(|e| (e.failed.dead_at, e.id));
        out
    }
}
