//! Table tests of the topology rules, and the seed scenarios step by step on a simulated
//! network of [`SiteView`]s (sessions opened as the views ask, cut and restored by the test, time
//! advanced by the test).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use super::*;
use crate::mep::frame::{Message, Role, SiteStatus};
use crate::mep::session::Audience;

fn ip(last: u8) -> IpAddr {
    IpAddr::from([10, 0, 0, last])
}

/// The seed's deployment: parents P1..P3 (10.0.0.1..3), child1..3 of each, backups
/// P1: P2, P3; P2: P3, P1; P3: P1, P2.
fn seed() -> SiteTree {
    SiteTree::new(vec![
        SiteSpec::parent("P1", ip(1)).with_backups(["P2", "P3"]),
        SiteSpec::parent("P2", ip(2)).with_backups(["P3", "P1"]),
        SiteSpec::parent("P3", ip(3)).with_backups(["P1", "P2"]),
        SiteSpec::child("child1", ip(11), "P1"),
        SiteSpec::child("child2", ip(12), "P2"),
        SiteSpec::child("child3", ip(13), "P3"),
    ])
    .unwrap()
}

/// A child's own configuration: itself and its parent only.
fn child_config(full: &SiteTree, child: &str) -> SiteTree {
    let c = full.site(child).unwrap().clone();
    let mut p = full.site(c.parent.as_deref().unwrap()).unwrap().clone();
    p.backups.clear();
    SiteTree::new(vec![p, c]).unwrap()
}

const T: TopologyTiming = TopologyTiming {
    adopt_after: Duration::from_secs(2),
    accept_after: Duration::from_secs(1),
    startup_grace: Duration::from_secs(10),
};

#[test]
fn validation() {
    let p = |n: &str, i: u8| SiteSpec::parent(n, ip(i));
    let err = |sites: Vec<SiteSpec>| SiteTree::new(sites).unwrap_err();
    assert_eq!(
        err(vec![p("a", 1), p("a", 2)]),
        TopologyError::DuplicateSite("a".into())
    );
    assert!(matches!(
        err(vec![p("a", 1), p("b", 1)]),
        TopologyError::DuplicateIp(..)
    ));
    assert!(matches!(err(vec![p("", 1)]), TopologyError::BadName(_)));
    let many: Vec<SiteSpec> = (0..33).map(|i| p(&format!("p{i}"), i)).collect();
    assert_eq!(err(many), TopologyError::TooManyParents(33));
    let mut sites = vec![p("p", 1)];
    sites.extend((0..1025u32).map(|i| {
        SiteSpec::child(
            format!("c{i}"),
            IpAddr::from((0x0b00_0000 + i).to_be_bytes()),
            "p",
        )
    }));
    assert_eq!(err(sites.clone()), TopologyError::TooManyChildren(1025));
    sites.pop();
    assert!(
        SiteTree::new(sites).is_ok(),
        "32 parents and 1024 children are fine"
    );
    assert!(matches!(
        err(vec![SiteSpec::child("c", ip(2), "nope")]),
        TopologyError::BadParent {
            why: "is not defined",
            ..
        }
    ));
    assert!(matches!(
        err(vec![
            p("p", 1),
            SiteSpec::child("c", ip(2), "p"),
            SiteSpec::child("d", ip(3), "c")
        ]),
        TopologyError::BadParent {
            why: "is not a parent",
            ..
        }
    ));
    let mut orphan = SiteSpec::child("c", ip(2), "p");
    orphan.parent = None;
    assert_eq!(
        err(vec![p("p", 1), orphan]),
        TopologyError::NoParent("c".into())
    );
    assert!(matches!(
        err(vec![
            p("p", 1),
            SiteSpec::child("c", ip(2), "p").with_backups(["p"])
        ]),
        TopologyError::ChildWithBackups { .. }
    ));
    // Backup lists.
    let backup_err = |list: &[&str]| {
        err(vec![
            p("a", 1).with_backups(list.iter().copied()),
            p("b", 2),
            p("c", 3),
            p("d", 4),
            p("e", 5),
            p("f", 6),
            p("g", 7),
            SiteSpec::child("k", ip(8), "a"),
        ])
    };
    assert!(matches!(
        backup_err(&["zz"]),
        TopologyError::BadBackup {
            why: "is not defined (add the site first)",
            ..
        }
    ));
    assert!(matches!(
        backup_err(&["k"]),
        TopologyError::BadBackup {
            why: "is not a parent",
            ..
        }
    ));
    assert!(matches!(
        backup_err(&["a"]),
        TopologyError::BadBackup {
            why: "is the site itself",
            ..
        }
    ));
    assert!(matches!(
        backup_err(&["b", "b"]),
        TopologyError::BadBackup {
            why: "is listed twice",
            ..
        }
    ));
    assert_eq!(
        backup_err(&["b", "c", "d", "e", "f", "g"]),
        TopologyError::TooManyBackups {
            site: "a".into(),
            n: 6
        }
    );
}

