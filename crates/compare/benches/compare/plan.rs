//! How big and how long every workload is: the one place to tune the run.
//!
//! A measured run does `n` operations but also stops once `budget` has
//! elapsed (checked after every operation), and reports operations done /
//! time taken. `n` also sizes what a workload prefills (pending messages to
//! drain, DLQ entries to inspect or replay, messages to recover on reopen),
//! so it is kept modest for the slow durable cases.

use std::time::Duration;

/// The workloads, in report order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Workload {
    /// One message per commit.
    EnqueueOne,
    /// `Plan::batch` messages per commit.
    EnqueueBatch,
    /// One message per commit from `Plan::threads` threads at once.
    EnqueueThreads,
    /// Lease `Plan::lease_batch` messages, ack them, repeat.
    Drain,
    /// Drain through a handler: 10% fail permanently, 10% fail twice first.
    FailureFlow,
    /// The engine's worker pool (or `pool::batch_pool`) with a no-op handler,
    /// 1 worker.
    Pool1,
    /// The same with 2 workers.
    Pool2,
    /// The same with 4 workers.
    Pool4,
    /// The failure flow through the pool (4 workers): 10% fail permanently,
    /// 10% fail twice first, each retry after `Plan::retry_after`.
    PoolFailureFlow,
    /// One producer enqueueing one message at a time while the pool (2
    /// workers) handles them: the time from enqueue to handler.
    PoolLatency,
    /// DLQ statistics (total and per error kind) on a full DLQ.
    DlqStats,
    /// First `Plan::dlq_list_limit` DLQ entries of one error kind.
    DlqListFiltered,
    /// One DLQ entry by id.
    DlqGet,
    /// Move DLQ entries back to the main queue, `Plan::batch` per call.
    Replay,
    /// Open a store full of pending messages, lease the first one and count
    /// the pending messages (the engine's own stats).
    Reopen,
}

impl Workload {
    /// Every workload, in report order.
    pub const ALL: [Workload; 15] = [
        Workload::EnqueueOne,
        Workload::EnqueueBatch,
        Workload::EnqueueThreads,
        Workload::Drain,
        Workload::FailureFlow,
        Workload::Pool1,
        Workload::Pool2,
        Workload::Pool4,
        Workload::PoolFailureFlow,
        Workload::PoolLatency,
        Workload::DlqStats,
        Workload::DlqListFiltered,
        Workload::DlqGet,
        Workload::Replay,
        Workload::Reopen,
    ];

    /// Name used in the report.
    pub fn name(self) -> &'static str {
        match self {
            Workload::EnqueueOne => "enqueue_one",
            Workload::EnqueueBatch => "enqueue_batch",
            Workload::EnqueueThreads => "enqueue_4_threads",
            Workload::Drain => "drain",
            Workload::FailureFlow => "failure_flow",
            Workload::Pool1 => "pool_1_worker",
            Workload::Pool2 => "pool_2_workers",
            Workload::Pool4 => "pool_4_workers",
            Workload::PoolFailureFlow => "pool_failure_flow",
            Workload::PoolLatency => "pool_latency",
            Workload::DlqStats => "dlq_stats",
            Workload::DlqListFiltered => "dlq_list_filtered",
            Workload::DlqGet => "dlq_get",
            Workload::Replay => "replay",
            Workload::Reopen => "reopen",
        }
    }

    /// Read-only workloads share one prefilled DLQ per contestant and payload.
    pub fn is_dlq_read(self) -> bool {
        matches!(
            self,
            Workload::DlqStats | Workload::DlqListFiltered | Workload::DlqGet
        )
    }

    /// Workloads measured on the shared DLQ store (the reads and replay).
    pub fn uses_dlq_store(self) -> bool {
        self.is_dlq_read() || self == Workload::Replay
    }

    /// Worker threads of a pool workload; `None` for the others.
    pub fn pool_workers(self) -> Option<usize> {
        match self {
            Workload::Pool1 => Some(1),
            Workload::Pool2 | Workload::PoolLatency => Some(2),
            Workload::Pool4 | Workload::PoolFailureFlow => Some(4),
            _ => None,
        }
    }

    /// Durabilities measured. Reads and recovery do not commit, so only the
    /// durable configuration is measured for them; latency only matters
    /// durable (not durable, an enqueue is a memory copy).
    pub fn durabilities(self) -> &'static [bool] {
        if self.is_dlq_read() || self == Workload::Reopen || self == Workload::PoolLatency {
            &[true]
        } else {
            &[true, false]
        }
    }

    /// Payload sizes measured: the pool workloads only at the smallest (the
    /// pool's cost is per message; the payload's is the enqueue rows').
    pub fn payload_sizes(self, plan: &Plan) -> &[usize] {
        if self.pool_workers().is_some() {
            &plan.payload_sizes[..1]
        } else {
            &plan.payload_sizes
        }
    }
}

