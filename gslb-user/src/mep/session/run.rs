//! An established session: what it carries (the controller's [`Outbound`], filtered by
//! [`Audience`]), its reader and writer, heartbeats and the dead-peer and write timeouts.

use std::{
    collections::{BTreeMap, HashMap},
    io,
    sync::Arc,
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncWrite, AsyncWriteExt},
    sync::{mpsc, oneshot, watch},
};

use super::{CloseReason, Counters, SessionError, read_sealed, seal};
use crate::mep::{
    auth::SessionKeys,
    frame::{self, Message, RttRow, ServiceStates, SiteStatus},
    node::Event,
};
use crate::persist::PersistEntry;

/// What a session sends to its peer, chosen by the controller from the topology.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Audience {
    /// Nothing but heartbeats (a session still being vetted, e.g. an adoption offer).
    None,
    /// Another parent (or any site of a flat mesh): everything, network metrics and the
    /// relayed state of our children included.
    PeerParent,
    /// Our child (own or adopted): our status and backup list.
    Child,
    /// Our parent (own or adopter): our status and services.
    Parent,
}

/// A part of the local state with the version it had when it last changed.
#[derive(Clone, Debug)]
pub struct Part<T> {
    pub version: u64,
    pub value: Arc<T>,
}

impl<T: Default> Default for Part<T> {
    fn default() -> Self {
        Part {
            version: 0,
            value: Arc::new(T::default()),
        }
    }
}

/// A child's state as its parent relays it to the other parents.
#[derive(Clone, Debug)]
pub struct Relay {
    /// When anything of it last changed.
    pub version: u64,
    /// When its status last changed (a change of load alone sends only the services).
    pub status_version: u64,
    pub status: SiteStatus,
    pub services: Option<Arc<ServiceStates>>,
}

/// Everything this site may send, as last published; sessions send the parts their audience
/// gets, and only the parts that changed since they last sent them.
#[derive(Clone, Debug, Default)]
pub struct Outbound {
    pub status: Option<Part<SiteStatus>>,
    pub services: Option<Part<ServiceStates>>,
    pub rtt: Part<Vec<RttRow>>,
    pub persistence: Part<Vec<PersistEntry>>,
    /// Our backup-parent list (parents only).
    pub backups: Option<Part<Vec<String>>>,
    pub children: BTreeMap<String, Relay>,
}

/// A command from the controller to a session (closing goes through the session's kill channel,
/// which never fills up).
#[derive(Debug)]
pub enum SessionCmd {
    Send(Message),
}

/// The session's fixed parameters.
#[derive(Clone, Debug)]
pub struct SessionParams {
    pub id: u64,
    pub peer: String,
    pub version: u8,
    pub max_payload: usize,
    pub heartbeat: Duration,
    pub dead_after: Duration,
    pub write_timeout: Duration,
}

/// The channels between a session and the controller.
pub struct SessionChannels {
    pub cmds: mpsc::Receiver<SessionCmd>,
    /// Closes the session, with the reason (sent to the peer in a Reject).
    pub kill: oneshot::Receiver<(CloseReason, String)>,
    pub outbound: watch::Receiver<Arc<Outbound>>,
    pub audience: watch::Receiver<Audience>,
    pub events: mpsc::Sender<Event>,
}