#[test]
fn set_and_clear_backups() {
    let mut t = seed();
    t.set_backups("P1", vec!["P3".into()]).unwrap();
    assert_eq!(t.site("P1").unwrap().backups, ["P3"]);
    // A refused list changes nothing.
    assert!(t.set_backups("P1", vec!["P9".into()]).is_err());
    assert_eq!(t.site("P1").unwrap().backups, ["P3"]);
    assert!(matches!(
        t.set_backups("child1", vec!["P2".into()]),
        Err(TopologyError::ChildWithBackups { .. })
    ));
    assert!(matches!(
        t.set_backups("nope", vec![]),
        Err(TopologyError::UnknownSite(_))
    ));
    // `unset` clears the whole list.
    t.set_backups("P1", vec!["P2".into(), "P3".into()]).unwrap();
    t.clear_backups("P1").unwrap();
    assert!(t.site("P1").unwrap().backups.is_empty());
}

#[test]
fn static_rules() {
    let t = seed();
    // (a, b, who initiates)
    let table: &[(&str, &str, Option<&str>)] = &[
        ("P1", "P2", Some("P1")),
        ("P2", "P1", Some("P1")),
        ("P3", "P2", Some("P2")),
        ("P1", "child1", Some("P1")),
        ("child1", "P1", Some("P1")),
        ("P2", "child1", None),
        ("child1", "child2", None),
        ("P1", "P1", None),
        ("P1", "nope", None),
    ];
    for (a, b, want) in table {
        assert_eq!(t.initiator(a, b), *want, "{a} {b}");
    }
    assert!(t.answers_dns("P1") && !t.answers_dns("child1") && !t.answers_dns("nope"));
    assert!(t.syncs_network_metrics("P1", "P3"));
    assert!(!t.syncs_network_metrics("P1", "child1"));
    assert!(!t.is_flat());
    // (me, from, role claimed, allowed)
    let table: &[(&str, &str, Role, bool)] = &[
        ("P2", "P1", Role::Parent, true),
        ("P1", "P2", Role::Parent, false),    // P1 initiates
        ("P1", "child1", Role::Child, false), // parents dial their children
        ("P1", "stranger", Role::Parent, false),
        ("P2", "P1", Role::Child, false), // role mismatch
        ("child1", "P1", Role::Parent, true),
        ("child1", "P2", Role::Parent, true), // a would-be adopter
        ("child1", "child2", Role::Child, false),
    ];
    for (me, from, role, ok) in table {
        assert_eq!(
            t.inbound_allowed(me, from, *role).is_ok(),
            *ok,
            "{me} ← {from} ({role:?})"
        );
    }
    // A child's own configuration knows only its parent, and still takes an adopter's call.
    let c = child_config(&t, "child1");
    assert!(c.inbound_allowed("child1", "P3", Role::Parent).is_ok());
    // Ties on the IP (sites on one host in tests) are broken by port, then name.
    let t = SiteTree::new(vec![
        SiteSpec::parent("a", ip(1)).with_port(2000),
        SiteSpec::parent("b", ip(2)).with_port(1000),
    ])
    .unwrap();
    assert_eq!(t.initiator("a", "b"), Some("a"));
}

