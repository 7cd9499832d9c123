//! The node's state machine: one task owns the sessions, the dialers, the topology view and what
//! sessions brought; session tasks talk to it by [`Event`]s, it answers through bounded queues and
//! the outbound `watch`. `outbound` builds what this site sends, `statements` handles what
//! peers say.

use std::{
    collections::{BTreeMap, HashMap},
    future::Future,
    sync::Arc,
    time::{Duration, Instant},
};

use tokio::{
    sync::{mpsc, oneshot, watch},
    task::JoinSet,
};
use tracing::{debug, info};

use super::{
    LocalState, MepView, NodeState, SessionInfo,
    merge::SiteTable,
    transport::{AbortOnDrop, Ctx, Event, dial_loop},
};
use crate::mep::{
    frame::{Message, Role, RttRow},
    session::{Audience, CloseReason, Outbound, SessionCmd},
    topology::{Action, Purpose, SiteView},
};
use crate::persist::PersistEntry;

mod outbound;
use outbound::same_versions;
mod statements;

struct SessionHandle {
    id: u64,
    initiated: bool,
    cmds: mpsc::Sender<SessionCmd>,
    kill: Option<oneshot::Sender<(CloseReason, String)>>,
    audience: watch::Sender<Audience>,
}

impl SessionHandle {
    fn kill(&mut self, reason: CloseReason, detail: String) {
        if let Some(k) = self.kill.take() {
            let _ = k.send((reason, detail));
        }
    }
}

struct Dialer {
    purpose: Purpose,
    stop: watch::Sender<bool>,
}

pub(super) struct Controller {
    ctx: Arc<Ctx>,
    view: SiteView,
    shared: Arc<NodeState>,
    local: watch::Receiver<Arc<LocalState>>,
    sessions: HashMap<String, SessionHandle>,
    by_id: HashMap<u64, String>,
    info: BTreeMap<String, SessionInfo>,
    dialers: HashMap<String, Dialer>,
    /// What each session brought about each site, and the handovers in progress.
    table: SiteTable,
    pending_rtt: HashMap<String, Vec<RttRow>>,
    pending_persist: HashMap<String, Vec<PersistEntry>>,
    out: Outbound,
    version: u64,
    tasks: JoinSet<()>,
    /// Something the topology or what sessions send depends on changed.
    topo_dirty: bool,
    /// Something the published view shows changed.
    view_dirty: bool,
}

impl Controller {
    pub(super) fn new(ctx: Arc<Ctx>, view: SiteView, shared: Arc<NodeState>) -> Self {
        let dead_after = ctx.cfg.dead_after;
        Controller {
            ctx,
            view,
            local: shared.local.subscribe(),
            shared,
            sessions: HashMap::new(),
            by_id: HashMap::new(),
            info: BTreeMap::new(),
            dialers: HashMap::new(),
            table: SiteTable::new(dead_after),
            pending_rtt: HashMap::new(),
            pending_persist: HashMap::new(),
            out: Outbound::default(),
            version: 0,
            tasks: JoinSet::new(),
            topo_dirty: true,
            view_dirty: true,
        }
    }

