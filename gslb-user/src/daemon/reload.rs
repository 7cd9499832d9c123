//! Reading a configuration: the file with the command line's overrides, the checks a reload
//! makes before anything switches (what needs a restart, MEP, the location database, the
//! monitors), and the inputs the configuration names (location files, service monitors).

use std::{path::PathBuf, sync::Arc};

use tokio::sync::mpsc;
use tracing::{error, info};

use super::{Overrides, ReloadError, anyhow_like, load, mep};
use crate::{
    config::{Config, ConfigError},
    control::Reload,
    health::{HealthSupervisor, ServiceMonitors},
    location::db::LocationDb,
};

/// The configuration file with the command line's overrides applied (they apply to the fast
/// path too, so they change the configuration itself).
pub fn load_config(path: &std::path::Path, overrides: &Overrides) -> Result<Config, ConfigError> {
    let mut config = Config::load(path)?;
    if !overrides.listen.is_empty() {
        config.server.listen.clone_from(&overrides.listen);
    }
    if let Some(port) = overrides.port {
        config.server.dns_port = port;
    }
    Ok(config)
}

/// Reads a configuration to reload: the new one is validated in full, with its location
/// database and monitors, and nothing switches; the caller publishes its answers, then
/// switches the monitors, MEP, links and RTT settings (or, when the publish fails, keeps the
/// running configuration). A configuration that does not load, or that
/// changes what only a restart can (sockets, interface, pins), is refused and the running one
/// stays in force.
pub async fn reload(
    path: &std::path::Path,
    overrides: &Overrides,
    running: &Config,
) -> Result<(Config, Option<Arc<LocationDb>>, FileStamps), ReloadError> {
    // Reading the files and building the location database take as long as the files are
    // big: on a blocking thread, so that the runtime's workers (monitors, probes, MEP) are not
    // held meanwhile.
    let (owned_path, owned_overrides) = (path.to_owned(), overrides.clone());
    let config = match off_runtime(move || load_config(&owned_path, &owned_overrides)).await {
        Ok(config) => config,
        Err(error) => {
            error!(
                error = anyhow_like(&error),
                "reload refused; the running configuration stays in force"
            );
            return Err(ReloadError::Config(error));
        }
    };
    let (old, new) = (&running.server, &config.server);
    let restart_only = [
        ("listen", old.listen != new.listen),
        ("dns_port", old.dns_port != new.dns_port),
        ("interface", old.interface != new.interface),
        ("xdp_mode", old.xdp_mode != new.xdp_mode),
        ("pin_path", old.pin_path != new.pin_path),
        ("tcp_* limits", old.tcp != new.tcp),
        ("stale_after_s", old.stale_after != new.stale_after),
        ("user", old.user != new.user),
        ("state_file", old.state_file != new.state_file),
        (
            "socket_affinity",
            old.socket_affinity != new.socket_affinity,
        ),
    ];
    let changed: Vec<&str> = restart_only
        .iter()
        .filter(|(_, c)| *c)
        .map(|(n, _)| *n)
        .collect();
    if !changed.is_empty() {
        error!(fields = ?changed, "reload refused: [server] changes need a restart; the running configuration stays in force");
        return Err(ReloadError::RestartOnly { fields: changed });
    }
    if running.admin != config.admin {
        error!(
            "reload refused: [admin] changes need a restart; the running configuration stays in force"
        );
        return Err(ReloadError::AdminRestartOnly);
    }
    if let Err(reason) = mep::check_reload(running, &config) {
        error!(%reason, "reload refused: MEP; the running configuration stays in force");
        return Err(ReloadError::Mep(reason));
    }
    let stamps = FileStamps::of(&location_files(&config));
    let (built, owned_path) = (config.clone(), path.to_owned());
    let locations = match off_runtime(move || location_db(&built, &owned_path)).await {
        Ok(db) => db,
        Err(error) => {
            error!(
                error = anyhow_like(&error),
                "reload refused: location database"
            );
            return Err(ReloadError::Locations(error));
        }
    };
    if let Err(error) = load::Loads::check(&config) {
        error!(error = anyhow_like(&error), "reload refused: load monitors");
        return Err(ReloadError::Load(error));
    }
    if let Err(error) = HealthSupervisor::check(&service_monitors(&config)) {
        error!(
            error = anyhow_like(&error),
            "reload refused: health monitors"
        );
        return Err(ReloadError::Health(error));
    }
    Ok((config, locations, stamps))
}