#[test]
fn remote_service_rule() {
    // (local monitor, site reachable, reported, effective)
    let table = [
        (None, true, Some(true), true),
        (None, true, Some(false), false),
        (None, false, Some(true), false), // MEP to its site is down: DOWN
        (None, true, None, false),        // never reported
        (Some(true), false, Some(false), true), // a local monitor decides
        (Some(false), true, Some(true), false),
    ];
    for (local, reachable, reported, want) in table {
        assert_eq!(
            remote_service_up(local, reachable, reported),
            want,
            "{local:?} {reachable} {reported:?}"
        );
    }
}

#[test]
fn who_adopts() {
    let t0 = Instant::now();
    let later = t0 + T.adopt_after;
    // P3's view; sessions to P1 and P2 as given; P1's backups are [P2, P3].
    // (P1 up, P2 up, time, P3 adopts child1)
    let table = [
        (true, true, later, false),
        (false, true, later, false), // P2 is a higher-priority backup and up
        (false, false, later, true),
        (false, false, t0 + Duration::from_millis(10), false), // not down long enough
    ];
    for (p1, p2, now, adopts) in table {
        let mut v = SiteView::new(seed(), "P3", T, t0).unwrap();
        for (peer, up) in [("P1", p1), ("P2", p2)] {
            v.session_up(peer, t0);
            if !up {
                v.session_down(peer, t0);
            }
        }
        assert_eq!(v.should_adopt_from("P1", now), adopts, "{p1} {p2}");
        let wants = v.desired_outbound(now);
        assert_eq!(
            wants.get("child1")
                == Some(&Purpose::Adopt {
                    original_parent: "P1".into()
                }),
            adopts
        );
        // Always: the configured sessions.
        assert_eq!(wants.get("child3"), Some(&Purpose::Child));
        assert_eq!(wants.get("P1"), None, "P1 has the lower IP and calls us");
    }
    // Sessions never up: down only from the end of the startup grace (a cold start adopts nothing).
    let v = SiteView::new(seed(), "P3", T, t0).unwrap();
    assert!(!v.should_adopt_from("P1", later));
    assert!(
        !v.should_adopt_from(
            "P1",
            (t0 + T.startup_grace + T.adopt_after)
                .checked_sub(Duration::from_millis(1))
                .unwrap()
        )
    );
    assert!(
        v.should_adopt_from("P1", t0 + T.startup_grace + T.adopt_after),
        "a parent that never came up"
    );
    // Not in the list at all: never adopts.
    let mut t = seed();
    t.set_backups("P1", vec!["P2".into()]).unwrap();
    let v = SiteView::new(t, "P3", T, t0).unwrap();
    assert!(!v.should_adopt_from("P1", later));
    // A child wants no sessions of its own.
    let v = SiteView::new(child_config(&seed(), "child1"), "child1", T, t0).unwrap();
    assert!(v.desired_outbound(later).is_empty());
}

