//! Stage 0, once per configuration: what every compilation of one configuration shares (the
//! decision engine), carried in each [`Snapshot`](super::Snapshot) so that the responder does
//! not build it again on every health change.

use std::sync::Arc;

use super::kinds::{Kind, kind, needs_engine, service_index};
use crate::config::Config;
use crate::policy::Engine;

/// What one configuration gives every snapshot, built once per configuration: a
/// [`Compiler`](super::Compiler) keeps it while the configuration stays, whatever the service
/// states, the location database or the RTT rows do.
#[derive(Debug)]
pub struct Spec {
    /// The configuration it was built from (the compiler compares the next one with it: by
    /// identity first, which is sound because this `Arc` keeps that allocation alive and
    /// unshared-mutable, then by value).
    config: Arc<Config>,
    /// The decision engine, when some domain needs one (not round robin alone). `None` too
    /// when the engine rejected the configuration, which validation makes unreachable: no
    /// answers for those names is the safe side.
    pub engine: Option<Arc<Engine>>,
    /// How each GSLB domain is decided, by configuration index (before an RTT budget sends
    /// domains answered by RTT to the responder): it reads the configuration and the engine
    /// only, and costs a look-up per service name of every domain.
    pub(super) kinds: Vec<Kind>,
}

impl Spec {
    pub fn new(config: &Config) -> Spec {
        Spec::of_shared(Arc::new(config.clone()))
    }

    /// [`Spec::new`] of a configuration already shared (the world's), kept without a copy.
    pub fn of_shared(shared: Arc<Config>) -> Spec {
        let services = service_index(&shared);
        let engine = Spec::engine_of(&shared, &services);
        let kinds = shared
            .gslb_domains
            .iter()
            .map(|d| kind(&shared, d, &services, engine.as_deref()))
            .collect();
        Spec {
            config: shared,
            engine,
            kinds,
        }
    }

    /// The decision engine of `config`, when some domain needs one.
    fn engine_of(
        config: &Config,
        services: &ahash::AHashMap<&str, (usize, &crate::config::Service)>,
    ) -> Option<Arc<Engine>> {
        config
            .gslb_domains
            .iter()
            .any(|d| needs_engine(config, d, services))
            .then(|| match config.engine() {
                Ok(engine) => Some(Arc::new(engine)),
                Err(error) => {
                    tracing::error!(%error, "decision engine rejected the configuration");
                    None
                }
            })
            .flatten()
    }

    /// Whether this is the spec of `config`.
    pub fn is_of(&self, config: &Config) -> bool {
        std::ptr::eq(Arc::as_ptr(&self.config), config) || *self.config == *config
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
