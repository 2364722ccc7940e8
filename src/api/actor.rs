//! Who makes a change to a DLQ, for the audit trail: an [`Actor`] travels with a
//! [`Store`] handle (and the queue and DLQ handles made from it), and every operator's
//! change (replay, delete, purge, import, mark reprocessed) writes it in an audit record
//! after the change's own records. [`Store::audit_trail`] lists the trail.
//!
//! Invariant: an actor's name is 1 to 256 bytes without control characters, so that it
//! prints on one line of a table and fits any record.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::api::store::Store;
use crate::api::types::MessageId;
use crate::engine::op_entry;
use crate::engine::record::{Decoded, Op};
use crate::engine::state::{AuditAction, AuditEntry, IdSet, STORE_ACTOR};
use crate::error::{Error, Result};

/// Longest actor name, in bytes.
const MAX_ACTOR_BYTES: usize = 256;

/// Who makes a change: `user@host` for the command-line tool, a token's name for the
/// dashboard, what a library caller sets (`library` by default), `store` for what the
/// store does on its own (retention, TTL).
///
/// ```
/// use deadletter::Actor;
///
/// assert_eq!(Actor::new("ana@ops-1").unwrap().name(), "ana@ops-1");
/// assert_eq!(Actor::library().name(), "library");
/// assert!(Actor::new("").is_err());
/// assert!(Actor::new("two\nlines").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Actor(Arc<str>);

impl Actor {
    /// An actor named `name`; [`Error::InvalidActor`] unless it is 1 to 256 bytes without
    /// control characters.
    pub fn new(name: impl Into<String>) -> Result<Actor> {
        let name = name.into();
        if name.is_empty() || name.len() > MAX_ACTOR_BYTES || name.chars().any(char::is_control) {
            return Err(Error::InvalidActor(name));
        }
        Ok(Actor(name.into()))
    }

    /// A library caller that set no actor: `library`.
    pub fn library() -> Actor {
        Actor(Arc::from("library"))
    }

    /// The store itself (retention, TTL): `store`.
    pub fn store() -> Actor {
        Actor(Arc::from(STORE_ACTOR))
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Actor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Actor {
    type Error = Error;
    fn try_from(name: String) -> Result<Actor> {
        Actor::new(name)
    }
}

impl From<Actor> for String {
    fn from(a: Actor) -> String {
        a.0.to_string()
    }
}

impl Store {
    /// This store, as a handle whose changes to DLQs (and those of the queue, DLQ and
    /// importer handles made from it) are recorded as made by `actor`. Handles share
    /// everything else.
    pub fn with_actor(&self, actor: Actor) -> Store {
        let mut store = self.clone();
        store.actor = actor;
        store
    }

    /// Who this handle's changes are recorded as.
    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    /// The audit record of a change to `ids` made at `at` by this handle's actor: the last
    /// record of the change's batch.
    pub(crate) fn audit_record<'a>(
        &self,
        at: u64,
        action: AuditAction,
        ids: &[MessageId],
    ) -> Result<(Vec<u8>, Decoded<'a>)> {
        let entry = AuditEntry::new(at, self.actor.name(), action, IdSet::of(ids));
        op_entry(Op::Audit(entry))
    }

    /// The earliest time (ms) from which the store still knows every DLQ entry: what left
    /// a DLQ before it may be forgotten (tombstone and lineage limits,
    /// [`crate::Config::audit`]).
    pub fn audit_horizon(&self) -> u64 {
        self.engine().lock().audit.horizon()
    }

    /// The audit trail, oldest first: the last `limit` changes operators and the store
    /// made to DLQs, within what the store keeps ([`crate::Config::audit`]).
    pub fn audit_trail(&self, limit: usize) -> Vec<AuditEntry> {
        let st = self.engine().lock();
        let mut newest: Vec<AuditEntry> = st.audit.trail().rev().take(limit).cloned().collect();
        newest.reverse();
        newest
    }
}
