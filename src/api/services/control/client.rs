//! The asking side of the control socket: [`Client`].

use std::io::BufReader;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use parking_lot::Mutex;

use super::protocol::{
    self, EnqueueRequest, GuardedStep, RemoteError, Reply, Request, CORRECTED_BATCH_SINCE,
    OLDEST_COMPATIBLE, PROTOCOL_VERSION, QUEUE_MESSAGES_SINCE, WORKERS_SINCE,
};
use crate::api::activity::Workers;
use crate::api::core::actor::Actor;
use crate::api::core::types::{DeadLetter, MessageId};
use crate::api::dlq::{Correction, Filter, ImportReport, Page, ReplayOptions, ReplayReport};
use crate::api::guarded::{GuardedReplay, GuardedReplayOptions};
use crate::api::queue::{
    ActionReport, EnqueueOptions, MessageAction, MessageCounts, QueuedMessage, QueuedState,
};
use crate::error::{Error, Result};

/// Sends `$request` on `$client` and takes from its reply what `$pattern` matches, as
/// `$value` (see [`Client::ask`]).
macro_rules! ask {
    ($client:expr, $request:expr, $pattern:pat => $value:expr) => {
        $client.ask($request, |reply| match reply {
            $pattern => Ok($value),
            other => Err(other),
        })
    };
}

/// How long a client waits for a reply: a large replay or import batch is carried out,
/// and made durable, before the owner answers.
const REPLY_TIMEOUT: Duration = Duration::from_secs(600);

/// A connection to the control socket of the process that holds a store (see the module
/// documentation). Each call is one request, carried out by the owner before it returns.
/// Calls from several threads take turns.
#[derive(Debug)]
pub struct Client {
    dir: PathBuf,
    conn: Mutex<(BufReader<UnixStream>, UnixStream)>,
    owner_pid: u32,
    /// The protocol version spoken with the owner: this build's, or the older compatible
    /// one an older owner speaks.
    speaks: u16,
}

/// What [`Client::mark_reprocessed`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MarkReport {
    /// Entries marked.
    pub marked: Vec<MessageId>,
    /// Entries refused (gone, or not entries of that DLQ), with the reason.
    pub failed: Vec<(MessageId, String)>,
}

impl Client {
    /// Connects to the control socket in store directory `dir` and greets the owner.
    /// [`Error::NoOwner`] when no socket is there, nobody answers on it (the owner died, or
    /// serves none), or the owner speaks another protocol version.
    pub fn connect(dir: impl AsRef<Path>) -> Result<Client> {
        Self::greet(dir.as_ref(), None, REPLY_TIMEOUT)
    }

    /// [`Client::connect`], waiting at most `timeout` for each reply (the greeting's
    /// included) rather than the ten minutes a large change may take: for a tool that
    /// only reads what the owner knows ([`Client::workers`]) and must not hang on an
    /// owner that stopped answering. A reply later than that is [`Error::NoOwner`].
    pub fn connect_with_timeout(dir: impl AsRef<Path>, timeout: Duration) -> Result<Client> {
        Self::greet(dir.as_ref(), None, timeout)
    }

    /// [`Client::connect`], with the changes asked on this connection recorded in the
    /// owner's audit trail as made by `actor` (the command-line tool passes `user@host`).
    pub fn connect_as(dir: impl AsRef<Path>, actor: &Actor) -> Result<Client> {
        Self::greet(dir.as_ref(), Some(actor.name().to_string()), REPLY_TIMEOUT)
    }

