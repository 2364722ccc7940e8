//! jq expressions over JSON payloads (`replay --transform EXPR`), through jaq: an
//! expression is compiled once ([`Jq::compile`], with jq's standard library), before any
//! entry is read, so an invalid one is refused before anything is touched
//! ([`ExprError`]); then [`Jq::apply`] runs it on one payload.
//!
//! A payload is transformed only when it is one JSON value and the expression gives
//! exactly one value for it; anything else is that payload's [`TransformError`]. The value
//! is written back as compact JSON, numbers as they were written; a value equal to the
//! payload's own (the expression changed nothing) gives back the payload's bytes as they
//! were, so an entry the expression does not concern is not rewritten.

use std::fmt;

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{data, unwrap_valr, Compiler, Ctx, Vars};
use jaq_json::{read, write, Val};
use jaq_std::ValT;

/// The compiled form of an expression.
type Filter = jaq_core::compile::Filter<jaq_core::Native<data::JustLut<Val>>>;

/// A compiled jq expression.
pub struct Jq {
    expr: String,
    filter: Filter,
}

/// Why an expression does not compile: each problem found, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprError {
    /// The expression as given.
    pub expr: String,
    /// What is wrong with it, such as "expected term at the end".
    pub problems: Vec<String>,
}

impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid jq expression {:?}: {}; nothing was changed",
            self.expr,
            self.problems.join("; ")
        )
    }
}

/// Why one payload could not be transformed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransformError {
    /// The payload is not one JSON value.
    NotJson(String),
    /// The expression failed on it (jq's `error`, a type error).
    Failed(String),
    /// The expression gave no value, or more than one (`count`: 0, or 2 for "two or more").
    NotOneValue { count: usize },
}

impl fmt::Display for TransformError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransformError::NotJson(why) => write!(f, "the payload is not JSON ({why})"),
            TransformError::Failed(why) => write!(f, "the expression failed: {why}"),
            TransformError::NotOneValue { count: 0 } => f.write_str(
                "the expression gave no value (it must give exactly one, the new payload)",
            ),
            TransformError::NotOneValue { .. } => f.write_str(
                "the expression gave more than one value (it must give exactly one, the new \
                 payload)",
            ),
        }
    }
}

impl Jq {
    /// Compiles `expr` with jq's standard library.
    pub fn compile(expr: &str) -> Result<Jq, ExprError> {
        let refuse = |problems: Vec<String>| ExprError {
            expr: expr.to_string(),
            problems,
        };
        let defs = jaq_core::defs()
            .chain(jaq_std::defs())
            .chain(jaq_json::defs());
        let funs = jaq_core::funs()
            .chain(jaq_std::funs())
            .chain(jaq_json::funs());
        let arena = Arena::default();
        let file = File {
            code: expr,
            path: (),
        };
        let modules = Loader::new(defs).load(&arena, file).map_err(|errors| {
            refuse(
                errors
                    .into_iter()
                    .flat_map(|(_, e)| load_problems(expr, e))
                    .collect(),
            )
        })?;
        let filter = Compiler::default()
            .with_funs(funs)
            .compile(modules)
            .map_err(|errors| {
                refuse(
                    errors
                        .into_iter()
                        .flat_map(|(_, undefined)| undefined)
                        .map(|(name, what)| format!("undefined {} `{name}`", what.as_str()))
                        .collect(),
                )
            })?;
        Ok(Jq {
            expr: expr.to_string(),
            filter,
        })
    }

    /// The expression as given.
    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// The payload the expression makes of `payload` (see the module documentation).
    pub fn apply(&self, payload: &[u8]) -> Result<Vec<u8>, TransformError> {
        let input =
            read::parse_single(payload).map_err(|e| TransformError::NotJson(e.to_string()))?;
        let ctx = Ctx::<data::JustLut<Val>>::new(&self.filter.lut, Vars::new([]));
        let mut outputs = self.filter.id.run((ctx, input.clone())).map(unwrap_valr);
        let value = match outputs.next() {
            None => return Err(TransformError::NotOneValue { count: 0 }),
            Some(Err(e)) => return Err(TransformError::Failed(error_text(e))),
            Some(Ok(value)) => value,
        };
        if outputs.next().is_some() {
            return Err(TransformError::NotOneValue { count: 2 });
        }
        if value == input {
            return Ok(payload.to_vec());
        }
        Ok(compact(&value))
    }
}

/// What a jq error says: the text of a string error (`error("bad order")`), else the
/// value's JSON form.
fn error_text(e: jaq_core::Error<Val>) -> String {
    let value = e.into_val();
    match value.as_utf8_bytes() {
        Some(text) => String::from_utf8_lossy(text).into_owned(),
        None => value.to_string(),
    }
}

