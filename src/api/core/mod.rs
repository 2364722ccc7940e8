//! The bottom of the API layer: the store's shared state and handle ([`store`]), its
//! settings ([`config`]), who makes a change ([`actor`]), DLQ alert hooks ([`alert`]), the
//! clock ([`clock`]), handler durations ([`durations`]), the worker pools attached
//! ([`pools`]), the pools that hold leased messages (`holders`), and the types failures and
//! envelopes are seen as ([`types`]). Nothing here imports a layer above it.

pub mod actor;
pub mod alert;
pub mod clock;
pub mod config;
pub mod durations;
pub(crate) mod holders;
pub mod pools;
pub mod store;
pub mod types;
