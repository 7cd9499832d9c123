//! `[[view]]`: static client-prefix views.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use ipnet::IpNet;
use serde::Deserialize;

use super::error::ConfigError;
use super::names::Seen;
use super::validate::{List, Str, Validator};

/// Implicit view of clients matching no `[[view]]`; answered from a domain's own services.
pub(super) const DEFAULT_VIEW: &str = "default";

/// `[[view]]`: clients whose source address falls in `prefixes` get the view's answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// Unique, `[A-Za-z0-9_-]+`, never "default".
    pub name: String,
    /// Non-empty; host bits are zero; each prefix belongs to exactly one view.
    pub prefixes: Vec<IpNet>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawView {
    pub(super) name: Str,
    pub(super) prefixes: List,
}

impl Validator<'_> {
    pub(super) fn views(&self, raw: Vec<RawView>) -> Result<Vec<View>, ConfigError> {
        let mut names = Seen::new();
        // Prefix → (owning view, line); also catches a prefix repeated within one view.
        let mut owners: HashMap<IpNet, (String, usize)> = HashMap::new();
        let mut views = Vec::new();
        for rv in raw {
            let name = rv.name.get_ref();
            let name_err =
                |reason: &str| self.error(rv.name.span(), format!("view name {name:?}: {reason}"));
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(name_err("only letters, digits, '-' and '_' are allowed"));
            }
            if name.eq_ignore_ascii_case(DEFAULT_VIEW) {
                return Err(name_err(
                    "reserved for clients in no view; choose another name",
                ));
            }
            if let Some(first) = names.first(name.clone(), self.line(rv.name.span())) {
                return Err(name_err(&format!("defined twice (first on line {first})")));
            }

            if rv.prefixes.get_ref().is_empty() {
                return Err(self.error(
                    rv.prefixes.span(),
                    format!("view {name:?}: prefixes is empty"),
                ));
            }
            let mut prefixes = Vec::new();
            for p in rv.prefixes.get_ref() {
                let err = |reason: String| self.error(p.span(), format!("view {name:?}: {reason}"));
                let net = self.prefix(p, &format!("view {name:?}"))?;
                match owners.entry(net) {
                    Entry::Occupied(e) => {
                        let (owner, line) = e.get();
                        return Err(err(if owner == name {
                            format!("prefix {net} listed twice (first on line {line})")
                        } else {
                            format!(
                                "prefix {net} is already in view {owner:?} (line {line}); a prefix may be in only one view"
                            )
                        }));
                    }
                    Entry::Vacant(e) => {
                        e.insert((name.clone(), self.line(p.span())));
                    }
                }
                prefixes.push(net);
            }
            views.push(View {
                name: rv.name.into_inner(),
                prefixes,
            });
        }
        Ok(views)
    }
}
