//! `serve`: the dashboard starts on the address it prints and answers its API; where its
//! token comes from decides whether it is printed; `--bind` takes a host name; Ctrl-C and
//! SIGTERM stop it cleanly, the store's `control.sock` removed.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use serde_json::Value;

use crate::fixture::fixture;
use crate::http;
use crate::run::{serial, BIN};

/// Starts `deadletter serve TARGET` on a free loopback port with token `t0k3n`; returns
/// the process (to kill) and the address it printed.
pub fn start(target: &str) -> (Child, SocketAddr) {
    start_with(target, &[])
}

/// [`start`] with more arguments.
fn start_with(target: &str, extra: &[&str]) -> (Child, SocketAddr) {
    let mut child = Command::new(BIN)
        .args([
            "serve",
            target,
            "--bind",
            "127.0.0.1:0",
            "--token",
            "t0k3n",
            "--json",
        ])
        .args(extra)
        .env_remove("DEADLETTER_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let info: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(info["token"], "t0k3n");
    let addr: SocketAddr = info["addr"].as_str().unwrap().parse().unwrap();
    (child, addr)
}

#[test]
fn serve_starts_and_answers() {
    let _serial = serial();
    let f = fixture();
    let (mut child, addr) = start(f.path());
    let reply = http::request(addr, "GET", "/api/stats", &[], "");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(reply.status, 200, "{}", reply.body);
    let v: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(v["queues"][0]["dlq_size"], 4);
}

/// The dashboard's changes are recorded in the audit trail as made by its token's name.
#[test]
fn the_dashboard_changes_as_its_token_name() {
    let _serial = serial();
    let f = fixture();
    let id = f.entries()["ORD-4"].id();
    let (mut child, addr) = start_with(f.path(), &["--token-name", "ops-token"]);
    let body = format!(r#"{{"dlq":"orders-dlq","ids":[{id}]}}"#);
    let headers = [
        ("X-Deadletter-Token", "t0k3n"),
        ("Content-Type", "application/json"),
    ];
    let reply = http::request(addr, "POST", "/api/delete", &headers, &body);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(reply.status, 200, "{}", reply.body);
    let store = f.open();
    let h = store.history(id).unwrap();
    let last = h.steps.last().unwrap();
    assert_eq!(last.actor.as_deref(), Some("ops-token"), "{h:?}");
}

/// A running `deadletter serve` started with `args` and `env`, its standard output read
/// up to its announcement.
struct Served {
    child: Child,
    stdout: BufReader<ChildStdout>,
    /// The announcement: the JSON line with `--json`, the lines up to "press Ctrl-C to
    /// stop" without.
    announced: String,
}

impl Served {
    fn start(args: &[&str], env: &[(&str, &str)]) -> Served {
        let mut command = Command::new(BIN);
        command
            .arg("serve")
            .args(args)
            .env_remove("DEADLETTER_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let json = args.contains(&"--json");
        let mut announced = String::new();
        loop {
            let mut line = String::new();
            let n = stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "serve ended before it listened: {announced}");
            announced.push_str(&line);
            if json || line.starts_with("press Ctrl-C") {
                break;
            }
        }
        Served {
            child,
            stdout,
            announced,
        }
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.announced).unwrap()
    }

    /// The address it listens on, from its announcement.
    fn addr(&self) -> SocketAddr {
        if let Ok(v) = serde_json::from_str::<Value>(&self.announced) {
            return v["addr"].as_str().unwrap().parse().unwrap();
        }
        let url = self.announced.split("http://").nth(1).unwrap();
        url.split('/').next().unwrap().parse().unwrap()
    }

    /// Sends `signal` (`INT`, `TERM`), waits for the exit; returns whether it exited 0 and
    /// everything it printed on stdout and stderr.
    fn stop(mut self, signal: &str) -> (bool, String, String) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-s", signal, &pid]).status();
        assert!(sent.unwrap().success());
        let status = self.child.wait().unwrap();
        let mut out = self.announced.clone();
        self.stdout.read_to_string(&mut out).unwrap();
        let mut err = String::new();
        let _ = self.child.stderr.take().unwrap().read_to_string(&mut err);
        (status.success(), out, err)
    }
}

