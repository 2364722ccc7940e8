//! `serve`: the web dashboard and `/metrics`, in this process, until it is stopped.

use deadletter_dashboard::{self as dashboard, DashboardOptions, Source};

use crate::cli::ServeArgs;
use crate::error::CliError;
use crate::output::print;
use crate::store_access::{self, Open};

pub fn serve(args: &ServeArgs, json: bool) -> Result<(), CliError> {
    let store = store_access::open(&args.dir, Open::Existing)?;
    serve_on(store, args, json)
}

/// `serve` of any source of queues and DLQs (a store, a JetStream namespace).
pub fn serve_on<S: Source>(store: S, args: &ServeArgs, json: bool) -> Result<(), CliError> {
    let what = store.describe();
    let mut options = DashboardOptions::default().bind(args.bind);
    if let Some(token) = &args.token {
        options = options.token(token);
    }
    let server = dashboard::serve_source(store, options).map_err(CliError::Dashboard)?;
    let text = if json {
        serde_json::json!({
            "url": server.url(),
            "addr": server.local_addr().to_string(),
            "token": server.token(),
            "open": server.url_with_token(),
        })
        .to_string()
            + "\n"
    } else {
        let mut t = format!(
            "deadletter dashboard for {} on {}\n\
             token for replay and delete: {}\n\
             open: {}\n\
             metrics: {}metrics\n",
            what,
            server.url(),
            server.token(),
            server.url_with_token(),
            server.url()
        );
        if !server.local_addr().ip().is_loopback() {
            t.push_str(
                "warning: listening beyond loopback; API reads need the token too, and \
                 traffic is not encrypted\n",
            );
        }
        t.push_str("press Ctrl-C to stop\n");
        t
    };
    print(&text)?;
    server.wait();
    Ok(())
}
