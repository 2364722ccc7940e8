//! Two contestants on NATS JetStream, each run on its own nats-server (a free loopback
//! port, its store in the run's directory, stopped with SIGTERM when the store is
//! closed):
//!
//! * `deadletter-jetstream`: the `deadletter-jetstream` package: the envelope, the
//!   attempt history, the DLQ check of every delivery, counters;
//! * `jetstream-plain`: what a user writes by hand with the async-nats client: a
//!   work-queue stream with a pull consumer (at most 3 deliveries), a negative
//!   acknowledgement for a transient failure, and for a permanent one (or the last
//!   delivery) a publish of the payload with its error in headers to a second stream
//!   (Limits retention, subject `dlq.{kind}`), then a termination.
//!
//! Both wait for the server to confirm every acknowledgement and every publish, so the
//! difference is the envelope and its bookkeeping. Both use file storage on a server
//! with `sync_interval: always`: the server fsyncs every write before it acknowledges
//! it, so the rows are durable in the same sense as the embedded store's. Measured on the enqueue
//! workloads, drain, failure_flow and the pool workloads (`runs`).

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use async_nats::jetstream::{self, consumer::PullConsumer, stream::RetentionPolicy, AckKind};
use deadletter::queue::QueueOptions;
use deadletter_jetstream::local_server::LocalServer;
use deadletter_jetstream::{JetStream, JetStreamOptions};
use futures_util::StreamExt;
use parking_lot::Mutex;

use crate::contestant::{BenchResult, Contestant, DlqEntry, DlqStats, Failure, Id, Leased};
use crate::deadletter_queue::Backend;
use crate::plan::Workload;

/// The workloads the JetStream contestants run: writes, drain, the failure flow and the
/// pool workloads, with file storage. (`pool_latency` once hung here for good: a lease
/// that does not wait sent a no-wait pull that nats-server left unanswered; the backend now
/// stops listening after one pull slice, and this run is what would hang again.)
pub fn runs(w: Workload, durable: bool) -> bool {
    durable
        && matches!(
            w,
            Workload::EnqueueOne
                | Workload::EnqueueBatch
                | Workload::EnqueueThreads
                | Workload::Drain
                | Workload::FailureFlow
                | Workload::Pool1
                | Workload::Pool2
                | Workload::Pool4
                | Workload::PoolFailureFlow
                | Workload::PoolLatency
        )
}

/// A nats-server of the run's own, its store under the run's directory: JetStream with
/// `sync_interval: always` (an fsync per write, as the embedded durable rows), the binary
/// of `DEADLETTER_NATS_SERVER` (see `deadletter_jetstream::local_server`); stopped with
/// SIGTERM when dropped, so its files are complete.
struct Server {
    server: LocalServer,
    url: String,
}

