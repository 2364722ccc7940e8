//! Message templates and failure fingerprints, rule by rule (the table at the top of
//! `src/engine/fingerprint.rs`): numbers, UUIDs and hex, quoted strings,
//! e-mail addresses and URLs, timestamps, mixed ids, linear time on long inputs, Unicode;
//! fingerprints of one template, frames only when asked, their text form.

use deadletter::dlq::{message_template, Fingerprint};

fn t(s: &str) -> String {
    message_template(s)
}

#[test]
fn numbers() {
    assert_eq!(t("order ORD-123 not found"), "order ORD-<num> not found");
    assert_eq!(t("retry 3 of 5"), "retry <num> of <num>");
    assert_eq!(t("took 3.25s"), "took <num>.<num>s");
    assert_eq!(t("user42 and item7b"), "user<num> and item<num>b");
    assert_eq!(t("took 3.25 s"), "took <num> s");
    assert_eq!(t("balance -42"), "balance -<num>");
    assert_eq!(t("10.0.0.1 refused"), "<num>.<num> refused");
    assert_eq!(t("no digits here"), "no digits here");
}

#[test]
fn uuids_and_hex() {
    assert_eq!(
        t("user 6f1c2e4a-9b3d-4c5e-8f7a-1b2c3d4e5f60 is gone"),
        "user <uuid> is gone"
    );
    assert_eq!(
        t("user 6F1C2E4A-9B3D-4C5E-8F7A-1B2C3D4E5F60"),
        "user <uuid>"
    );
    assert_eq!(t("at 0xdeadBEEF"), "at <hex>");
    assert_eq!(t("commit 3fa9c01b failed"), "commit <hex> failed");
    // Words of hex letters only are words.
    assert_eq!(t("cafe facade"), "cafe facade");
    // Not a uuid: a group too short.
    assert_eq!(t("6f1c2e4a-9b3-4c5e"), "<hex>-<num>b<num>-<num>c<num>e");
}

