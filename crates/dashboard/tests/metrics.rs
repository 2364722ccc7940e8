//! `/metrics` served by the dashboard parses as Prometheus text (checked by a strict parser
//! of the exposition format written here) and its numbers equal the library's
//! `Store::metrics_snapshot()`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

mod common;

use common::http::request;
use common::store::small_store;
use deadletter::metrics::{Metrics, QueueMetrics};
use deadletter::queue::{FailureReport, QueueOptions};
use deadletter::Failure;
use deadletter_dashboard::{self as dashboard, DashboardOptions};

const T0: u64 = 1_800_000_000_000;

/// One sample line: metric name, labels, value.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A parsed exposition: families (name -> type) and samples.
#[derive(Debug, Default)]
struct Exposition {
    types: BTreeMap<String, String>,
    help: BTreeMap<String, String>,
    samples: Vec<Sample>,
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

fn valid_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(is_name_start) && chars.all(is_name_char)
}

fn valid_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with("__")
}

fn parse_value(s: &str) -> Result<f64, String> {
    match s {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => s.parse::<f64>().map_err(|_| format!("bad value {s:?}")),
    }
}

/// Parses `{a="x",b="y"}` at the start of `s`; returns the labels and the rest.
fn parse_labels(s: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    let mut rest = s.strip_prefix('{').ok_or("expected {")?;
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return Ok((labels, r));
        }
        let eq = rest.find('=').ok_or("label without =")?;
        let name = &rest[..eq];
        if !valid_label_name(name) {
            return Err(format!("bad label name {name:?}"));
        }
        rest = rest[eq + 1..]
            .strip_prefix('"')
            .ok_or("label value not quoted")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            let (i, c) = chars.next().ok_or("unterminated label value")?;
            match c {
                '"' => break i,
                '\\' => match chars.next().ok_or("dangling escape")?.1 {
                    '\\' => value.push('\\'),
                    '"' => value.push('"'),
                    'n' => value.push('\n'),
                    other => return Err(format!("bad escape \\{other}")),
                },
                '\n' => return Err("raw newline in label value".into()),
                c => value.push(c),
            }
        };
        if labels.insert(name.to_string(), value).is_some() {
            return Err(format!("label {name} repeated"));
        }
        rest = &rest[end + 1..];
        if let Some(r) = rest.strip_prefix(',') {
            rest = r;
        } else if !rest.starts_with('}') {
            return Err("expected , or } after a label".into());
        }
    }
}

