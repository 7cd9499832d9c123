//! `[engine]`: decision-engine settings.

use serde::Deserialize;

use crate::location::WildcardMode;

/// `[engine]`: decision-engine settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EngineSettings {
    /// NetScaler `matchWildcardtoany`.
    pub wildcard_mode: WildcardMode,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEngine {
    #[serde(default)]
    pub(super) wildcard_mode: WildcardMode,
}
