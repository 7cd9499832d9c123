//! gslbd's control socket: a Unix stream socket (gslbd `--control`, default
//! [`DEFAULT_CONTROL_PATH`]) that `gslbctl` talks to. One request per connection, one line:
//!
//! - `reload`: reloads the configuration as SIGHUP does, and says how it went;
//! - `ldns`: the LDNS entries and their RTT per site (F5's `ldns` record, [`format_report`]);
//! - `stats`: the controller's republish counters (and reloads refused or failed), the
//!   persistence table's, the load monitors' (totals, then per monitor whether its value is
//!   known, the value, checks and failures), the supervised tasks' (running, panics, fatal
//!   errors and restarts, in total and per task that failed) and the prober's,
//!   `name value` per line;
//! - `service|site|domain disable|enable NAME`: takes a service, every service of a site, or a
//!   domain out of the answers, or puts it back (`crate::steering`); the reply comes once the
//!   answers without (or with) it are published;
//! - `show services|sites|domains|mep`: tables of what the controller holds as of its last
//!   republish (`crate::admin::tables`); `show rtt` is `ldns`'s table.
//!
//! The reply's first line is `ok`, followed by the body, or `error: <reason>`; then the server
//! closes the connection. The socket is made mode 0600: a reload is for root only. At most
//! [`MAX_CONNECTIONS`] are served at once, and none for long: the request line must arrive
//! within [`REQUEST_TIMEOUT`], the whole reply be taken within [`REPLY_TIMEOUT`].

use std::{
    io,
    os::unix::fs::{FileTypeExt, PermissionsExt},
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::{UnixListener, UnixStream},
    sync::{Semaphore, mpsc, oneshot, watch},
};
use tracing::{debug, info, warn};

use crate::probe::{RttHandle, format_report};

/// Where gslbd listens and gslbctl connects unless told otherwise.
pub const DEFAULT_CONTROL_PATH: &str = "/run/gslbd.sock";

/// Longest request line accepted.
const MAX_REQUEST: u64 = 256;
/// A client that sends no whole request line in this long is dropped.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a `reload` waits for gslbd's loop to finish it (location databases can be large).
const RELOAD_TIMEOUT: Duration = Duration::from_secs(120);
/// Connections served at once; more wait in the backlog.
const MAX_CONNECTIONS: usize = 16;
/// A client must take its whole reply within this long (gslbctl reads it at once), or it is
/// dropped: one that never reads does not hold a connection's permit for longer.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    #[error("control socket {}: another gslbd answers there", path.display())]
    InUse { path: PathBuf },
    #[error("control socket {}: {what}", path.display())]
    Io {
        path: PathBuf,
        what: &'static str,
        source: io::Error,
    },
}

/// Where gslbd makes its control socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlPath {
    pub path: PathBuf,
    /// Named on the command line: a failure to bind it stops gslbd. The default path is best
    /// effort: gslbd runs without a socket when another gslbd (in another network namespace,
    /// say) already answers there.
    pub required: bool,
}

/// A request to reload the configuration. `reply` gets the outcome: `Err` says why the new
/// configuration is not in force (the running one stays). SIGHUP sends none.
#[derive(Debug, Default)]
pub struct Reload {
    pub reply: Option<oneshot::Sender<Result<(), ReloadRefused>>>,
}

/// Why a requested reload left the running configuration in force. Every requester of one
/// reload gets a copy, hence the `Arc`.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReloadRefused {
    /// The new configuration does not load or cannot run (gslbd's `daemon::ReloadError`).
    /// Display shows the error with its causes: the text gslbctl prints.
    #[error("{}", crate::error_text::anyhow_like(.0.as_ref()))]
    Invalid(#[source] Arc<dyn std::error::Error + Send + Sync>),
    #[error(
        "the configuration loaded, but publishing its answers failed; the running configuration and its answers stay in force"
    )]
    PublishFailed,
}

impl Reload {
    /// Tells the requester how it went (if it still waits).
    pub fn answer(self, outcome: Result<(), ReloadRefused>) {
        if let Some(reply) = self.reply {
            let _ = reply.send(outcome);
        }
    }
}

impl From<()> for Reload {
    fn from((): ()) -> Self {
        Reload::default()
    }
}

/// A steering command for gslbd's loop; `reply` gets what it did once the answers are
/// published, or why it was refused.
#[derive(Debug)]
pub struct Steer {
    pub command: crate::steering::Command,
    pub reply: oneshot::Sender<Result<String, ControlRequestError>>,
}

/// What the socket's requests read and drive.
#[derive(Clone)]
pub struct ControlState {
    /// gslbd's reload requests (the same queue SIGHUP feeds).
    pub reloads: mpsc::Sender<Reload>,
    /// gslbd's steering commands.
    pub steer: mpsc::Sender<Steer>,
    /// The RTT table while this gslbd probes.
    pub rtt: watch::Receiver<Option<RttHandle>>,
    /// The controller's republish counters.
    pub republish: Arc<crate::admin::metrics::RepublishStats>,
    /// The responder's persistence entries (their count and counters).
    pub persistence: Arc<crate::persist::Store>,
    /// The load monitors' readings.
    pub load: watch::Receiver<crate::health::load::LoadReadings>,
    /// The services', sites' and domains' states, as of the last republish.
    pub world: watch::Receiver<Arc<crate::admin::status::WorldStatus>>,
}

