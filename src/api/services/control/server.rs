//! The owner's side of the control socket: a listener thread in the store's process that
//! accepts connections and carries out each request through the store's own API. A store
//! opened with [`Config::control_socket`](crate::Config::control_socket) serves one for as
//! long as a handle on it lives; a program can also start one itself
//! ([`ControlServer::start`]) and hold the guard.
//!
//! Invariants:
//! - the socket file is created under a temporary name, given mode 0600 and only then
//!   renamed to `control.sock`, so nobody else can connect in between;
//! - any `control.sock` found at start is stale (this process holds the directory lock, so
//!   its previous owner is gone) and is replaced;
//! - the threads hold the store weakly: a request that arrives once the store is closing is
//!   refused;
//! - one server per store: a second start finds the first one answering and is refused;
//! - stopping (dropping the guard) removes the socket file before the guard lets go of
//!   the store, so before the directory lock can be released; it returns even when the
//!   socket file was removed by someone else meanwhile (the listener is then not waited
//!   for).

use std::io::BufReader;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::protocol::{
    self, GuardedStep, RemoteError, Reply, Request, OLDEST_COMPATIBLE, PROTOCOL_VERSION,
};
use crate::api::core::actor::Actor;
use crate::api::core::store::{Store, WeakStore};
use crate::api::dlq::{Cursor, Dlq, Importer, Page};
use crate::api::queue::EnqueueOptions;
use crate::error::{Error, Result};

/// How long a connection may stay silent before the server drops it.
const IDLE: Duration = Duration::from_secs(300);

/// A running control socket server (a guard): `control.sock` in the store's directory,
/// answered by a listener thread, until the guard is dropped, which removes the socket
/// file. It keeps the store open meanwhile.
pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Let go of only after the socket file is removed.
    _store: Store,
}

