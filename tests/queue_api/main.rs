//! The queue and DLQ API, one behaviour per file: what the model-based test
//! (`queue_model.rs`) and the crash tests do not single out.
//!
//! - `typed_errors`: oversized messages, unknown queues;
//! - `store_lock`: a second open of a store is `Error::Locked`;
//! - `live_store`: a read-only snapshot of a held store, the control socket, the holder named;
//! - `services`: the control socket, the guarded-replay driver and the compaction schedule
//!   started on their own, each until its guard goes; the last handle dropped on a
//!   service's thread;
//! - `idempotency`: idempotency keys and their window;
//! - `delay_and_ttl`: delayed messages, time-to-live expiry on lease;
//! - `stale_delivery`: a redelivered message's old delivery cannot report;
//! - `ack_and_lease`: one write acks a delivery and leases the next;
//! - `lease_in_order`: an in-order lease never skips a held-back suspect;
//! - `queue_browse`: a queue's own messages by state, got, counted, and an operator's
//!   retry now, delay, move to the DLQ and delete, refusals included;
//! - `queue_limit`: a queue's limit of pending messages refuses enqueues, counted;
//! - `concurrent_consumers`: distinct messages to concurrent consumers;
//! - `typed_payloads`: serde payloads;
//! - `history`: the bounded failure history;
//! - `dlq_browse`: stats from counters, list pages and filters;
//! - `dlq_alert`: the DLQ size alert hook;
//! - `replay`: replay rules;
//! - `replay_transformed`: replays with payloads through a function, and corrected batches;
//! - `dlq_import`: exported entries imported into another store, once each;
//! - `waiting_age`: the oldest waiting age after a reopen that cut leases;
//! - `reopen_delivers_once`: a reopen never hands one message out twice;
//! - `fingerprints`: failure fingerprints, and replay, delete and purge by fingerprint;
//! - `templates`: message templates and fingerprints, rule by rule;
//! - `audit_trail`: who changed a DLQ, and a message's whole life after compaction;
//! - `id_sets`: the audit trail's sets of ids, as runs;
//! - `time_travel`: a DLQ as of a past time;
//! - `policies`: the worker pool's classifier rules and retry delays;
//! - `handler_durations`: the histogram of handler times a queue records;
//! - `prometheus`: the metrics snapshot in the Prometheus text format.
//!
//! `helpers` holds the configuration and the steps they share.

#[path = "../common/mod.rs"]
mod common;
mod helpers;

mod ack_and_lease;
mod audit_trail;
mod concurrent_consumers;
mod delay_and_ttl;
mod dlq_alert;
mod dlq_browse;
mod dlq_import;
mod dlq_lazy;
mod fingerprints;
mod handler_durations;
mod history;
mod id_sets;
mod idempotency;
mod lease_in_order;
mod live_store;
mod policies;
mod prometheus;
mod queue_browse;
mod queue_limit;
mod reopen_delivers_once;
mod replay;
mod replay_transformed;
mod services;
mod stale_delivery;
mod store_lock;
mod templates;
mod time_travel;
mod typed_errors;
mod typed_payloads;
mod waiting_age;
