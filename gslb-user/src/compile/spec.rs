//! Stage 0, once per configuration: what every compilation of one configuration shares (the
//! decision engine), carried in each [`Snapshot`](super::Snapshot) so that the responder does
//! not build it again on every health change.

use std::sync::Arc;

use super::kinds::{needs_engine, service_index};
use crate::config::Config;
use crate::policy::Engine;

/// What one configuration gives every snapshot, built once per configuration: a
/// [`Compiler`](super::Compiler) keeps it while the configuration stays, whatever the service
/// states, the location database or the RTT rows do.
#[derive(Debug)]
pub struct Spec {
    /// The configuration it was built from (the compiler compares the next one with it).
    config: Config,
    /// The decision engine, when some domain needs one (not round robin alone). `None` too
    /// when the engine rejected the configuration, which validation makes unreachable: no
    /// answers for those names is the safe side.
    pub engine: Option<Arc<Engine>>,
}

impl Spec {
    pub fn new(config: &Config) -> Spec {
        let services = service_index(config);
        let engine = config
            .gslb_domains
            .iter()
            .any(|d| needs_engine(config, d, &services))
            .then(|| match config.engine() {
                Ok(engine) => Some(Arc::new(engine)),
                Err(error) => {
                    tracing::error!(%error, "decision engine rejected the configuration");
                    None
                }
            })
            .flatten();
        Spec {
            config: config.clone(),
            engine,
        }
    }

    /// Whether this is the spec of `config`.
    pub fn is_of(&self, config: &Config) -> bool {
        self.config == *config
    }
}

/// Two specs are equal when built from equal configurations (so are their engines): snapshots
/// of one configuration compare by their answers, whichever compiler made them.
impl PartialEq for Spec {
    fn eq(&self, other: &Spec) -> bool {
        self.config == other.config
    }
}

impl Eq for Spec {}
