//! What gslbd starts on: the DNS, MEP and control sockets, the admin state and, as root, the
//! loaded, pinned fast path. `main` opens them on its one thread before it drops its privileges
//! (`server.user`, [`crate::privilege`]), then starts the runtime and [`super::run`]; tests
//! give the sockets they bound ([`Started::with_listeners`]).

use std::path::PathBuf;

use tracing::{error, info};

use super::{DaemonError, Listeners, Overrides, anyhow_like, mep};
use crate::{
    config::Config,
    control::{ControlError, ControlSocket},
    dataplane::Dataplane,
    privilege::{self, Kept, PrivilegeError, User},
};

/// The control socket, bound but not yet served.
pub struct BoundControl {
    pub listener: std::os::unix::net::UnixListener,
    pub path: PathBuf,
}

/// Everything that needs root, opened before the drop.
pub struct Started {
    pub listeners: Listeners,
    pub mep: Option<std::net::TcpListener>,
    /// `None`: not bound (the control socket is off, or optional and it failed).
    pub control: Option<BoundControl>,
    /// The fast path, loaded and pinned (published and attached later); `None` with `--no-xdp`.
    pub dataplane: FreshPins,
    pub pin_path: PathBuf,
    /// The admin state (`server.state_file`), read as root: the user gslbd becomes may not
    /// read the file an earlier gslbd run as root wrote.
    pub admin: crate::steering::AdminState,
    /// `server.state_file`, whose directory the user is given ([`privilege::give_state_dir`]).
    pub state_file: PathBuf,
}

/// A loaded dataplane that has not been attached yet: if gslbd fails to start before it is
/// taken, the pins it created (none when it adopted an earlier gslbd's) are removed, as they
/// were never made before.
pub struct FreshPins(Option<Dataplane>);

impl FreshPins {
    pub fn none() -> FreshPins {
        FreshPins(None)
    }

    pub fn take(&mut self) -> Option<Dataplane> {
        self.0.take()
    }
}

impl Drop for FreshPins {
    fn drop(&mut self) {
        if let Some(mut dataplane) = self.0.take()
            && !dataplane.adopted()
        {
            dataplane.unpin();
        }
    }
}

impl Started {
    /// Binds the sockets and loads the fast path for `config` (after `overrides`): what `main`
    /// does as root, before it drops privileges.
    pub fn open(config: &Config, overrides: &Overrides) -> Result<Started, DaemonError> {
        super::check_privileges(overrides)?;
        let listeners = Listeners::bind(config)?;
        let mut started = Started::opened(config, overrides, listeners)?;
        if !overrides.no_xdp {
            started.dataplane = FreshPins(Some(Dataplane::load(Some(&started.pin_path))?));
        }
        Ok(started)
    }

    /// What [`super::run`] starts on, with the DNS sockets `listeners` the caller bound (tests
    /// bind port 0; `run` checks they are the configured ones); the MEP and admin listeners when the caller bound them, else the
    /// configured ones are bound (MEP here, admin by `run`). The fast path is loaded by `run`.
    pub fn with_listeners(
        config: &Config,
        overrides: &Overrides,
        listeners: Listeners,
    ) -> Result<Started, DaemonError> {
        super::check_privileges(overrides)?;
        Started::opened(config, overrides, listeners)
    }

    fn opened(
        config: &Config,
        overrides: &Overrides,
        mut listeners: Listeners,
    ) -> Result<Started, DaemonError> {
        let mep = match listeners.mep.take() {
            Some(given) => Some(mep::adopt(config, given)?),
            None => mep::bind(config)?,
        };
        let control = bind_control(overrides)?;
        Ok(Started {
            listeners,
            mep,
            control,
            dataplane: FreshPins::none(),
            pin_path: pin_path(config, overrides),
            admin: crate::steering::AdminState::load(&config.server.state_file)?,
            state_file: config.server.state_file.clone(),
        })
    }

    /// Becomes `user`, keeping the capabilities that what was opened still needs
    /// ([`privilege::needed`]); the pin directory becomes the user's, for the unpin on exit, and
    /// so does the state file's directory when it is gslbd's, for `gslbctl service disable`'s
    /// save (or the start is refused). Must be called before any other thread starts.
    pub fn drop_privileges(&self, user: &User) -> Result<Vec<Kept>, PrivilegeError> {
        let keep = privilege::needed(
            self.dataplane.0.is_some(),
            privilege::bpf_calls_need_cap(),
            privilege::ping_sockets_allowed(user.gid),
        );
        if self.dataplane.0.is_some() {
            privilege::give_dir(&self.pin_path, user)?;
        }
        privilege::give_state_dir(
            &self.state_file,
            std::path::Path::new(crate::config::DEFAULT_STATE_FILE),
            user,
        )?;
        privilege::drop_to(user, &keep)?;
        let names: Vec<&str> = keep.iter().map(|k| k.name).collect();
        info!(user = %user.name, uid = user.uid, gid = user.gid, capabilities = ?names, "privileges dropped");
        Ok(keep)
    }
}

/// The control socket at the command line's path, bound (not yet served): `None` without one,
/// or when the default path cannot be bound (another gslbd answers there, say).
fn bind_control(overrides: &Overrides) -> Result<Option<BoundControl>, DaemonError> {
    let Some(control) = &overrides.control else {
        return Ok(None);
    };
    match ControlSocket::bind_std(&control.path) {
        Ok(listener) => Ok(Some(BoundControl {
            listener,
            path: control.path.clone(),
        })),
        Err(error) if !control.required => {
            error!(
                error = anyhow_like(&error),
                "running without a control socket (gslbctl reload and ldns will not reach this gslbd)"
            );
            Ok(None)
        }
        Err(error) => Err(error.into()),
    }
}

/// The bound control socket, served from now on (needs the runtime).
pub(super) fn serve_control(bound: BoundControl) -> Result<ControlSocket, ControlError> {
    ControlSocket::from_std(bound.listener, &bound.path)
}

/// `server.pin_path`, or the command line's.
fn pin_path(config: &Config, overrides: &Overrides) -> PathBuf {
    overrides
        .pin_path
        .clone()
        .unwrap_or_else(|| config.server.pin_path.clone())
}
