//! A `--error-kind` that matched nothing while a DLQ holds a kind equal to it but for case
//! (`timeout` for `Timeout`): error kinds match exactly, so the command says so and lists
//! the error kinds of the DLQs concerned, instead of only "no matching DLQ entries".

use std::collections::BTreeMap;

use deadletter::DeadLetterQueue;
use serde_json::{json, Value};

use crate::error::CliError;

/// What to tell about a `--error-kind` that matched nothing because of case.
#[derive(Debug, Clone)]
pub struct KindHint {
    /// The kind typed.
    pub typed: String,
    /// The kinds equal to it but for case, in the DLQs' order.
    pub near: Vec<String>,
    /// Each DLQ holding one of them, with the number of entries of each of its kinds.
    pub dlqs: Vec<(String, BTreeMap<String, u64>)>,
}

/// The hint for `typed` (the selection's `--error-kind`, if any) over `dlqs`, the DLQs the
/// command selected, when one of them holds a kind differing from it only in case. The
/// caller asks only when the selection came out empty.
pub fn hint<'a, D, I>(typed: Option<&str>, dlqs: I) -> Result<Option<KindHint>, CliError>
where
    D: DeadLetterQueue + 'a,
    I: IntoIterator<Item = &'a D>,
{
    let Some(typed) = typed else {
        return Ok(None);
    };
    let lower = typed.to_lowercase();
    let mut out = KindHint {
        typed: typed.to_string(),
        near: Vec::new(),
        dlqs: Vec::new(),
    };
    for dlq in dlqs {
        let kinds = dlq.stats()?.by_error_kind;
        let near: Vec<&String> = kinds
            .keys()
            .filter(|k| k.as_str() != typed && k.to_lowercase() == lower)
            .collect();
        if near.is_empty() {
            continue;
        }
        for k in near {
            if !out.near.contains(k) {
                out.near.push(k.clone());
            }
        }
        out.dlqs.push((dlq.name(), kinds));
    }
    Ok((!out.near.is_empty()).then_some(out))
}

impl KindHint {
    /// The nearest kind: the first one equal but for case.
    pub fn suggestion(&self) -> Option<&str> {
        self.near.first().map(String::as_str)
    }

    /// The hint in words, one sentence: `no entry has error kind "timeout"; error kinds
    /// match exactly, and "Timeout" differs only in case; the error kinds of orders-dlq:
    /// InvalidPayload (2), Timeout (1)`.
    pub fn sentence(&self) -> String {
        let near: Vec<String> = self.near.iter().map(|k| format!("{k:?}")).collect();
        let (them, differ) = if near.len() == 1 {
            (near[0].clone(), "differs")
        } else {
            (near.join(", "), "differ")
        };
        let mut text = format!(
            "no entry has error kind {:?}; error kinds match exactly, and {them} {differ} \
             only in case",
            self.typed
        );
        for (dlq, kinds) in &self.dlqs {
            let list: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} ({n})")).collect();
            text.push_str(&format!("; the error kinds of {dlq}: {}", list.join(", ")));
        }
        text
    }

    /// The `error_kind_hint` field of a command's JSON: the kind typed, the suggestion,
    /// and the known kinds (with their counts) of each DLQ concerned.
    pub fn to_json(&self) -> Value {
        let known: serde_json::Map<String, Value> = self
            .dlqs
            .iter()
            .map(|(dlq, kinds)| (dlq.clone(), json!(kinds)))
            .collect();
        json!({
            "error_kind": self.typed,
            "suggestion": self.suggestion(),
            "differs_only_in_case": self.near,
            "known": known,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(near: &[&str]) -> KindHint {
        let kinds: BTreeMap<String, u64> =
            [("InvalidPayload".to_string(), 2), ("Timeout".into(), 1)]
                .into_iter()
                .collect();
        KindHint {
            typed: "timeout".into(),
            near: near.iter().map(|s| s.to_string()).collect(),
            dlqs: vec![("orders-dlq".into(), kinds)],
        }
    }

    #[test]
    fn sentence_names_the_kind_and_lists_the_known_ones() {
        let h = sample(&["Timeout"]);
        assert_eq!(
            h.sentence(),
            "no entry has error kind \"timeout\"; error kinds match exactly, and \"Timeout\" \
             differs only in case; the error kinds of orders-dlq: InvalidPayload (2), \
             Timeout (1)"
        );
        assert_eq!(h.to_json()["suggestion"], "Timeout");
        assert_eq!(h.to_json()["known"]["orders-dlq"]["Timeout"], 1);
        let two = sample(&["Timeout", "TIMEOUT"]);
        assert!(two
            .sentence()
            .contains("\"Timeout\", \"TIMEOUT\" differ only"));
    }
}
