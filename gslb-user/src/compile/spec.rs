//! Stage 0, once per configuration: what every compilation of one configuration shares (the
//! model, the decision engine and how each domain is decided), carried in each
//! [`Snapshot`](super::Snapshot) so that the responder does not build it again on every health
//! change.

use std::sync::Arc;

use super::kinds::{Kind, kind, needs_engine};
use super::{Source, cname, wildcard};
use crate::model::Model;
use crate::policy::Engine;

/// What one configuration gives every snapshot, built once per configuration: a
/// [`Compiler`](super::Compiler) keeps it while the configuration stays, whatever the service
/// states, the location database or the RTT rows do.
#[derive(Debug)]
pub struct Spec {
    /// The configuration it was built from (the compiler compares the next one with it: by
    /// identity first, then by value).
    source: Source,
    /// The decision engine, when some domain needs one (not round robin alone). `None` too
    /// when the engine rejected the model, which validation makes unreachable: no answers for
    /// those names is the safe side.
    pub engine: Option<Arc<Engine>>,
    /// How each GSLB domain is decided, by domain id (before an RTT budget sends domains
    /// answered by RTT to the responder): it reads the model and the engine only.
    pub(super) kinds: Vec<Kind>,
    /// What each service's `cname` answers (for its CNAME domains' answers).
    pub(super) cname_targets: cname::Targets,
    /// By domain index: a wildcard the fast path answers below its parent
    /// ([`wildcard::fast`]).
    pub(super) fast_wildcards: Vec<bool>,
}

impl Spec {
    pub fn new(source: Source) -> Spec {
        let model = &source.model;
        let engine = Spec::engine_of(model);
        let kinds = (0..model.domains.len())
            .map(|d| kind(model, d, engine.as_deref()))
            .collect();
        Spec {
            cname_targets: cname::targets(model),
            fast_wildcards: wildcard::fast(model),
            source,
            engine,
            kinds,
        }
    }

    /// The model it was built from.
    pub fn model(&self) -> &Arc<Model> {
        &self.source.model
    }

    /// What it was built from.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// The decision engine of `model`, when some domain needs one.
    fn engine_of(model: &Arc<Model>) -> Option<Arc<Engine>> {
        (0..model.domains.len())
            .any(|d| needs_engine(model, d))
            .then(|| match Engine::new(model.clone()) {
                Ok(engine) => Some(Arc::new(engine)),
                Err(error) => {
                    tracing::error!(%error, "decision engine rejected the configuration");
                    None
                }
            })
            .flatten()
    }

    /// Whether this is the spec of `source`.
    pub fn is_of(&self, source: &Source) -> bool {
        Arc::ptr_eq(&self.source.model, &source.model) || self.source == *source
    }
}

/// Two specs are equal when built from equal configurations (so are their engines): snapshots
/// of one configuration compare by their answers, whichever compiler made them.
impl PartialEq for Spec {
    fn eq(&self, other: &Spec) -> bool {
        self.source == other.source
    }
}

impl Eq for Spec {}