#[test]
fn child_decides() {
    let t0 = Instant::now();
    let late = t0 + T.accept_after * 3;
    let accepted = |a: &[Action]| {
        a.iter().any(|a| {
            matches!(
                a,
                Action::Send {
                    message: Message::AdoptAccept { .. },
                    ..
                }
            )
        })
    };
    // (parent session up, since, request from, known list, current adopter, accepted)
    type Row<'a> = (
        bool,
        Instant,
        &'a str,
        Option<&'a [&'a str]>,
        Option<&'a str>,
        bool,
    );
    let table: &[Row] = &[
        (true, late, "P2", Some(&["P2", "P3"]), None, false), // parent up: reject (scenario 2)
        (false, t0, "P2", Some(&["P2", "P3"]), None, true),   // parent down: accept
        (
            false,
            late.checked_sub(Duration::from_millis(1)).unwrap(),
            "P2",
            Some(&["P2", "P3"]),
            None,
            true,
        ),
        (false, t0, "P4", Some(&["P2", "P3"]), None, false), // not a backup of P1
        (false, t0, "P3", Some(&["P2", "P3"]), Some("P2"), false), // P2 ranks higher
        (false, t0, "P2", Some(&["P2", "P3"]), Some("P3"), true), // P2 ranks higher than P3
        (false, t0, "P2", Some(&[]), None, false),           // list cleared
        (false, t0, "P2", None, None, true),                 // no list yet: the offered one
    ];
    for (i, &(parent_up, down_since, from, list, current, want)) in table.iter().enumerate() {
        let mut v = SiteView::new(child_config(&seed(), "child1"), "child1", T, t0).unwrap();
        v.session_up("P1", t0);
        if let Some(list) = list {
            v.backup_list("P1", "P1", list.iter().map(ToString::to_string).collect());
        }
        if !parent_up {
            v.session_down("P1", down_since.min(t0 + Duration::from_millis(1)));
        }
        if let Some(c) = current {
            v.session_up(c, t0);
            let a = v.adopt_request(c, "P1", &[], late);
            assert!(
                accepted(&a),
                "row {i}: setting up the current adopter: {a:?}"
            );
        }
        let actions = v.adopt_request(from, "P1", &["P2".into(), "P3".into()], late);
        assert_eq!(accepted(&actions), want, "row {i}: {actions:?}");
        if want {
            assert_eq!(v.current_parent(), Some(from));
            if let Some(c) = current {
                assert!(
                    actions
                        .iter()
                        .any(|a| matches!(a, Action::Close { peer, .. } if peer == c)),
                    "row {i}"
                );
            }
        } else {
            assert!(
                actions
                    .iter()
                    .any(|a| matches!(a, Action::Close { peer, .. } if peer == from)),
                "row {i}"
            );
        }
    }
    // Down only a moment: rejected.
    let mut v = SiteView::new(child_config(&seed(), "child1"), "child1", T, t0).unwrap();
    v.session_up("P1", t0);
    v.session_down("P1", late);
    assert!(!accepted(&v.adopt_request(
        "P2",
        "P1",
        &["P2".into()],
        late
    )));
    // Another parent's child: rejected.
    assert!(!accepted(&v.adopt_request(
        "P2",
        "P3",
        &["P2".into()],
        late + T.accept_after
    )));
}

/// A simulated network of site views.
struct Sim {
    now: Instant,
    full: SiteTree,
    views: BTreeMap<String, SiteView>,
    alive: BTreeSet<String>,
    cut: BTreeSet<(String, String)>,
    /// Established sessions → who opened them.
    sessions: BTreeMap<(String, String), String>,
    /// Dial attempts made at this instant (a real dialer backs off before retrying).
    tried: BTreeSet<(String, String)>,
}

fn pair(a: &str, b: &str) -> (String, String) {
    if a < b {
        (a.into(), b.into())
    } else {
        (b.into(), a.into())
    }
}

impl Sim {
    fn new(full: SiteTree) -> Sim {
        let now = Instant::now();
        let names: Vec<String> = full.sites().iter().map(|s| s.name.clone()).collect();
        let mut sim = Sim {
            now,
            full,
            views: BTreeMap::new(),
            alive: BTreeSet::new(),
            cut: BTreeSet::new(),
            sessions: BTreeMap::new(),
            tried: BTreeSet::new(),
        };
        for name in &names {
            sim.start(name);
        }
        sim.settle();
        sim
    }

    fn config_of(&self, site: &str) -> SiteTree {
        match self.full.site(site).unwrap().role {
            Role::Parent => self.full.clone(),
            Role::Child => child_config(&self.full, site),
        }
    }

    fn start(&mut self, site: &str) {
        let v = SiteView::new(self.config_of(site), site, T, self.now).unwrap();
        self.views.insert(site.into(), v);
        self.alive.insert(site.into());
    }

    fn kill(&mut self, site: &str) {
        self.alive.remove(site);
        self.settle();
    }

    fn revive(&mut self, site: &str) {
        self.start(site);
        self.settle();
    }

    fn cut(&mut self, a: &str, b: &str) {
        self.cut.insert(pair(a, b));
        self.settle();
    }

    fn restore(&mut self, a: &str, b: &str) {
        self.cut.remove(&pair(a, b));
        self.settle();
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
        self.tried.clear();
        self.settle();
    }

    fn connected(&self, a: &str, b: &str) -> bool {
        self.sessions.contains_key(&pair(a, b))
    }

    fn view(&self, site: &str) -> &SiteView {
        &self.views[site]
    }

    fn close(&mut self, a: &str, b: &str) {
        if self.sessions.remove(&pair(a, b)).is_none() {
            return;
        }
        for (x, y) in [(a, b), (b, a)] {
            if self.alive.contains(x) {
                let now = self.now;
                let actions = self.views.get_mut(x).unwrap().session_down(y, now);
                self.run(x, actions);
            }
        }
    }