/// A strict parser of the text exposition format 0.0.4.
fn parse_exposition(text: &str) -> Result<Exposition, String> {
    if !text.ends_with('\n') {
        return Err("the exposition must end with a line feed".into());
    }
    let mut exp = Exposition::default();
    let mut seen_series = BTreeSet::new();
    let mut finished_families = BTreeSet::new();
    let mut current: Option<String> = None;
    for (n, line) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}: {line:?}", n + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut parts = comment.trim_start().splitn(3, ' ');
            match parts.next() {
                Some("HELP") => {
                    let name = parts
                        .next()
                        .ok_or_else(|| at("HELP without a name".into()))?;
                    if !valid_metric_name(name) {
                        return Err(at(format!("bad name {name}")));
                    }
                    let help = parts.next().unwrap_or("");
                    if exp.help.insert(name.into(), help.into()).is_some() {
                        return Err(at(format!("second HELP for {name}")));
                    }
                }
                Some("TYPE") => {
                    let name = parts
                        .next()
                        .ok_or_else(|| at("TYPE without a name".into()))?;
                    let kind = parts
                        .next()
                        .ok_or_else(|| at("TYPE without a type".into()))?;
                    if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                        return Err(at(format!("unknown type {kind}")));
                    }
                    if exp.samples.iter().any(|s| s.name == name) {
                        return Err(at(format!("TYPE of {name} after its samples")));
                    }
                    if exp.types.insert(name.into(), kind.into()).is_some() {
                        return Err(at(format!("second TYPE for {name}")));
                    }
                }
                _ => {}
            }
            continue;
        }
        let name_end = line
            .find(['{', ' '])
            .ok_or_else(|| at("sample without a value".into()))?;
        let name = &line[..name_end];
        if !valid_metric_name(name) {
            return Err(at(format!("bad metric name {name:?}")));
        }
        let (labels, rest) = if line[name_end..].starts_with('{') {
            parse_labels(&line[name_end..]).map_err(at)?
        } else {
            (BTreeMap::new(), &line[name_end..])
        };
        let rest = rest
            .strip_prefix(' ')
            .ok_or_else(|| at("expected a space before the value".into()))?;
        let mut fields = rest.split(' ');
        let value = parse_value(fields.next().unwrap_or("")).map_err(at)?;
        if let Some(ts) = fields.next() {
            ts.parse::<i64>()
                .map_err(|_| at(format!("bad timestamp {ts:?}")))?;
        }
        if fields.next().is_some() {
            return Err(at("trailing fields".into()));
        }
        // Samples of one family are contiguous.
        if current.as_deref() != Some(name) {
            if let Some(prev) = current.take() {
                finished_families.insert(prev);
            }
            if finished_families.contains(name) {
                return Err(at(format!("samples of {name} are not contiguous")));
            }
            current = Some(name.to_string());
        }
        if !seen_series.insert((name.to_string(), labels.clone())) {
            return Err(at("duplicate series".into()));
        }
        exp.samples.push(Sample {
            name: name.into(),
            labels,
            value,
        });
    }
    Ok(exp)
}

/// The samples of `family` for `queue` in the exposition.
fn samples_of<'e>(exp: &'e Exposition, family: &str, q: &QueueMetrics) -> Vec<&'e Sample> {
    exp.samples
        .iter()
        .filter(|s| s.name == family && s.labels.get("queue") == Some(&q.queue))
        .collect()
}

/// The value of `family` for `queue`: its one sample, whose only label is `queue` (the
/// DLQ's name, a function of the queue's, is in `deadletter_queue_info`), or `None` when
/// the family has no sample for it.
fn value_of(exp: &Exposition, family: &str, q: &QueueMetrics) -> Option<f64> {
    let hits = samples_of(exp, family, q);
    assert!(hits.len() <= 1, "{family} for {}: {hits:?}", q.queue);
    let hit = hits.first()?;
    assert_eq!(hit.labels.len(), 1, "{family}: {:?}", hit.labels);
    Some(hit.value)
}

