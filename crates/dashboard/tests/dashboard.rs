//! The dashboard's HTTP surface without a browser: the page and its assets, the JSON API
//! against the library, and the protections of mutating requests (token, same origin,
//! JSON body, expected Host).

use std::net::SocketAddr;

mod common;

use common::http::{request, Reply};
use common::store::small_store;
use deadletter::queue::{FailureReport, QueueOptions};
use deadletter::{Failure, Store};
use deadletter_dashboard::{self as dashboard, Dashboard, DashboardOptions};
use serde_json::Value;

const T0: u64 = 1_800_000_000_000;
const TOKEN: &str = "s3cret-token";

trait ReplyJson {
    fn json(&self) -> Value;
}

impl ReplyJson for Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

fn get(addr: SocketAddr, path: &str) -> Reply {
    request(addr, "GET", path, &[], "")
}

/// A store with 3 DLQ entries in `orders` (2 Invalid, 1 Timeout) and a server on it.
fn setup() -> (tempfile::TempDir, Store, Dashboard, Vec<u64>) {
    let dir = tempfile::tempdir().unwrap();
    let (store, clock) = small_store(dir.path(), T0);
    let q = store
        .queue_with("orders", QueueOptions::default().max_attempts(1))
        .unwrap();
    q.enqueue(b"not json").unwrap();
    q.enqueue([0xffu8, 0x00, 0x80]).unwrap();
    q.enqueue(b"{\"slow\":true}").unwrap();
    let mut ids = Vec::new();
    for (i, msg) in q.lease(3).unwrap().into_iter().enumerate() {
        clock.advance(60_000);
        let f = if i < 2 {
            Failure::permanent("Invalid", "cannot parse")
        } else {
            Failure::transient("Timeout", "took too long")
        };
        q.dead_letter(&msg, &FailureReport::new(&f)).unwrap();
        ids.push(msg.id());
    }
    let server = dashboard::serve(
        store.clone(),
        DashboardOptions::default()
            .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .token(TOKEN)
            .log_actions(false),
    )
    .unwrap();
    (dir, store, server, ids)
}

