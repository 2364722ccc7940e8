//! Queue and DLQ names the store (or namespace) does not know: refused with the nearest
//! known name ("did you mean") and every known one, and new queues created only when
//! asked (`--create`).
//!
//! The edit distance and the rule for what counts as near are the dashboard's
//! (`deadletter_dashboard::suggest`), so the command and the dashboard suggest alike.

use deadletter::queue::NameProblem;
use deadletter::{DeadLetterQueue, Error};
use deadletter_dashboard::suggest;
use deadletter_dashboard::Source;

use crate::error::{CliError, Unknown};

/// The known queues and, beside them, every queue and DLQ name a typed name may be a slip
/// of.
fn known_names<S: Source>(source: &S) -> Result<(Vec<String>, Vec<String>), CliError> {
    let queues = source.queue_names()?;
    let mut candidates = queues.clone();
    for q in &queues {
        candidates.push(source.dlq(q)?.name());
    }
    Ok((queues, candidates))
}

/// ` (did you mean "orders"?)`, or, with nothing near, the known queues when they are few.
fn hint(suggestion: Option<&str>, known: &[String]) -> String {
    match suggestion {
        Some(s) => format!(" (did you mean {s:?}?)"),
        None if known.is_empty() => " (the store has no queue yet)".to_string(),
        None if known.len() <= 8 => format!(" (the queues are: {})", known.join(", ")),
        None => " (`deadletter stats` lists the queues)".to_string(),
    }
}

/// The error for `name`, a queue or DLQ name that `source` does not know, looked up (by
/// `--queue`).
pub fn unknown_dlq<S: Source>(source: &S, name: &str) -> CliError {
    let (known, candidates) = match known_names(source) {
        Ok(k) => k,
        Err(e) => return e,
    };
    refusal(name, known, &candidates, |hint| {
        format!("unknown queue {name:?}{hint}")
    })
}

/// The refusal of `name`: the nearest of `candidates` suggested, the `known` queues listed,
/// and the sentence `sentence` builds around that hint.
fn refusal(
    name: &str,
    known: Vec<String>,
    candidates: &[String],
    sentence: impl FnOnce(&str) -> String,
) -> CliError {
    let suggestion = suggest::nearest(name, candidates.iter().map(String::as_str));
    let message = sentence(&hint(suggestion, &known));
    let suggestion = suggestion.map(str::to_string);
    Unknown::new(name.to_string(), suggestion, known, message).into()
}

/// The DLQ `name` names (a queue or DLQ name), or [`CliError::UnknownQueue`] with the
/// nearest known name.
pub fn dlq<S: Source>(source: &S, name: &str) -> Result<S::Dlq, CliError> {
    match source.dlq(name) {
        Ok(d) => Ok(d),
        Err(Error::UnknownQueue(_)) => Err(unknown_dlq(source, name)),
        Err(e) => Err(e.into()),
    }
}

/// Checks `name` as the queue a command writes into (`verb` says how, such as "replay
/// into"): a known queue is `Ok(false)`; an unknown one is `Ok(true)` (it is to be
/// created) with `create`, and otherwise refused with the nearest known name. A name
/// no new queue may have, or one taken by a DLQ, is refused as the store would refuse it,
/// whatever `create`.
pub fn target<S: Source>(
    source: &S,
    name: &str,
    verb: &str,
    create: bool,
) -> Result<bool, CliError> {
    // A known queue, the common case: no DLQ is looked up.
    if source.queue_names()?.iter().any(|q| q == name) {
        return Ok(false);
    }
    let (known, candidates) = known_names(source)?;
    if let Some(problem) = NameProblem::of(name) {
        return Err(Error::InvalidQueueName {
            name: name.to_string(),
            problem,
        }
        .into());
    }
    // A DLQ's name: the store refuses it as a new queue's name.
    if let Some(pos) = candidates[known.len()..].iter().position(|d| d == name) {
        return Err(Error::NameClash {
            name: name.to_string(),
            existing: known[pos].clone(),
        }
        .into());
    }
    if create {
        return Ok(true);
    }
    // Only queues are targets: suggest among them.
    let candidates = known.clone();
    Err(missing_target(name, verb, known, &candidates))
}

/// The refusal of `name` as the queue to `verb`, suggesting the nearest of `candidates`
/// and listing the `known` queues.
fn missing_target(name: &str, verb: &str, known: Vec<String>, candidates: &[String]) -> CliError {
    refusal(name, known, candidates, |hint| {
        format!(
            "there is no queue {name:?} to {verb}{hint}; check the name, or pass --create \
             to create it"
        )
    })
}

/// Checks `name` as the DLQ an import writes into (a queue or DLQ name, as the importer
/// resolves it): `Ok(false)` when it exists, `Ok(true)` when its queue is to be created
/// (`create`), and otherwise refused with the nearest known name.
pub fn import_target<S: Source>(source: &S, name: &str, create: bool) -> Result<bool, CliError> {
    match source.dlq(name) {
        Ok(_) => Ok(false),
        Err(Error::UnknownQueue(_)) if create => Ok(true),
        Err(Error::UnknownQueue(_)) => {
            let (known, candidates) = known_names(source)?;
            Err(missing_target(name, "import into", known, &candidates))
        }
        Err(e) => Err(e.into()),
    }
}

/// What a command created because of `--create`: a store, queues.
#[derive(Debug, Clone, Default)]
pub struct Created {
    /// The store directory, when the command created the store.
    pub store: Option<String>,
    /// The queues it created, in the order it did.
    pub queues: Vec<String>,
}

impl Created {
    /// Says on stderr what was created, one line each, unless the output is JSON (where
    /// the command's document says it in its `created` field, [`Created::to_json`]).
    pub fn say(&self, json: bool) {
        if json {
            return;
        }
        if let Some(dir) = &self.store {
            eprintln!("created store {dir}");
        }
        for q in &self.queues {
            eprintln!("created queue {q}");
        }
    }

    /// The `created` field: `{"store": DIR or null, "queues": [...]}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "store": self.store, "queues": self.queues })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints() {
        let known = vec!["orders".to_string(), "emails".to_string()];
        assert_eq!(hint(Some("orders"), &known), " (did you mean \"orders\"?)");
        assert_eq!(hint(None, &known), " (the queues are: orders, emails)");
        assert_eq!(hint(None, &[]), " (the store has no queue yet)");
        let many: Vec<String> = (0..9).map(|i| format!("q{i}")).collect();
        assert!(hint(None, &many).contains("deadletter stats"));
    }
}
