//! The `deadletter` binary, run for real against store directories written by the library:
//! every command, its `--json` output parsed and checked against the library, exit codes
//! (2 for bad usage, 1 for a failed operation or a locked store), and export/import
//! round-tripping payload bytes exactly. One group of commands per file, as in `src/`:
//!
//! - `browse`: stats, list, show, analyze;
//! - `change`: replay, delete, purge, enqueue;
//! - `transfer`: export and import;
//! - `verify`: the read-only check;
//! - `errors`: locked and missing stores, bad usage;
//! - `live`: a store held by a running owner process, and a read-only copy;
//! - `messages`: a queue's own messages by state, and retry-now, delay, dead-letter and
//!   delete-message, on a store the tool takes and on one a running pool's owner holds;
//! - `fingerprints`: templates in `analyze`, and `--fingerprint` in list, replay, delete, purge;
//! - `guarded`: `replay --guarded` on a store the tool takes and on one an owner holds;
//! - `serve`: the dashboard;
//! - `nats`: the commands on a JetStream namespace (the machine's NATS server);
//! - `forward`: the forwarder, from a store filled offline to its limit;
//! - `features`: what the `jetstream` feature adds, and what a build without it says;
//! - `trace`: a message's life after compactions;
//! - `as_of`: `list` and `stats` of the DLQs as they were at a past time;
//! - `limits`: records larger than the tool's own message limit, kept by every command;
//! - `missing`: a deleted first, middle or last segment, reported and refused;
//! - `names`: bad queue names, a name clash and a store path that is a file, refused by kind.
//! - `foreign`: a segment of another store, refused by name.
//! - `transform`: `replay --transform`, `--payload-file` and `--edit`, through an owner
//!   process's worker pool and on a store the tool takes;
//! - `mistakes`: no store or queue created without `--create`, the nearest name for an
//!   unknown one, a `--error-kind` differing only in case, `--yes` for bulk changes.
//! - `workers`: the pools of a running owner process and its rates, a stopped pool, a gone
//!   owner, and an owner of the previous control protocol.
//!
//! `nats` and `forward` need the `jetstream` feature (on by default). `run` runs the binary (one test at a time, see `run::SERIAL`), `fixture` writes the store
//! they run it against.

mod fixture;
/// The dashboard tests' HTTP client (one request per connection, the reply read whole),
/// shared rather than written again: `serve` runs that dashboard.
#[path = "../../../dashboard/tests/common/http.rs"]
#[allow(dead_code)]
mod http;
mod run;

mod as_of;
mod browse;
mod change;
mod errors;
mod features;
mod fingerprints;
mod foreign;
#[cfg(feature = "jetstream")]
mod forward;
mod guarded;
mod limits;
mod live;
mod messages;
mod missing;
mod mistakes;
mod names;
#[cfg(feature = "jetstream")]
mod nats;
mod serve;
mod trace;
mod transfer;
mod transform;
mod verify;
mod workers;