/// What a reload replaced in the [`World`](crate::world::World), put back when its answers cannot be published.
pub(super) struct Previous {
    pub(super) config: Arc<Config>,
    /// What the world compiled from: `config`'s model, as it was.
    pub(super) source: crate::compile::Source,
    pub(super) locations: Option<Arc<LocationDb>>,
}

/// A reloaded configuration in the [`World`](crate::world::World), waiting for its answers to be published.
pub(super) struct Switch {
    pub(super) previous: Previous,
    /// The new location files' stamps.
    pub(super) stamps: FileStamps,
    /// The requesters, told the outcome.
    pub(super) waiting: Vec<Reload>,
}

/// The next reload request, from SIGHUP's queue or the control socket's.
pub(super) async fn next_reload(
    signals: &mut mpsc::Receiver<impl Into<Reload>>,
    control: &mut mpsc::Receiver<Reload>,
) -> Option<Reload> {
    tokio::select! {
        Some(r) = signals.recv() => Some(r.into()),
        Some(r) = control.recv() => Some(r),
        else => None,
    }
}

/// `work` on a blocking thread; its panic, if it panics, goes on here as it would have inline.
async fn off_runtime<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// The client location database the configuration describes, if it names any source.
pub(super) fn location_db(
    config: &Config,
    path: &std::path::Path,
) -> Result<Option<Arc<LocationDb>>, crate::location::db::LocationDbError> {
    let sources = &config.locations;
    if sources.files.is_empty()
        && sources.mmdb_city.is_none()
        && sources.mmdb_asn.is_none()
        && sources.custom.is_empty()
    {
        return Ok(None);
    }
    let db = LocationDb::from_sources(sources, path)?;
    info!(ranges = db.len(), "location database loaded");
    Ok(Some(Arc::new(db)))
}

/// How often the location database's files are checked for changes.
pub(super) const LOCATION_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// The files the location database is read from, as the loader opens them.
pub(super) fn location_files(config: &Config) -> Vec<PathBuf> {
    let l = &config.locations;
    l.files
        .iter()
        .map(|f| &f.path)
        .chain(&l.mmdb_city)
        .chain(&l.mmdb_asn)
        .cloned()
        .collect()
}

/// Modification times and sizes of files (`None` for one that cannot be read).
/// (Public because [`reload`] returns it: the stamps taken before the files were read.)
#[derive(Debug, PartialEq, Eq)]
pub struct FileStamps(Vec<Option<(std::time::SystemTime, u64)>>);

impl FileStamps {
    /// The stamps `files` had when the configuration read them.
    pub(super) fn recorded(files: &[crate::config::InputFile]) -> FileStamps {
        FileStamps(files.iter().map(|f| f.stamp).collect())
    }

    /// The stamps of the files `config` read (its zone files) as they are now.
    pub(super) fn of_inputs(config: &Config) -> FileStamps {
        let paths: Vec<PathBuf> = config.zone_files.iter().map(|f| f.path.clone()).collect();
        FileStamps::of(&paths)
    }

    pub(super) fn of(files: &[PathBuf]) -> FileStamps {
        FileStamps(
            files
                .iter()
                .map(|f| crate::config::InputFile::stamp_of(f))
                .collect(),
        )
    }
}

/// What the health supervisor watches: every service with monitors bound, probed at its own
/// address (not the public one answers carry).
pub(super) fn service_monitors(config: &Config) -> Vec<ServiceMonitors> {
    config
        .services
        .iter()
        .filter(|s| !s.monitors.is_empty())
        .map(|s| {
            let mut watched = ServiceMonitors::new(&s.name, s.ip, s.port);
            watched.threshold = s.monitor_threshold;
            for name in &s.monitors {
                let spec = config
                    .monitors
                    .iter()
                    .find(|m| &m.name == name)
                    .expect("validated");
                watched = watched.monitor(spec.clone());
            }
            watched
        })
        .collect()
}
