//! The engine layer: queue records, the state machine, checkpoints and compaction.

pub mod checkpoint;
pub mod compaction;
pub mod record;
pub mod state;
