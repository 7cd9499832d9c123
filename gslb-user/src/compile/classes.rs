//! Stage 2, per configuration, location database and RTT rows: the client address space cut
//! at every boundary into segments, and the segments grouped into classes of clients that
//! every decision sees alike (a [`ClientClasses`]).

use ahash::AHashMap as HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use super::Job;
use super::partition::{AddressSteps, Segments, V4_FIRST, V4_LAST, addr_of};
use super::views::merge;
use crate::location::Location;
use crate::location::db::LocationDb;
use crate::model::Model;
use crate::policy::topology::Ldns;

/// The client address space cut into segments, and their classes.
pub(super) struct ClientClasses {
    /// Segment starts, ascending; the first is 0.
    pub(super) points: Vec<u128>,
    pub(super) seg_class: Vec<u32>,
    /// Each class's key and one address in it.
    pub(super) classes: Vec<(ClassKey, IpAddr)>,
    /// Segments per class.
    pub(super) class_segments: Vec<u32>,
    /// Each class's place: a dense number for its (family, subnets, location), which is all a
    /// decision without an RTT row reads of the client.
    pub(super) place_ids: Vec<u32>,
    pub(super) places: usize,
    /// Each class's key without its RTT row, as a dense number: classes that differ only by
    /// their row (a hundred thousand rows, a few dozen of these) share their view.
    pub(super) view_ids: Vec<u32>,
    pub(super) view_keys: usize,
    pub(super) rtt_rows: Arc<AddressSteps>,
    /// Client → static view number (0: none).
    pub(super) static_views: Arc<AddressSteps>,
    /// Neighbouring segments of one class merged (their `views` are class numbers), for the
    /// ECS scope of per-query answers; empty when no domain is decided per query.
    pub(super) class_runs: Arc<Segments>,
}

/// A class of segments: everything a decision reads about the client but its address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct ClassKey {
    pub(super) v4: bool,
    pub(super) view: u32,
    pub(super) subnet: u32,
    pub(super) rtt: u32,
    pub(super) location: u64,
}

impl ClassKey {
    pub(super) fn family(v4: bool) -> ClassKey {
        ClassKey {
            v4,
            view: 0,
            subnet: 0,
            rtt: 0,
            location: 0,
        }
    }
}

