//! The nearest known name to a mistyped one ("did you mean"): what the dashboard's and the
//! command's "unknown queue" errors offer. Owns the edit distance and the rule for what
//! counts as near; nothing else.
//!
//! Invariant: a suggestion is never the name itself, and never farther than a third of the
//! typed name's length (at least 1, at most 3 edits), so a short random name gets none.

/// The edit distance between `a` and `b`, by characters: insert, delete or replace one
/// character, or swap two adjacent ones, each count 1 (the optimal string alignment
/// distance: Levenshtein's with the transpositions people type, so "hled" is one slip of
/// "held", not two).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows of the table: row[j] is the distance from the first `i + 1` characters of
    // `a` to the first `j` of `b`; `previous` and `before` the rows for `i` and `i - 1`.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut row: Vec<usize> = vec![0; b.len() + 1];
    for (i, &ca) in a.iter().enumerate() {
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let replace = previous[j] + usize::from(ca != cb);
            let mut best = replace.min(row[j] + 1).min(previous[j + 1] + 1);
            if i > 0 && j > 0 && ca == b[j - 1] && a[i - 1] == cb {
                best = best.min(before[j - 1] + 1);
            }
            row[j + 1] = best;
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut row);
    }
    previous[b.len()]
}

/// The known name nearest to `typed`, if one is near enough; a name equal but for case is
/// nearest of all. Ties go to the first in `known`'s order.
pub fn nearest<'a, I>(typed: &str, known: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let limit = (typed.chars().count() / 3).clamp(1, 3);
    let lower = typed.to_lowercase();
    known
        .into_iter()
        .filter(|k| *k != typed)
        .map(|k| {
            let d = if k.to_lowercase() == lower {
                0
            } else {
                edit_distance(&lower, &k.to_lowercase())
            };
            (d, k)
        })
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// The sentence a message appends for `typed`: ` (did you mean "orders"?)`, or nothing.
pub fn did_you_mean<'a, I>(typed: &str, known: I) -> String
where
    I: IntoIterator<Item = &'a str>,
{
    match nearest(typed, known) {
        Some(k) => format!(" (did you mean {k:?}?)"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("", ""), 0);
        assert_eq!(edit_distance("abc", ""), 3);
        assert_eq!(edit_distance("", "ab"), 2);
        assert_eq!(edit_distance("ordrs", "orders"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("flaw", "lawn"), 2);
        assert_eq!(edit_distance("é", "e"), 1);
        // Adjacent swaps count once.
        assert_eq!(edit_distance("hled", "held"), 1);
        assert_eq!(edit_distance("ab", "ba"), 1);
        assert_eq!(edit_distance("ordres", "orders"), 1);
        assert_eq!(edit_distance("abcd", "badc"), 2);
        assert_eq!(edit_distance("ca", "abc"), 3);
    }

    #[test]
    fn nearest_names() {
        let known = ["orders", "payments", "orders-dlq", "emails"];
        assert_eq!(nearest("ordrs", known), Some("orders"));
        assert_eq!(nearest("Orders", known), Some("orders"));
        assert_eq!(nearest("paymnts", known), Some("payments"));
        assert_eq!(nearest("orders-dql", known), Some("orders-dlq"));
        assert_eq!(nearest("hled", ["held", "orders"]), Some("held"));
        // Too far, or the very name: nothing.
        assert_eq!(nearest("zzz", known), None);
        assert_eq!(nearest("orders", ["orders"]), None);
        assert_eq!(nearest("x", std::iter::empty()), None);
        assert_eq!(did_you_mean("ordrs", known), " (did you mean \"orders\"?)");
        assert_eq!(did_you_mean("zzz", known), "");
    }
}