fn check_against(exp: &Exposition, m: &Metrics) {
    // An age with nothing to age has no sample (not a 0 that reads as "fresh").
    let secs = |ms: Option<u64>| ms.map(|ms| ms as f64 / 1000.0);
    let mut per_queue_samples_expected = 0;
    for q in &m.queues {
        let expect: [(&str, Option<f64>); 15] = [
            ("deadletter_queue_depth", Some(q.depth as f64)),
            ("deadletter_queue_in_flight", Some(q.in_flight as f64)),
            ("deadletter_enqueued_total", Some(q.enqueued as f64)),
            ("deadletter_acked_total", Some(q.acked as f64)),
            ("deadletter_retried_total", Some(q.retried as f64)),
            (
                "deadletter_dead_lettered_total",
                Some(q.dead_lettered as f64),
            ),
            ("deadletter_expired_total", Some(q.expired as f64)),
            ("deadletter_enqueue_refused_total", Some(q.refused as f64)),
            ("deadletter_dlq_pending", Some(q.dlq_pending as f64)),
            ("deadletter_dlq_replayed_total", Some(q.dlq_replayed as f64)),
            (
                "deadletter_oldest_message_age_seconds",
                secs(q.oldest_message_age_ms),
            ),
            (
                "deadletter_dlq_oldest_age_seconds",
                secs(q.dlq_oldest_age_ms),
            ),
            // The pools attached: known in the process that holds the store (0 for none).
            (
                "deadletter_worker_pools",
                q.pools.as_ref().map(|p| p.len() as f64),
            ),
            (
                "deadletter_pool_workers",
                q.pools
                    .as_ref()
                    .map(|p| p.iter().map(|p| p.workers as f64).sum()),
            ),
            (
                "deadletter_pool_handlers_in_flight",
                q.pools
                    .as_ref()
                    .map(|p| p.iter().map(|p| p.in_flight as f64).sum()),
            ),
        ];
        for (family, want) in expect {
            assert_eq!(value_of(exp, family, q), want, "{family} of {}", q.queue);
            per_queue_samples_expected += usize::from(want.is_some());
        }
        // The DLQ's name: one info sample per queue, always 1.
        let info = samples_of(exp, "deadletter_queue_info", q);
        assert_eq!(info.len(), 1, "queue_info of {}", q.queue);
        assert_eq!(info[0].labels.get("dlq"), Some(&q.dlq));
        assert_eq!(info[0].value, 1.0);
        // The DLQ's size is not a family of its own: it is the sum of its entries by kind.
        let by_kind: f64 = samples_of(exp, "deadletter_dlq_entries", q)
            .iter()
            .map(|s| s.value)
            .sum();
        assert_eq!(by_kind, q.dlq_size as f64, "dlq size of {}", q.queue);
    }
    assert!(!exp.types.contains_key("deadletter_dlq_size"));
    assert!(
        exp.samples
            .iter()
            .filter(|s| s.name != "deadletter_queue_info")
            .all(|s| !s.labels.contains_key("dlq")),
        "a dlq label beside queue"
    );
    // Every family is typed and described; counters end in _total.
    for name in Metrics::family_names() {
        let kind = exp
            .types
            .get(name)
            .unwrap_or_else(|| panic!("no TYPE for {name}"));
        assert!(exp.help.contains_key(name), "no HELP for {name}");
        assert_eq!(
            kind == "counter",
            name.ends_with("_total"),
            "{name} is a {kind}"
        );
    }
    let per_queue: Vec<&str> = Metrics::family_names().collect();
    let per_queue_samples = exp
        .samples
        .iter()
        .filter(|s| per_queue.contains(&s.name.as_str()))
        .count();
    assert_eq!(per_queue_samples, per_queue_samples_expected);

    // DLQ entries by error kind: one series per kind, with the queue's labels.
    for q in &m.queues {
        let kinds: BTreeMap<String, f64> = exp
            .samples
            .iter()
            .filter(|s| s.name == "deadletter_dlq_entries" && s.labels["queue"] == q.queue)
            .map(|s| (s.labels["error_kind"].clone(), s.value))
            .collect();
        let want: BTreeMap<String, f64> = q
            .dlq_by_error_kind
            .iter()
            .map(|(k, &n)| (k.clone(), n as f64))
            .collect();
        assert_eq!(kinds, want, "entries by kind of {}", q.queue);
    }
    assert_eq!(exp.types["deadletter_dlq_entries"], "gauge");
    // The build, and the store's bytes on disk.
    let build: Vec<&Sample> = exp
        .samples
        .iter()
        .filter(|s| s.name == "deadletter_build_info")
        .collect();
    assert_eq!(build.len(), 1);
    assert_eq!(build[0].value, 1.0);
    assert_eq!(
        build[0].labels["format_version"],
        deadletter::store::FORMAT_VERSION.to_string()
    );
    assert_eq!(build[0].labels["version"], env!("CARGO_PKG_VERSION"));
    let disk = exp
        .samples
        .iter()
        .find(|s| s.name == "deadletter_store_disk_bytes")
        .expect("disk bytes");
    assert_eq!(Some(disk.value as u64), m.disk_bytes);
}