/// Everything that sizes a comparison run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// `--quick` was given.
    pub quick: bool,
    /// Measured runs per row (the median is reported).
    pub runs: usize,
    /// Time cap of one measured run.
    pub budget: Duration,
    /// Payload sizes in bytes.
    pub payload_sizes: [usize; 2],
    /// Messages per batch commit (enqueue_batch, replay, prefill).
    pub batch: usize,
    /// Threads of enqueue_4_threads.
    pub threads: usize,
    /// Messages per lease call in drain and failure_flow.
    pub lease_batch: usize,
    /// Messages per lease of a pool built on the trait (`pool::batch_pool`):
    /// 256, the largest batch deadletter's own pool reserved when this was written.
    pub pool_batch: usize,
    /// Backoff of a transient failure in pool_failure_flow.
    pub retry_after: Duration,
    /// Entries returned by one dlq_list_filtered call.
    pub dlq_list_limit: usize,
    /// Bytes written by the sequential-write reference.
    pub seq_write_bytes: usize,
    /// Bytes copied by the memcpy reference.
    pub memcpy_bytes: usize,
    /// Segment sizes of the "few messages" open probes (`probe.rs`); the
    /// first is also the pending-messages probe's.
    pub probe_segment_sizes: [u64; 2],
    /// Pending messages of the open + memory probe.
    pub probe_pending: usize,
}

impl Plan {
    /// The plan for a quick (`--quick`) or full run.
    pub fn new(quick: bool) -> Self {
        Plan {
            quick,
            runs: 3,
            budget: if quick {
                Duration::from_millis(60)
            } else {
                Duration::from_millis(1500)
            },
            payload_sizes: [100, 1024],
            batch: 1000,
            threads: 4,
            lease_batch: 100,
            pool_batch: 256,
            retry_after: Duration::from_millis(2),
            dlq_list_limit: 100,
            seq_write_bytes: if quick { 32 << 20 } else { 256 << 20 },
            memcpy_bytes: if quick { 256 << 20 } else { 2 << 30 },
            probe_segment_sizes: if quick {
                [8 << 20, 64 << 20]
            } else {
                [64 << 20, 256 << 20]
            },
            probe_pending: if quick { 20_000 } else { 1_000_000 },
        }
    }

    /// Operations of one measured run (messages, or calls for DLQ reads),
    /// which is also the prefill size where the workload needs one.
    pub fn n(&self, workload: Workload, durable: bool, contestant: &str) -> usize {
        use Workload::*;
        // (full plain, full durable, quick plain, quick durable)
        let (fp, fd, qp, qd) = match workload {
            EnqueueOne => (300_000, 20_000, 20_000, 2_000),
            EnqueueBatch => (2_000_000, 500_000, 50_000, 10_000),
            EnqueueThreads => (400_000, 40_000, 20_000, 4_000),
            Drain => (100_000, 20_000, 2_000, 1_000),
            FailureFlow => (50_000, 10_000, 1_000, 300),
            // Quick: as small as drain's (a file-per-message store's fill and
            // cleanup dominate the quick run's time otherwise).
            Pool1 | Pool2 | Pool4 => (300_000, 50_000, 2_000, 1_000),
            PoolFailureFlow => (100_000, 20_000, 1_000, 300),
            // Bounded by the time budget in practice (one durable enqueue each).
            PoolLatency => (20_000, 20_000, 1_000, 1_000),
            // Calls; bounded by the time budget in practice.
            DlqStats => (1_000, 1_000, 100, 100),
            DlqListFiltered => (10_000, 10_000, 1_000, 1_000),
            DlqGet => (1_000_000, 1_000_000, 100_000, 100_000),
            Replay => (10_000, 10_000, 300, 300),
            Reopen => (1_000_000, 1_000_000, 5_000, 5_000),
        };
        let n = match (self.quick, durable) {
            (false, false) => fp,
            (false, true) => fd,
            (true, false) => qp,
            (true, true) => qd,
        };
        match (contestant, self.quick) {
            ("filesystem-json", false) => n.min(file_per_message_cap(workload, durable)),
            _ => n,
        }
    }

    /// Entries in the DLQ inspected by dlq_stats / dlq_list_filtered / dlq_get;
    /// the replay runs (`plan.runs` durable, as many plain) take their entries
    /// from it too, so it must hold `2 * runs * n(Replay)`.
    pub fn dlq_entries(&self) -> usize {
        if self.quick {
            2_000
        } else {
            100_000
        }
    }
}

/// Smaller prefills for `filesystem-json` in the full run. Its stores hold
/// one file per message, and deleting a file whose blocks reached the disk is
/// slow here (the file system is mounted with `discard`, so every freed
/// extent waits for a synchronous discard: 300 to 3,000 files/s measured).
/// It drains only ~10,000 messages/s anyway, so a run uses at most this many
/// before its time budget is spent; throughput is per message either way.
fn file_per_message_cap(workload: Workload, durable: bool) -> usize {
    match (workload, durable) {
        (Workload::Drain | Workload::Pool1 | Workload::Pool2 | Workload::Pool4, false) => 20_000,
        (Workload::Drain | Workload::Pool1 | Workload::Pool2 | Workload::Pool4, true) => 10_000,
        (Workload::FailureFlow | Workload::PoolFailureFlow, false) => 10_000,
        (Workload::FailureFlow | Workload::PoolFailureFlow, true) => 3_000,
        (Workload::Reopen, _) => 20_000,
        _ => usize::MAX,
    }
}