    fn run(&mut self, from: &str, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Send { to, message } => {
                    if self.connected(from, &to) {
                        self.deliver(from, &to, message);
                    }
                }
                Action::Close { peer, .. } => self.close(from, &peer),
            }
        }
    }

    fn deliver(&mut self, from: &str, to: &str, message: Message) {
        let now = self.now;
        let v = self.views.get_mut(to).unwrap();
        let actions = match message {
            Message::AdoptRequest {
                original_parent,
                backups,
            } => v.adopt_request(from, &original_parent, &backups, now),
            Message::AdoptAccept { .. } => v.adopt_answer(from, true, ""),
            Message::AdoptReject { reason, .. } => v.adopt_answer(from, false, &reason),
            Message::BackupParents { parent, backups } => {
                v.backup_list(from, &parent, backups);
                Vec::new()
            }
            Message::SiteStatus(s) => {
                v.site_status(from, &s);
                Vec::new()
            }
            _ => Vec::new(),
        };
        self.run(to, actions);
    }

    /// Runs the network until nothing changes: sessions break where cut or dead, sites open
    /// the sessions they want, parents send their backup lists to their children and relay
    /// their children's status to the other parents.
    fn settle(&mut self) {
        for _ in 0..100 {
            let before = (self.sessions.clone(), self.snapshot());
            let broken: Vec<_> = self
                .sessions
                .keys()
                .filter(|(a, b)| {
                    self.cut.contains(&pair(a, b))
                        || !self.alive.contains(a)
                        || !self.alive.contains(b)
                })
                .cloned()
                .collect();
            for (a, b) in broken {
                self.close(&a, &b);
            }
            // Sessions the opener no longer wants.
            let unwanted: Vec<_> = self
                .sessions
                .iter()
                .filter(|((a, b), opener)| {
                    let other = if *opener == a { b } else { a };
                    !self
                        .view(opener)
                        .desired_outbound(self.now)
                        .contains_key(other)
                })
                .map(|(k, _)| k.clone())
                .collect();
            for (a, b) in unwanted {
                self.close(&a, &b);
            }
            for a in self.alive.clone() {
                for (b, _) in self.view(&a).desired_outbound(self.now) {
                    let p = pair(&a, &b);
                    if self.sessions.contains_key(&p)
                        || self.cut.contains(&p)
                        || !self.alive.contains(&b)
                        || !self.tried.insert((a.clone(), b.clone()))
                    {
                        continue;
                    }
                    let role = self.view(&a).role();
                    if self
                        .view(&b)
                        .topology()
                        .inbound_allowed(&b, &a, role)
                        .is_err()
                    {
                        continue;
                    }
                    self.sessions.insert(p, a.clone());
                    let now = self.now;
                    let acts = self.views.get_mut(&a).unwrap().session_up(&b, now);
                    let bcts = self.views.get_mut(&b).unwrap().session_up(&a, now);
                    self.run(&a, acts);
                    self.run(&b, bcts);
                }
            }
            // What sessions carry: backup lists to children, children's status to parents.
            for ((a, b), _) in self.sessions.clone() {
                for (x, y) in [(&a, &b), (&b, &a)] {
                    if !self.connected(x, y) {
                        continue;
                    }
                    let vx = self.view(x);
                    match vx.audience(y) {
                        Audience::Child => {
                            let m = Message::BackupParents {
                                parent: x.clone(),
                                backups: vx.own_backups().to_vec(),
                            };
                            self.deliver(x, y, m);
                        }
                        Audience::PeerParent => {
                            let statuses: Vec<SiteStatus> = self
                                .full
                                .sites()
                                .iter()
                                .filter(|s| s.role == Role::Child)
                                .map(|s| vx.child_status(&s.name))
                                .collect();
                            for s in statuses {
                                self.deliver(x, y, Message::SiteStatus(s));
                            }
                        }
                        _ => {}
                    }
                }
            }
            if (self.sessions.clone(), self.snapshot()) == before {
                return;
            }
        }
        panic!("the simulated network does not settle");
    }

    /// Who holds each child, and who each parent has adopted.
    fn snapshot(&self) -> Vec<String> {
        self.views
            .iter()
            .map(|(k, v)| format!("{k}:{:?}:{:?}", v.current_parent(), v.adopted()))
            .collect()
    }

    fn parent_of(&self, child: &str) -> Option<&str> {
        self.view(child).current_parent()
    }
}

