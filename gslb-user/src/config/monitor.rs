//! `[[monitor]]`: health monitors and the services they check.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::error::ConfigError;
use super::load::at;
use super::names::Seen;
use super::validate::{Int, PORT_RANGE, Str, Validator};

/// `[[monitor]]`: a health monitor, bound to services by name. Times in milliseconds.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMonitor {
    pub(super) name: Str,
    #[serde(rename = "type")]
    pub(super) kind: Spanned<RawMonitorType>,
    pub(super) port: Option<Int>,
    pub(super) interval_ms: Option<Int>,
    pub(super) timeout_ms: Option<Int>,
    pub(super) fall: Option<Int>,
    pub(super) rise: Option<Int>,
    pub(super) weight: Option<Int>,
    // http, https
    pub(super) path: Option<Str>,
    pub(super) host: Option<Str>,
    pub(super) expect_status: Option<Spanned<Vec<i64>>>,
    pub(super) body_contains: Option<Str>,
    // https
    pub(super) insecure: Option<Spanned<bool>>,
    pub(super) sni: Option<Str>,
    pub(super) ca_file: Option<Str>,
    // dns
    pub(super) qname: Option<Str>,
    pub(super) qtype: Option<Str>,
    pub(super) expect_rcode: Option<Str>,
    pub(super) expect_answer: Option<Str>,
    // load
    pub(super) format: Option<Spanned<super::load::RawLoadFormat>>,
    pub(super) metric: Option<Str>,
    pub(super) labels: Option<super::load::RawLabels>,
    pub(super) aggregate: Option<Spanned<crate::health::load::Aggregate>>,
    pub(super) measure: Option<Spanned<crate::health::load::Measure>>,
    pub(super) scheme: Option<Spanned<super::load::RawScheme>>,
    pub(super) unknown_after: Option<Int>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(super) enum RawMonitorType {
    Tcp,
    Http,
    Https,
    Dns,
    Icmp,
    Load,
}