/// The bound socket; its file is removed when it is dropped.
pub struct ControlSocket {
    listener: UnixListener,
    path: PathBuf,
}

impl ControlSocket {
    /// Binds `path`. A socket file left there by a gslbd that died is replaced; one that a
    /// running gslbd answers on is not.
    pub async fn bind(path: &Path) -> Result<ControlSocket, ControlError> {
        ControlSocket::from_std(ControlSocket::bind_std(path)?, path)
    }

    /// [`ControlSocket::bind`] outside a runtime, as gslbd does before it drops privileges
    /// (the socket's directory is root's); [`ControlSocket::from_std`] serves it.
    pub fn bind_std(path: &Path) -> Result<std::os::unix::net::UnixListener, ControlError> {
        let io_err = |what| {
            move |source| ControlError::Io {
                path: path.to_owned(),
                what,
                source,
            }
        };
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_socket() => {
                if std::os::unix::net::UnixStream::connect(path).is_ok() {
                    return Err(ControlError::InUse {
                        path: path.to_owned(),
                    });
                }
                std::fs::remove_file(path).map_err(io_err("removing a stale socket"))?;
            }
            // Anything else there is not ours to remove: bind fails on it and says so.
            _ => {}
        }
        let listener = std::os::unix::net::UnixListener::bind(path).map_err(io_err("bind"))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(io_err("chmod"))?;
        info!(path = %path.display(), "control socket listening");
        Ok(listener)
    }

    /// The socket `listener`, bound at `path` by [`ControlSocket::bind_std`] (needs a runtime).
    pub fn from_std(
        listener: std::os::unix::net::UnixListener,
        path: &Path,
    ) -> Result<ControlSocket, ControlError> {
        let control = |source| ControlError::Io {
            path: path.to_owned(),
            what: "bind",
            source,
        };
        listener.set_nonblocking(true).map_err(control)?;
        Ok(ControlSocket {
            listener: UnixListener::from_std(listener).map_err(control)?,
            path: path.to_owned(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves requests until `shutdown`.
    pub async fn serve(self, state: ControlState, shutdown: impl Future<Output = ()>) {
        let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        tokio::pin!(shutdown);
        loop {
            let permit = tokio::select! {
                () = &mut shutdown => return,
                p = permits.clone().acquire_owned() => p.expect("never closed"),
            };
            let stream = tokio::select! {
                () = &mut shutdown => return,
                r = self.listener.accept() => match r {
                    Ok((stream, _)) => stream,
                    Err(error) => {
                        warn!(%error, "control socket accept");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let state = state.clone();
            tokio::spawn(async move {
                if let Err(error) = serve_connection(stream, &state).await {
                    debug!(%error, "control connection");
                }
                drop(permit);
            });
        }
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

async fn serve_connection(stream: UnixStream, state: &ControlState) -> io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    let mut reader = BufReader::new(read).take(MAX_REQUEST);
    match tokio::time::timeout(REQUEST_TIMEOUT, reader.read_line(&mut line)).await {
        Ok(r) => r?,
        Err(_) => return Ok(()),
    };
    let request = line.trim();
    debug!(request, "control request");
    let reply = match handle(request, state).await {
        Ok(body) => format!("ok\n{body}"),
        Err(reason) => format!("error: {reason}\n"),
    };
    let written = async {
        write.write_all(reply.as_bytes()).await?;
        write.shutdown().await
    };
    tokio::time::timeout(REPLY_TIMEOUT, written)
        .await
        .unwrap_or_else(|_| {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client did not take its reply within {REPLY_TIMEOUT:?}"),
            ))
        })
}

/// Why a control request failed; its Display is the reason after `error: ` in the reply.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlRequestError {
    #[error(
        "unknown request {request:?} (reload, ldns, stats, show services|sites|domains|mep|rtt, or service|site|domain disable|enable NAME)"
    )]
    UnknownRequest { request: String },
    #[error("no {target} {name:?} in the running configuration")]
    UnknownName {
        target: crate::steering::Target,
        name: String,
    },
    #[error(
        "{target} {name} is {state}, but publishing the answers failed; the next republish applies it"
    )]
    SteerPublishFailed {
        target: crate::steering::Target,
        name: String,
        state: &'static str,
    },
    /// The change is in force, but the state file could not be written (with its cause).
    #[error("{target} {name} is {state}, but it will not survive a restart: {reason}")]
    StateNotSaved {
        target: crate::steering::Target,
        name: String,
        state: &'static str,
        reason: String,
    },
    #[error("gslbd is shutting down")]
    ShuttingDown,
    /// The cause is in the message too: the client gets only this line.
    #[error("reload refused, the running configuration stays: {source}")]
    ReloadRefused { source: ReloadRefused },
    #[error("no reload outcome within {timeout:?}")]
    ReloadTimeout { timeout: Duration },
    #[error(
        "RTT probing is off (it needs server.site, and [rtt] enabled = true or a domain using rtt)"
    )]
    RttOff,
}

