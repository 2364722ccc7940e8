//! Error classification for the worker pool: which errors converted with `?` are worth
//! retrying.
//!
//! A handler that builds its [`Failure`] with [`Failure::transient`] or
//! [`Failure::permanent`] has chosen the class itself; a [`Classifier`] never changes it.
//! A failure converted from an error with `?` carries the error's type name
//! ([`Failure::source_type`]); the classifier maps it by that type (or by the failure's
//! kind, for errors known by name only) to a class. Rules are tried in the order they were
//! added, and the first that matches decides. A converted failure no rule matches keeps the
//! class the conversion gave it: transient, except a payload that does not decode
//! ([`crate::Error::Codec`]), which is permanent. Unknown errors therefore stay transient:
//! a wrong guess costs `max_attempts` deliveries of a message that cannot succeed, never a
//! message dead-lettered that a retry would have saved.

use crate::api::core::types::{short_type_name, Failure, FailureClass};

/// What a rule matches.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Matcher {
    /// The full type name of the error (`std::any::type_name`).
    Type(&'static str),
    /// The failure's kind (for a converted error: its short type name).
    Kind(String),
}

/// Maps error types to transient or permanent failures, for a worker pool
/// ([`WorkerPool::classify`](crate::WorkerPool::classify)).
///
/// ```
/// use deadletter::Failure;
/// use deadletter::pool::{Classifier, FailureClass};
///
/// #[derive(Debug)]
/// struct InvalidOrder;
/// impl std::fmt::Display for InvalidOrder {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("the order has no lines")
///     }
/// }
/// impl std::error::Error for InvalidOrder {}
///
/// let classifier = Classifier::new().permanent::<InvalidOrder>();
/// let failure = Failure::from(InvalidOrder); // what `?` does in a handler
/// assert_eq!(failure.class, FailureClass::Transient);
/// assert_eq!(classifier.class_of(&failure), FailureClass::Permanent);
/// // A failure the handler built itself keeps its class.
/// let chosen = Failure::transient("InvalidOrder", "retry it anyway");
/// assert_eq!(classifier.class_of(&chosen), FailureClass::Transient);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Classifier {
    rules: Vec<(Matcher, FailureClass)>,
}

impl Classifier {
    /// A classifier with no rules: every failure keeps its class.
    pub fn new() -> Self {
        Classifier::default()
    }

    /// Errors of type `E` converted with `?` are permanent.
    pub fn permanent<E: 'static>(self) -> Self {
        self.rule(
            Matcher::Type(std::any::type_name::<E>()),
            FailureClass::Permanent,
        )
    }

    /// Errors of type `E` converted with `?` are transient (to keep one type retried
    /// when a later kind rule would match it).
    pub fn transient<E: 'static>(self) -> Self {
        self.rule(
            Matcher::Type(std::any::type_name::<E>()),
            FailureClass::Transient,
        )
    }

    /// Converted errors whose failure kind is `kind` (the error's short type name, such as
    /// `"ParseIntError"`) are permanent.
    pub fn permanent_kind(self, kind: impl Into<String>) -> Self {
        self.rule(Matcher::Kind(kind.into()), FailureClass::Permanent)
    }

    /// Converted errors whose failure kind is `kind` are transient.
    pub fn transient_kind(self, kind: impl Into<String>) -> Self {
        self.rule(Matcher::Kind(kind.into()), FailureClass::Transient)
    }

    fn rule(mut self, matcher: Matcher, class: FailureClass) -> Self {
        self.rules.push((matcher, class));
        self
    }

    /// The class `failure` gets: the first matching rule's for a converted failure, its
    /// own otherwise.
    pub fn class_of(&self, failure: &Failure) -> FailureClass {
        let Some(source) = failure.source_type() else {
            return failure.class;
        };
        self.rules
            .iter()
            .find(|(m, _)| match m {
                Matcher::Type(name) => *name == source,
                Matcher::Kind(kind) => {
                    *kind == failure.kind || kind.as_str() == short_type_name(source)
                }
            })
            .map_or(failure.class, |(_, class)| *class)
    }

    /// `failure` with the class [`class_of`](Classifier::class_of) gives it.
    pub fn apply(&self, mut failure: Failure) -> Failure {
        failure.class = self.class_of(&failure);
        failure
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_type_names_keep_generics() {
        assert_eq!(short_type_name("a::b::Error"), "Error");
        assert_eq!(short_type_name("a::Wrap<b::C>"), "Wrap<b::C>");
        assert_eq!(short_type_name("Plain"), "Plain");
    }
}
