//! Reading commands: `stats`, `list` (filters and paging), `show` and `analyze`, their
//! `--json` output checked against the library and their tables against the same numbers.

use deadletter::Filter;
use deadletter_dashboard::time::format_utc;

use crate::fixture::fixture;
use crate::run::{fails, ids_of, json, ok, serial};

#[test]
fn stats_matches_the_library() {
    let _serial = serial();
    let f = fixture();
    let v = json(&["stats", f.path(), "--json"]);
    let m = f.open().metrics_snapshot();
    let queues = v["queues"].as_array().unwrap();
    assert_eq!(queues.len(), 2);
    for (j, q) in queues.iter().zip(&m.queues) {
        assert_eq!(j["queue"], q.queue.as_str());
        assert_eq!(j["dlq"], q.dlq.as_str());
        for (field, want) in [
            ("depth", q.depth),
            ("in_flight", q.in_flight),
            ("enqueued", q.enqueued),
            ("acked", q.acked),
            ("retried", q.retried),
            ("dead_lettered", q.dead_lettered),
            ("expired", q.expired),
            ("dlq_size", q.dlq_size),
            ("dlq_pending", q.dlq_pending),
        ] {
            assert_eq!(j[field].as_u64(), Some(want), "{} {field}", q.queue);
        }
    }
    assert_eq!(queues[0]["dlq_size"], 4);
    assert_eq!(queues[0]["depth"], 1);
    assert_eq!(queues[0]["dlq_stats"]["by_error_kind"]["InvalidPayload"], 2);
    assert_eq!(queues[1]["dlq_stats"]["by_error_kind"]["SmtpError"], 1);
    // The human form is an aligned table with the same numbers.
    let text = ok(&["stats", f.path()]);
    let header = text.lines().next().unwrap();
    assert!(header.starts_with("QUEUE") && header.contains("DEAD-LETTERED"));
    let orders_line = text.lines().find(|l| l.starts_with("orders ")).unwrap();
    assert!(orders_line.contains("orders-dlq"), "{orders_line}");
    assert!(text.contains("PaymentDeclined"));
}

