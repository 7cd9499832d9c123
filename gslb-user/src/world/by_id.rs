//! The world's inputs that arrive keyed by name, resolved to the model's ids.
//!
//! The subsystems that produce them (the operator's admin state, the load monitors, the link
//! monitor, MEP, the health monitors) keep them by name, because names are what survives a
//! reload. The answers are computed by id: each input is resolved here once when it changes
//! (and all of them when the model changes), so that [`super::World::service_states`], which
//! runs on every republish and every load note, indexes vectors and looks nothing up by name.

use std::collections::HashMap;

use crate::health::link::LinkLoad;
use crate::health::load::{LoadReadings, Measure};
use crate::health::state::ServiceState;
use crate::mep::MepView;
use crate::model::{DomainId, LinkId, Model, ServiceId};
use crate::steering::AdminState;

/// What a service's own site says of it over MEP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Reported {
    /// This site's service, or MEP is off: its state is measured here.
    #[default]
    Here,
    /// Another site's, which MEP does not reach now.
    Unreachable,
    /// Another site's, reachable: its report of the service (`None`: the site lists no such
    /// service).
    Reachable(Option<ServiceState>),
}

/// The inputs by id, each vector as long as its model list.
#[derive(Debug, Default)]
pub(super) struct ById {
    /// By [`ServiceId`]: neither the service nor its site is disabled by the operator.
    pub(super) enabled: Vec<bool>,
    /// By [`DomainId`]: the domain is not disabled by the operator.
    pub(super) domain_enabled: Vec<bool>,
    /// By [`ServiceId`], then [`Measure`] (connections, bandwidth): the value of the load
    /// monitor of that measure run here for the service; `None` while unknown, or when none
    /// runs.
    pub(super) loads: Vec<[Option<u64>; 2]>,
    /// By [`LinkId`]: the link's latest sample, `None` before its first.
    pub(super) links: Vec<Option<LinkLoad>>,
    /// By [`ServiceId`]: what its site reports over MEP.
    pub(super) reported: Vec<Reported>,
}

/// The slot of `measure` in [`ById::loads`].
pub(super) fn slot(measure: Measure) -> usize {
    match measure {
        Measure::Connections => 0,
        Measure::BandwidthKbps => 1,
    }
}

impl ById {
    /// Every input resolved against `model`.
    pub(super) fn resolve(
        model: &Model,
        admin: &AdminState,
        loads: &LoadReadings,
        links: &HashMap<String, LinkLoad>,
        mep: Option<&MepView>,
    ) -> ById {
        let mut by_id = ById::default();
        by_id.admin(model, admin);
        by_id.loads(model, loads);
        by_id.links(model, links);
        by_id.reported(model, mep);
        by_id
    }

    pub(super) fn admin(&mut self, model: &Model, admin: &AdminState) {
        self.enabled = model
            .services
            .iter()
            .map(|s| admin.service_enabled(&s.name, &model.site(s.site).name))
            .collect();
        self.domain_enabled = model
            .domains
            .iter()
            .map(|d| admin.domain_enabled(&d.name))
            .collect();
    }

    pub(super) fn loads(&mut self, model: &Model, loads: &LoadReadings) {
        self.loads = model
            .services
            .iter()
            .map(|s| {
                [Measure::Connections, Measure::BandwidthKbps]
                    .map(|m| loads.value(&s.name, m).flatten())
            })
            .collect();
    }

    pub(super) fn links(&mut self, model: &Model, links: &HashMap<String, LinkLoad>) {
        self.links = model
            .links
            .iter()
            .map(|l| links.get(&l.name).cloned())
            .collect();
    }

    /// Another site's services take their state from `mep`'s report of that site.
    pub(super) fn reported(&mut self, model: &Model, mep: Option<&MepView>) {
        let Some(view) = mep else {
            self.reported = vec![Reported::Here; model.services.len()];
            return;
        };
        // Each other site's report while it is reachable, by site id, its services by name:
        // one look-up per site and per reported service.
        let reports: Vec<Option<HashMap<&str, ServiceState>>> = model
            .sites
            .iter()
            .map(|site| {
                let report = view.sites.get(&site.name).filter(|r| r.reachable)?;
                // The first report of a name wins.
                Some(
                    report
                        .services
                        .iter()
                        .rev()
                        .map(|x| (x.name.as_str(), x.state))
                        .collect(),
                )
            })
            .collect();
        self.reported = model
            .services
            .iter()
            .map(|s| {
                if model.here.is_none_or(|here| here == s.site) {
                    return Reported::Here;
                }
                match &reports[s.site.index()] {
                    None => Reported::Unreachable,
                    Some(services) => Reported::Reachable(services.get(s.name.as_str()).copied()),
                }
            })
            .collect();
    }

    pub(super) fn enabled(&self, id: ServiceId) -> bool {
        self.enabled[id.index()]
    }

    pub(super) fn domain_enabled(&self, id: DomainId) -> bool {
        self.domain_enabled[id.index()]
    }

    pub(super) fn link(&self, id: LinkId) -> Option<&LinkLoad> {
        self.links[id.index()].as_ref()
    }
}
