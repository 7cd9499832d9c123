//! `[server] xdp_mode`: how the XDP program is attached to the interface.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

/// How the XDP program is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum XdpMode {
    /// Native (driver) mode, falling back to skb (generic) mode if the driver refuses.
    #[default]
    Auto,
    /// Native (driver) mode only.
    Native,
    /// Generic (skb) mode only.
    Skb,
}

impl XdpMode {
    const NAMES: [(&str, XdpMode); 3] = [
        ("auto", XdpMode::Auto),
        ("native", XdpMode::Native),
        ("skb", XdpMode::Skb),
    ];
}

impl fmt::Display for XdpMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, _) = Self::NAMES
            .iter()
            .find(|(_, m)| m == self)
            .expect("all modes named");
        f.write_str(name)
    }
}

/// Error from parsing an [`XdpMode`] that is not "auto", "native" or "skb".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid XDP mode {0:?} (expected auto, native or skb)")]
pub struct ParseXdpModeError(pub String);

impl FromStr for XdpMode {
    type Err = ParseXdpModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::NAMES
            .iter()
            .find(|(name, _)| *name == s)
            .map(|&(_, mode)| mode)
            .ok_or_else(|| ParseXdpModeError(s.to_owned()))
    }
}