#[test]
fn list_filters_and_pages() {
    let _serial = serial();
    let f = fixture();
    let entries = f.entries();
    let all = json(&["list", f.path(), "--json"]);
    assert_eq!(ids_of(&all).len(), 5);
    assert!(all["next_cursor"].is_null());

    // Paging: two at a time across both DLQs, the cursor printed by each page.
    let mut seen = Vec::new();
    let mut cursor: Option<u64> = None;
    loop {
        let after = cursor.map(|c| c.to_string());
        let mut args = vec!["list", f.path(), "--json", "--limit", "2"];
        if let Some(a) = &after {
            args.extend(["--after", a.as_str()]);
        }
        let page = json(&args);
        seen.extend(ids_of(&page));
        match page["next_cursor"].as_u64() {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, ids_of(&all));

    let kind = json(&["list", f.path(), "--json", "--error-kind", "InvalidPayload"]);
    let mut got = ids_of(&kind);
    got.sort();
    let mut want = vec![entries["ORD-2"].id(), entries["ORD-3"].id()];
    want.sort();
    assert_eq!(got, want);

    let msg = json(&["list", f.path(), "--json", "--message", "declined"]);
    assert_eq!(ids_of(&msg), vec![entries["ORD-4"].id()]);

    let attempts = json(&["list", f.path(), "--json", "--min-attempts", "2"]);
    assert_eq!(ids_of(&attempts), vec![entries["ORD-5"].id()]);

    let queue = json(&["list", f.path(), "--json", "--queue", "emails"]);
    assert_eq!(ids_of(&queue), vec![entries["MAIL-1"].id()]);

    // Time range: [dead-lettered time of ORD-3, that of ORD-5).
    let since = entries["ORD-3"].dlq.dead_lettered_at_ms.to_string();
    let until = entries["ORD-5"].dlq.dead_lettered_at_ms.to_string();
    let range = json(&[
        "list",
        f.path(),
        "--json",
        "--queue",
        "orders",
        "--since",
        &since,
        "--until",
        &until,
    ]);
    assert_eq!(
        ids_of(&range),
        vec![entries["ORD-3"].id(), entries["ORD-4"].id()]
    );
    // Relative times: everything was dead-lettered within the last 4 hours.
    assert_eq!(
        ids_of(&json(&["list", f.path(), "--json", "--since", "4h"])).len(),
        5
    );
    assert_eq!(
        ids_of(&json(&["list", f.path(), "--json", "--until", "4h"])).len(),
        0
    );

    // Each listed envelope is complete: payload bytes exactly, failure kept.
    let e3 = all["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == entries["ORD-3"].id())
        .unwrap();
    let back = deadletter_dashboard::export::envelope_from_json(e3).unwrap();
    assert_eq!(back, entries["ORD-3"]);
    assert!(
        e3.get("payload_text").is_none(),
        "binary payload has no text"
    );

    let text = ok(&["list", f.path(), "--limit", "2"]);
    assert!(text.starts_with("ID") || text.trim_start().starts_with("ID"));
    assert!(text.contains("next page: --after"), "{text}");
}

#[test]
fn show_prints_the_whole_envelope() {
    let _serial = serial();
    let f = fixture();
    let entries = f.entries();
    let e2 = &entries["ORD-2"];
    let id = e2.id().to_string();
    let v = json(&["show", f.path(), &id, "--json"]);
    assert_eq!(v["id"], e2.id());
    assert_eq!(v["payload_text"], "orderId=ORD-2;;;");
    assert_eq!(v["payload_encoding"], "base64");
    assert_eq!(v["failure"]["error_kind"], "InvalidPayload");
    assert_eq!(v["failure"]["context"]["step"], "parse");
    assert_eq!(v["metadata"]["attributes"]["orderId"], "ORD-2");
    assert_eq!(
        deadletter_dashboard::export::envelope_from_json(&v).unwrap(),
        *e2
    );

    let text = ok(&["show", f.path(), &id]);
    assert!(text.contains("InvalidPayload: payload is not valid JSON"));
    assert!(text.contains("UTF-8 text"));
    assert!(text.contains("orderId=ORD-2;;;"));
    // Times in the front ends' one form (RFC 3339, UTC), which --since reads back.
    let dead_lettered = format_utc(e2.dlq.dead_lettered_at_ms);
    assert!(
        text.lines()
            .any(|l| l.starts_with("dead-lettered") && l.ends_with(&dead_lettered)),
        "{text}"
    );
    assert_eq!(dead_lettered.len(), "2026-11-29T18:53:00Z".len());
    assert!(dead_lettered.ends_with('Z') && dead_lettered.as_bytes()[10] == b'T');
    let since = json(&["list", f.path(), "--since", &dead_lettered, "--json"]);
    assert!(ids_of(&since).contains(&e2.id()), "{since}");

    let hex = ok(&["show", f.path(), &id, "--hex"]);
    assert!(hex.contains("6f 72 64 65 72 49 64"), "{hex}");
    let vhex = json(&["show", f.path(), &id, "--hex", "--json"]);
    assert_eq!(vhex["payload_encoding"], "hex");
    // "orderId=ORD-2;;;" in lower-case hex.
    assert_eq!(vhex["payload"], "6f7264657249643d4f52442d323b3b3b");

    let binary = entries["ORD-3"].id().to_string();
    let text = ok(&["show", f.path(), &binary]);
    assert!(
        text.contains("hex") && text.contains("00 9f 92 96 ff 0a c3"),
        "{text}"
    );

    fails(
        &["show", f.path(), "999999"],
        1,
        "no DLQ entry with id 999999",
    );
}

#[test]
fn analyze_reports_patterns() {
    let _serial = serial();
    let f = fixture();
    let v = json(&["analyze", f.path(), "--json"]);
    let dlqs = v["dlqs"].as_array().unwrap();
    assert_eq!(dlqs.len(), 2);
    let orders = &dlqs[0];
    assert_eq!(orders["dlq"], "orders-dlq");
    let a = &orders["analysis"];
    assert_eq!(a["total"], 4);
    assert_eq!(a["by_error_kind"]["InvalidPayload"], 2);
    assert_eq!(a["by_hour_of_day"].as_array().unwrap().len(), 24);
    let lib = f
        .open()
        .dlq("orders-dlq")
        .unwrap()
        .analyze(&Filter::all())
        .unwrap();
    assert_eq!(a["average_attempts"].as_f64(), Some(lib.average_attempts));
    let one = json(&["analyze", f.path(), "--json", "--queue", "emails"]);
    assert_eq!(one["dlqs"][0]["analysis"]["total"], 1);
    let text = ok(&["analyze", f.path(), "--queue", "orders"]);
    assert!(text.contains("orders-dlq: 4 entries"), "{text}");
    assert!(text.contains("InvalidPayload"));
}

#[test]
fn search_by_payload_regex_and_attribute() {
    let _serial = serial();
    let f = fixture();
    let names = |args: &[&str]| -> Vec<String> {
        let mut full = vec!["list", f.path(), "--json"];
        full.extend_from_slice(args);
        let v = json(&full);
        let mut out: Vec<String> = v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                e["metadata"]["attributes"]["orderId"]
                    .as_str()
                    .unwrap_or("mail")
                    .to_string()
            })
            .collect();
        out.sort();
        out
    };
    // Statuses are spelled as the dashboard's API spells them.
    let all = json(&["list", f.path(), "--json"]);
    assert_eq!(all["entries"][0]["status"], "pending");
    // The entry of order ORD-4, by a substring of its payload.
    assert_eq!(names(&["--grep", "ORD-4"]), ["ORD-4"]);
    assert_eq!(names(&["--grep", "declined"]), ["ORD-4"]);
    // A regular expression on the payload text or the error message.
    assert_eq!(names(&["--regex", r"ORD-[45]"]), ["ORD-4", "ORD-5"]);
    assert_eq!(names(&["--regex", "^550 "]), ["mail"]);
    // Attributes, with other filters.
    assert_eq!(names(&["--attr", "orderId=ORD-2"]), ["ORD-2"]);
    assert!(names(&["--attr", "orderId=ORD-2", "--error-kind", "Timeout"]).is_empty());
    // A bad expression is bad usage.
    fails(&["list", f.path(), "--regex", "("], 2, "regex");
    // The same filters select what to delete.
    let v = json(&["delete", f.path(), "--grep", "ORD-5", "--json"]);
    assert_eq!(v["deleted"], 1);
    assert!(names(&["--grep", "ORD-5"]).is_empty());
}

#[test]
fn tables_fit_the_terminal_width() {
    let _serial = serial();
    let f = fixture();
    for args in [vec!["list", f.path()], vec!["stats", f.path()]] {
        let o = std::process::Command::new(crate::run::BIN)
            .args(&args)
            .env("COLUMNS", "72")
            .output()
            .unwrap();
        assert!(o.status.success());
        let text = String::from_utf8(o.stdout).unwrap();
        for line in text.lines() {
            assert!(line.chars().count() <= 72, "{args:?}: {line:?}");
        }
        assert!(text.contains('…'), "{args:?} cut something: {text}");
    }
}

#[test]
fn shell_completions() {
    let _serial = serial();
    for (shell, needle) in [
        ("bash", "_deadletter()"),
        ("zsh", "#compdef deadletter"),
        ("fish", "complete -c deadletter"),
    ] {
        let text = ok(&["completions", shell]);
        assert!(
            text.contains(needle),
            "{shell}: {}",
            &text[..200.min(text.len())]
        );
        assert!(text.contains("mark-reprocessed"), "{shell}");
    }
}
