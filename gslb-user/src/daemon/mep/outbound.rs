//! MEP out: this site's services (as its own monitors see them, with their loads) and its RTT
//! column, sent to the node after every recompute; the node sends the latest to its peers.

use ipnet::IpNet;
use tracing::error;

use super::Mep;
use crate::{
    mep::{RttProtocol, RttRow, ServiceReport},
    probe::{ProbeKind, RttHandle},
    world::World,
};

impl Mep {
    /// Sends this site's state to the node: its own services as its monitors see them (UP when
    /// unmonitored; DOWN when the operator disabled them or this site, `steering`), and its RTT column when it probes. Cheap when nothing changed (the node
    /// sends only changed parts).
    pub fn publish_local(&self, world: &World) {
        let model = world.model();
        let services = model
            .services
            .iter()
            .enumerate()
            .filter(|(_, s)| model.site(s.site).name == self.site)
            .map(|(id, s)| ServiceReport {
                name: s.name.clone(),
                state: world.own_state(id.into()),
            })
            .collect();
        let rtt = world
            .rtt
            .as_ref()
            .map(|r| local_rtt(&self.site, r))
            .unwrap_or_default();
        // The persistence entries are published on their own clock (`daemon::persist`).
        if let Err(error) = self.running.node().publish_metrics(services, rtt) {
            error!(%error, "MEP: the local state cannot be sent");
        }
    }
}

/// This site's RTT column as MEP rows (prefixes of the LDNS mask).
pub(super) fn local_rtt(site: &str, rtt: &RttHandle) -> Vec<RttRow> {
    let mask = rtt.settings().mask;
    rtt.local_column()
        .into_iter()
        .filter_map(|row| {
            let d = row.rtt?;
            let len = if row.ldns.is_ipv4() {
                mask.v4.min(32)
            } else {
                mask.v6.min(128)
            };
            Some(RttRow {
                ldns: IpNet::new(row.ldns, len).ok()?,
                site: site.to_owned(),
                rtt_us: u32::try_from(d.as_micros()).unwrap_or(u32::MAX),
                protocol: match row.kind {
                    Some(ProbeKind::Icmp) => RttProtocol::Icmp,
                    Some(ProbeKind::Tcp) => RttProtocol::Tcp,
                    Some(ProbeKind::DnsDot | ProbeKind::DnsRev) | None => RttProtocol::Dns,
                },
                age_s: 0,
            })
        })
        .collect()
}
