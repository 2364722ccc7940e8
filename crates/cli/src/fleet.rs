//! `fleet list` and `fleet replay`: the fleet DLQ of a JetStream namespace, the DLQ entries
//! that forwarders of many stores sent there (`deadletter_jetstream::FleetDlq`).
//!
//! `list` prints each entry with its origin, queue and sequence in the edge stream (the
//! handle `replay` takes); with `--json`, each entry's whole envelope in the export format
//! beside them. The usual DLQ filters apply, and `--origin` selects one store.

use deadletter_dashboard::export::{envelope_to_json, PayloadEncoding};
use deadletter_dashboard::time::format_utc;
use deadletter_jetstream::JetStream;
use serde_json::json;

use crate::cli::FleetCommand;
use crate::error::CliError;
use crate::output::{clip, payload_preview, print, print_json, Table};

pub fn run(js: &JetStream, command: &FleetCommand, json: bool) -> Result<(), CliError> {
    let fleet = js.fleet_dlq();
    match command {
        FleetCommand::List(a) => {
            let mut entries = fleet.list(a.origin.as_deref(), &a.sel.filter(), usize::MAX)?;
            if let Some(q) = &a.sel.queue {
                entries.retain(|e| &e.queue == q || e.entry.dlq_name == *q);
            }
            entries.truncate(a.limit as usize);
            if json {
                let list: Vec<_> = entries
                    .iter()
                    .map(|e| {
                        json!({
                            "origin": e.origin,
                            "queue": e.queue,
                            "sequence": e.sequence,
                            "envelope": envelope_to_json(&e.entry, PayloadEncoding::Base64, true),
                        })
                    })
                    .collect();
                return print_json(&json!({ "entries": list }));
            }
            if entries.is_empty() {
                return print("no matching fleet DLQ entries\n");
            }
            let mut t = Table::new(&[
                ">SEQ",
                "ORIGIN",
                "QUEUE",
                "DEAD-LETTERED",
                "ERROR KIND",
                "MESSAGE",
                "PAYLOAD",
            ]);
            for e in &entries {
                t.row(vec![
                    e.sequence.to_string(),
                    e.origin.clone(),
                    e.queue.clone(),
                    format_utc(e.entry.dlq.dead_lettered_at_ms),
                    clip(&e.entry.failure.error_kind, 24),
                    clip(&e.entry.failure.error_message, 40),
                    payload_preview(&e.entry.payload, 32),
                ]);
            }
            print(&t.render())
        }
        FleetCommand::Replay(a) => {
            fleet.replay(a.sequence)?;
            if json {
                print_json(&json!({ "replayed": a.sequence }))
            } else {
                print(&format!(
                    "entry {} sent back to its device; its forwarder enqueues it\n",
                    a.sequence
                ))
            }
        }
    }
}