/// The reply body to `request`, or why it failed.
async fn handle(request: &str, state: &ControlState) -> Result<String, ControlRequestError> {
    match request {
        "reload" => {
            let (tx, rx) = oneshot::channel();
            state
                .reloads
                .send(Reload { reply: Some(tx) })
                .await
                .map_err(|_| ControlRequestError::ShuttingDown)?;
            match tokio::time::timeout(RELOAD_TIMEOUT, rx).await {
                Ok(Ok(Ok(()))) => Ok("configuration reloaded\n".into()),
                Ok(Ok(Err(source))) => Err(ControlRequestError::ReloadRefused { source }),
                Ok(Err(_)) => Err(ControlRequestError::ShuttingDown),
                Err(_) => Err(ControlRequestError::ReloadTimeout {
                    timeout: RELOAD_TIMEOUT,
                }),
            }
        }
        // `show rtt` is the same table, named with the other `show`s.
        "ldns" | "show rtt" => {
            let handle = rtt_handle(state)?;
            Ok(format_report(&handle.report()))
        }
        "stats" => {
            let handle = state.rtt.borrow().clone();
            let mut out = state.republish.lines();
            for (name, value) in state.persistence.stats().lines() {
                out.push_str(&format!("{name} {value}\n"));
            }
            out.push_str(&state.load.borrow().stats_lines());
            out.push_str(&crate::supervise::stats_lines());
            out.push_str(&format!("rtt_probing {}\n", u8::from(handle.is_some())));
            if let Some(handle) = handle {
                let stats = handle.stats();
                let r = stats.recorded;
                let lines = [
                    ("ldns_entries", stats.ldns_entries as u64),
                    ("rtt_rows", handle.rtt_rows() as u64),
                    ("probe_rounds", stats.rounds),
                    ("probe_samples", stats.samples),
                    ("probes_sent", stats.probes),
                    ("probe_local_errors", stats.local_errors),
                    ("probe_backoffs", stats.backoffs),
                    ("probe_held_by_budget", stats.held),
                    ("probe_refused_targets", stats.refused_at_probe),
                    ("ldns_expired", stats.expired),
                    ("ldns_evicted", stats.evicted),
                    ("ldns_refused_denied", r.denied),
                    ("ldns_refused_martian", r.martian),
                    ("ldns_refused_own_address", r.own),
                    ("ldns_recorder_dropped", r.dropped),
                ];
                for (name, value) in lines {
                    out.push_str(&format!("{name} {value}\n"));
                }
            }
            Ok(out)
        }
        show if show.starts_with("show ") => {
            let what = show["show ".len()..].trim();
            crate::admin::tables::table(what, &state.world.borrow()).ok_or_else(|| {
                ControlRequestError::UnknownRequest {
                    request: show.to_owned(),
                }
            })
        }
        other => match crate::steering::Command::parse(other) {
            Some(command) => {
                let (tx, rx) = oneshot::channel();
                state
                    .steer
                    .send(Steer { command, reply: tx })
                    .await
                    .map_err(|_| ControlRequestError::ShuttingDown)?;
                rx.await.map_err(|_| ControlRequestError::ShuttingDown)?
            }
            None => Err(ControlRequestError::UnknownRequest {
                request: other.to_owned(),
            }),
        },
    }
}

fn rtt_handle(state: &ControlState) -> Result<RttHandle, ControlRequestError> {
    state
        .rtt
        .borrow()
        .clone()
        .ok_or(ControlRequestError::RttOff)
}

/// One request to the gslbd at `path`: `Ok(body)` after an `ok` reply, `Err` with the reason
/// of an `error:` reply or of a failure to ask (for gslbctl and tests).
pub async fn request(path: &Path, request: &str, timeout: Duration) -> Result<String, ClientError> {
    let exchange = async {
        let mut stream =
            UnixStream::connect(path)
                .await
                .map_err(|source| ClientError::Connect {
                    path: path.to_owned(),
                    source,
                })?;
        stream
            .write_all(format!("{request}\n").as_bytes())
            .await
            .map_err(ClientError::Io)?;
        let mut reply = String::new();
        stream
            .read_to_string(&mut reply)
            .await
            .map_err(ClientError::Io)?;
        Ok::<_, ClientError>(reply)
    };
    let reply = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| ClientError::Timeout(timeout))??;
    match reply.split_once('\n') {
        Some(("ok", body)) => Ok(body.to_owned()),
        Some((first, _)) if first.starts_with("error: ") => {
            Err(ClientError::Refused(first["error: ".len()..].to_owned()))
        }
        _ => Err(ClientError::Garbled(reply)),
    }
}

/// Why a [`request`] got no `ok`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    #[error("cannot connect to {} (is gslbd running with --control there?)", path.display())]
    Connect { path: PathBuf, source: io::Error },
    #[error("talking to gslbd")]
    Io(#[source] io::Error),
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Refused(String),
    #[error("not a gslbd reply: {0:?}")]
    Garbled(String),
}

#[cfg(test)]
mod tests;
