//! Helpers shared by integration tests.

pub mod http;
pub mod store;