#[test]
fn cold_start_connects_the_configured_links_and_adopts_nothing() {
    let mut sim = Sim::new(seed());
    for (a, b) in [
        ("P1", "P2"),
        ("P1", "P3"),
        ("P2", "P3"),
        ("P1", "child1"),
        ("P2", "child2"),
        ("P3", "child3"),
    ] {
        assert!(sim.connected(a, b), "{a}-{b}");
    }
    assert_eq!(sim.sessions.len(), 6);
    assert_eq!(
        sim.sessions[&pair("P1", "P2")],
        "P1",
        "the lower IP opened it"
    );
    sim.advance(T.adopt_after * 2);
    for (c, p) in [("child1", "P1"), ("child2", "P2"), ("child3", "P3")] {
        assert_eq!(sim.parent_of(c), Some(p));
        assert_eq!(sim.view("P1").holder(c), Some(p), "P1 knows who holds {c}");
    }
    assert!(sim.views.values().all(|v| v.adopted().is_empty()));
    // Children learnt their parent's backup list over MEP.
    assert_eq!(sim.view("child1").backups("P1"), ["P2", "P3"]);
}

/// Scenario 1: P1 goes down; P2, first in P1's list, adopts child1; P3 assumes child1 is
/// P2's; P1 returns and child1 goes back to it.
#[test]
fn scenario_1_parent_down_adopted_by_first_backup_and_back() {
    let mut sim = Sim::new(seed());
    sim.kill("P1");
    // Detected at once, but nobody adopts before `adopt_after`.
    assert!(!sim.view("P2").is_up("P1") && !sim.view("P3").is_up("P1"));
    assert_eq!(sim.parent_of("child1"), None);
    assert!(!sim.connected("P2", "child1"));
    sim.advance(T.adopt_after);
    assert!(sim.connected("P2", "child1"), "P2 adopts");
    assert_eq!(sim.parent_of("child1"), Some("P2"));
    assert_eq!(
        sim.view("P2").adopted().get("child1").map(String::as_str),
        Some("P1")
    );
    assert!(!sim.connected("P3", "child1"), "P3 leaves it to P2");
    assert!(
        !sim.view("P3")
            .desired_outbound(sim.now)
            .contains_key("child1")
    );
    assert_eq!(
        sim.view("P3").holder("child1"),
        Some("P2"),
        "P3 assumes child1 is now P2's"
    );
    // The other children never moved.
    assert_eq!(sim.parent_of("child2"), Some("P2"));
    assert_eq!(sim.parent_of("child3"), Some("P3"));
    // P1 returns: it calls child1, which goes back to it; P2 lets go.
    sim.revive("P1");
    assert_eq!(sim.parent_of("child1"), Some("P1"));
    assert!(sim.connected("P1", "child1") && !sim.connected("P2", "child1"));
    assert!(sim.view("P2").adopted().is_empty());
    assert_eq!(sim.view("P3").holder("child1"), Some("P1"));
    sim.advance(T.adopt_after * 3);
    assert_eq!(sim.parent_of("child1"), Some("P1"), "and stays");
}

/// Scenario 2: only the P1–P2 session is down; P2 offers to adopt child1, which refuses since
/// its parent P1 is up.
#[test]
fn scenario_2_only_the_parent_link_down_child_rejects() {
    let mut sim = Sim::new(seed());
    sim.cut("P1", "P2");
    sim.advance(T.adopt_after);
    assert!(
        sim.view("P2").should_adopt_from("P1", sim.now),
        "P2 sees P1 down and is first in its list"
    );
    // P2 called child1 and was refused (the session is closed again).
    assert!(sim.tried.contains(&("P2".to_owned(), "child1".to_owned())));
    assert!(!sim.connected("P2", "child1"));
    assert_eq!(sim.parent_of("child1"), Some("P1"));
    assert!(sim.view("P2").adopted().is_empty());
    // Retries (after backoff) are refused the same way.
    sim.advance(T.adopt_after);
    assert_eq!(sim.parent_of("child1"), Some("P1"));
    // P3 sees P1 up and does nothing.
    assert!(!sim.view("P3").should_adopt_from("P1", sim.now));
    sim.restore("P1", "P2");
    assert!(sim.connected("P1", "P2"));
    assert!(
        !sim.view("P2")
            .desired_outbound(sim.now)
            .contains_key("child1")
    );
}

