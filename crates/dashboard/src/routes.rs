//! Answering one request: the routes, the checks every request passes (expected `Host`,
//! the token, same origin, a JSON body of bounded size; see the crate's security model),
//! the protective headers of every response, and the log line of every change.

use std::io::Read;

use tiny_http::{Header, Method, Request, Response};

use crate::options::ExtraMetrics;
use crate::reply::Reply;
use crate::source::Source;
use crate::{api, change, time};

/// What answering a request needs: the source served and the settings of its checks
/// (shared by the request threads).
pub(crate) struct Ctx<S> {
    /// What is served.
    pub(crate) store: S,
    pub(crate) token: String,
    /// `Host` header values accepted (`None`: any, for an unspecified bind address).
    pub(crate) hosts: Option<Vec<String>>,
    pub(crate) reads_need_token: bool,
    pub(crate) log_actions: bool,
    pub(crate) extra_metrics: Option<ExtraMetrics>,
}

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const LIST_JS: &str = include_str!("assets/list.js");
const GUARDED_JS: &str = include_str!("assets/guarded.js");
const WORKERS_JS: &str = include_str!("assets/workers.js");
const STYLE_CSS: &str = include_str!("assets/style.css");

/// The header that carries the token on mutating requests.
pub const TOKEN_HEADER: &str = "X-Deadletter-Token";

/// Largest request body accepted.
const MAX_BODY: u64 = 1 << 20;

/// Equality whose time does not depend on where the strings differ. Hand-written rather
/// than a crate (such as `subtle`): one comparison of a short token per request, with no
/// early exit, where a request costs milliseconds of network time; the length, which it
/// does reveal, is the same for every random token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn header(name: &str, value: &str) -> Option<Header> {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).ok()
}

fn header_value<'r>(request: &'r Request, name: &'static str) -> Option<&'r str> {
    request
        .headers()
        .iter()
        .find(|h| h.field.equiv(name))
        .map(|h| h.value.as_str())
}

pub(crate) fn handle<S: Source>(ctx: &Ctx<S>, mut request: Request) {
    let reply = route(ctx, &mut request);
    let mut response = Response::from_string(reply.body).with_status_code(reply.status);
    let headers = [
        ("Content-Type", reply.content_type),
        ("Cache-Control", "no-store"),
        ("X-Content-Type-Options", "nosniff"),
        ("X-Frame-Options", "DENY"),
        ("Referrer-Policy", "same-origin"),
        (
            "Content-Security-Policy",
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
             connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
        ),
    ];
    for (name, value) in headers {
        if let Some(h) = header(name, value) {
            response.add_header(h);
        }
    }
    // The client may have gone away: nothing to do about it.
    let _ = request.respond(response);
}

fn route<S: Source>(ctx: &Ctx<S>, request: &mut Request) -> Reply {
    if let Some(hosts) = &ctx.hosts {
        let host = header_value(request, "Host").unwrap_or("");
        if !hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            return Reply::error(
                421,
                format!("unexpected Host header {host:?}: use the address the dashboard printed"),
            );
        }
    }
    let url = request.url().to_string();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let method = request.method().clone();
    match (&method, path) {
        (Method::Get, "/") | (Method::Get, "/index.html") => {
            Reply::text(200, "text/html; charset=utf-8", INDEX_HTML)
        }
        (Method::Get, "/app.js") => Reply::text(200, "text/javascript; charset=utf-8", APP_JS),
        (Method::Get, "/list.js") => Reply::text(200, "text/javascript; charset=utf-8", LIST_JS),
        (Method::Get, "/guarded.js") => {
            Reply::text(200, "text/javascript; charset=utf-8", GUARDED_JS)
        }
        (Method::Get, "/workers.js") => {
            Reply::text(200, "text/javascript; charset=utf-8", WORKERS_JS)
        }
        (Method::Get, "/style.css") => Reply::text(200, "text/css; charset=utf-8", STYLE_CSS),
        (Method::Get, "/metrics") if ctx.reads_need_token && !read_token_ok(ctx, request) => {
            Reply::error(
                403,
                format!(
                    "beyond loopback /metrics needs the token: {TOKEN_HEADER}: TOKEN, or \
                     Authorization: Bearer TOKEN"
                ),
            )
        }
        (Method::Get, "/metrics") => match ctx.store.metrics() {
            Ok(m) => {
                let mut text = m.to_prometheus();
                if let Some(extra) = &ctx.extra_metrics {
                    text.push_str(&(extra.0)());
                }
                Reply::text(200, "text/plain; version=0.0.4; charset=utf-8", text)
            }
            Err(e) => Reply::error(500, e.to_string()),
        },
        (Method::Get, "/healthz") => Reply::text(200, "text/plain; charset=utf-8", "ok\n"),
        (Method::Get, p) if change::Action::of_path(p).is_some() => {
            Reply::error(405, "this endpoint takes POST only")
        }
        (Method::Get, p) if p.starts_with("/api/") => {
            if ctx.reads_need_token && !read_token_ok(ctx, request) {
                return Reply::error(403, format!("missing or wrong {TOKEN_HEADER} header"));
            }
            api::get(&ctx.store, p, query)
        }
        (Method::Post, p) => match change::Action::of_path(p) {
            Some(action) => mutate(ctx, request, action),
            None => Reply::error(404, format!("no such endpoint {path:?}")),
        },
        (Method::Get, _) => Reply::error(404, format!("no such page {path:?}")),
        _ => Reply::error(405, "method not allowed"),
    }
}

