//! What a list request selects: the filter keys shared by a query string and a JSON body
//! ([`FilterSpec`]), and the page cursors of the list (`after` / `before`).
//!
//! A cursor names a place in the DLQ's browse order, `{dead_lettered_at_ms}-{id}`: it stays
//! right when the entry it was taken from, or any other, is replayed, deleted or added
//! between two page loads (a keyset, [`deadletter::dlq::Cursor`]).

use std::collections::BTreeMap;

use serde::Deserialize;

use deadletter::dlq::Cursor;
use deadletter::Filter;

/// Which entries: the same keys in a query string and in a JSON body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct FilterSpec {
    /// Error kind, exactly.
    pub error_kind: Option<String>,
    /// A substring of the error message.
    pub message: Option<String>,
    /// A substring of the payload (its UTF-8 text).
    pub payload: Option<String>,
    /// Dead-lettered at or after (ms).
    pub since_ms: Option<u64>,
    /// Dead-lettered before (ms).
    pub until_ms: Option<u64>,
    /// At least this many deliveries.
    pub min_attempts: Option<u32>,
    /// At most this many deliveries.
    pub max_attempts: Option<u32>,
    /// `pending`, `reprocessed`, or `any` (the default).
    pub status: Option<String>,
    /// Worker name, exactly.
    pub worker: Option<String>,
    /// Attributes that must all be present with these values (`attr.KEY=VALUE` in a query).
    pub attributes: BTreeMap<String, String>,
    /// Tags that must all be present with these values (`tag.KEY=VALUE` in a query).
    pub tags: BTreeMap<String, String>,
    /// Failure fingerprint, 16 hex digits as `analyze` and the summaries give it.
    pub fingerprint: Option<String>,
}

/// A list request: the filter, the page's cursor and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListQuery {
    pub spec: FilterSpec,
    /// Entries after this place (`after=`).
    pub after: Option<Cursor>,
    /// Entries before this place (`before=`): the previous page.
    pub before: Option<Cursor>,
    pub limit: usize,
}

/// The text form of a cursor: `{dead_lettered_at_ms}-{id}`.
pub(crate) fn cursor_text(c: &Cursor) -> String {
    format!("{}-{}", c.dead_lettered_at_ms, c.id)
}

/// Reads a cursor written by [`cursor_text`].
pub(crate) fn parse_cursor(key: &str, text: &str) -> Result<Cursor, String> {
    let bad = || format!("{key}={text:?} is not a cursor (AT_MS-ID, as next_cursor gives)");
    let (at, id) = text.split_once('-').ok_or_else(bad)?;
    Ok(Cursor {
        dead_lettered_at_ms: at.parse().map_err(|_| bad())?,
        id: id.parse().map_err(|_| bad())?,
    })
}

impl FilterSpec {
    /// The keys given, in words (`error_kind=Timeout, fingerprint=...`), or `every entry`.
    pub(crate) fn describe(&self) -> String {
        let mut parts = Vec::new();
        let mut add = |key: &str, value: Option<String>| {
            if let Some(v) = value.filter(|v| !v.is_empty()) {
                parts.push(format!("{key}={v}"));
            }
        };
        add("error_kind", self.error_kind.clone());
        add("message", self.message.clone());
        add("payload", self.payload.clone());
        add("since_ms", self.since_ms.map(|t| t.to_string()));
        add("until_ms", self.until_ms.map(|t| t.to_string()));
        add("min_attempts", self.min_attempts.map(|n| n.to_string()));
        add("max_attempts", self.max_attempts.map(|n| n.to_string()));
        add("status", self.status.clone());
        add("worker", self.worker.clone());
        for (k, v) in &self.attributes {
            add(&format!("attr.{k}"), Some(v.clone()));
        }
        for (k, v) in &self.tags {
            add(&format!("tag.{k}"), Some(v.clone()));
        }
        add("fingerprint", self.fingerprint.clone());
        if parts.is_empty() {
            "every entry".into()
        } else {
            parts.join(", ")
        }
    }