/// A test that fails leaves no server running.
impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A delete of `id` carrying `token`: its status.
fn delete_with(addr: SocketAddr, token: &str, id: u64) -> u16 {
    let body = format!(r#"{{"dlq":"orders-dlq","ids":[{id}]}}"#);
    let headers = [
        ("X-Deadletter-Token", token),
        ("Content-Type", "application/json"),
    ];
    http::request(addr, "POST", "/api/delete", &headers, &body).status
}

/// A token from `$DEADLETTER_TOKEN` or `--token-file` guards the changes but is printed
/// nowhere: not in the announcement (text or JSON, nor in its `open:` address), not when
/// it stops, not in the log of changes.
#[test]
fn a_token_from_the_environment_or_a_file_is_never_printed() {
    let _serial = serial();
    let f = fixture();
    let secret = "env-s3cret-4711";
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), format!("  {secret}\n")).unwrap();
    let file_arg = file.path().to_str().unwrap();
    let bind = ["--bind", "127.0.0.1:0"];
    // The four entries of orders-dlq: one deleted per case.
    let entries = f.entries();
    let ids: Vec<u64> = ["ORD-2", "ORD-3", "ORD-4", "ORD-5"]
        .iter()
        .map(|k| entries[*k].id())
        .collect();
    type Env<'a> = Vec<(&'a str, &'a str)>;
    let cases: [(Vec<&str>, Env, &str); 4] = [
        (vec![], vec![("DEADLETTER_TOKEN", secret)], "env"),
        (vec!["--json"], vec![("DEADLETTER_TOKEN", secret)], "env"),
        (vec!["--token-file", file_arg], vec![], "file"),
        // The file wins over the environment, and is not printed either.
        (
            vec!["--json", "--token-file", file_arg],
            vec![("DEADLETTER_TOKEN", "other")],
            "file",
        ),
    ];
    for (i, (args, env, from)) in cases.into_iter().enumerate() {
        let args: Vec<&str> = [f.path()].iter().copied().chain(bind).chain(args).collect();
        let served = Served::start(&args, &env);
        assert!(!served.announced.contains(secret), "{}", served.announced);
        if args.contains(&"--json") {
            let v = served.json();
            assert_eq!(v["token"], Value::Null, "{v}");
            assert_eq!(v["token_from"], from);
            assert!(!v["open"].as_str().unwrap().contains("#token"), "{v}");
        } else {
            assert!(
                served.announced.contains("(not shown)"),
                "{}",
                served.announced
            );
            assert!(!served.announced.contains("#token"), "{}", served.announced);
        }
        // It is the token all the same.
        let addr = served.addr();
        assert_eq!(delete_with(addr, "wrong", ids[i]), 403);
        assert_eq!(delete_with(addr, secret, ids[i]), 200);
        let (clean, out, err) = served.stop("TERM");
        assert!(clean, "{out}{err}");
        assert!(!out.contains(secret) && !err.contains(secret), "{out}{err}");
    }
}

/// A token given with `--token` is in the command line already: it is printed, with the
/// address that carries it.
#[test]
fn a_token_given_on_the_command_line_is_printed() {
    let _serial = serial();
    let f = fixture();
    let served = Served::start(&[f.path(), "--bind", "127.0.0.1:0", "--token", "fl4g"], &[]);
    assert!(
        served
            .announced
            .contains("token for replay and delete: fl4g\n"),
        "{}",
        served.announced
    );
    assert!(served.announced.contains("/#token=fl4g\n"));
    let (clean, ..) = served.stop("TERM");
    assert!(clean);
}