impl Server {
    fn start(dir: &Path) -> BenchResult<Server> {
        let server =
            LocalServer::start(&dir.join("nats")).map_err(|e| format!("start nats-server: {e}"))?;
        Ok(Server {
            url: server.url(),
            server,
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.server.stop();
    }
}

/// Options shared by both: a lease longer than any run, at most 3 deliveries.
const MAX_DELIVERIES: u32 = 3;
const LEASE: Duration = Duration::from_secs(3600);

/// Opens the `deadletter-jetstream` contestant on its own server in `dir`: the same
/// contestant code as the embedded store's (`deadletter::Backend`).
pub fn open_deadletter(dir: &Path, _durable: bool) -> BenchResult<Box<dyn Contestant>> {
    let server = Server::start(dir)?;
    let js = JetStream::connect_with(&server.url, JetStreamOptions::new("bench"))?;
    let queue = js.queue_with(
        "bench",
        QueueOptions::default()
            .max_attempts(MAX_DELIVERIES)
            .visibility_timeout(LEASE),
    )?;
    Ok(Box::new(Backend::new(queue, server)))
}

// ---------------------------------------------------------------------------------
// jetstream-plain

const WORK_STREAM: &str = "work";
const WORK_SUBJECT: &str = "work.jobs";
const DLQ_STREAM: &str = "dead";

struct Plain {
    runtime: tokio::runtime::Runtime,
    js: jetstream::Context,
    consumer: PullConsumer,
    leased: Mutex<HashMap<u64, jetstream::Message>>,
    _server: Server,
}

/// Opens the `jetstream-plain` contestant on its own server in `dir`.
pub fn open_plain(dir: &Path, _durable: bool) -> BenchResult<Box<dyn Contestant>> {
    let server = Server::start(dir)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let (js, consumer) = runtime.block_on(async {
        let client = async_nats::connect(&server.url).await?;
        let js = jetstream::new(client);
        let work = js
            .get_or_create_stream(jetstream::stream::Config {
                name: WORK_STREAM.into(),
                subjects: vec![WORK_SUBJECT.into()],
                retention: RetentionPolicy::WorkQueue,
                ..Default::default()
            })
            .await?;
        js.get_or_create_stream(jetstream::stream::Config {
            name: DLQ_STREAM.into(),
            subjects: vec!["dlq.*".into()],
            ..Default::default()
        })
        .await?;
        let consumer: PullConsumer = work
            .get_or_create_consumer(
                "workers",
                jetstream::consumer::pull::Config {
                    durable_name: Some("workers".into()),
                    ack_wait: LEASE,
                    max_deliver: MAX_DELIVERIES as i64,
                    max_ack_pending: 100_000,
                    ..Default::default()
                },
            )
            .await?;
        Ok::<_, BenchErrorSend>((js, consumer))
    })?;
    Ok(Box::new(Plain {
        runtime,
        js,
        consumer,
        leased: Mutex::new(HashMap::new()),
        _server: server,
    }))
}

type BenchErrorSend = Box<dyn std::error::Error + Send + Sync>;

impl Plain {
    fn take(&self, id: Id) -> BenchResult<jetstream::Message> {
        self.leased
            .lock()
            .remove(&(id.0 as u64))
            .ok_or_else(|| format!("message {} is not leased", id.0).into())
    }

    async fn publish_all(&self, payloads: &[&[u8]]) -> BenchResult<()> {
        let mut acks = Vec::with_capacity(payloads.len());
        for p in payloads {
            acks.push(
                self.js
                    .publish(WORK_SUBJECT, bytes::Bytes::copy_from_slice(p))
                    .await?,
            );
        }
        for ack in acks {
            ack.await?;
        }
        Ok(())
    }

    /// Every DLQ message (on `subject`), in order, up to `limit`.
    async fn scan_dlq(&self, subject: &str, limit: usize) -> BenchResult<Vec<DlqEntry>> {
        let stream = self.js.get_stream(DLQ_STREAM).await?;
        let consumer: PullConsumer = stream
            .create_consumer(jetstream::consumer::pull::Config {
                filter_subject: subject.into(),
                ack_policy: jetstream::consumer::AckPolicy::None,
                inactive_threshold: Duration::from_secs(30),
                ..Default::default()
            })
            .await?;
        let mut out = Vec::new();
        'fetch: while out.len() < limit {
            let mut batch = consumer.fetch().max_messages(256).messages().await?;
            let mut got = 0;
            while let Some(m) = batch.next().await {
                let m = m?;
                got += 1;
                let pending = m.info()?.pending;
                out.push(plain_entry(m.info()?.stream_sequence, &m.message));
                if out.len() >= limit || pending == 0 {
                    break 'fetch;
                }
            }
            if got == 0 {
                break;
            }
        }
        Ok(out)
    }
}

fn plain_entry(seq: u64, m: &async_nats::Message) -> DlqEntry {
    let header = |name: &str| {
        m.headers
            .as_ref()
            .and_then(|h| h.get(name))
            .map(|v| v.as_str().to_string())
            .unwrap_or_default()
    };
    DlqEntry {
        id: Id(seq as u128),
        payload: m.payload.to_vec(),
        error_kind: header("Error-Kind"),
        error: header("Error"),
        attempts: header("Attempts").parse().unwrap_or(0),
    }
}

impl Contestant for Plain {
    fn enqueue(&self, payload: &[u8]) -> BenchResult<()> {
        self.runtime.block_on(self.publish_all(&[payload]))
    }

    fn enqueue_batch(&self, payloads: &[&[u8]]) -> BenchResult<()> {
        self.runtime.block_on(self.publish_all(payloads))
    }