/// Scenario 3: P3 and child1 see P1 down, P3–P2 is down too, P2 still sees P1 up. P2 does
/// nothing; P3 (P2 being down for it) adopts child1. Then P1–P2 drops: P2, first in P1's
/// list, asks child1, which moves from P3 to P2.
#[test]
fn scenario_3_split_views_then_the_higher_backup_takes_over() {
    let mut sim = Sim::new(seed());
    sim.cut("P1", "P3");
    sim.cut("P1", "child1");
    sim.cut("P2", "P3");
    assert!(sim.view("P2").is_up("P1"));
    sim.advance(T.adopt_after);
    assert!(
        !sim.view("P2").should_adopt_from("P1", sim.now),
        "P2 does nothing"
    );
    assert!(
        sim.view("P3").should_adopt_from("P1", sim.now),
        "P3 sees P2 down too"
    );
    assert_eq!(
        sim.parent_of("child1"),
        Some("P3"),
        "child1 sees P1 down and accepts P3"
    );
    assert_eq!(
        sim.view("P3").adopted().get("child1").map(String::as_str),
        Some("P1")
    );
    // The P1–P2 session drops.
    sim.cut("P1", "P2");
    assert_eq!(
        sim.parent_of("child1"),
        Some("P3"),
        "not before adopt_after"
    );
    sim.advance(T.adopt_after);
    assert_eq!(
        sim.parent_of("child1"),
        Some("P2"),
        "child1 prefers P2 by P1's list"
    );
    assert!(sim.connected("P2", "child1") && !sim.connected("P3", "child1"));
    assert!(sim.view("P3").adopted().is_empty());
    // P3 keeps offering (it still sees P1 and P2 down) and child1 keeps refusing.
    sim.advance(T.adopt_after);
    assert_eq!(sim.parent_of("child1"), Some("P2"));
    // Everything heals: child1 goes home.
    for (a, b) in [("P1", "P3"), ("P1", "child1"), ("P2", "P3"), ("P1", "P2")] {
        sim.restore(a, b);
    }
    assert_eq!(sim.parent_of("child1"), Some("P1"));
    assert!(sim.views.values().all(|v| v.adopted().is_empty()));
}

#[test]
fn no_backup_up_leaves_the_children_orphaned_and_a_cleared_list_adopts_nothing() {
    let mut sim = Sim::new(seed());
    sim.kill("P1");
    sim.kill("P2");
    sim.kill("P3");
    sim.advance(T.adopt_after * 2);
    assert_eq!(sim.parent_of("child1"), None);

    let mut t = seed();
    t.clear_backups("P1").unwrap();
    let mut sim = Sim::new(t);
    assert!(
        sim.view("child1").backups("P1").is_empty(),
        "the cleared list reached the child"
    );
    sim.kill("P1");
    sim.advance(T.adopt_after * 2);
    assert_eq!(sim.parent_of("child1"), None);
    assert!(!sim.connected("P2", "child1") && !sim.connected("P3", "child1"));
}

#[test]
fn flat_mesh_is_full_and_opened_by_the_lower_ip() {
    let sites: Vec<SiteSpec> = (1..=6)
        .map(|i| SiteSpec::parent(format!("s{i}"), ip(i)))
        .collect();
    let t = SiteTree::new(sites).unwrap();
    assert!(t.is_flat());
    let sim = Sim::new(t);
    assert_eq!(sim.sessions.len(), 15);
    for ((a, b), opener) in &sim.sessions {
        assert_eq!(opener, a.min(b));
    }
}