/// `value` as compact JSON.
fn compact(value: &Val) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing into memory cannot fail.
    let _ = write::write(&mut out, &write::Pp::default(), 0, value);
    out
}

/// `payload` indented, two spaces a level, if it is one JSON value (for a diff people
/// read); `None` otherwise.
pub fn pretty(payload: &[u8]) -> Option<Vec<u8>> {
    let value = read::parse_single(payload).ok()?;
    let pp = write::Pp {
        indent: Some("  ".to_string()),
        sep_space: true,
        ..write::Pp::default()
    };
    let mut out = Vec::new();
    write::write(&mut out, &pp, 0, &value).ok()?;
    out.push(b'\n');
    Some(out)
}

/// What a load error of `expr` says, one problem each, with where in `expr` it is.
fn load_problems(expr: &str, e: jaq_core::load::Error<&str>) -> Vec<String> {
    use jaq_core::load::Error;
    let at = |rest: &str| match rest.len() {
        0 => "at the end".to_string(),
        n => format!("at offset {} (`{}`)", expr.len() - n, clip(rest)),
    };
    match e {
        Error::Io(errors) => errors
            .into_iter()
            .map(|(path, why)| format!("cannot load module {path}: {why}"))
            .collect(),
        Error::Lex(errors) => errors
            .into_iter()
            .map(|(expect, rest)| format!("expected {} {}", expect.as_str(), at(rest)))
            .collect(),
        Error::Parse(errors) => errors
            .into_iter()
            .map(|(expect, rest)| format!("expected {} {}", expect.as_str(), at(rest)))
            .collect(),
    }
}

/// The first few characters of `rest`, for an error message.
fn clip(rest: &str) -> String {
    let mut out: String = rest.chars().take(20).collect();
    if out.len() < rest.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transforms_one_json_value_keeping_numbers_as_written() {
        let jq = Jq::compile(".orderId |= ascii_upcase").unwrap();
        let out = jq
            .apply(br#"{"orderId":"ord-1","n":12345678901234567890,"x":1.50}"#)
            .unwrap();
        assert_eq!(
            out,
            br#"{"orderId":"ORD-1","n":12345678901234567890,"x":1.50}"#
        );
    }

    #[test]
    fn an_unchanged_value_keeps_its_bytes() {
        let jq = Jq::compile(".orderId |= ascii_upcase").unwrap();
        let spaced = br#"{ "orderId" : "ORD-1" }"#;
        assert_eq!(jq.apply(spaced).unwrap(), spaced);
    }

    #[test]
    fn payload_failures_say_why() {
        let jq = Jq::compile(".orderId |= ascii_upcase").unwrap();
        let not_json = jq.apply(b"ORD;4").unwrap_err();
        assert!(matches!(not_json, TransformError::NotJson(_)), "{not_json}");
        assert!(not_json.to_string().contains("not JSON"), "{not_json}");
        let failed = jq.apply(br#"{"orderId":5}"#).unwrap_err();
        assert!(matches!(failed, TransformError::Failed(_)), "{failed}");
        let none = Jq::compile("empty").unwrap().apply(b"{}").unwrap_err();
        assert_eq!(none, TransformError::NotOneValue { count: 0 });
        let two = Jq::compile(".[]").unwrap().apply(b"[1,2]").unwrap_err();
        assert_eq!(two, TransformError::NotOneValue { count: 2 });
        assert!(two.to_string().contains("more than one value"), "{two}");
        let error = Jq::compile(r#"error("bad order")"#).unwrap().apply(b"{}");
        assert_eq!(error, Err(TransformError::Failed("bad order".into())));
    }

    #[test]
    fn invalid_expressions_are_refused_with_where() {
        let e = Jq::compile(".orderId |=").err().unwrap();
        assert_eq!(e.problems, ["expected term at the end"]);
        let e = Jq::compile("{a:}").err().unwrap();
        assert_eq!(e.problems, ["expected term at offset 3 (`}`)"]);
        let e = Jq::compile("no_such_filter(1)").err().unwrap();
        assert_eq!(e.problems, ["undefined filter `no_such_filter`"]);
        assert!(e.to_string().contains("nothing was changed"), "{e}");
    }

    #[test]
    fn pretty_indents_json_only() {
        assert_eq!(
            pretty(br#"{"a":[1]}"#).unwrap(),
            b"{\n  \"a\": [\n    1\n  ]\n}\n"
        );
        assert_eq!(pretty(b"not json"), None);
    }
}
