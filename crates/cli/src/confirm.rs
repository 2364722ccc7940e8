//! Asking before a change in bulk: deleting every entry, purging, and replaying or
//! deleting more than [`BULK`] entries at once need `--yes`, or a "y" typed on the
//! terminal. Without a terminal to ask on, the command refuses (exit 2), giving the count,
//! and changes nothing.

use std::io::IsTerminal;

use crate::error::CliError;

/// Entries a replay or delete may change without asking first.
pub const BULK: usize = 1000;

/// Asks on the terminal before `what` (such as "delete 1500 entries of orders-dlq for
/// good"), unless `yes`; refuses when standard input is not a terminal.
pub fn confirm(what: &str, yes: bool) -> Result<(), CliError> {
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(CliError::Usage(format!(
            "this would {what}; add --yes to confirm (standard input is not a terminal, so \
             there is no one to ask)"
        )));
    }
    eprint!("This will {what}. Continue? [y/N] ");
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .map_err(|e| CliError::io("read the answer", e))?;
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Ok(()),
        _ => Err(CliError::Incomplete(
            "cancelled: nothing was changed".into(),
        )),
    }
}

/// [`confirm`]s `what` when `count` entries are more than [`BULK`].
pub fn bulk(count: usize, what: impl FnOnce() -> String, yes: bool) -> Result<(), CliError> {
    if count <= BULK {
        return Ok(());
    }
    confirm(&what(), yes)
}

/// "orders-dlq", "orders-dlq and emails-dlq", "3 DLQs": the DLQs a bulk change concerns.
pub fn dlqs_in_words(names: &[String]) -> String {
    match names {
        [] => "no DLQ".to_string(),
        [one] => one.clone(),
        [a, b] => format!("{a} and {b}"),
        more => format!("{} DLQs", more.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_bulk_entries_need_no_answer() {
        // No terminal is asked: at the threshold it passes without --yes, above it is
        // refused giving the count, and --yes passes.
        assert!(bulk(BULK, || unreachable!(), false).is_ok());
        assert!(bulk(BULK + 1, || "replay 1001 entries".into(), true).is_ok());
        if !std::io::stdin().is_terminal() {
            let err = bulk(BULK + 1, || "replay 1001 entries".into(), false).unwrap_err();
            assert!(err.to_string().contains("replay 1001 entries"), "{err}");
            assert!(err.to_string().contains("--yes"), "{err}");
            assert_eq!(err.exit_code(), 2);
        }
    }

    #[test]
    fn dlq_words() {
        let n = |v: &[&str]| dlqs_in_words(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(n(&["orders-dlq"]), "orders-dlq");
        assert_eq!(n(&["a-dlq", "b-dlq"]), "a-dlq and b-dlq");
        assert_eq!(n(&["a", "b", "c"]), "3 DLQs");
    }
}