impl Validator<'_> {
    /// `[[monitor]]`s: the health monitors, and the load monitors (config/load.rs).
    #[allow(clippy::type_complexity)]
    pub(super) fn monitors(
        &self,
        raw: Vec<RawMonitor>,
    ) -> Result<
        (
            Vec<crate::health::MonitorSpec>,
            Vec<crate::health::load::LoadMonitorSpec>,
        ),
        ConfigError,
    > {
        use crate::health::{DnsCheck, HttpCheck, MonitorKind, MonitorSpec, TlsCheck};
        let mut names = Seen::new();
        let mut out = Vec::new();
        let mut load = Vec::new();
        for rm in raw {
            let name = self.object_name("monitor", &rm.name, &mut names)?;
            let owner = format!("monitor {name:?}");
            let kind = *rm.kind.get_ref();
            if kind == Load {
                load.push(self.load_monitor(&rm, name)?);
                continue;
            }
            self.no_load_keys(&rm, &owner)?;
            use RawMonitorType::{Dns, Http, Https, Icmp, Load, Tcp};
            // A certificate that is not verified needs no CA to verify it. (Only an https
            // monitor gets here with both: the table below refuses them on other types.)
            if kind == Https
                && let (Some(i), Some(ca)) = (&rm.insecure, &rm.ca_file)
                && *i.get_ref()
            {
                return Err(self.error(
                    ca.span(),
                    format!(
                        "{owner}: ca_file is not read with insecure = true (the certificate is \
                         not verified): remove one"
                    ),
                ));
            }
            // A setting of another monitor type is a mistake worth saying, not ignoring.
            const HTTP: (&[RawMonitorType], &str) = (&[Http, Https], "http and https");
            const HTTPS: (&[RawMonitorType], &str) = (&[Https], "https");
            // An ICMP echo has no port to check.
            const PORTED: (&[RawMonitorType], &str) =
                (&[Tcp, Http, Https, Dns], "tcp, http, https and dns");
            const DNS: (&[RawMonitorType], &str) = (&[Dns], "dns");
            let only = [
                ("path", at(&rm.path), HTTP),
                ("host", at(&rm.host), HTTP),
                ("expect_status", at(&rm.expect_status), HTTP),
                ("body_contains", at(&rm.body_contains), HTTP),
                ("insecure", at(&rm.insecure), HTTPS),
                ("sni", at(&rm.sni), HTTPS),
                ("ca_file", at(&rm.ca_file), HTTPS),
                ("port", at(&rm.port), PORTED),
                ("qname", at(&rm.qname), DNS),
                ("qtype", at(&rm.qtype), DNS),
                ("expect_rcode", at(&rm.expect_rcode), DNS),
                ("expect_answer", at(&rm.expect_answer), DNS),
            ];
            for (key, span, (types, label)) in only {
                if let Some(span) = span
                    && !types.contains(&kind)
                {
                    return Err(self.error(
                        span,
                        format!("{owner}: {key} applies to {label} monitors only"),
                    ));
                }
            }
            let mut expect_status = Vec::new();
            if let Some(list) = &rm.expect_status {
                for code in list.get_ref() {
                    let Ok(code) = u16::try_from(*code).map_err(drop).and_then(|c| {
                        if (100..=599).contains(&c) {
                            Ok(c)
                        } else {
                            Err(())
                        }
                    }) else {
                        return Err(self.error(
                            list.span(),
                            format!(
                                "{owner}: expect_status {code} is not an HTTP status (100-599)"
                            ),
                        ));
                    };
                    expect_status.push(code);
                }
            }
            let http = || HttpCheck {
                path: rm
                    .path
                    .as_ref()
                    .map_or("/".to_owned(), |p| p.get_ref().clone()),
                host: rm.host.as_ref().map(|h| h.get_ref().clone()),
                expect_status: expect_status.clone(),
                body_contains: rm.body_contains.as_ref().map(|b| b.get_ref().clone()),
            };
            let kind = match kind {
                Tcp => MonitorKind::Tcp,
                Icmp => MonitorKind::Icmp,
                Http => MonitorKind::Http(http()),
                Https => MonitorKind::Https(
                    http(),
                    TlsCheck {
                        insecure: rm.insecure.as_ref().is_some_and(|i| *i.get_ref()),
                        sni: rm.sni.as_ref().map(|s| s.get_ref().clone()),
                        // Relative to the configuration file, as every other file it names.
                        ca_file: rm.ca_file.as_ref().map(|f| self.path(f.get_ref())),
                    },
                ),
                Load => unreachable!("load monitors are read above"),
                Dns => {
                    let Some(qname) = &rm.qname else {
                        return Err(self.error(
                            rm.kind.span(),
                            format!("{owner}: a dns monitor needs qname"),
                        ));
                    };
                    let qtype = match &rm.qtype {
                        Some(t) => t.get_ref().to_uppercase().parse().map_err(|_| {
                            self.error(
                                t.span(),
                                format!("{owner}: qtype {:?} is not a DNS type", t.get_ref()),
                            )
                        })?,
                        None => hickory_proto::rr::RecordType::A,
                    };
                    let mut check = DnsCheck::new(qname.get_ref().clone(), qtype);
                    if let Some(r) = &rm.expect_rcode {
                        check.expect_rcode = match r.get_ref().to_uppercase().as_str() {
                            "NOERROR" => hickory_proto::op::ResponseCode::NoError,
                            "NXDOMAIN" => hickory_proto::op::ResponseCode::NXDomain,
                            "REFUSED" => hickory_proto::op::ResponseCode::Refused,
                            "SERVFAIL" => hickory_proto::op::ResponseCode::ServFail,
                            other => return Err(self.error(r.span(), format!("{owner}: expect_rcode {other:?}: one of NOERROR, NXDOMAIN, REFUSED, SERVFAIL"))),
                        };
                    }
                    if let Some(a) = &rm.expect_answer {
                        check.expect_answer = Some(self.ip(&owner, "expect_answer", a)?);
                    }
                    MonitorKind::Dns(check)
                }
            };
            let mut spec = MonitorSpec::new(name, kind);
            if rm.port.is_some() {
                spec.port = Some(self.int(&owner, "port", rm.port, PORT_RANGE, 0)?);
            }
            let ms =
                |v: Option<Int>, key: &str, default: Duration| -> Result<Duration, ConfigError> {
                    Ok(match v {
                        None => default,
                        v => Duration::from_millis(self.int(&owner, key, v, 1..=3_600_000, 0)?),
                    })
                };
            spec.interval = ms(rm.interval_ms, "interval_ms", spec.interval)?;
            spec.timeout = ms(rm.timeout_ms, "timeout_ms", spec.timeout)?;
            spec.fall = self.int(&owner, "fall", rm.fall, 1..=100, spec.fall)?;
            spec.rise = self.int(&owner, "rise", rm.rise, 1..=100, spec.rise)?;
            spec.weight = self.int(&owner, "weight", rm.weight, 1..=100, spec.weight)?;
            out.push(spec);
        }
        Ok((out, load))
    }
}
