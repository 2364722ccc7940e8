//! The change a corrected replay makes to one entry's payload, as a unified diff people
//! read (`replay --transform --dry-run`, `replay --edit`, `replay --payload-file
//! --dry-run`).
//!
//! Two JSON payloads are compared indented, one member a line, so that a changed field is
//! one line of the diff whatever the payloads' own layout; when only their layout differs,
//! the text says so. Other text is compared line by line as it is; payloads that are not
//! UTF-8 are described by their sizes.

use similar::TextDiff;

use deadletter::queue::MessageId;

use crate::jq::pretty;

/// The diff of entry `id`'s payload from `before` to `after`, ending in a newline.
pub fn payload_diff(id: MessageId, before: &[u8], after: &[u8]) -> String {
    if before == after {
        return format!("entry {id}: payload unchanged\n");
    }
    let (old, new) = match (pretty(before), pretty(after)) {
        (Some(old), Some(new)) if old == new => {
            return format!(
                "entry {id}: the same JSON value, written differently ({} bytes, then {})\n",
                before.len(),
                after.len()
            );
        }
        (Some(old), Some(new)) => (old, new),
        _ => (before.to_vec(), after.to_vec()),
    };
    match (std::str::from_utf8(&old), std::str::from_utf8(&new)) {
        (Ok(old), Ok(new)) => TextDiff::from_lines(old, new)
            .unified_diff()
            .context_radius(3)
            .header(
                &format!("entry {id} (now)"),
                &format!("entry {id} (replayed)"),
            )
            .to_string(),
        _ => format!(
            "entry {id}: binary payload, {} bytes, then {} bytes\n",
            before.len(),
            after.len()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_payloads_differ_by_the_changed_member() {
        let d = payload_diff(
            7,
            br#"{"orderId":"ord-1","n":2}"#,
            br#"{"orderId":"ORD-1","n":2}"#,
        );
        assert!(
            d.starts_with("--- entry 7 (now)\n+++ entry 7 (replayed)\n"),
            "{d}"
        );
        assert!(d.contains("-  \"orderId\": \"ord-1\",\n"), "{d}");
        assert!(d.contains("+  \"orderId\": \"ORD-1\",\n"), "{d}");
        assert!(d.contains("   \"n\": 2\n"), "{d}");
    }

    #[test]
    fn text_layout_and_bytes() {
        let d = payload_diff(1, b"a\nb\n", b"a\nc\n");
        assert!(d.contains("-b\n+c\n"), "{d}");
        let d = payload_diff(1, br#"{ "a": 1 }"#, br#"{"a":1}"#);
        assert!(
            d.contains("the same JSON value, written differently"),
            "{d}"
        );
        let d = payload_diff(1, &[0xff, 0], &[0xfe]);
        assert_eq!(d, "entry 1: binary payload, 2 bytes, then 1 bytes\n");
        assert_eq!(payload_diff(1, b"x", b"x"), "entry 1: payload unchanged\n");
    }
}
