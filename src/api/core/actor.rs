//! Who makes a change to a DLQ, for the audit trail: an [`Actor`] travels with a
//! [`Store`](crate::Store) handle (and the queue and DLQ handles made from it), and every
//! operator's change (replay, delete, purge, import, mark reprocessed) writes it in an
//! audit record after the change's own records.
//! [`Store::audit_trail`](crate::Store::audit_trail) lists the trail.
//!
//! Invariant: an actor's name is 1 to 256 bytes without control characters, so that it
//! prints on one line of a table and fits any record.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::engine::state::STORE_ACTOR;
use crate::error::{Error, Result};

/// Longest actor name, in bytes.
const MAX_ACTOR_BYTES: usize = 256;

/// Who makes a change: `user@host` for the command-line tool, a token's name for the
/// dashboard, what a library caller sets (`library` by default), `store` for what the
/// store does on its own (retention, TTL).
///
/// ```
/// use deadletter::audit::Actor;
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