#[test]
fn quoted_strings() {
    assert_eq!(t(r#"field "email" is required"#), "field <str> is required");
    assert_eq!(t("key 'a b c' missing"), "key <str> missing");
    assert_eq!(t("run `make x`"), "run <str>");
    assert_eq!(t(r#"say "he said \"hi\"" now"#), "say <str> now");
    // Apostrophes are not quotes.
    assert_eq!(t("can't connect"), "can't connect");
    assert_eq!(t("the user's cart"), "the user's cart");
    // An unclosed quote stays as it is.
    assert_eq!(t("bad \"input"), "bad \"input");
}

#[test]
fn emails_and_urls() {
    assert_eq!(
        t("no mailbox ana.b+x@mail.example.com."),
        "no mailbox <email>."
    );
    assert_eq!(t("user@localhost is local"), "user@localhost is local");
    assert_eq!(
        t("GET https://api.example.com/v1/orders/77?x=1 failed"),
        "GET <url> failed"
    );
    assert_eq!(t("see (http://x.io/a)."), "see (<url>).");
    assert_eq!(t("postgres://db:5432/app: refused"), "<url>: refused");
    assert_eq!(t("http:// nothing"), "http:// nothing");
}

#[test]
fn timestamps() {
    assert_eq!(t("expired at 2024-05-01T10:00:00Z"), "expired at <ts>");
    assert_eq!(t("at 2024-05-01 10:00:00.123+02:00 ok"), "at <ts> ok");
    assert_eq!(t("on 2024-05-01."), "on <ts>.");
    assert_eq!(t("at 23:59:01.5 local"), "at <ts> local");
    assert_eq!(t("ratio 12:30"), "ratio <num>:<num>");
    assert_eq!(t("at 2024-05-01T10:00+0100"), "at <ts>");
}

#[test]
fn mixed_ids() {
    assert_eq!(t("session usr_8fK2pQ9x expired"), "session <id> expired");
    assert_eq!(t("HTTP2 stream"), "HTTP<num> stream");
    assert_eq!(t("v2 api"), "v<num> api");
}

#[test]
fn names_whose_digits_are_part_of_the_name() {
    assert_eq!(t("payload is not UTF-8"), "payload is not UTF-8");
    assert_eq!(
        t("payload is not utf-16 (BOM)"),
        "payload is not utf-16 (BOM)"
    );
    assert_eq!(t("bad SHA-256 of part 3"), "bad SHA-256 of part <num>");
    assert_eq!(t("GET /x HTTP/1.1 refused"), "GET /x HTTP/1.1 refused");
    assert_eq!(
        t("IPv6 address 7 unreachable"),
        "IPv6 address <num> unreachable"
    );
    assert_eq!(t("S3 bucket b7 missing"), "S3 bucket b<num> missing");
    // Only whole words: a longer word or number is not the name.
    assert_eq!(t("UTF-88 and xS3"), "UTF-<num> and xS<num>");
    assert_eq!(t("ISO-8859-15 text"), "ISO-8859-15 text");
    assert_ne!(
        Fingerprint::compute("InvalidPayload", "not UTF-8", None, 0),
        Fingerprint::compute("InvalidPayload", "not UTF-16", None, 0)
    );
}

#[test]
fn long_inputs_cost_linear_time() {
    let quotes = "\"".repeat(100_000);
    assert_eq!(t(&quotes), "<str>".repeat(50_000));
    let unclosed = "\"x ".repeat(30_000);
    assert_eq!(t(&unclosed), unclosed);
    let dashes = "a-".repeat(100_000);
    assert_eq!(t(&dashes), dashes);
    let long_word = "x".repeat(200) + "@example.com";
    assert_eq!(t(&long_word), long_word);
}

#[test]
fn unicode_is_copied_whole() {
    assert_eq!(t("Bestellung 42 für Zoë"), "Bestellung <num> für Zoë");
    assert_eq!(t("注文 7 が見つかりません"), "注文 <num> が見つかりません");
    assert_eq!(t(""), "");
}

#[test]
fn messages_of_one_template_share_a_fingerprint() {
    let a = Fingerprint::compute("NotFound", "order ORD-1 of 'bob' at 2024-01-01", None, 0);
    let b = Fingerprint::compute("NotFound", "order ORD-99 of 'al' at 2025-12-31", None, 0);
    let c = Fingerprint::compute("Timeout", "order ORD-1 of 'bob' at 2024-01-01", None, 0);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn frames_count_only_when_asked() {
    let x = Some("at handler.rs:10\nat main.rs:3\nat start");
    let y = Some("at worker.rs:99\nat main.rs:3");
    let no = |tr| Fingerprint::compute("E", "m", tr, 0);
    assert_eq!(no(x), no(y));
    assert_eq!(no(x), no(None));
    let one = |tr| Fingerprint::compute("E", "m", tr, 1);
    assert_ne!(one(x), one(y));
    // Line numbers are normalised: the same place with another line is the same frame.
    assert_eq!(one(x), one(Some("at handler.rs:77")));
}

/// A fingerprint is FNV-1a (64 bits) of kind, NUL, template, NUL, frames: the value
/// stays the same from one release to the next.
#[test]
fn a_fingerprint_has_its_released_value() {
    let f = Fingerprint::compute("NotFound", "order ORD-123 not found", None, 0);
    assert_eq!(f, Fingerprint(0x6a5a_0bd3_d12d_7995));
}

#[test]
fn fingerprints_print_and_parse() {
    let f = Fingerprint(0x00ab_cdef_0123_4567);
    assert_eq!(f.to_string(), "00abcdef01234567");
    assert_eq!(format!("{f:?}"), "Fingerprint(00abcdef01234567)");
    assert_eq!("00abcdef01234567".parse::<Fingerprint>(), Ok(f));
    assert_eq!("abc".parse::<Fingerprint>(), Ok(Fingerprint(0xabc)));
    assert!("".parse::<Fingerprint>().is_err());
    assert!("xyz".parse::<Fingerprint>().is_err());
    assert!("+1".parse::<Fingerprint>().is_err());
    assert!("00abcdef012345678".parse::<Fingerprint>().is_err());
}