    pub(super) async fn run(
        &mut self,
        mut events: mpsc::Receiver<Event>,
        shutdown: impl Future<Output = ()>,
        acceptor: AbortOnDrop,
    ) {
        tokio::pin!(shutdown);
        // Adoption timers are checked on this tick (nothing else is rebuilt unless it changed).
        let tick = (self.ctx.cfg.timing.adopt_after / 10)
            .clamp(Duration::from_millis(10), Duration::from_millis(100));
        let mut ticker = tokio::time::interval(tick);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        self.refresh_local(true);
        // The view is rebuilt at most every `view_interval` (it is O(sites); a parent of a large
        // tree gets a relayed frame for some child every millisecond).
        let publish_every = self.ctx.cfg.view_interval;
        let mut last_publish = Instant::now().checked_sub(publish_every).unwrap();
        loop {
            let flush_at = last_publish + publish_every;
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                () = tokio::time::sleep_until(flush_at.into()), if self.view_dirty => {}
                Some(event) = events.recv() => {
                    self.handle(event);
                    // Take what else is waiting before publishing once.
                    for _ in 0..256 {
                        match events.try_recv() {
                            Ok(e) => self.handle(e),
                            Err(_) => break,
                        }
                    }
                }
                r = self.local.changed() => {
                    if r.is_ok() {
                        self.refresh_local(false);
                        self.topo_dirty = true;
                    }
                }
                _ = ticker.tick() => {
                    self.topo_dirty = true;
                    self.settle_handovers(Instant::now());
                    while self.tasks.try_join_next().is_some() {}
                }
            }
            if std::mem::take(&mut self.topo_dirty) {
                self.reconcile();
            }
            if self.view_dirty && Instant::now() >= last_publish + publish_every {
                self.view_dirty = false;
                last_publish = Instant::now();
                self.publish();
            }
        }
        info!(site = %self.view.me(), links = self.sessions.len(), "MEP stopping");
        for d in self.dialers.values() {
            let _ = d.stop.send(true);
        }
        for l in self.sessions.values_mut() {
            l.kill(CloseReason::Shutdown, "site shutting down".into());
        }
        // Give sessions a moment to send their Reject, then abort whatever is left.
        let sessions = &mut self.sessions;
        let _ = tokio::time::timeout(Duration::from_millis(100), async {
            while !sessions.is_empty() {
                match events.recv().await {
                    Some(Event::Down { session, peer, .. }) => {
                        if sessions.get(&peer).is_some_and(|l| l.id == session) {
                            sessions.remove(&peer);
                        }
                    }
                    Some(_) => {}
                    None => break,
                }
            }
        })
        .await;
        drop(acceptor);
        self.tasks.abort_all();
    }

    fn handle(&mut self, event: Event) {
        let now = Instant::now();
        self.view_dirty = true;
        self.topo_dirty |= match &event {
            Event::Frame { session, message } => match message {
                // Services and tables matter to the topology only as a child's, relayed.
                Message::ServiceStates(_) => self
                    .by_id
                    .get(session)
                    .is_some_and(|peer| self.view.is_attached(peer)),
                Message::RttRows(_) | Message::Persistence(_) => false,
                _ => true,
            },
            _ => true,
        };
        match event {
            Event::Up {
                session,
                hello,
                version,
                initiated,
                cmds,
                kill,
                audience,
            } => {
                let peer = hello.site.clone();
                if let Some(mut old) = self.sessions.remove(&peer) {
                    // One session per pair. This one proved the peer's name with its key (a
                    // newcomer that cannot never gets here), so it is the peer itself,
                    // reconnected before we saw the old session die: the newer one wins.
                    old.kill(CloseReason::Replaced, "replaced by a newer link".into());
                    self.by_id.remove(&old.id);
                }
                self.by_id.insert(session, peer.clone());
                self.sessions.insert(
                    peer.clone(),
                    SessionHandle {
                        id: session,
                        initiated,
                        cmds,
                        kill: Some(kill),
                        audience,
                    },
                );
                self.info.insert(
                    peer.clone(),
                    SessionInfo {
                        up: true,
                        since: now,
                        version: Some(version),
                        initiated,
                        peer_software: Some(hello.software.clone()),
                        last_error: None,
                        last_reason: None,
                        audience: Audience::None,
                    },
                );
                // Drop what an older session of this peer left.
                self.table.session_up(&peer);
                let actions = self.view.session_up(&peer, now);
                self.apply(actions);
            }
            Event::Down {
                session,
                peer,
                reason,
                error,
            } => {
                if self.by_id.remove(&session).is_none() {
                    return;
                }
                if self.sessions.get(&peer).is_some_and(|l| l.id == session) {
                    self.sessions.remove(&peer);
                }
                if let Some(i) = self.info.get_mut(&peer) {
                    i.up = false;
                    i.since = now;
                    i.version = None;
                    i.last_error = Some(error);
                    i.last_reason = Some(reason);
                    i.audience = Audience::None;
                }
                // A child that said it is moving to another parent is kept (as it last was)
                // until that parent delivers it; anything else the session brought goes now.
                let moved_to = self.view.departed_to(&peer).map(str::to_owned);
                if let Some(h) = self.table.session_down(&peer, moved_to.as_deref(), now) {
                    self.handover_started(&peer, &h);
                }
                self.pending_rtt.remove(&peer);
                self.pending_persist.remove(&peer);
                let actions = self.view.session_down(&peer, now);
                self.apply(actions);
            }
            Event::Failed {
                peer,
                reason,
                error,
            } => {
                if !self.sessions.contains_key(&peer) {
                    let i = self.info.entry(peer).or_insert(SessionInfo {
                        up: false,
                        since: now,
                        version: None,
                        initiated: true,
                        peer_software: None,
                        last_error: None,
                        last_reason: None,
                        audience: Audience::None,
                    });
                    i.last_error = Some(error);
                    i.last_reason = Some(reason);
                }
            }
            Event::Frame { session, message } => {
                let Some(peer) = self.by_id.get(&session).cloned() else {
                    return;
                };
                self.frame(&peer, message, now);
            }
        }
        self.settle_handovers(now);
    }

    fn apply(&mut self, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Send { to, message } => {
                    let Some(session) = self.sessions.get_mut(&to) else {
                        continue;
                    };
                    if session.cmds.try_send(SessionCmd::Send(message)).is_err() {
                        session.kill(
                            CloseReason::QueueFull,
                            "the link's queue is full (peer too slow)".into(),
                        );
                    }
                }
                Action::Close {
                    peer,
                    code: _,
                    reason,
                } => {
                    if let Some(session) = self.sessions.get_mut(&peer) {
                        let why = if reason.starts_with("adoption rejected") {
                            CloseReason::AdoptRejected
                        } else {
                            CloseReason::Unwanted
                        };
                        session.kill(why, reason);
                    }
                }
            }
        }
    }

    /// Starts and stops dialers to match the view; updates what each session carries.
    fn reconcile(&mut self) {
        let now = Instant::now();
        let desired = self.view.desired_outbound(now);
        let stale: Vec<String> = self
            .dialers
            .iter()
            .filter(|(peer, d)| desired.get(*peer) != Some(&d.purpose))
            .map(|(peer, _)| peer.clone())
            .collect();
        for peer in stale {
            if let Some(d) = self.dialers.remove(&peer) {
                let _ = d.stop.send(true);
                debug!(site = %self.view.me(), %peer, "MEP link no longer wanted");
            }
            if let Some(session) = self.sessions.get_mut(&peer)
                && session.initiated
            {
                session.kill(
                    CloseReason::Unwanted,
                    "the topology no longer wants this link".into(),
                );
            }
        }
        for (peer, purpose) in desired {
            if self.dialers.contains_key(&peer) {
                continue;
            }
            let Some(spec) = self.view.topology().site(&peer).cloned() else {
                continue;
            };
            let (stop, stop_rx) = watch::channel(false);
            if let Purpose::Adopt { original_parent } = &purpose {
                info!(site = %self.view.me(), child = %peer, %original_parent, "adopting a child of a parent that is down");
            }
            self.tasks.spawn(dial_loop(spec, self.ctx.clone(), stop_rx));
            self.dialers.insert(peer, Dialer { purpose, stop });
        }
        for (peer, session) in &self.sessions {
            let audience = self.view.audience(peer);
            session
                .audience
                .send_if_modified(|a| std::mem::replace(a, audience) != audience);
            if let Some(i) = self.info.get_mut(peer)
                && i.audience != audience
            {
                i.audience = audience;
                self.view_dirty = true;
            }
        }
        self.refresh_topology_parts();
        let out = &self.out;
        self.ctx.outbound.send_if_modified(|o| {
            let changed = !same_versions(o, out);
            if changed {
                *o = Arc::new(out.clone());
            }
            changed
        });
    }

    fn publish(&self) {
        let me = self.view.me();
        let names = self
            .view
            .topology()
            .sites()
            .iter()
            .map(|s| s.name.as_str())
            .filter(|s| *s != me);
        let sites = self.table.sites(
            names,
            |peer| self.info.get(peer).is_some_and(|i| i.up),
            Instant::now(),
        );
        let holders = self
            .view
            .topology()
            .sites()
            .iter()
            .filter(|s| s.role == Role::Child)
            .filter_map(|s| {
                self.view
                    .holder(&s.name)
                    .map(|h| (s.name.clone(), h.to_owned()))
            })
            .collect();
        let view = MepView {
            site: self.view.me().to_owned(),
            role: self.view.role(),
            answers_dns: self.view.topology().answers_dns(self.view.me()),
            sessions: self.info.clone(),
            sites,
            current_parent: self.view.current_parent().map(str::to_owned),
            adopted: self.view.adopted().clone(),
            holders,
        };
        self.shared.view.send_replace(Arc::new(view));
    }
}