/// A child leaving a parent for another says where it goes on the session it is closing, before
/// the close; the parent it left relays it as not attached, naming the new parent, so that
/// the other parents keep its state across the move (node::merge) instead of dropping it.
#[test]
fn a_child_leaving_a_parent_says_where_it_goes() {
    let moving = |to: &str, parent: &str| Action::Send {
        to: to.into(),
        message: Message::SiteStatus(SiteStatus {
            site: "child1".into(),
            role: Role::Child,
            parent: Some(parent.into()),
            up: true,
        }),
    };
    let t0 = Instant::now();
    let late = t0 + T.accept_after * 3;
    // Back from its adopter P2 to P1: the word, then the close, on P2's session.
    let mut c = SiteView::new(child_config(&seed(), "child1"), "child1", T, t0).unwrap();
    c.session_up("P1", t0);
    c.session_down("P1", t0);
    c.session_up("P2", late);
    assert!(
        c.adopt_request("P2", "P1", &["P2".into(), "P3".into()], late)
            .iter()
            .any(|a| matches!(
                a,
                Action::Send {
                    message: Message::AdoptAccept { .. },
                    ..
                }
            ))
    );
    let actions = c.session_up("P1", late);
    assert_eq!(actions.len(), 2, "{actions:?}");
    assert_eq!(actions[0], moving("P2", "P1"));
    assert!(matches!(&actions[1], Action::Close { peer, .. } if peer == "P2"));
    // From the adopter P3 to the higher-ranked P2: the same to P3.
    let mut c = SiteView::new(child_config(&seed(), "child1"), "child1", T, t0).unwrap();
    c.session_up("P1", t0);
    c.session_down("P1", t0);
    for p in ["P3", "P2"] {
        c.session_up(p, late);
    }
    c.adopt_request("P3", "P1", &["P2".into(), "P3".into()], late);
    let actions = c.adopt_request("P2", "P1", &["P2".into(), "P3".into()], late);
    assert_eq!(actions[0], moving("P3", "P2"), "{actions:?}");
    assert!(matches!(&actions[1], Action::Close { peer, .. } if peer == "P3"));

    // On the simulated network (scenario 1): P2, which had adopted child1, relays it as gone
    // to P1; P3 still takes P1 as its holder.
    let mut sim = Sim::new(seed());
    sim.kill("P1");
    sim.advance(T.adopt_after);
    assert_eq!(sim.parent_of("child1"), Some("P2"));
    assert_eq!(
        sim.view("P2").child_status("child1").parent.as_deref(),
        Some("P2")
    );
    sim.revive("P1");
    assert_eq!(sim.parent_of("child1"), Some("P1"));
    assert_eq!(sim.view("P2").departed_to("child1"), Some("P1"));
    let relayed = sim.view("P2").child_status("child1");
    assert_eq!((relayed.up, relayed.parent.as_deref()), (false, Some("P1")));
    assert_eq!(sim.view("P3").holder("child1"), Some("P1"));
    // A child's word about another parent counts only from a child attached to me.
    let mut p3 = SiteView::new(seed(), "P3", T, t0);
    let p3 = p3.as_mut().unwrap();
    p3.site_status(
        "child1",
        &SiteStatus {
            site: "child1".into(),
            role: Role::Child,
            parent: Some("P1".into()),
            up: true,
        },
    );
    assert_eq!(p3.departed_to("child1"), None);
    // Scenario 3's move from P3 to P2: P3 relays child1 as gone to P2.
    let mut sim = Sim::new(seed());
    for (a, b) in [("P1", "P3"), ("P1", "child1"), ("P2", "P3")] {
        sim.cut(a, b);
    }
    sim.advance(T.adopt_after);
    assert_eq!(sim.parent_of("child1"), Some("P3"));
    sim.cut("P1", "P2");
    sim.advance(T.adopt_after);
    assert_eq!(sim.parent_of("child1"), Some("P2"));
    assert_eq!(
        sim.view("P3").child_status("child1").parent.as_deref(),
        Some("P2")
    );
    // Once back with a parent it left, it is that parent's again.
    for (a, b) in [("P1", "P3"), ("P1", "child1"), ("P2", "P3"), ("P1", "P2")] {
        sim.restore(a, b);
    }
    assert_eq!(
        sim.view("P1").child_status("child1").parent.as_deref(),
        Some("P1")
    );
    assert_eq!(sim.view("P2").departed_to("child1"), Some("P1"));
}