/// `--read-only` on loopback prints no token (changes are refused, reads are open), in
/// text and in JSON, and says it is read-only.
#[test]
fn read_only_prints_no_token() {
    let _serial = serial();
    let f = fixture();
    let text = Served::start(&[f.path(), "--read-only", "--bind", "127.0.0.1:0"], &[]);
    assert!(!text.announced.contains("token"), "{}", text.announced);
    assert!(text
        .announced
        .contains("read-only: replay and delete are refused"));
    let addr = text.addr();
    let stats = http::request(addr, "GET", "/api/stats", &[], "");
    assert_eq!(stats.status, 200, "reads stay open: {}", stats.body);
    assert!(text.stop("TERM").0);
    let json = Served::start(
        &[f.path(), "--read-only", "--bind", "127.0.0.1:0", "--json"],
        &[],
    );
    let v = json.json();
    assert_eq!(v["token"], Value::Null, "{v}");
    assert_eq!(v["read_only"], true);
    assert!(!v["open"].as_str().unwrap().contains("#token"), "{v}");
    assert!(json.stop("TERM").0);
}

/// Beyond loopback, `/metrics` needs the token (here from a file), which Prometheus sends
/// as `Authorization: Bearer`; the announcement says so. The test reaches the server,
/// bound to 0.0.0.0, through 127.0.0.1 only.
#[test]
fn metrics_need_the_token_beyond_loopback() {
    let _serial = serial();
    let f = fixture();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), "scr4pe\n").unwrap();
    let served = Served::start(
        &[
            f.path(),
            "--bind",
            "0.0.0.0:0",
            "--token-file",
            file.path().to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        served
            .announced
            .contains("(with Authorization: Bearer TOKEN)"),
        "{}",
        served.announced
    );
    let addr = SocketAddr::from(([127, 0, 0, 1], served.addr().port()));
    let open = http::request(addr, "GET", "/metrics", &[], "");
    assert_eq!(open.status, 403, "{}", open.body);
    let auth = [("Authorization", "Bearer scr4pe")];
    let scraped = http::request(addr, "GET", "/metrics", &auth, "");
    assert_eq!(scraped.status, 200, "{}", scraped.body);
    assert!(scraped
        .body
        .contains("deadletter_queue_depth{queue=\"orders\"}"));
    assert!(served.stop("TERM").0);
}

/// `serve` holds the store and serves its control socket; Ctrl-C (SIGINT) or SIGTERM
/// stops it with exit 0, the dashboard shut down and the store closed: `control.sock` is
/// gone and the store can be taken at once.
#[test]
fn a_clean_stop_removes_the_control_socket() {
    let _serial = serial();
    let f = fixture();
    let socket = Path::new(f.path()).join("control.sock");
    for (signal, name) in [("INT", "SIGINT"), ("TERM", "SIGTERM")] {
        let served = Served::start(&[f.path(), "--bind", "127.0.0.1:0", "--json"], &[]);
        assert!(socket.exists(), "serve serves the store's control socket");
        let (clean, out, err) = served.stop(signal);
        assert!(clean, "exit after SIG{signal}: {out}{err}");
        assert!(
            out.ends_with(&format!("{{\"stopped\":\"{name}\"}}\n")),
            "{out}"
        );
        assert!(!socket.exists(), "control.sock left after SIG{signal}");
        drop(f.open()); // the lock was released
    }
}

/// `--bind localhost:PORT` resolves the name (to 127.0.0.1, as the default); a form it
/// cannot take is refused with the accepted forms.
#[test]
fn bind_takes_a_host_name() {
    let _serial = serial();
    let f = fixture();
    let served = Served::start(&[f.path(), "--bind", "localhost:0", "--json"], &[]);
    let addr = served.addr();
    assert!(addr.ip().is_loopback(), "{addr}");
    let host = format!("localhost:{}", addr.port());
    let reply = http::request(addr, "GET", "/api/stats", &[("Host", &host)], "");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(served.stop("TERM").0);
    for bad in ["localhost", "8097", "localhost:http"] {
        let o = crate::run::run(&["serve", f.path(), "--bind", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        let err = crate::run::stderr(&o);
        assert!(
            err.contains("expected HOST:PORT, such as 127.0.0.1:8080, localhost:8080"),
            "{bad}: {err}"
        );
    }
}