/// Runs an established session until it fails or is closed: frames received go to `events`
/// (tagged with the session id), `outbound` is sent as the `audience` allows, `cmds` are obeyed.
/// Returns why it ended.
pub async fn run_session<S: AsyncRead + AsyncWrite + Send + 'static>(
    stream: S,
    keys: SessionKeys,
    params: SessionParams,
    counters: Arc<Counters>,
    channels: SessionChannels,
) -> SessionError {
    let SessionChannels {
        mut cmds,
        mut kill,
        mut outbound,
        mut audience,
        events,
    } = channels;
    let (mut rd, mut wr) = tokio::io::split(stream);
    let SessionKeys {
        send: mut sealer,
        recv: mut opener,
    } = keys;
    let reader = {
        let counters = counters.clone();
        let p = params.clone();
        async move {
            loop {
                let read = read_sealed(&mut rd, p.max_payload, &mut opener);
                let (version, message, len) = match tokio::time::timeout(p.dead_after, read).await {
                    Err(_) => return SessionError::DeadPeer(p.dead_after),
                    Ok(Err(e)) => return e,
                    Ok(Ok(f)) => f,
                };
                counters.received(len);
                if version != p.version {
                    return SessionError::WrongFrameVersion {
                        got: version,
                        expected: p.version,
                    };
                }
                match message {
                    Message::Heartbeat { .. } => {}
                    Message::Reject { code, detail } => {
                        return SessionError::PeerRejected { code, detail };
                    }
                    Message::Hello(_) | Message::Auth(_) => {
                        return SessionError::Unexpected(message.kind());
                    }
                    message => {
                        if events
                            .send(Event::Frame {
                                session: p.id,
                                message,
                            })
                            .await
                            .is_err()
                        {
                            return SessionError::Local {
                                reason: CloseReason::Shutdown,
                                detail: "node stopped".into(),
                            };
                        }
                    }
                }
            }
        }
    };
    let writer = async move {
        let p = &params;
        let mut sent = Sent::default();
        let mut seq = 0u64;
        let mut ticker = tokio::time::interval(p.heartbeat);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut write =
            async |wr: &mut tokio::io::WriteHalf<S>, m: &Message| -> Result<(), SessionError> {
                let bytes = seal(p.version, m, p.max_payload, &mut sealer)?;
                match tokio::time::timeout(p.write_timeout, wr.write_all(&bytes)).await {
                    Err(_) => return Err(SessionError::WriteTimeout(p.write_timeout)),
                    Ok(r) => r?,
                }
                counters.sent(bytes.len());
                Ok(())
            };
        loop {
            tokio::select! {
                biased;
                k = &mut kill => {
                    let Ok((reason, detail)) = k else {
                        return SessionError::Local { reason: CloseReason::Shutdown, detail: "node stopped".into() };
                    };
                    // What was queued before the close goes first (an AdoptReject, say).
                    while let Ok(SessionCmd::Send(m)) = cmds.try_recv() {
                        if write(&mut wr, &m).await.is_err() {
                            break;
                        }
                    }
                    let m = Message::Reject { code: reason.reject_code(), detail: detail.clone() };
                    let _ = write(&mut wr, &m).await;
                    let _ = tokio::time::timeout(p.write_timeout, wr.shutdown()).await;
                    return SessionError::Local { reason, detail };
                }
                // Before the state: a session that always has state to send still heartbeats.
                _ = ticker.tick() => {
                    seq += 1;
                    if let Err(e) = write(&mut wr, &Message::Heartbeat { seq }).await {
                        return e;
                    }
                    continue;
                }
                cmd = cmds.recv() => match cmd {
                    Some(SessionCmd::Send(m)) => {
                        if let Err(e) = write(&mut wr, &m).await {
                            return e;
                        }
                    }
                    None => return SessionError::Local { reason: CloseReason::Shutdown, detail: "node stopped".into() },
                },
                r = audience.changed() => {
                    if r.is_err() {
                        return SessionError::Local { reason: CloseReason::Shutdown, detail: "node stopped".into() };
                    }
                    sent = Sent::default();
                }
                r = outbound.changed() => {
                    if r.is_err() {
                        return SessionError::Local { reason: CloseReason::Shutdown, detail: "node stopped".into() };
                    }
                }
            }
            // Send whatever changed for this audience (the latest version only: a slow session
            // skips intermediate states instead of queueing them).
            let out = outbound.borrow_and_update().clone();
            let who = *audience.borrow_and_update();
            for m in sent.due(&out, who, p.max_payload) {
                if let Err(e) = write(&mut wr, &m).await {
                    return e;
                }
            }
            if let Err(e) = tokio::time::timeout(p.write_timeout, wr.flush())
                .await
                .unwrap_or(Err(io::ErrorKind::TimedOut.into()))
            {
                return e.into();
            }
        }
    };
    tokio::select! {
        e = reader => e,
        e = writer => e,
    }
}

/// The versions of the parts a session has sent.
#[derive(Default)]
struct Sent {
    status: u64,
    services: u64,
    rtt: u64,
    persistence: u64,
    backups: u64,
    /// Per relayed child: (version, status version) sent.
    children: HashMap<String, (u64, u64)>,
}

impl Sent {
    /// The messages that bring the peer up to date with `out`, and marks them sent.
    fn due(&mut self, out: &Outbound, who: Audience, max_payload: usize) -> Vec<Message> {
        let mut v = Vec::new();
        if who == Audience::None {
            return v;
        }
        if let Some(s) = &out.status
            && s.version > self.status
        {
            self.status = s.version;
            v.push(Message::SiteStatus((*s.value).clone()));
        }
        if matches!(who, Audience::PeerParent | Audience::Parent)
            && let Some(s) = &out.services
            && s.version > self.services
        {
            self.services = s.version;
            v.push(Message::ServiceStates((*s.value).clone()));
        }
        if matches!(who, Audience::PeerParent | Audience::Child)
            && let Some(b) = &out.backups
            && b.version > self.backups
            && let Some(status) = &out.status
        {
            self.backups = b.version;
            v.push(Message::BackupParents {
                parent: status.value.site.clone(),
                backups: (*b.value).clone(),
            });
        }
        if who == Audience::PeerParent {
            if out.rtt.version > self.rtt {
                self.rtt = out.rtt.version;
                v.extend(
                    frame::chunks(&out.rtt.value, max_payload, frame::rtt_row_len)
                        .into_iter()
                        .map(Message::RttRows),
                );
            }
            if out.persistence.version > self.persistence {
                self.persistence = out.persistence.version;
                v.extend(
                    frame::chunks(
                        &out.persistence.value,
                        max_payload,
                        frame::persist_entry_len,
                    )
                    .into_iter()
                    .map(Message::Persistence),
                );
            }
            for (child, relay) in &out.children {
                let (seen, seen_status) = self.children.entry(child.clone()).or_insert((0, 0));
                if relay.version > *seen {
                    *seen = relay.version;
                    if relay.status_version > *seen_status {
                        *seen_status = relay.status_version;
                        v.push(Message::SiteStatus(relay.status.clone()));
                    }
                    if let Some(s) = &relay.services {
                        v.push(Message::ServiceStates((**s).clone()));
                    }
                }
            }
        }
        v
    }
}
