//! The rules a new queue name must follow, and [`NameProblem`], what is wrong with one
//! that does not.
//!
//! A queue name (and so a DLQ name, built from it) is what operators type, read in logs and
//! a dashboard's URLs, and what tools turn into file names (an export per DLQ): it must not
//! be blank, look like another name (edge whitespace, invisible characters) or be a path
//! (`/`, `\`, `.`, `..`). The rules apply to names a store is asked to create; a queue that
//! a store already holds keeps its name (release 0.1.0 allowed any name of 1 to 200 bytes
//! without control characters).
//!
//! Invariant: [`NameProblem::of`] is a pure function of the name, so the owner of a store
//! and a client of its control socket agree on why a name is refused.

use std::fmt;

/// What is wrong with a queue name ([`crate::Error::InvalidQueueName`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameProblem {
    /// The name is empty.
    Empty,
    /// The name is longer than the limit (bytes of UTF-8).
    TooLong {
        /// Its length in bytes.
        len: usize,
        /// The most bytes a name may have.
        max: usize,
    },
    /// The name is only whitespace.
    Blank,
    /// The name starts or ends with whitespace.
    EdgeWhitespace,
    /// The name is `.` or `..`.
    DotName,
    /// The name holds a path separator (`/` or `\`).
    PathSeparator(char),
    /// The name holds a control character (NUL, a newline, an escape...).
    ControlCharacter(char),
    /// The name holds an invisible formatting character (a zero-width space or joiner, a
    /// soft hyphen, a byte order mark, a bidirectional override): two names that print the
    /// same would be different queues.
    InvisibleCharacter(char),
    /// The name breaks a backend's own, narrower rules (JetStream's, say).
    NotAllowed {
        /// What that backend allows, in words.
        allowed: &'static str,
    },
}

impl NameProblem {
    /// The most bytes a queue name may have.
    pub const MAX_LEN: usize = 200;

    /// What is wrong with `name` as a new queue's name, or `None` when it is a valid one.
    ///
    /// ```
    /// use deadletter::queue::NameProblem;
    ///
    /// assert_eq!(NameProblem::of("orders"), None);
    /// assert_eq!(NameProblem::of("eu orders"), None);
    /// assert_eq!(NameProblem::of(" "), Some(NameProblem::Blank));
    /// assert_eq!(NameProblem::of("../x"), Some(NameProblem::PathSeparator('/')));
    /// assert_eq!(NameProblem::of("orders "), Some(NameProblem::EdgeWhitespace));
    /// ```
    pub fn of(name: &str) -> Option<NameProblem> {
        if name.is_empty() {
            return Some(NameProblem::Empty);
        }
        if name.len() > Self::MAX_LEN {
            return Some(NameProblem::TooLong {
                len: name.len(),
                max: Self::MAX_LEN,
            });
        }
        if let Some(c) = name.chars().find(|c| c.is_control()) {
            return Some(NameProblem::ControlCharacter(c));
        }
        if name.chars().all(char::is_whitespace) {
            return Some(NameProblem::Blank);
        }
        if name.starts_with(char::is_whitespace) || name.ends_with(char::is_whitespace) {
            return Some(NameProblem::EdgeWhitespace);
        }
        if name == "." || name == ".." {
            return Some(NameProblem::DotName);
        }
        if let Some(c) = name.chars().find(|&c| c == '/' || c == '\\') {
            return Some(NameProblem::PathSeparator(c));
        }
        name.chars()
            .find(|&c| is_invisible(c))
            .map(NameProblem::InvisibleCharacter)
    }
}

/// Unicode formatting characters that print as nothing: soft hyphen, zero-width
/// space/joiners and marks, bidirectional embeddings, overrides and isolates, word joiner
/// and invisible operators, byte order mark.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{061C}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}'
    )
}

/// Completes "the name ..." (the error's message reads "invalid queue name "x": it ...").
impl fmt::Display for NameProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameProblem::Empty => f.write_str("is empty"),
            NameProblem::TooLong { len, max } => {
                write!(f, "is {len} bytes long, over the limit of {max}")
            }
            NameProblem::Blank => f.write_str("is only whitespace"),
            NameProblem::EdgeWhitespace => f.write_str("starts or ends with whitespace"),
            NameProblem::DotName => f.write_str("is a path component (\".\" or \"..\")"),
            NameProblem::PathSeparator(c) => write!(f, "holds the path separator {c:?}"),
            NameProblem::ControlCharacter(c) => {
                write!(f, "holds the control character U+{:04X}", *c as u32)
            }
            NameProblem::InvisibleCharacter(c) => {
                write!(f, "holds the invisible character U+{:04X}", *c as u32)
            }
            NameProblem::NotAllowed { allowed } => write!(f, "is not allowed here: {allowed}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule_names_its_problem() {
        let long = "x".repeat(NameProblem::MAX_LEN + 1);
        let cases: [(&str, Option<NameProblem>); 17] = [
            ("orders", None),
            ("eu orders.v2-dlq", None),
            ("ünïcode ✓", None),
            ("", Some(NameProblem::Empty)),
            (&long, Some(NameProblem::TooLong { len: 201, max: 200 })),
            (" ", Some(NameProblem::Blank)),
            ("\u{3000}", Some(NameProblem::Blank)),
            (" orders", Some(NameProblem::EdgeWhitespace)),
            ("orders ", Some(NameProblem::EdgeWhitespace)),
            (".", Some(NameProblem::DotName)),
            ("..", Some(NameProblem::DotName)),
            ("../x", Some(NameProblem::PathSeparator('/'))),
            ("a/b", Some(NameProblem::PathSeparator('/'))),
            ("a\\b", Some(NameProblem::PathSeparator('\\'))),
            ("a\0b", Some(NameProblem::ControlCharacter('\0'))),
            ("a\n", Some(NameProblem::ControlCharacter('\n'))),
            (
                "pay\u{202E}ments",
                Some(NameProblem::InvisibleCharacter('\u{202E}')),
            ),
        ];
        for (name, want) in cases {
            assert_eq!(NameProblem::of(name), want, "{name:?}");
        }
        // The limit is in bytes, and a name of exactly the limit is fine.
        assert_eq!(NameProblem::of(&"x".repeat(200)), None);
        assert!(NameProblem::of(&"é".repeat(101)).is_some());
    }

    #[test]
    fn messages_say_what_is_wrong() {
        assert_eq!(
            NameProblem::ControlCharacter('\0').to_string(),
            "holds the control character U+0000"
        );
        assert_eq!(
            NameProblem::PathSeparator('/').to_string(),
            "holds the path separator '/'"
        );
    }
}
