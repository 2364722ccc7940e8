//! A DLQ as it was at a past time, from what the index keeps: the lineage of every message
//! still in the store that was in a DLQ, the tombstones of those gone, and, for DLQ entries
//! restored from a checkpoint that kept no lineage (format version 4 or older), their index
//! entries.
//!
//! An entry was in the DLQ of queue `q` at time `t` when a step at or before `t` put it
//! there (a dead-lettering, an import) and no step at or before `t` took it out (a replay,
//! a removal). Its status then is that of the last mark at or before `t`. The answer is
//! exact for every `t` at or after the audit log's horizon (see
//! [`super::AuditLog::horizon`]); the caller refuses earlier times.

use super::{DeadStatus, Event, Failed, Lineage, Place, State};
use crate::engine::envelope::MessageId;
use crate::engine::fingerprint::Fingerprint;
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
    /// For an entry still in the DLQ whose message the index does not hold (restored from
    /// an older checkpoint, which kept no lineage): its envelope, which holds it.
    pub envelope_pos: Option<u64>,
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
            if let Some((failed, status)) = at_time(lineage, t) {
                if failed.queue == queue {
                    out.push(PastEntry {
                        id,
                        failed: failed.clone(),
                        status,
                        envelope_pos: self.envelope_of(id, failed),
                    });
                }
            }
        };
        for (id, lineage) in self.audit.lineages() {
            take(id, lineage);
        }
        for tombstone in self.audit.tombstones() {
            take(tombstone.id, &tombstone.lineage);
        }
        // Entries restored from a checkpoint without lineage, still in the DLQ: there
        // since their dead-lettering.
        if let Some(q) = self.queues.get(queue as usize) {
            for (&(dead_at, id), _) in q.dlq_order.range(..(t.saturating_add(1), 0)) {
                if self.audit.knows(id) {
                    continue;
                }
                let (Some(info), Some(m)) = (self.dead.get(&id), self.msgs.get(&id)) else {
                    continue;
                };
                if m.place() != Place::Dead {
                    continue;
                }
                let status = match info.status {
                    DeadStatus::Reprocessed(_, at) if at > t => DeadStatus::Pending,
                    s => s,
                };
                let kind = self.strings.name(info.kind).to_string();
                let worker = (info.worker != 0).then(|| self.strings.name(info.worker).to_string());
                let fingerprint = self
                    .fingerprints
                    .of(id)
                    .map_or_else(|| Fingerprint::compute(&kind, "", None, 0), |d| d.id);
                out.push(PastEntry {
                    id,
                    failed: Failed {
                        queue,
                        generation: self.extras.get(&id).map_or(0, |e| e.generation),
                        attempts: m.attempts,
                        first_received_at: self.extras.get(&id).and_then(|e| e.first_received_at),
                        error_kind: kind,
                        message: String::new(),
                        fingerprint,
                        worker,
                        dead_at,
                    },
                    status,
                    envelope_pos: Some(info.envelope_pos),
                });
            }
        }
        out.sort_by_key(|e| (e.failed.dead_at, e.id));
        out
    }

    /// The envelope to read `failed`'s message from: only for a lineage begun without it
    /// (from an older checkpoint's index entry, whose message is not in the index) while
    /// that entry is still in its DLQ. Once such an entry has left, its message is gone.
    fn envelope_of(&self, id: MessageId, failed: &Failed) -> Option<u64> {
        if !failed.message.is_empty() {
            return None;
        }
        let info = self.dead.get(&id)?;
        let m = self.msgs.get(&id)?;
        (m.queue() == failed.queue && info.dead_at == failed.dead_at).then_some(info.envelope_pos)
    }
}
