//! The property through the XDP program: the fast path answers as the engine.

use super::*;

// ---- Through the XDP program ----

/// Every compiled domain's A and AAAA for `clients`, asked of the real program with the
/// snapshot published: a query the snapshot answers (1 to MAX_ADDRS records for the client's
/// view or the default view) must be answered with the engine's answer, the others passed.
/// Rotations are asked as many times in a row as the answer holds records, on one CPU, so that
/// the replies show the whole rotation.
/// Returns the queries answered and those passed.
/// The sources the fast path refuses to answer (`Counter::MartianSource`): the martian ones
/// and, over IPv6, every IPv4-mapped one.
pub(super) fn martian(client: IpAddr) -> bool {
    match client {
        IpAddr::V4(a) => gslb_common::martian_v4(a.octets()),
        IpAddr::V6(a) => gslb_common::martian_v6(a.octets()) || a.to_ipv4_mapped().is_some(),
    }
}

pub(super) fn ask_xdp(dp: &Dataplane, world: &World, clients: &[IpAddr]) -> (usize, usize) {
    let tables = Tables::new(&world.snapshot);
    let started = Instant::now();
    let (mut hits, mut passes, mut runs) = (0usize, 0usize, 0usize);
    let mut id = 0u16;
    for &client in clients {
        let view = tables.view(client);
        let location = world.db.lookup(client);
        for (d, domain) in world.config.gslb_domains.iter().enumerate() {
            let per_query = world.snapshot.engine_domains.contains(&domain.name);
            for (qtype, rtype) in [(QTYPE_A, RecordType::A), (QTYPE_AAAA, RecordType::AAAA)] {
                id = id.wrapping_add(1);
                let frame =
                    Frame::query_from(client, wire(&query(id, &domain.name, rtype))).bytes();
                let case = format!(
                    "{}: {} {rtype} from {client} (view {view:?})",
                    world.name, domain.name
                );
                // A source no resolver sends from is passed before any lookup (the responder
                // answers it, from the same tables; XDP does not trust it).
                if martian(client) {
                    assert_passed(&case, dp, &frame, Counter::MartianSource);
                    passes += 1;
                    runs += 1;
                    continue;
                }
                let stored = tables.answer(&domain.name, qtype, view);
                let Some(stored) = stored.filter(|a| !a.addrs.is_empty() && a.fast()) else {
                    let reason = if tables.known(&domain.name, qtype) {
                        Counter::NoAnswer
                    } else {
                        assert!(
                            per_query || Meaning::of_answer(stored) == Meaning::Nodata,
                            "{case}"
                        );
                        Counter::UnknownName
                    };
                    assert_passed(&case, dp, &frame, reason);
                    passes += 1;
                    runs += 1;
                    continue;
                };
                let want = world
                    .expected(d, qtype, client, location.as_deref())
                    .unwrap_or_else(|e| panic!("{case}: {e}"));
                let rotates = stored.mode == AnswerMode::Rotate;
                let expect = Expect {
                    rtype,
                    ttl: want.ttl(),
                    answers: if rotates {
                        Answers::OneOf(want.support())
                    } else {
                        Answers::All(want.support())
                    },
                };
                let times = if rotates { stored.addrs.len() } else { 1 };
                let mut got = Vec::new();
                for _ in 0..times {
                    got.extend(assert_reply(&case, &frame, &run(dp, &frame), &expect));
                    runs += 1;
                }
                let seen = if rotates {
                    Meaning::rotation(want.ttl(), got.into_iter().map(|a| (a, 1)))
                } else {
                    Meaning::All {
                        ttl: want.ttl(),
                        addrs: got,
                    }
                };
                assert_eq!(seen, want, "{case}: the replies over one rotation");
                hits += 1;
            }
        }
    }
    eprintln!(
        "{}: {} clients through XDP in {:?}: {hits} answered, {passes} passed, {runs} runs",
        world.name,
        clients.len(),
        started.elapsed()
    );
    (hits, passes)
}

/// Most queries are answered by the fast path and some (more than it can carry) are passed.
pub(super) fn ask_xdp_mostly_answered(dp: &Dataplane, world: &World, clients: &[IpAddr]) {
    let (hits, passes) = ask_xdp(dp, world, clients);
    assert!(hits > passes && passes > 0, "hits {hits}, passes {passes}");
}

/// A sample of the property's clients, both families.
pub(super) fn sample(clients: &[IpAddr], n: usize) -> Vec<IpAddr> {
    let step = clients.len() / n;
    let sample: Vec<IpAddr> = clients.iter().step_by(step).take(n).copied().collect();
    assert!(sample.iter().any(IpAddr::is_ipv4) && sample.iter().any(IpAddr::is_ipv6));
    sample
}

/// A dataplane of its own (fresh maps) with `snapshot` published, on this thread's CPU (the
/// rotor is per CPU); `None` when skipped for lack of privileges.
pub(super) fn dataplane(world: &World) -> Option<Dataplane> {
    if !common::privileged() {
        return None;
    }
    common::pin_to_current_cpu();
    let mut dp = Dataplane::load(None).expect("loading the XDP object");
    publish(&mut dp, world);
    Some(dp)
}

pub(super) fn publish(dp: &mut Dataplane, world: &World) -> PublishStats {
    let stats = dp.table.publish(&world.snapshot).expect("publishing");
    eprintln!("{}: published {stats:?}", world.name);
    assert_eq!((stats.too_long, stats.collisions), (0, 0));
    stats
}

#[test]
fn xdp_answers_the_rich_configuration_as_the_engine() {
    let world = World::rich();
    let Some(dp) = dataplane(&world) else { return };
    let clients = clients(&world, 1, CLIENTS);
    ask_xdp_mostly_answered(&dp, &world, &sample(&clients, XDP_CLIENTS));
}

#[test]
fn xdp_answers_the_split_configuration_as_the_engine() {
    let world = World::split();
    let Some(dp) = dataplane(&world) else { return };
    let clients = clients(&world, 2, SPLIT_CLIENTS);
    ask_xdp_mostly_answered(&dp, &world, &sample(&clients, SPLIT_XDP_CLIENTS));
}