impl Job<'_> {
    /// Cuts the address space at every boundary and finds each segment's class.
    pub(super) fn client_classes(&self) -> ClientClasses {
        let model = self.model;
        // Per-query domains' inputs cut the space too, though no view differs by them: the ECS
        // scope of their answers is the class's (`Snapshot::classes`).
        let place = self.kinds.iter().any(|k| k.reads().0);
        let rtt = self.kinds.iter().any(|k| k.reads().1);
        let views = Arc::new(AddressSteps::longest_match(
            model
                .views
                .iter()
                .enumerate()
                .flat_map(|(i, v)| v.prefixes.iter().map(move |p| (*p, i as u32 + 1))),
            0,
        ));
        let mut subnets = Vec::new();
        if place {
            for p in &model.policies {
                p.expr.subnets(&mut subnets);
            }
            for r in &model.topology {
                if let Ldns::Prefix(net) = &r.ldns {
                    subnets.push(*net);
                }
            }
        }
        let subnets = AddressSteps::longest_match(
            subnets.iter().enumerate().map(|(i, n)| (*n, i as u32 + 1)),
            0,
        );
        // Kept even when no compiled domain reads them: the responder's per-query decisions do.
        let rtt_rows = Arc::new(AddressSteps::longest_match(
            self.inputs
                .rtt
                .iter()
                .enumerate()
                .map(|(i, r)| (r.ldns, i as u32 + 1)),
            0,
        ));
        let locations = self.inputs.locations.filter(|_| place);
        // Decisions read a client's location only through patterns (service locations, policy
        // and action locations, topology records) and stop at the first wildcard of a
        // pattern: qualifiers deeper than every pattern's last value never matter. Clients
        // whose locations agree down to that depth share a class.
        let depth = location_depth(model);
        let mut truncated: HashMap<Location, u64> = HashMap::new();
        let mut by_class: HashMap<u64, u64> = HashMap::new();
        let mut location_key = |db: &LocationDb, addr: IpAddr| {
            *by_class
                .entry(db.class(addr))
                .or_insert_with(|| match db.lookup(addr) {
                    None => 0,
                    Some(l) => {
                        let mut l = l.into_owned();
                        for q in &mut l.0[depth..] {
                            *q = crate::location::Qualifier::Any;
                        }
                        let next = truncated.len() as u64 + 1;
                        *truncated.entry(l).or_insert(next)
                    }
                })
        };
        let mut points: Vec<u128> = vec![0, V4_FIRST, V4_LAST + 1];
        for steps in [&*views, &subnets] {
            points.extend_from_slice(&steps.starts);
        }
        if rtt {
            points.extend_from_slice(&rtt_rows.starts);
        }
        if let Some(db) = locations {
            points.extend(db.boundaries());
        }
        points.sort_unstable();
        points.dedup();

        let mut class_ids: HashMap<ClassKey, u32> = HashMap::new();
        let mut classes: Vec<(ClassKey, IpAddr)> = Vec::new();
        let mut seg_class = Vec::with_capacity(points.len());
        let (mut iv, mut is, mut ir) = (0, 0, 0);
        let at = |steps: &AddressSteps, i: &mut usize, p: u128| {
            while *i + 1 < steps.starts.len() && steps.starts[*i + 1] <= p {
                *i += 1;
            }
            steps.vals[*i]
        };
        for &p in &points {
            let addr = addr_of(p);
            let key = ClassKey {
                v4: addr.is_ipv4(),
                view: at(&views, &mut iv, p),
                subnet: at(&subnets, &mut is, p),
                rtt: if rtt { at(&rtt_rows, &mut ir, p) } else { 0 },
                location: locations.map_or(0, |db| location_key(db, addr)),
            };
            let id = *class_ids.entry(key).or_insert_with(|| {
                classes.push((key, addr));
                classes.len() as u32 - 1
            });
            seg_class.push(id);
        }
        let mut class_segments = vec![0u32; classes.len()];
        for &c in &seg_class {
            class_segments[c as usize] += 1;
        }
        let mut place_numbers: HashMap<(bool, u32, u64), u32> = HashMap::new();
        let place_ids = classes
            .iter()
            .map(|(k, _)| {
                let next = place_numbers.len() as u32;
                *place_numbers
                    .entry((k.v4, k.subnet, k.location))
                    .or_insert(next)
            })
            .collect();
        let mut view_numbers: HashMap<ClassKey, u32> = HashMap::new();
        let view_ids = classes
            .iter()
            .map(|&(k, _)| {
                let next = view_numbers.len() as u32;
                *view_numbers.entry(ClassKey { rtt: 0, ..k }).or_insert(next)
            })
            .collect();
        let class_runs = if self.kinds.iter().any(|k| k.per_query()) {
            let by_class: Vec<(u32, u32)> = (0..classes.len() as u32).map(|c| (c, 0)).collect();
            Arc::new(merge(&points, &seg_class, &by_class).0)
        } else {
            Arc::default()
        };
        ClientClasses {
            points,
            seg_class,
            classes,
            class_segments,
            place_ids,
            places: place_numbers.len(),
            view_ids,
            view_keys: view_numbers.len(),
            rtt_rows,
            static_views: views,
            class_runs,
        }
    }
}

/// How many leading location qualifiers any decision can read: one past the deepest value
/// in a service location, a policy's or an action's location, or a topology record.
fn location_depth(model: &Model) -> usize {
    let mut patterns: Vec<Location> = Vec::new();
    patterns.extend(model.services.iter().filter_map(|s| s.location.clone()));
    for p in &model.policies {
        let mut found = Vec::new();
        p.expr.locations(&mut found);
        patterns.extend(found.into_iter().cloned());
    }
    patterns.extend(
        model
            .actions
            .iter()
            .flat_map(|a| a.preferred.iter().cloned()),
    );
    patterns.extend(model.topology.iter().filter_map(|r| match &r.ldns {
        Ldns::Location(l) => Some(l.clone()),
        Ldns::Prefix(_) => None,
    }));
    patterns
        .iter()
        .filter_map(|l| l.0.iter().rposition(|q| !q.is_any()))
        .map(|i| i + 1)
        .max()
        .unwrap_or(0)
}