/// Whether the request carries the token in [`TOKEN_HEADER`] (what a change needs).
fn token_ok<S: Source>(ctx: &Ctx<S>, request: &Request) -> bool {
    header_value(request, TOKEN_HEADER)
        .is_some_and(|t| constant_time_eq(t.trim().as_bytes(), ctx.token.as_bytes()))
}

/// Whether a read carries the token: in [`TOKEN_HEADER`], or as `Authorization: Bearer`
/// (what a Prometheus scrape sends with `authorization: {credentials_file: ...}`). Reads
/// only: a change still needs the custom header, whose absence from cross-site requests
/// the security model rests on.
fn read_token_ok<S: Source>(ctx: &Ctx<S>, request: &Request) -> bool {
    token_ok(ctx, request)
        || header_value(request, "Authorization")
            .and_then(|v| {
                let (scheme, token) = v.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then_some(token)
            })
            .is_some_and(|t| constant_time_eq(t.trim().as_bytes(), ctx.token.as_bytes()))
}

/// Checks that a browser's `Origin` (or, without it, `Referer`) names this dashboard.
fn same_origin(request: &Request) -> Result<(), String> {
    let host = header_value(request, "Host").unwrap_or("");
    let own = format!("http://{host}");
    if let Some(origin) = header_value(request, "Origin") {
        if !origin.eq_ignore_ascii_case(&own) {
            return Err(format!("cross-site request refused (Origin {origin})"));
        }
    } else if let Some(referer) = header_value(request, "Referer") {
        let ok = referer
            .get(..own.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(&own))
            && matches!(referer.as_bytes().get(own.len()), None | Some(b'/'));
        if !ok {
            return Err(format!("cross-site request refused (Referer {referer})"));
        }
    }
    Ok(())
}

fn mutate<S: Source>(ctx: &Ctx<S>, request: &mut Request, action: change::Action) -> Reply {
    let remote = request
        .remote_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|| "-".into());
    let what = action.path();
    let refuse = |status: u16, why: String| {
        if ctx.log_actions {
            eprintln!(
                "{} dashboard: refused POST {what} from {remote}: {why}",
                time::format_utc(ctx.store.now_ms())
            );
        }
        Reply::error(status, why)
    };
    if !token_ok(ctx, request) {
        return refuse(403, format!("missing or wrong {TOKEN_HEADER} header"));
    }
    if let Err(why) = same_origin(request) {
        return refuse(403, why);
    }
    let json = header_value(request, "Content-Type").is_some_and(|c| {
        c.trim()
            .to_ascii_lowercase()
            .starts_with("application/json")
    });
    if !json {
        return refuse(
            415,
            "the body must be JSON (Content-Type: application/json)".into(),
        );
    }
    let mut body = Vec::new();
    if let Err(e) = request
        .as_reader()
        .take(MAX_BODY + 1)
        .read_to_end(&mut body)
    {
        return refuse(400, format!("cannot read the body: {e}"));
    }
    if body.len() as u64 > MAX_BODY {
        return refuse(413, format!("the body is larger than {MAX_BODY} bytes"));
    }
    let (reply, summary) = change::mutate(&ctx.store, action, &body);
    if ctx.log_actions {
        eprintln!(
            "{} dashboard: POST {what} from {remote}: {summary}",
            time::format_utc(ctx.store.now_ms())
        );
    }
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_eq_compares() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