impl std::fmt::Debug for ControlServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlServer")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl ControlServer {
    /// Binds `control.sock` in `store`'s directory (replacing a stale one) and starts the
    /// listener thread. [`Error::ReadOnly`] on a snapshot (its changes are made by its
    /// owner); [`Error::InvalidConfig`] if the store already serves its control socket.
    pub fn start(store: &Store) -> Result<ControlServer> {
        store.writable()?;
        let dir = store.dir();
        let path = dir.join(super::SOCKET_NAME);
        if UnixStream::connect(&path).is_ok() {
            // This process holds the store: only it can be answering.
            return Err(Error::InvalidConfig(format!(
                "{} is served already",
                path.display()
            )));
        }
        let temp = dir.join(format!("{}.new", super::SOCKET_NAME));
        for stale in [&path, &temp] {
            match std::fs::remove_file(stale) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("remove stale control socket", stale, e)),
            }
        }
        let listener =
            UnixListener::bind(&temp).map_err(|e| Error::io("bind control socket", &temp, e))?;
        std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| Error::io("chmod control socket", &temp, e))?;
        std::fs::rename(&temp, &path).map_err(|e| Error::io("rename control socket", &temp, e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let weak = store.downgrade();
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("deadletter-control".into())
            .spawn(move || accept_loop(listener, weak, stopping))
            .map_err(|e| Error::io("spawn control thread", &path, e))?;
        Ok(ControlServer {
            path,
            stop,
            thread: Some(thread),
            _store: store.without_services(),
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the listener out of `accept`. When that fails (the socket file, or the
        // whole store directory, was removed under the running process), nobody can
        // connect any more either: the listener is left blocked rather than waited for
        // forever; it holds the store only weakly, and refuses whatever it might still
        // accept since `stop` is set.
        let woken = UnixStream::connect(&self.path).is_ok();
        if let Some(thread) = self.thread.take() {
            if woken {
                let _ = thread.join();
            }
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn accept_loop(listener: UnixListener, store: WeakStore, stop: Arc<AtomicBool>) {
    for conn in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            return;
        }
        let Ok(conn) = conn else { continue };
        let store = store.clone();
        let _ = std::thread::Builder::new()
            .name("deadletter-control-conn".into())
            .spawn(move || serve_connection(conn, store));
    }
}

/// Answers requests on one connection until the client hangs up (or stays silent too long).
fn serve_connection(conn: UnixStream, store: WeakStore) {
    let _ = conn.set_read_timeout(Some(IDLE));
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    let mut input = BufReader::new(conn);
    let mut importer = None;
    let mut actor = None;
    while let Ok(Some((version, body))) = protocol::read_frame(&mut input) {
        let speaks = (OLDEST_COMPATIBLE..=PROTOCOL_VERSION).contains(&version);
        let reply = if !speaks {
            Reply::Failed(RemoteError::Unsupported {
                version,
                supported: PROTOCOL_VERSION,
            })
        } else {
            match protocol::decode::<Request>(&body) {
                Err(e) => Reply::Failed(RemoteError::BadRequest(e)),
                Ok(request) => match store.upgrade(&Actor::library()) {
                    None => Reply::Failed(RemoteError::from(&Error::Closed)),
                    Some(store) => handle(&store, request, version, &mut importer, &mut actor)
                        .unwrap_or_else(|e| Reply::Failed(RemoteError::from(&e))),
                },
            }
        };
        // An older client is answered in its version (its replies encode the same).
        let answer_in = if speaks { version } else { PROTOCOL_VERSION };
        if protocol::write_frame(&mut out, answer_in, &reply).is_err() {
            return;
        }
    }
}

/// Carries out one request through the store's API. `importer` is the connection's
/// importer, kept between import requests; `actor` who the connection's changes are made
/// by, as its `Hello` said; `version` the protocol the request came in (a `Hello` is
/// answered with it: the version spoken on the connection).
fn handle(
    store: &Store,
    request: Request,
    version: u16,
    importer: &mut Option<(Option<String>, Importer)>,
    actor: &mut Option<Actor>,
) -> Result<Reply> {
    let store = &match actor {
        Some(a) => store.with_actor(a.clone()),
        None => store.clone(),
    };
    Ok(match request {
        Request::Hello { actor: name } => {
            *actor = name.map(Actor::new).transpose()?;
            *importer = None;
            Reply::Hello {
                protocol: version,
                pid: std::process::id(),
            }
        }
        Request::Enqueue(r) => {
            // An existing queue keeps the options its owner opened it with.
            let handle = match store.existing_queue(&r.queue) {
                Ok(q) => q,
                Err(Error::UnknownQueue(_)) => store.queue(&r.queue)?,
                Err(e) => return Err(e),
            };
            let options = EnqueueOptions {
                attributes: r.attributes,
                delay: r.delay_ms.map(Duration::from_millis),
                ttl: r.ttl_ms.map(Duration::from_millis),
                idempotency_key: r.idempotency_key,
            };
            Reply::Enqueued {
                id: handle.enqueue_with(r.payload, &options)?,
            }
        }
        Request::Replay {
            dlq,
            ids,
            options,
            create_target,
        } => {
            let dlq = replay_source(store, &dlq, options.target.as_deref(), create_target)?;
            Reply::Replayed(dlq.replay_ids(&ids, &options)?)
        }
        Request::GuardedReplay {
            dlq,
            ids,
            options,
            create_target,
        } => {
            let target = options.replay.target.as_deref();
            let dlq = replay_source(store, &dlq, target, create_target)?;
            Reply::Guarded(Box::new(dlq.replay_guarded_ids(&ids, &options)?))
        }
        Request::Workers => Reply::Workers(store.workers()),
        Request::GuardedStep { id, step } => Reply::Guarded(Box::new(match step {
            GuardedStep::Pause => store.pause_guarded_replay(id)?,
            GuardedStep::Resume => store.resume_guarded_replay(id)?,
            GuardedStep::Cancel => store.cancel_guarded_replay(id)?,
        })),
        Request::ReplayCorrected {
            dlq,
            id,
            payload,
            options,
        } => {
            store.dlq(&dlq)?.replay_corrected(id, payload, &options)?;
            Reply::Done
        }
        Request::ReplayCorrectedBatch {
            dlq,
            corrections,
            mut options,
            detail,
        } => {
            options.detail = detail;
            // The client checked the target (`--create`) against its snapshot, as for
            // `ReplayCorrected`.
            Reply::Replayed(
                store
                    .dlq(&dlq)?
                    .replay_corrected_batch(&corrections, &options)?,
            )
        }
        Request::Delete { dlq, ids } => Reply::Deleted {
            deleted: store.dlq(&dlq)?.delete_present(&ids)?,
        },
        Request::Purge {
            dlq,
            older_than_ms,
            include_pending,
        } => Reply::Purged {
            deleted: store
                .dlq(&dlq)?
                .purge(Duration::from_millis(older_than_ms), include_pending)?,
        },
        Request::Mark { dlq, ids, success } => {
            let dlq = store.dlq(&dlq)?;
            let (mut marked, mut failed) = (Vec::new(), Vec::new());
            for id in ids {
                match dlq.mark_reprocessed(id, success) {
                    Ok(()) => marked.push(id),
                    Err(e @ (Error::NotFound(_) | Error::InvalidState { .. })) => {
                        failed.push((id, e.to_string()))
                    }
                    Err(e) => return Err(e),
                }
            }
            Reply::Marked { marked, failed }
        }
        Request::Messages {
            queue,
            state,
            filter,
            after,
            before,
            limit,
        } => {
            let mut page = Page::first(usize::try_from(limit).unwrap_or(usize::MAX));
            page.after = after;
            page.before_cursor = before.map(|id| Cursor {
                dead_lettered_at_ms: 0,
                id,
            });
            Reply::Messages(
                store
                    .existing_queue(&queue)?
                    .messages(state, &filter, page)?,
            )
        }
        Request::Message { queue, id } => {
            Reply::Messages(vec![store.existing_queue(&queue)?.message(id)?])
        }
        Request::MessageCounts { queue } => {
            Reply::Counts(store.existing_queue(&queue)?.message_counts())
        }
        Request::MessageAction {
            queue,
            action,
            ids,
            strict,
        } => Reply::Action(
            store
                .existing_queue(&queue)?
                .apply_action(&action, &ids, strict)?,
        ),
        Request::Import { queue, entries } => {
            // One importer per connection and target: the identities the store holds are
            // collected once, however many batches follow.
            let importer = match importer {
                Some((q, imp)) if *q == queue => imp,
                slot => {
                    &mut slot
                        .insert((queue.clone(), store.importer(queue.as_deref())?))
                        .1
                }
            };
            Reply::Imported(importer.import_batch(&entries)?)
        }
    })
}

/// The DLQ a replay request names, after checking its target: [`Error::UnknownQueue`]
/// for a target queue that does not exist, unless the request allows creating it.
fn replay_source(store: &Store, dlq: &str, target: Option<&str>, create: bool) -> Result<Dlq> {
    let dlq = store.dlq(dlq)?;
    match target {
        Some(t) if !create && !store.queue_names().iter().any(|q| q == t) => {
            Err(Error::UnknownQueue(t.to_string()))
        }
        _ => Ok(dlq),
    }
}