#[test]
fn page_and_assets_are_served_with_protective_headers() {
    let (_dir, _store, server, _) = setup();
    let addr = server.local_addr();
    let page = get(addr, "/");
    assert_eq!(page.status, 200);
    assert!(page
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    assert!(page.body.contains("<script src=\"/app.js\"></script>"));
    assert!(
        !page.body.contains("http://") && !page.body.contains("https://"),
        "no CDN"
    );
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    let csp = page.header("content-security-policy").unwrap();
    assert!(csp.contains("default-src 'self'") && csp.contains("frame-ancestors 'none'"));
    let js = get(addr, "/app.js");
    assert_eq!(js.status, 200);
    assert!(js
        .header("content-type")
        .unwrap()
        .starts_with("text/javascript"));
    assert!(js.body.contains("X-Deadletter-Token"));
    let list = get(addr, "/list.js");
    assert_eq!(list.status, 200);
    assert!(list.body.contains("/api/mark"));
    assert_eq!(get(addr, "/style.css").status, 200);
    assert_eq!(get(addr, "/nope").status, 404);
    assert_eq!(
        server.url_with_token(),
        format!("http://{addr}/#token={TOKEN}")
    );
    server.shutdown();
}

#[test]
fn the_api_reads_what_the_library_holds() {
    let (_dir, store, server, ids) = setup();
    let addr = server.local_addr();
    let stats = get(addr, "/api/stats").json();
    assert_eq!(stats["queues"][0]["queue"], "orders");
    assert_eq!(stats["queues"][0]["dlq_size"], 3);
    assert_eq!(
        stats["queues"][0]["dlq_stats"]["by_error_kind"]["Invalid"],
        2
    );

    // Payload search: the one entry whose payload holds the text, and nothing for text
    // no payload holds.
    let found = get(addr, "/api/dlq/orders-dlq?payload=slow").json();
    assert_eq!(found["matched"], 1);
    assert_eq!(found["entries"][0]["id"], ids[2]);
    let none = get(addr, "/api/dlq/orders-dlq?payload=nowhere").json();
    assert_eq!(none["matched"], 0);

    let page = get(addr, "/api/dlq/orders-dlq?error_kind=Invalid&limit=1").json();
    assert_eq!(page["matched"], 2);
    assert_eq!(page["entries"].as_array().unwrap().len(), 1);
    assert_eq!(page["entries"][0]["id"], ids[0]);
    let first_cursor = page["entries"][0]["cursor"].as_str().unwrap().to_string();
    assert_eq!(page["next_cursor"], first_cursor.as_str());
    assert!(page["prev_cursor"].is_null());
    let next = get(
        addr,
        &format!("/api/dlq/orders?error_kind=Invalid&limit=1&after={first_cursor}"),
    )
    .json();
    assert_eq!(next["entries"][0]["id"], ids[1]);
    assert_eq!(next["entries"][0]["payload_is_text"], false);
    assert_eq!(next["entries"][0]["payload_preview"], "ff0080");
    assert!(next["next_cursor"].is_null());
    assert_eq!(next["prev_cursor"], next["entries"][0]["cursor"]);

    // Each summary carries its failure fingerprint, and the list filters by it.
    let fp = page["entries"][0]["fingerprint"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(fp.len(), 16);
    let same = get(addr, &format!("/api/dlq/orders-dlq?fingerprint={fp}")).json();
    let dlq = store.dlq("orders").unwrap();
    let want = dlq
        .ids(
            &deadletter::Filter::all().fingerprint(fp.parse().unwrap()),
            None,
        )
        .unwrap();
    assert_eq!(same["matched"], want.len());
    assert!(same["entries"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["fingerprint"] == fp.as_str()));
    let bad = get(addr, "/api/dlq/orders-dlq?fingerprint=zz");
    assert_eq!(bad.status, 400);

    let entry = get(addr, &format!("/api/entry/{}", ids[1])).json();
    let back = deadletter_dashboard::export::envelope_from_json(&entry).unwrap();
    assert_eq!(back, store.dlq("orders").unwrap().get(ids[1]).unwrap());
    assert_eq!(back.payload, vec![0xff, 0x00, 0x80]);

    let timeline = get(addr, "/api/timeline/orders-dlq?hours=3").json();
    let buckets: Vec<u64> = timeline["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(buckets.len(), 3);
    assert_eq!(
        buckets.iter().sum::<u64>() + timeline["earlier"].as_u64().unwrap(),
        3
    );

    // The cursors stay right once the entry they came from is gone: the previous page
    // of the second is the first entry, the next page of the (deleted) first the second.
    let prev_cursor = next["prev_cursor"].as_str().unwrap().to_string();
    let back_page = get(
        addr,
        &format!("/api/dlq/orders?limit=1&before={prev_cursor}"),
    )
    .json();
    assert_eq!(back_page["entries"][0]["id"], ids[0]);
    assert!(back_page["prev_cursor"].is_null());
    store.dlq("orders").unwrap().delete(ids[0]).unwrap();
    let after_gone = get(
        addr,
        &format!("/api/dlq/orders?limit=1&after={first_cursor}"),
    )
    .json();
    assert_eq!(after_gone["entries"][0]["id"], ids[1]);
    assert!(after_gone["prev_cursor"].is_null());
    let before_gone = get(
        addr,
        &format!("/api/dlq/orders?limit=5&before={prev_cursor}"),
    )
    .json();
    assert_eq!(before_gone["entries"].as_array().unwrap().len(), 0);
    assert_eq!(before_gone["next_cursor"], prev_cursor.as_str());
    // The failure chart still counts the deleted entry: it is the store's history.
    let timeline = get(addr, "/api/timeline/orders-dlq?hours=3").json();
    let total: u64 = timeline["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(total + timeline["earlier"].as_u64().unwrap(), 3);
    assert_eq!(timeline["persisted"], true);
    let invalid: u64 = timeline["by_kind"]["Invalid"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(invalid, 2);
    assert_eq!(get(addr, "/api/dlq/orders?after=12").status, 400);

    assert_eq!(get(addr, "/api/dlq/nosuch").status, 404);
    assert_eq!(get(addr, "/api/entry/999").status, 404);
    assert_eq!(get(addr, "/api/dlq/orders?bogus=1").status, 400);
    assert_eq!(get(addr, "/api/timeline/orders?hours=9999").status, 400);
    server.shutdown();
}

#[test]
fn mutations_need_the_token_the_origin_and_json() {
    let (_dir, store, server, ids) = setup();
    let addr = server.local_addr();
    let own = format!("http://{addr}");
    let body = format!(r#"{{"dlq":"orders-dlq","ids":[{}]}}"#, ids[0]);
    let json = ("Content-Type", "application/json");
    let cases: [(&[(&str, &str)], u16); 6] = [
        (&[json], 403),                                  // no token
        (&[json, ("X-Deadletter-Token", "wrong")], 403), // wrong token
        (
            &[
                json,
                ("X-Deadletter-Token", TOKEN),
                ("Origin", "http://evil.example"),
            ],
            403,
        ),
        (
            &[
                json,
                ("X-Deadletter-Token", TOKEN),
                ("Referer", "http://evil.example/x"),
            ],
            403,
        ),
        (
            &[
                ("Content-Type", "application/x-www-form-urlencoded"),
                ("X-Deadletter-Token", TOKEN),
            ],
            415,
        ),
        (
            &[
                json,
                ("X-Deadletter-Token", TOKEN),
                ("Host", "evil.example"),
            ],
            421,
        ),
    ];
    for (headers, status) in cases {
        let r = request(addr, "POST", "/api/replay", headers, &body);
        assert_eq!(r.status, status, "{headers:?}: {}", r.body);
    }
    assert_eq!(
        store.dlq("orders").unwrap().len(),
        3,
        "nothing was replayed"
    );
    assert_eq!(get(addr, "/api/replay").status, 405);

    // With the token from the page's own origin: replayed.
    let ok = request(
        addr,
        "POST",
        "/api/replay",
        &[json, ("X-Deadletter-Token", TOKEN), ("Origin", &own)],
        &body,
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(ok.json()["replayed"][0], ids[0]);
    assert_eq!(store.dlq("orders").unwrap().len(), 2);
    assert_eq!(store.existing_queue("orders").unwrap().len(), 1);

    // A dry run by filter changes nothing; a delete by filter removes what matches.
    let dry = request(
        addr,
        "POST",
        "/api/replay",
        &[json, ("X-Deadletter-Token", TOKEN)],
        r#"{"dlq":"orders","filter":{"error_kind":"Timeout"},"dry_run":true}"#,
    );
    assert_eq!(dry.json()["replayed"].as_array().unwrap().len(), 1);
    assert_eq!(store.dlq("orders").unwrap().len(), 2);

    // Edit-then-replay: one entry with the payload the operator wrote, at the generation
    // it was read at; refused for several ids, and for a generation the entry is not at.
    let headers = [json, ("X-Deadletter-Token", TOKEN)];
    let edited = |ids: &str, generation: u32| {
        let body = format!(
            r#"{{"dlq":"orders","ids":{ids},"payload":"{{\"fixed\":true}}","generation":{generation}}}"#
        );
        request(addr, "POST", "/api/replay", &headers, &body)
    };
    let two = edited(&format!("[{},{}]", ids[1], ids[2]), 0);
    assert_eq!(two.status, 400, "{}", two.body);
    let stale = edited(&format!("[{}]", ids[1]), 3);
    assert_eq!(stale.status, 200, "{}", stale.body);
    let reason = stale.json()["failed"][0]["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reason.contains("replayed since"), "{reason}");
    assert_eq!(store.dlq("orders").unwrap().len(), 2);
    let fixed = edited(&format!("[{}]", ids[1]), 0);
    assert_eq!(fixed.json()["replayed"][0], ids[1], "{}", fixed.body);
    let orders = store.existing_queue("orders").unwrap();
    let leased = orders.lease(10).unwrap();
    let got: Vec<&[u8]> = leased.iter().map(|m| m.payload()).collect();
    assert_eq!(got, [&b"not json"[..], br#"{"fixed":true}"#]);
    // It fails again: back in the DLQ for what follows, with the payload it replaced.
    for m in leased {
        if m.id() == ids[1] {
            let f = Failure::permanent("Invalid", "still wrong");
            orders.dead_letter(&m, &FailureReport::new(&f)).unwrap();
        } else {
            orders.ack(&m).unwrap();
        }
    }
    let again = store.dlq("orders").unwrap().get(ids[1]).unwrap();
    assert_eq!(
        again.replaced_payload.as_deref(),
        Some(&[0xffu8, 0x00, 0x80][..])
    );

    // A replay (plain or guarded) into a queue the store does not hold is refused with a
    // typed error naming the nearest queue; no queue is created, no entry moves.
    for path in ["/api/replay", "/api/guarded/start"] {
        let typo = request(
            addr,
            "POST",
            path,
            &[json, ("X-Deadletter-Token", TOKEN)],
            r#"{"dlq":"orders","filter":{},"to":"ordrs"}"#,
        );
        assert_eq!(typo.status, 404, "{path}: {}", typo.body);
        let body = typo.json();
        assert_eq!(body["kind"], "unknown_queue", "{path}: {body}");
        assert_eq!(body["queue"], "ordrs");
        assert_eq!(body["suggestion"], "orders");
        assert_eq!(body["known"], serde_json::json!(["orders"]));
        let message = body["error"].as_str().unwrap();
        assert!(message.contains("did you mean \"orders\""), "{message}");
        assert_eq!(store.queue_names(), ["orders"], "{path}: no queue created");
        assert_eq!(store.dlq("orders").unwrap().len(), 2);
    }
    let del = request(
        addr,
        "POST",
        "/api/delete",
        &[
            json,
            ("X-Deadletter-Token", TOKEN),
            ("Referer", &format!("{own}/")),
        ],
        r#"{"dlq":"orders-dlq","filter":{"error_kind":"Timeout"}}"#,
    );
    assert_eq!(del.status, 200, "{}", del.body);
    assert_eq!(del.json()["deleted"], 1);
    assert_eq!(store.dlq("orders").unwrap().len(), 1);

    // Mark reprocessed, selected by id, with a note: kept, no longer pending.
    let mark = format!(
        r#"{{"dlq":"orders","ids":[{}],"success":false,"note":"fixed by hand"}}"#,
        ids[1]
    );
    let headers = [json, ("X-Deadletter-Token", TOKEN)];
    let marked = request(addr, "POST", "/api/mark", &headers, &mark);
    assert_eq!(marked.status, 200, "{}", marked.body);
    assert_eq!(marked.json()["marked"][0], ids[1]);
    let entry = store.dlq("orders").unwrap().get(ids[1]).unwrap();
    assert!(matches!(
        entry.status,
        deadletter::dlq::EntryStatus::Reprocessed { success: false, .. }
    ));
    let no_outcome = format!(r#"{{"dlq":"orders","ids":[{}]}}"#, ids[1]);
    assert_eq!(
        request(addr, "POST", "/api/mark", &headers, &no_outcome).status,
        400
    );
    assert_eq!(get(addr, "/api/mark").status, 405);

    // Malformed bodies are refused with a reason.
    for bad in [
        "{",
        r#"{"dlq":"orders"}"#,
        r#"{"dlq":"orders","ids":[1],"filter":{}}"#,
        r#"{"dlq":"orders","ids":[1],"surprise":true}"#,
        r#"{"dlq":"orders","filter":{"status":"weird"}}"#,
    ] {
        let r = request(
            addr,
            "POST",
            "/api/delete",
            &[json, ("X-Deadletter-Token", TOKEN)],
            bad,
        );
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
        assert!(r.json()["error"].is_string());
    }
    server.shutdown();
}

#[test]
fn fingerprints_and_guarded_replays_through_the_api() {
    let (_dir, store, server, ids) = setup();
    let addr = server.local_addr();
    let headers = [
        ("Content-Type", "application/json"),
        ("X-Deadletter-Token", TOKEN),
    ];
    let post = |path: &str, body: &str| request(addr, "POST", path, &headers, body);

    // Fingerprints: the two "cannot parse" entries are one row, the most frequent first,
    // with their hours and an example; the library says the same.
    let fps = get(addr, "/api/fingerprints/orders-dlq").json();
    let rows = fps["fingerprints"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{fps}");
    assert_eq!(
        (
            rows[0]["error_kind"].as_str(),
            rows[0]["template"].as_str(),
            rows[0]["count"].as_u64()
        ),
        (Some("Invalid"), Some("cannot parse"), Some(2))
    );
    assert_eq!(rows[0]["example_id"], ids[0]);
    let hours: Vec<u64> = rows[0]["last_day_by_hour"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!((hours.len(), hours.iter().sum::<u64>()), (24, 2));
    let library = store.dlq("orders").unwrap().fingerprints();
    let invalid = library.iter().find(|f| f.error_kind == "Invalid").unwrap();
    assert_eq!(
        rows[0]["fingerprint"],
        invalid.fingerprint.to_string().as_str()
    );
    assert_eq!(get(addr, "/api/fingerprints/nosuch").status, 404);

    // Guarded replays: none yet; one started by a filter releases its canary.
    let none = get(addr, "/api/guarded").json();
    assert_eq!(
        (
            none["available"].as_bool(),
            none["replays"].as_array().unwrap().len()
        ),
        (Some(true), 0)
    );
    let fp = invalid.fingerprint.to_string();
    let started = post(
        "/api/guarded/start",
        &format!(
            r#"{{"dlq":"orders","filter":{{"fingerprint":"{fp}"}},"canary":1,"growth":2,"max_failure_ratio":0.5,"reset_attempts":true}}"#
        ),
    );
    assert_eq!(started.status, 200, "{}", started.body);
    let r = started.json();
    let id = r["id"].as_u64().unwrap();
    assert_eq!(
        (
            r["state"].as_str(),
            r["selected"].as_u64(),
            r["replayed"].as_u64(),
            r["left"].as_u64()
        ),
        (Some("running"), Some(2), Some(1), Some(1))
    );
    assert_eq!(r["selection"], format!("fingerprint={fp}").as_str());
    // One active guarded replay per DLQ.
    let again = post("/api/guarded/start", r#"{"dlq":"orders","ids":[1]}"#);
    assert_eq!(again.status, 409, "{}", again.body);

    // Paused, the canary's success releases nothing; resumed, the next wave goes out.
    let step = |s: &str| {
        post(
            "/api/guarded/step",
            &format!(r#"{{"id":{id},"step":"{s}"}}"#),
        )
    };
    assert_eq!(step("pause").json()["state"], "paused");
    let orders = store.existing_queue("orders").unwrap();
    for m in orders.lease(10).unwrap() {
        orders.ack(&m).unwrap();
    }
    let paused = &get(addr, "/api/guarded").json()["replays"][0];
    assert_eq!(
        (paused["succeeded"].as_u64(), paused["replayed"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(step("resume").json()["replayed"], 2);
    for m in orders.lease(10).unwrap() {
        orders.ack(&m).unwrap();
    }
    let done = &get(addr, "/api/guarded").json()["replays"][0];
    assert_eq!(
        (
            done["state"].as_str(),
            done["succeeded"].as_u64(),
            done["active"].as_bool()
        ),
        (Some("completed"), Some(2), Some(false))
    );
    assert_eq!(step("cancel").status, 409);
    assert_eq!(step("jump").status, 400);
    let unknown = post("/api/guarded/step", r#"{"id":99,"step":"pause"}"#);
    assert_eq!(unknown.status, 404);
    let bad = post(
        "/api/guarded/start",
        r#"{"dlq":"orders","ids":[1],"canary":0}"#,
    );
    assert_eq!(bad.status, 400, "{}", bad.body);
    // Without the token, nothing starts.
    let refused = request(
        addr,
        "POST",
        "/api/guarded/start",
        &headers[..1],
        r#"{"dlq":"orders","ids":[1]}"#,
    );
    assert_eq!(refused.status, 403);
    assert_eq!(get(addr, "/api/guarded/start").status, 405);
    let js = get(addr, "/guarded.js");
    assert_eq!(js.status, 200);
    assert!(js.body.contains("/api/guarded/step"));
    server.shutdown();
}

#[test]
fn the_workers_panel_lists_the_pools_attached_and_what_nothing_consumes() {
    let (_dir, store, server, ids) = setup();
    let addr = server.local_addr();
    let js = get(addr, "/workers.js");
    assert_eq!(js.status, 200);
    assert!(js.body.contains("/api/workers"));
    assert!(get(addr, "/")
        .body
        .contains("data-testid=\"workers-section\""));

    // Nothing consumes orders yet: a guarded replay into it says so, and how to attach one.
    let headers = [
        ("X-Deadletter-Token", TOKEN),
        ("Content-Type", "application/json"),
    ];
    let body = format!(
        r#"{{"dlq":"orders","ids":[{},{}],"canary":1}}"#,
        ids[0], ids[1]
    );
    let started = request(addr, "POST", "/api/guarded/start", &headers, &body);
    assert_eq!(started.status, 200, "{}", started.body);
    let listed = get(addr, "/api/guarded").json();
    let consumer = &listed["replays"][0]["consumer"];
    assert_eq!(consumer["queue"], "orders", "{listed}");
    assert_eq!(
        (consumer["known"].as_bool(), consumer["pools"].as_u64()),
        (Some(true), Some(0))
    );
    let hint = consumer["hint"].as_str().unwrap();
    assert!(
        hint.contains("no worker pool is attached to orders"),
        "{hint}"
    );
    assert!(hint.contains("WorkerPool"), "{hint}");

    let w = get(addr, "/api/workers").json();
    assert_eq!(w["available"], true, "{w}");
    let orders = &w["queues"][0];
    assert_eq!(orders["queue"], "orders");
    assert!(orders["pools"].as_array().unwrap().is_empty(), "{w}");
    assert_eq!(orders["rates"]["last_minute"]["seconds"], 60);

    // A pool starts on it: listed, with its workers; the replay's consumer is known.
    let queue = store.existing_queue("orders").unwrap();
    let pool = deadletter::WorkerPool::new(&queue)
        .workers(2)
        .name("checkout")
        .start(|_: &deadletter::Message| Ok(()))
        .unwrap();
    let w = get(addr, "/api/workers").json();
    let p = &w["queues"][0]["pools"][0];
    assert_eq!(
        (p["name"].as_str(), p["workers"].as_u64()),
        (Some("checkout"), Some(2)),
        "{w}"
    );
    assert!(p["heartbeat_age_ms"].as_u64().is_some(), "{p}");
    let metrics = get(addr, "/metrics").body;
    assert!(
        metrics.contains("deadletter_worker_pools{queue=\"orders\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("deadletter_pool_workers{queue=\"orders\"} 2"),
        "{metrics}"
    );
    drop(pool);
    assert!(get(addr, "/api/workers").json()["queues"][0]["pools"]
        .as_array()
        .unwrap()
        .is_empty());
    server.shutdown();
}