    fn greet(dir: &Path, actor: Option<String>, timeout: Duration) -> Result<Client> {
        let dir = dir.to_path_buf();
        let path = dir.join(super::SOCKET_NAME);
        let no_owner = |reason: String| Error::NoOwner {
            path: dir.clone(),
            reason,
        };
        let stream = match UnixStream::connect(&path) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(no_owner(format!(
                    "it has no control socket ({} is missing): the process holding the \
                     store must enable Config::control_socket",
                    path.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                return Err(no_owner(format!(
                    "nobody answers on {} (its owner is gone or stopped serving)",
                    path.display()
                )))
            }
            Err(e) => return Err(no_owner(format!("connect to {}: {e}", path.display()))),
        };
        stream
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
            .map_err(|e| Error::io("set timeout", &path, e))?;
        let writer = stream
            .try_clone()
            .map_err(|e| Error::io("clone socket", &path, e))?;
        let mut client = Client {
            dir: dir.clone(),
            conn: Mutex::new((BufReader::new(stream), writer)),
            owner_pid: 0,
            speaks: PROTOCOL_VERSION,
        };
        let hello = Request::Hello { actor };
        let mut reply = client.exchange(&hello)?;
        if let Reply::Failed(RemoteError::Unsupported { supported, .. }) = reply {
            // An older owner: speak its version, if this build still does.
            if (OLDEST_COMPATIBLE..PROTOCOL_VERSION).contains(&supported) {
                client.speaks = supported;
                reply = client.exchange(&hello)?;
            }
        }
        match reply {
            Reply::Hello { protocol, pid } if protocol == client.speaks => {
                client.owner_pid = pid;
                Ok(client)
            }
            Reply::Hello { protocol, .. }
            | Reply::Failed(RemoteError::Unsupported {
                supported: protocol,
                ..
            }) => Err(no_owner(format!(
                "the owner speaks control protocol version {protocol}, this build \
                 {OLDEST_COMPATIBLE} to {PROTOCOL_VERSION}"
            ))),
            Reply::Failed(e) => Err(e.into()),
            other => Err(Error::Remote {
                kind: "BadReply".into(),
                message: format!("unexpected reply {other:?}"),
            }),
        }
    }

    /// The process id of the store's owner.
    pub fn owner_pid(&self) -> u32 {
        self.owner_pid
    }

    /// The control protocol version spoken with the owner: [`PROTOCOL_VERSION`], or an
    /// older one (down to [`OLDEST_COMPATIBLE`]) that an owner running an older release
    /// speaks; a request added after it is refused before it is sent.
    pub fn protocol(&self) -> u16 {
        self.speaks
    }

    /// The owner's worker pools attached to each queue and the queues' recent rates
    /// (`Store::workers` in the owner). An owner that speaks a protocol older than 6 knows
    /// no such request: that is [`Error::Remote`] of kind `Unsupported`, saying so.
    pub fn workers(&self) -> Result<Workers> {
        if self.speaks < WORKERS_SINCE {
            return Err(Error::Remote {
                kind: "Unsupported".into(),
                message: format!(
                    "the process holding the store (pid {}) runs an older deadletter \
                     (control protocol {}), which cannot list its worker pools (protocol \
                     {WORKERS_SINCE} or later): upgrade the deadletter it is built with",
                    self.owner_pid, self.speaks
                ),
            });
        }
        ask!(self, &Request::Workers, Reply::Workers(workers) => workers)
    }

    /// Enqueues one message on `queue` (created if missing); returns its id.
    pub fn enqueue(
        &self,
        queue: &str,
        payload: impl AsRef<[u8]>,
        options: &EnqueueOptions,
    ) -> Result<MessageId> {
        let request = Request::Enqueue(EnqueueRequest {
            queue: queue.to_string(),
            payload: payload.as_ref().to_vec(),
            attributes: options.attributes.clone(),
            delay_ms: options.delay.map(|d| d.as_millis() as u64),
            ttl_ms: options.ttl.map(|d| d.as_millis() as u64),
            idempotency_key: options.idempotency_key.clone(),
        });
        ask!(self, &request, Reply::Enqueued { id } => id)
    }

    /// Replays entries `ids` of DLQ `dlq` (`Dlq::replay_ids` in the owner). A target queue
    /// that does not exist is [`Error::UnknownQueue`] unless `create_target`.
    pub fn replay(
        &self,
        dlq: &str,
        ids: &[MessageId],
        options: &ReplayOptions,
        create_target: bool,
    ) -> Result<ReplayReport> {
        let request = Request::Replay {
            dlq: dlq.to_string(),
            ids: ids.to_vec(),
            options: options.clone(),
            create_target,
        };
        ask!(self, &request, Reply::Replayed(report) => report)
    }

    /// Starts a guarded replay of entries `ids` of DLQ `dlq` (`Dlq::replay_guarded_ids` in
    /// the owner, which drives it from then on). A target queue that does not exist is
    /// created only with `create_target`.
    pub fn replay_guarded(
        &self,
        dlq: &str,
        ids: &[MessageId],
        options: &GuardedReplayOptions,
        create_target: bool,
    ) -> Result<GuardedReplay> {
        let request = Request::GuardedReplay {
            dlq: dlq.to_string(),
            ids: ids.to_vec(),
            options: options.clone(),
            create_target,
        };
        ask!(self, &request, Reply::Guarded(report) => *report)
    }

    /// Pauses guarded replay `id` (`Store::pause_guarded_replay` in the owner).
    pub fn pause_guarded_replay(&self, id: u64) -> Result<GuardedReplay> {
        self.step(id, GuardedStep::Pause)
    }

    /// Resumes guarded replay `id` (`Store::resume_guarded_replay` in the owner).
    pub fn resume_guarded_replay(&self, id: u64) -> Result<GuardedReplay> {
        self.step(id, GuardedStep::Resume)
    }

    /// Cancels guarded replay `id` (`Store::cancel_guarded_replay` in the owner).
    pub fn cancel_guarded_replay(&self, id: u64) -> Result<GuardedReplay> {
        self.step(id, GuardedStep::Cancel)
    }

    fn step(&self, id: u64, step: GuardedStep) -> Result<GuardedReplay> {
        ask!(self, &Request::GuardedStep { id, step }, Reply::Guarded(report) => *report)
    }

    /// Replays entry `id` of DLQ `dlq` with a corrected payload (`Dlq::replay_corrected`
    /// in the owner).
    pub fn replay_corrected(
        &self,
        dlq: &str,
        id: MessageId,
        payload: &[u8],
        options: &ReplayOptions,
    ) -> Result<()> {
        let request = Request::ReplayCorrected {
            dlq: dlq.to_string(),
            id,
            payload: payload.to_vec(),
            options: options.clone(),
        };
        ask!(self, &request, Reply::Done => ())
    }

    /// Replays entries of DLQ `dlq`, each with its corrected payload, in one batch
    /// (`Dlq::replay_corrected_batch` in the owner); those refused are in the report's
    /// `failed`. A request is at most 256 MiB: send a large selection in slices. An owner
    /// that speaks a protocol older than 7 knows no such request: that is
    /// [`Error::Remote`] of kind `Unsupported`, saying so, and nothing is sent.
    pub fn replay_corrected_batch(
        &self,
        dlq: &str,
        corrections: &[Correction],
        options: &ReplayOptions,
    ) -> Result<ReplayReport> {
        if self.speaks < CORRECTED_BATCH_SINCE {
            return Err(Error::Remote {
                kind: "Unsupported".into(),
                message: format!(
                    "the process holding the store (pid {}) runs an older deadletter \
                     (control protocol {}), which cannot replay corrected payloads in \
                     batches (protocol {CORRECTED_BATCH_SINCE} or later): upgrade the \
                     deadletter it is built with; nothing was replayed",
                    self.owner_pid, self.speaks
                ),
            });
        }
        let request = Request::ReplayCorrectedBatch {
            dlq: dlq.to_string(),
            corrections: corrections.to_vec(),
            options: options.clone(),
            detail: options.detail.clone(),
        };
        ask!(self, &request, Reply::Replayed(report) => report)
    }

    /// Deletes those of entries `ids` still in DLQ `dlq` (one record); returns them.
    pub fn delete(&self, dlq: &str, ids: &[MessageId]) -> Result<Vec<MessageId>> {
        let request = Request::Delete {
            dlq: dlq.to_string(),
            ids: ids.to_vec(),
        };
        ask!(self, &request, Reply::Deleted { deleted } => deleted)
    }

    /// Purges DLQ `dlq` (`Dlq::purge` in the owner, by the owner's clock).
    pub fn purge(&self, dlq: &str, older_than: Duration, include_pending: bool) -> Result<u64> {
        let request = Request::Purge {
            dlq: dlq.to_string(),
            older_than_ms: older_than.as_millis() as u64,
            include_pending,
        };
        ask!(self, &request, Reply::Purged { deleted } => deleted)
    }

    /// Marks entries `ids` of DLQ `dlq` reprocessed with outcome `success`; returns those
    /// marked and those refused (gone, or not entries of that DLQ) with the reason.
    pub fn mark_reprocessed(
        &self,
        dlq: &str,
        ids: &[MessageId],
        success: bool,
    ) -> Result<MarkReport> {
        let request = Request::Mark {
            dlq: dlq.to_string(),
            ids: ids.to_vec(),
            success,
        };
        ask!(self, &request, Reply::Marked { marked, failed } => MarkReport { marked, failed })
    }

    /// Imports exported entries into `queue`'s DLQ (created if missing) or, without one,
    /// each into the DLQ of the queue it failed in; entries the store already holds are
    /// skipped (the owner imports with a [`crate::dlq::Importer`], kept for the connection).
    pub fn import(&self, queue: Option<&str>, entries: &[DeadLetter]) -> Result<ImportReport> {
        let request = Request::Import {
            queue: queue.map(str::to_string),
            entries: entries.to_vec(),
        };
        ask!(self, &request, Reply::Imported(report) => report)
    }

    /// Refuses a request on a queue's own messages to an owner whose protocol predates
    /// them ([`QUEUE_MESSAGES_SINCE`]), before it is sent.
    fn queue_messages_known(&self) -> Result<()> {
        if self.speaks < QUEUE_MESSAGES_SINCE {
            return Err(Error::Remote {
                kind: "Unsupported".into(),
                message: format!(
                    "the process holding the store (pid {}) runs an older deadletter \
                     (control protocol {}), which cannot list or change a queue's own \
                     messages (protocol {QUEUE_MESSAGES_SINCE} or later): upgrade the \
                     deadletter it is built with",
                    self.owner_pid, self.speaks
                ),
            });
        }
        Ok(())
    }

    /// A page of `queue`'s own messages in `state` (`None`: all) matching `filter`, as
    /// `Queue::messages` lists them in the owner (which names the worker holding each
    /// in-flight one). The page's `after` and `before_cursor` place it by id.
    pub fn messages(
        &self,
        queue: &str,
        state: Option<QueuedState>,
        filter: &Filter,
        page: Page,
    ) -> Result<Vec<QueuedMessage>> {
        self.queue_messages_known()?;
        let request = Request::Messages {
            queue: queue.to_string(),
            state,
            filter: filter.clone(),
            after: page.after_cursor.map(|c| c.id).or(page.after),
            before: page.before_cursor.map(|c| c.id),
            limit: page.limit as u64,
        };
        ask!(self, &request, Reply::Messages(list) => list)
    }

    /// Message `id` of `queue` (`Queue::message` in the owner).
    pub fn message(&self, queue: &str, id: MessageId) -> Result<QueuedMessage> {
        self.queue_messages_known()?;
        let request = Request::Message {
            queue: queue.to_string(),
            id,
        };
        let list = ask!(self, &request, Reply::Messages(list) => list)?;
        list.into_iter().next().ok_or(Error::NotFound(id))
    }

    /// How many messages of `queue` are in each state (`Queue::message_counts` in the
    /// owner).
    pub fn message_counts(&self, queue: &str) -> Result<MessageCounts> {
        self.queue_messages_known()?;
        let request = Request::MessageCounts {
            queue: queue.to_string(),
        };
        ask!(self, &request, Reply::Counts(counts) => counts)
    }

    /// Applies an operator's `action` to waiting messages `ids` of `queue`
    /// (`Queue::apply_action` in the owner).
    pub fn message_action(
        &self,
        queue: &str,
        action: &MessageAction,
        ids: &[MessageId],
        strict: bool,
    ) -> Result<ActionReport> {
        self.queue_messages_known()?;
        let request = Request::MessageAction {
            queue: queue.to_string(),
            action: action.clone(),
            ids: ids.to_vec(),
            strict,
        };
        ask!(self, &request, Reply::Action(report) => report)
    }

    /// Sends `request` and takes from its reply what `expected` accepts; any other reply
    /// is [`Error::Remote`] (`BadReply`), an owner's error the [`Error`] it was.
    fn ask<T>(
        &self,
        request: &Request,
        expected: impl FnOnce(Reply) -> Result<T, Reply>,
    ) -> Result<T> {
        expected(self.call(request)?).map_err(|reply| Error::Remote {
            kind: "BadReply".into(),
            message: format!("unexpected reply {reply:?}"),
        })
    }

    /// Sends one request and reads its reply; an owner's error comes back as an [`Error`].
    fn call(&self, request: &Request) -> Result<Reply> {
        match self.exchange(request)? {
            Reply::Failed(e) => Err(e.into()),
            reply => Ok(reply),
        }
    }

    /// Sends one request in the version spoken and reads its reply, which must come in
    /// that version (an owner answers a version it does not speak in its own: its
    /// `Unsupported` decodes alike in every version).
    fn exchange(&self, request: &Request) -> Result<Reply> {
        let mut conn = self.conn.lock();
        let no_owner = |reason: String| Error::NoOwner {
            path: self.dir.clone(),
            reason,
        };
        let lost = |e: std::io::Error| no_owner(format!("the control connection failed: {e}"));
        protocol::write_frame(&mut conn.1, self.speaks, request).map_err(lost)?;
        let silent =
            || no_owner("the owner closed the control connection without answering".into());
        let (version, body) = protocol::read_frame(&mut conn.0)
            .map_err(lost)?
            .ok_or_else(silent)?;
        let reply = protocol::decode::<Reply>(&body).map_err(|e| Error::Remote {
            kind: "BadReply".into(),
            message: e,
        });
        match reply {
            Ok(reply @ Reply::Failed(RemoteError::Unsupported { .. })) => Ok(reply),
            _ if version != self.speaks => Err(no_owner(format!(
                "the owner answered in control protocol version {version}, this build \
                 speaks {}",
                self.speaks
            ))),
            reply => reply,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::BufReader;
    use std::os::unix::net::UnixListener;

    use super::*;

    /// An owner of protocol 5 (the release before the worker list): it answers a frame of
    /// any other version with `Unsupported` in its own, and a `Hello` of version 5.
    fn old_owner(dir: &Path) -> std::thread::JoinHandle<Vec<u16>> {
        let listener = UnixListener::bind(dir.join(super::super::SOCKET_NAME)).unwrap();
        std::thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            let mut out = conn.try_clone().unwrap();
            let mut input = BufReader::new(conn);
            let mut seen = Vec::new();
            while let Ok(Some((version, body))) = protocol::read_frame(&mut input) {
                seen.push(version);
                let reply = match (version, protocol::decode::<Request>(&body)) {
                    (5, Ok(Request::Hello { .. })) => Reply::Hello {
                        protocol: 5,
                        pid: 4242,
                    },
                    (5, _) => Reply::Failed(RemoteError::BadRequest("unknown request".into())),
                    (v, _) => Reply::Failed(RemoteError::Unsupported {
                        version: v,
                        supported: 5,
                    }),
                };
                protocol::write_frame(&mut out, 5, &reply).unwrap();
            }
            seen
        })
    }

    #[test]
    fn an_owner_that_stops_answering_is_given_up_on_after_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let listener = UnixListener::bind(dir.path().join(super::super::SOCKET_NAME)).unwrap();
        // Accepts, reads the greeting, never answers.
        let silent = std::thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            let mut input = BufReader::new(conn);
            let _ = protocol::read_frame(&mut input);
            std::thread::sleep(Duration::from_secs(2));
        });
        // Had it waited for the owner, the connection would have been closed under it:
        // "closed ... without answering", not a failed read.
        match Client::connect_with_timeout(dir.path(), Duration::from_millis(100)) {
            Err(Error::NoOwner { reason, .. }) => {
                assert!(reason.contains("control connection failed"), "{reason}")
            }
            other => panic!("expected NoOwner, got {other:?}"),
        }
        silent.join().unwrap();
    }

    #[test]
    fn an_older_client_is_answered_in_its_version_and_an_unknown_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let _owner =
            crate::Store::open(dir.path(), crate::Config::fast().control_socket(true)).unwrap();
        let conn = UnixStream::connect(dir.path().join(super::super::SOCKET_NAME)).unwrap();
        let mut out = conn.try_clone().unwrap();
        let mut input = BufReader::new(conn);
        let mut ask = |version: u16| {
            protocol::write_frame(&mut out, version, &Request::Hello { actor: None }).unwrap();
            let (v, body) = protocol::read_frame(&mut input).unwrap().unwrap();
            (v, protocol::decode::<Reply>(&body).unwrap())
        };
        // A client of release 0.1 (protocol 5) is greeted in 5, the version then spoken.
        let (v, reply) = ask(5);
        assert_eq!(v, 5);
        assert!(
            matches!(reply, Reply::Hello { protocol: 5, .. }),
            "{reply:?}"
        );
        // One older than that is refused, in this build's version.
        let (v, reply) = ask(4);
        assert_eq!(v, PROTOCOL_VERSION);
        assert!(
            matches!(
                reply,
                Reply::Failed(RemoteError::Unsupported {
                    version: 4,
                    supported: PROTOCOL_VERSION
                })
            ),
            "{reply:?}"
        );
    }

    #[test]
    fn an_older_owner_is_spoken_to_in_its_version_and_asked_nothing_it_does_not_know() {
        let dir = tempfile::tempdir().unwrap();
        let owner = old_owner(dir.path());
        let client = Client::connect(dir.path()).unwrap();
        assert_eq!((client.protocol(), client.owner_pid()), (5, 4242));
        match client.workers() {
            Err(Error::Remote { kind, message }) => {
                assert_eq!(kind, "Unsupported");
                assert!(message.contains("pid 4242"), "{message}");
                assert!(message.contains("control protocol 5"), "{message}");
            }
            other => panic!("expected Unsupported, got {other:?}"),
        }
        drop(client);
        // A greeting in 6, then again in 5; the worker list was never sent.
        assert_eq!(owner.join().unwrap(), [PROTOCOL_VERSION, 5]);
    }
}