    fn lease(&self, max: usize) -> BenchResult<Vec<Leased>> {
        self.runtime.block_on(async {
            let mut batch = self.consumer.fetch().max_messages(max).messages().await?;
            let mut out = Vec::new();
            let mut got = Vec::new();
            while let Some(m) = batch.next().await {
                let m = m?;
                let info = m.info()?;
                let (seq, attempt) = (info.stream_sequence, info.delivered as u32);
                out.push(Leased {
                    id: Id(seq as u128),
                    payload: m.payload.to_vec(),
                    attempt,
                });
                got.push((seq, m));
            }
            self.leased.lock().extend(got);
            Ok(out)
        })
    }

    fn ack(&self, ids: &[Id]) -> BenchResult<()> {
        let msgs = ids
            .iter()
            .map(|&id| self.take(id))
            .collect::<BenchResult<Vec<_>>>()?;
        self.runtime.block_on(async {
            let acks = msgs.iter().map(|m| m.double_ack());
            for r in futures_util::future::join_all(acks).await {
                r?;
            }
            Ok(())
        })
    }

    fn nack(&self, id: Id, failure: &Failure<'_>) -> BenchResult<()> {
        let m = self.take(id)?;
        self.runtime.block_on(async {
            let delivered = m.info()?.delivered as u32;
            let (kind, error) = match *failure {
                Failure::Transient { retry_after, .. } if delivered < MAX_DELIVERIES => {
                    let delay = (!retry_after.is_zero()).then_some(retry_after);
                    m.double_ack_with(AckKind::Nak(delay)).await?;
                    return Ok(());
                }
                Failure::Transient { error, .. } => ("max_deliveries", error),
                Failure::Permanent { kind, error } => (kind, error),
            };
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("Error-Kind", kind);
            headers.insert("Error", error);
            headers.insert("Attempts", delivered.to_string().as_str());
            self.js
                .publish_with_headers(format!("dlq.{kind}"), headers, m.payload.clone())
                .await?
                .await?;
            m.double_ack_with(AckKind::Term).await?;
            Ok(())
        })
    }

    fn dlq_stats(&self) -> BenchResult<DlqStats> {
        self.runtime.block_on(async {
            let stream = self.js.get_stream(DLQ_STREAM).await?;
            let mut subjects = stream.info_with_subjects("dlq.*").await?;
            let mut stats = DlqStats::default();
            while let Some(s) = subjects.next().await {
                let (subject, count) = s?;
                let kind = subject.trim_start_matches("dlq.").to_string();
                stats.total += count as u64;
                *stats.by_kind.entry(kind).or_default() += count as u64;
            }
            Ok(stats)
        })
    }

    fn dlq_list(&self, kind: Option<&str>, limit: usize) -> BenchResult<Vec<DlqEntry>> {
        let subject = format!("dlq.{}", kind.unwrap_or("*"));
        self.runtime.block_on(self.scan_dlq(&subject, limit))
    }

    fn dlq_get(&self, id: Id) -> BenchResult<Option<DlqEntry>> {
        self.runtime.block_on(async {
            let stream = self.js.get_stream(DLQ_STREAM).await?;
            match stream.get_raw_message(id.0 as u64).await {
                Ok(m) => {
                    let msg = async_nats::Message {
                        subject: m.subject.clone(),
                        reply: None,
                        payload: m.payload.clone(),
                        headers: Some(m.headers.clone()),
                        status: None,
                        description: None,
                        length: 0,
                    };
                    Ok(Some(plain_entry(m.sequence, &msg)))
                }
                Err(e) if e.kind() == jetstream::stream::RawMessageErrorKind::NoMessageFound => {
                    Ok(None)
                }
                Err(e) => Err(e.into()),
            }
        })
    }

    fn dlq_replay(&self, ids: &[Id]) -> BenchResult<usize> {
        self.runtime.block_on(async {
            let stream = self.js.get_stream(DLQ_STREAM).await?;
            let mut moved = 0;
            for id in ids {
                let m = stream.get_raw_message(id.0 as u64).await?;
                self.js
                    .publish(WORK_SUBJECT, m.payload.clone())
                    .await?
                    .await?;
                stream.delete_message(m.sequence).await?;
                moved += 1;
            }
            Ok(moved)
        })
    }

    fn pending(&self) -> BenchResult<u64> {
        self.runtime.block_on(async {
            let info = self.consumer.get_info().await?;
            Ok(info.num_pending + info.num_ack_pending as u64)
        })
    }
}