    /// The library filter, or why the spec is not valid.
    pub(crate) fn to_filter(&self) -> Result<Filter, String> {
        let mut f = Filter::all();
        f.error_kind = self.error_kind.clone().filter(|s| !s.is_empty());
        f.message_contains = self.message.clone().filter(|s| !s.is_empty());
        f.payload_contains = self.payload.clone().filter(|s| !s.is_empty());
        f.since_ms = self.since_ms;
        f.until_ms = self.until_ms;
        f.min_attempts = self.min_attempts;
        f.max_attempts = self.max_attempts;
        f.worker = self.worker.clone().filter(|s| !s.is_empty());
        f.attributes = self.attributes.clone();
        f.tags = self.tags.clone();
        f.fingerprint = match self.fingerprint.as_deref() {
            None | Some("") => None,
            Some(text) => Some(text.parse().map_err(|e| format!("fingerprint: {e}"))?),
        };
        f.pending = match self.status.as_deref() {
            None | Some("") | Some("any") => None,
            Some("pending") => Some(true),
            Some("reprocessed") => Some(false),
            Some(other) => {
                return Err(format!(
                    "status {other:?}: expected pending, reprocessed or any"
                ))
            }
        };
        Ok(f)
    }
}

impl ListQuery {
    /// Reads a list request from a query string.
    pub(crate) fn parse(query: &str) -> Result<ListQuery, String> {
        let mut spec = FilterSpec::default();
        let (mut after, mut before) = (None, None);
        let mut limit = 50usize;
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            if value.is_empty() {
                continue;
            }
            let value = value.into_owned();
            let num = |v: &str| {
                v.parse::<u64>()
                    .map_err(|_| format!("{key}={v:?} is not a whole number"))
            };
            let small = |v: &str| {
                v.parse::<u32>()
                    .map_err(|_| format!("{key}={v:?} is not a whole number"))
            };
            if let Some(name) = key.strip_prefix("attr.").filter(|n| !n.is_empty()) {
                spec.attributes.insert(name.to_string(), value);
                continue;
            }
            if let Some(name) = key.strip_prefix("tag.").filter(|n| !n.is_empty()) {
                spec.tags.insert(name.to_string(), value);
                continue;
            }
            match key.as_ref() {
                "error_kind" => spec.error_kind = Some(value),
                "message" => spec.message = Some(value),
                "payload" => spec.payload = Some(value),
                "since_ms" => spec.since_ms = Some(num(&value)?),
                "until_ms" => spec.until_ms = Some(num(&value)?),
                "min_attempts" => spec.min_attempts = Some(small(&value)?),
                "max_attempts" => spec.max_attempts = Some(small(&value)?),
                "status" => spec.status = Some(value),
                "worker" => spec.worker = Some(value),
                "fingerprint" => spec.fingerprint = Some(value),
                "after" => after = Some(parse_cursor("after", &value)?),
                "before" => before = Some(parse_cursor("before", &value)?),
                "limit" => limit = (num(&value)? as usize).clamp(1, 500),
                other => return Err(format!("unknown query parameter {other:?}")),
            }
        }
        if after.is_some() && before.is_some() {
            return Err("give at most one of after= and before=".into());
        }
        Ok(ListQuery {
            spec,
            after,
            before,
            limit,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parsing() {
        let q = ListQuery::parse(
            "error_kind=Validation%20Error&message=a+b&after=5-7&limit=9&attr.region=eu&tag.team=ops",
        )
        .unwrap();
        assert_eq!(q.spec.error_kind.as_deref(), Some("Validation Error"));
        assert_eq!(q.spec.message.as_deref(), Some("a b"));
        assert_eq!(q.spec.attributes["region"], "eu");
        assert_eq!(q.spec.tags["team"], "ops");
        let five_seven = Cursor {
            dead_lettered_at_ms: 5,
            id: 7,
        };
        assert_eq!((q.after, q.before, q.limit), (Some(five_seven), None, 9));
        assert_eq!(cursor_text(&five_seven), "5-7");
        assert!(ListQuery::parse("bogus=1").is_err());
        assert!(ListQuery::parse("since_ms=x").is_err());
        assert!(ListQuery::parse("after=7").is_err());
        assert!(ListQuery::parse("after=1-2&before=3-4").is_err());
        assert!(
            ListQuery::parse("min_attempts=%31%32").is_ok_and(|q| q.spec.min_attempts == Some(12))
        );
        // As browsers do (the WHATWG form decoding): a broken escape is kept as it is.
        let q = ListQuery::parse("message=100%zz&error_kind=&worker").unwrap();
        assert_eq!(q.spec.message.as_deref(), Some("100%zz"));
        assert_eq!((q.spec.error_kind, q.spec.worker), (None, None));
    }

    #[test]
    fn status_filter() {
        let spec = FilterSpec {
            status: Some("reprocessed".into()),
            ..FilterSpec::default()
        };
        assert_eq!(spec.to_filter().unwrap().pending, Some(false));
        let bad = FilterSpec {
            status: Some("weird".into()),
            ..FilterSpec::default()
        };
        assert!(bad.to_filter().is_err());
    }
}