/// The handler-duration histogram of `queue`: (le, cumulative count) pairs, sum, count.
fn histogram(exp: &Exposition, queue: &str) -> (Vec<(String, f64)>, f64, f64) {
    let name = "deadletter_handler_duration_seconds";
    let of = |suffix: &str| -> Vec<&Sample> {
        let full = format!("{name}{suffix}");
        exp.samples
            .iter()
            .filter(|s| s.name == full && s.labels["queue"] == queue)
            .collect()
    };
    let buckets = of("_bucket")
        .into_iter()
        .map(|s| (s.labels["le"].clone(), s.value))
        .collect();
    let one = |suffix: &str| of(suffix).first().map_or(f64::NAN, |s| s.value);
    (buckets, one("_sum"), one("_count"))
}

#[test]
fn metrics_parse_and_match_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let (store, clock) = small_store(dir.path(), T0);
    let opts = QueueOptions::default().max_attempts(2);
    let orders = store.queue_with("orders", opts.clone()).unwrap();
    // A name that needs escaping in a label value (a backslash, which the exporter also
    // escapes, is no longer a valid new name; `escape_label`'s unit test covers it).
    let odd = store.queue_with(r#"odd "name" here"#, opts).unwrap();
    for i in 0..6 {
        orders.enqueue(format!("order {i}")).unwrap();
    }
    odd.enqueue("x").unwrap();
    clock.advance(1_500);
    let msgs = orders.lease(4).unwrap();
    orders.ack(&msgs[0]).unwrap();
    let bad = Failure::permanent("Invalid", "bad");
    orders
        .dead_letter(&msgs[1], &FailureReport::new(&bad))
        .unwrap();
    let slow = Failure::transient("Timeout", "slow");
    orders
        .retry(&msgs[2], &FailureReport::new(&slow), T0 + 100_000)
        .unwrap();
    // msgs[3] stays in flight.
    clock.advance(2_250);

    let server = dashboard::serve(
        store.clone(),
        DashboardOptions::default()
            .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .log_actions(false),
    )
    .unwrap();
    let addr = server.local_addr();

    let reply = request(addr, "GET", "/metrics", &[], "");
    assert_eq!(reply.status, 200);
    assert!(
        reply
            .header("content-type")
            .is_some_and(|v| v.starts_with("text/plain; version=0.0.4")),
        "{:?}",
        reply.headers
    );
    let body = reply.body;
    let exp = parse_exposition(&body).unwrap_or_else(|e| panic!("{e}\n{body}"));
    let m = store.metrics_snapshot();
    assert_eq!(m.queues.len(), 2);
    let o = &m.queues[0];
    assert_eq!((o.depth, o.in_flight, o.acked, o.retried), (3, 1, 1, 1));
    assert_eq!((o.dead_lettered, o.dlq_size, o.enqueued), (1, 1, 6));
    assert_eq!(o.dlq_oldest_age_ms, Some(2_250));
    assert_eq!(m.queues[1].queue, r#"odd "name" here"#);
    check_against(&exp, &m);
    assert!(body.contains(r#"queue="odd \"name\" here""#), "{body}");

    // The numbers follow the store.
    orders.ack(&msgs[3]).unwrap();
    clock.advance(1_000);
    let body = request(addr, "GET", "/metrics", &[], "").body;
    let exp = parse_exposition(&body).unwrap();
    let m = store.metrics_snapshot();
    assert_eq!(m.queues[0].in_flight, 0);
    check_against(&exp, &m);
    assert!(m.disk_bytes.is_some_and(|b| b > 0));

    // A worker pool on the queue: its handler's durations, as a histogram.
    assert!(
        histogram(&exp, "orders").0.is_empty(),
        "no pool ever ran on orders: whether one will is not known"
    );
    let jobs = store.queue("jobs").unwrap();
    let pool = deadletter::WorkerPool::new(&jobs)
        .workers(1)
        .start(|_: &deadletter::Message| {
            std::thread::sleep(std::time::Duration::from_millis(30));
            Ok(())
        })
        .unwrap();
    // Started, no delivery yet: the series exist, at zero.
    let body = request(addr, "GET", "/metrics", &[], "").body;
    let exp = parse_exposition(&body).unwrap_or_else(|e| panic!("{e}\n{body}"));
    let (buckets, sum, count) = histogram(&exp, "jobs");
    assert_eq!(
        buckets.len(),
        deadletter::metrics::DURATION_BUCKETS_SECONDS.len() + 1,
        "{body}"
    );
    assert!(buckets.iter().all(|(_, n)| *n == 0.0), "{buckets:?}");
    assert_eq!((sum, count), (0.0, 0.0));
    assert!(histogram(&exp, "orders").0.is_empty());
    // An empty queue and an empty DLQ: no age samples, while the counts are there at 0.
    let m = store.metrics_snapshot();
    let empty = m.queues.iter().find(|q| q.queue == "jobs").unwrap();
    assert_eq!(
        (empty.oldest_message_age_ms, empty.dlq_oldest_age_ms),
        (None, None)
    );
    for family in [
        "deadletter_oldest_message_age_seconds",
        "deadletter_dlq_oldest_age_seconds",
    ] {
        assert_eq!(value_of(&exp, family, empty), None, "{family}\n{body}");
    }
    assert_eq!(value_of(&exp, "deadletter_queue_depth", empty), Some(0.0));
    for i in 0..5 {
        jobs.enqueue(format!("job {i}")).unwrap();
    }
    pool.run_until_idle().unwrap();
    pool.shutdown(std::time::Duration::from_secs(5)).unwrap();
    let body = request(addr, "GET", "/metrics", &[], "").body;
    let exp = parse_exposition(&body).unwrap_or_else(|e| panic!("{e}\n{body}"));
    assert_eq!(
        exp.types["deadletter_handler_duration_seconds"],
        "histogram"
    );
    let (buckets, sum, count) = histogram(&exp, "jobs");
    // Five deliveries, each handler slept 30 ms.
    assert_eq!(count, 5.0, "{body}");
    assert!(sum >= 0.15, "{sum}");
    assert_eq!(
        buckets.len(),
        deadletter::metrics::DURATION_BUCKETS_SECONDS.len() + 1
    );
    assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "cumulative");
    let at = |le: &str| buckets.iter().find(|(l, _)| l == le).map(|(_, n)| *n);
    assert_eq!(at("0.025"), Some(0.0));
    assert_eq!(at("+Inf"), Some(5.0));
    server.shutdown();
}

#[test]
fn the_strict_parser_rejects_malformed_text() {
    for bad in [
        "x 1",                                     // no final newline
        "1x 1\n",                                  // bad name
        "x{a=\"1\" 1\n",                           // unterminated labels
        "x{a=1} 1\n",                              // unquoted value
        "x{a=\"\\q\"} 1\n",                        // bad escape
        "x one\n",                                 // bad value
        "x 1\nx 2\n",                              // duplicate series
        "x 1\ny 1\nx{a=\"b\"} 1\n",                // not contiguous
        "# TYPE x gauge\n# TYPE x counter\nx 1\n", // second TYPE
        "x 1\n# TYPE x gauge\n",                   // TYPE after samples
        "# TYPE x flavour\nx 1\n",                 // unknown type
        "x{a=\"1\",a=\"2\"} 1\n",                  // repeated label
    ] {
        assert!(parse_exposition(bad).is_err(), "accepted {bad:?}");
    }
    let good = "# HELP x A thing.\n# TYPE x gauge\nx{a=\"q\\\"\\\\\\n\"} 1.5 1700000000\nx 2\n";
    let exp = parse_exposition(good).unwrap();
    assert_eq!(exp.samples[0].labels["a"], "q\"\\\n");
    assert_eq!(exp.samples[1].value, 2.0);
}
