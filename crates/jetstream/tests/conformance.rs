//! The conformance suite on JetStream: each scenario in a fresh namespace on the machine's
//! NATS server (`DEADLETTER_NATS_URL`, default `nats://127.0.0.1:4250`, the server `.ci/run`
//! starts), deleted after (`common::backend::Namespace`; `tests/cluster.rs` runs the same
//! suite on a three-node cluster).

mod common;

use common::backend::Namespace;

deadletter_conformance::conformance_tests!(Namespace::fresh());
