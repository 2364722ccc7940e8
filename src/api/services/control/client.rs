//! The asking side of the control socket: [`Client`].

use std::io::BufReader;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use parking_lot::Mutex;

use super::protocol::{self, EnqueueRequest, GuardedStep, Reply, Request, PROTOCOL_VERSION};
use crate::api::core::actor::Actor;
use crate::api::core::types::{DeadLetter, MessageId};
use crate::api::dlq::{ImportReport, ReplayOptions, ReplayReport};
use crate::api::guarded::{GuardedReplay, GuardedReplayOptions};
use crate::api::queue::EnqueueOptions;
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
        Self::greet(dir.as_ref(), None)
    }

    /// [`Client::connect`], with the changes asked on this connection recorded in the
    /// owner's audit trail as made by `actor` (the command-line tool passes `user@host`).
    pub fn connect_as(dir: impl AsRef<Path>, actor: &Actor) -> Result<Client> {
        Self::greet(dir.as_ref(), Some(actor.name().to_string()))
    }

    fn greet(dir: &Path, actor: Option<String>) -> Result<Client> {
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
            .set_read_timeout(Some(REPLY_TIMEOUT))
            .map_err(|e| Error::io("set timeout", &path, e))?;
        let writer = stream
            .try_clone()
            .map_err(|e| Error::io("clone socket", &path, e))?;
        let mut client = Client {
            dir: dir.clone(),
            conn: Mutex::new((BufReader::new(stream), writer)),
            owner_pid: 0,
        };
        let (protocol, pid) = ask!(client, &Request::Hello { actor },
            Reply::Hello { protocol, pid } => (protocol, pid))?;
        if protocol != PROTOCOL_VERSION {
            return Err(no_owner(format!(
                "the owner speaks control protocol version {protocol}, this build \
                 {PROTOCOL_VERSION}"
            )));
        }
        client.owner_pid = pid;
        Ok(client)
    }

    /// The process id of the store's owner.
    pub fn owner_pid(&self) -> u32 {
        self.owner_pid
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
        let mut conn = self.conn.lock();
        let no_owner = |reason: String| Error::NoOwner {
            path: self.dir.clone(),
            reason,
        };
        let lost = |e: std::io::Error| no_owner(format!("the control connection failed: {e}"));
        protocol::write_frame(&mut conn.1, request).map_err(lost)?;
        let silent =
            || no_owner("the owner closed the control connection without answering".into());
        let (version, body) = protocol::read_frame(&mut conn.0)
            .map_err(lost)?
            .ok_or_else(silent)?;
        if version != PROTOCOL_VERSION {
            return Err(no_owner(format!(
                "the owner answered in control protocol version {version}, this build \
                 speaks {PROTOCOL_VERSION}"
            )));
        }
        match protocol::decode::<Reply>(&body) {
            Ok(Reply::Failed(e)) => Err(e.into()),
            Ok(reply) => Ok(reply),
            Err(e) => Err(Error::Remote {
                kind: "BadReply".into(),
                message: e,
            }),
        }
    }
}
