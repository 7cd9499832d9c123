//! `[[action]]` and `[[policy]]`: NetScaler DNS actions (preferred locations) and the
//! policies that apply them.

use std::collections::HashMap;
use std::ops::RangeInclusive;

use serde::Deserialize;

use super::error::ConfigError;
use super::names::{Names, Seen};
use super::validate::{Int, List, Str, Validator};
use crate::location::Location;
use crate::policy::{Expr, MAX_PREFERRED_LOCATIONS};

/// NetScaler bind priorities.
const PRIORITY_RANGE: RangeInclusive<i64> = 1..=i32::MAX as i64;

/// `[[action]]`: a NetScaler DNS action with a preferred-location list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsAction {
    /// Unique; letters, digits, '-', '_' and '.'.
    pub name: String,
    /// 1..=[`MAX_PREFERRED_LOCATIONS`], highest priority first, no duplicates.
    pub preferred_locations: Vec<Location>,
}

/// `[[policy]]`: a NetScaler DNS policy, bound globally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsPolicy {
    /// Unique; letters, digits, '-', '_' and '.'.
    pub name: String,
    pub expression: Expr,
    /// A [`DnsAction`] (exists).
    pub action: String,
    /// 1..=2147483647, unique; lower is evaluated first.
    pub priority: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAction {
    pub(super) name: Str,
    pub(super) preferred_locations: List,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    pub(super) name: Str,
    pub(super) expression: Str,
    pub(super) action: Str,
    pub(super) priority: Int,
}

impl Validator<'_> {
    pub(super) fn actions(&self, raw: Vec<RawAction>) -> Result<Vec<DnsAction>, ConfigError> {
        let mut names = Seen::new();
        let mut actions = Vec::new();
        for ra in raw {
            let name = self.object_name("action", &ra.name, &mut names)?;
            let owner = format!("action {name:?}");
            let list = ra.preferred_locations.get_ref();
            if list.is_empty() {
                return Err(self.error(
                    ra.preferred_locations.span(),
                    format!("{owner}: preferred_locations is empty; list 1 to {MAX_PREFERRED_LOCATIONS} locations"),
                ));
            }
            let mut seen = Seen::new();
            let mut preferred = Vec::new();
            for (i, l) in list.iter().enumerate() {
                if i == MAX_PREFERRED_LOCATIONS {
                    return Err(self.error(
                        l.span(),
                        format!(
                            "{owner}: {} preferred locations, at most {MAX_PREFERRED_LOCATIONS}",
                            list.len()
                        ),
                    ));
                }
                let location = Location::parse(l.get_ref()).map_err(|reason| {
                    self.error(
                        l.span(),
                        format!("{owner}: location {:?}: {reason}", l.get_ref()),
                    )
                })?;
                if let Some(first) = seen.first(location.clone(), self.line(l.span())) {
                    return Err(self.error(
                        l.span(),
                        format!(
                            "{owner}: location {:?} listed twice (first on line {first})",
                            l.get_ref()
                        ),
                    ));
                }
                preferred.push(location);
            }
            actions.push(DnsAction {
                name,
                preferred_locations: preferred,
            });
        }
        Ok(actions)
    }

    pub(super) fn policies(
        &self,
        raw: Vec<RawPolicy>,
        actions: &[DnsAction],
    ) -> Result<Vec<DnsPolicy>, ConfigError> {
        let action_names = Names::new("action", actions.iter().map(|a| a.name.as_str()));
        let mut names = Seen::new();
        let mut priorities: HashMap<u32, (String, usize)> = HashMap::new();
        let mut policies = Vec::new();
        for rp in raw {
            let name = self.object_name("policy", &rp.name, &mut names)?;
            let owner = format!("policy {name:?}");
            let expression = Expr::parse(rp.expression.get_ref()).map_err(|e| {
                let at = self.expression_offset(&rp.expression, e.offset);
                self.error(at..at, format!("{owner}: expression: {e}"))
            })?;
            if !action_names.contains(rp.action.get_ref()) {
                return Err(self.error(
                    rp.action.span(),
                    format!("{owner}: {}", action_names.unknown(rp.action.get_ref())),
                ));
            }
            let span = rp.priority.span();
            let priority: u32 =
                self.int(&owner, "priority", Some(rp.priority), PRIORITY_RANGE, 0)?;
            if let Some((other, line)) = priorities.get(&priority) {
                return Err(self.error(
                    span,
                    format!(
                        "{owner}: priority {priority} is already policy {other:?}'s (line {line}); \
                         priorities decide the order, so they are unique"
                    ),
                ));
            }
            priorities.insert(priority, (name.clone(), self.line(span)));
            policies.push(DnsPolicy {
                name,
                expression,
                action: rp.action.into_inner(),
                priority,
            });
        }
        Ok(policies)
    }

    /// The file offset of byte `offset` of an expression string. Exact when the string is
    /// written on one line without escapes (a literal '…' string, the usual way since the
    /// expression has quotes of its own); otherwise the string's start.
    fn expression_offset(&self, raw: &Str, offset: usize) -> usize {
        let span = raw.span();
        let written = &self.text[span.clone()];
        let simple = (written.starts_with('\'') && !written.starts_with("'''"))
            || (written.starts_with('"')
                && !written.starts_with("\"\"\"")
                && !written.contains('\\'));
        if simple && written.len() == raw.get_ref().len() + 2 {
            span.start + 1 + offset
        } else {
            span.start
        }
    }
}
