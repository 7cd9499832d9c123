//! Runtime steering (NetScaler's `disable gslb service`, BIG-IP's force offline): the services,
//! sites and domains an operator took out of rotation with `gslbctl service|site|domain
//! disable NAME`. A disabled service, or any service of a disabled site, is DOWN for every
//! decision whatever its monitors say ([`crate::world::World::service_states`]), and this site
//! reports it DOWN over MEP; a disabled domain answers as if all its services were down (its
//! backup addresses or NODATA). Enabling restores the monitored state.
//!
//! The admin state survives reloads (it is kept by name; a name the reloaded configuration no
//! longer has is dropped with a warning) and restarts: it is written to `server.state_file`
//! on every change (a temporary file, then a rename, so a crash leaves the old file or the
//! new one; mode 0600, no link followed: the directory is `server.user`'s) and read at start.

use std::collections::BTreeSet;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::model::Model;

/// What a steering command names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    Service,
    Site,
    Domain,
}

impl Target {
    pub const ALL: [Target; 3] = [Target::Service, Target::Site, Target::Domain];

    pub fn name(self) -> &'static str {
        match self {
            Target::Service => "service",
            Target::Site => "site",
            Target::Domain => "domain",
        }
    }

    fn parse(word: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == word)
    }

    /// Whether `model` has a `self` named `name`.
    pub fn exists(self, model: &Model, name: &str) -> bool {
        match self {
            Target::Service => model.services.iter().any(|s| s.name == name),
            Target::Site => model.sites.iter().any(|s| s.name == name),
            Target::Domain => model
                .domains
                .iter()
                .any(|d| d.name.eq_ignore_ascii_case(name.trim_end_matches('.'))),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One steering command: `service disable web1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    pub target: Target,
    pub name: String,
    pub enable: bool,
}

impl Command {
    /// `TARGET enable|disable NAME` (the control socket's request line); `None` for any other
    /// line.
    pub fn parse(line: &str) -> Option<Command> {
        let mut words = line.split_ascii_whitespace();
        let target = Target::parse(words.next()?)?;
        let enable = match words.next()? {
            "enable" => true,
            "disable" => false,
            _ => return None,
        };
        let name = words.next()?.to_owned();
        words.next().is_none().then_some(Command {
            target,
            name,
            enable,
        })
    }
}

/// The names disabled by an operator, by target.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdminState {
    disabled: BTreeSet<(Target, String)>,
}

impl AdminState {
    /// Whether the service `name` at `site` takes part in the decisions: neither it nor its
    /// site is disabled.
    pub fn service_enabled(&self, name: &str, site: &str) -> bool {
        !self.is_disabled(Target::Service, name) && !self.is_disabled(Target::Site, site)
    }

    /// Whether the domain `name` (as configured) answers with its services.
    pub fn domain_enabled(&self, name: &str) -> bool {
        !self.is_disabled(Target::Domain, &domain_key(name))
    }

    pub fn is_disabled(&self, target: Target, name: &str) -> bool {
        let key = match target {
            Target::Domain => domain_key(name),
            _ => name.to_owned(),
        };
        self.disabled.contains(&(target, key))
    }

    /// Applies `command`; true when it changed anything.
    pub fn apply(&mut self, command: &Command) -> bool {
        let key = match command.target {
            Target::Domain => domain_key(&command.name),
            _ => command.name.clone(),
        };
        if command.enable {
            self.disabled.remove(&(command.target, key))
        } else {
            self.disabled.insert((command.target, key))
        }
    }

    /// Every disabled name, by target in order.
    pub fn disabled(&self) -> impl Iterator<Item = (Target, &str)> {
        self.disabled.iter().map(|(t, n)| (*t, n.as_str()))
    }

    pub fn is_empty(&self) -> bool {
        self.disabled.is_empty()
    }

    /// Drops the names `model` does not have; returns them (for a warning).
    pub fn retain_known(&mut self, model: &Model) -> Vec<(Target, String)> {
        let (kept, dropped) = std::mem::take(&mut self.disabled)
            .into_iter()
            .partition(|(t, n)| t.exists(model, n));
        self.disabled = kept;
        dropped.into_iter().collect()
    }

    /// Reads the state file at `path`; a missing file is nothing disabled. Every line is
    /// `service|site|domain NAME`, or a `#` comment, or blank.
    ///
    /// gslbd reads it at start as root, in a directory that is the user's: only a regular file
    /// is read, opened without following a link (a link to `/etc/shadow` would put its first
    /// line in the error) and without waiting (a FIFO would block the start).
    pub fn load(path: &Path) -> Result<AdminState, StateFileError> {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let io = |source| StateFileError::Io {
            path: path.to_owned(),
            what: "reading",
            source,
        };
        let not_regular = || StateFileError::NotRegular {
            path: path.to_owned(),
        };
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
        {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(AdminState::default());
            }
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(not_regular()),
            Err(source) => return Err(io(source)),
        };
        if !file.metadata().map_err(io)?.is_file() {
            return Err(not_regular());
        }
        // Bounded: a file that grew past what gslbd ever writes is not read whole into memory.
        let mut text = String::new();
        file.take(MAX_STATE_FILE + 1)
            .read_to_string(&mut text)
            .map_err(io)?;
        if text.len() as u64 > MAX_STATE_FILE {
            return Err(StateFileError::TooLarge {
                path: path.to_owned(),
            });
        }
        let mut state = AdminState::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut words = line.split_ascii_whitespace();
            let parsed = match (words.next().and_then(Target::parse), words.next()) {
                (Some(target), Some(name)) if words.next().is_none() => Some(Command {
                    target,
                    name: name.to_owned(),
                    enable: false,
                }),
                _ => None,
            };
            let Some(command) = parsed else {
                return Err(StateFileError::Line {
                    path: path.to_owned(),
                    line: i + 1,
                    text: line.chars().take(MAX_QUOTED).collect(),
                });
            };
            state.apply(&command);
        }
        Ok(state)
    }

    /// Writes the state to `path` atomically: a temporary file beside it, synced, then renamed
    /// over it. Its directory is made if it is missing (the default's, `/var/lib/gslb`, outside
    /// the unit that makes it).
    pub fn save(&self, path: &Path) -> Result<(), StateFileError> {
        let io = |what| {
            move |source| StateFileError::Io {
                path: path.to_owned(),
                what,
                source,
            }
        };
        let mut text = String::from(
            "# gslbd's admin state (gslbctl service|site|domain disable): written by gslbd\n",
        );
        for (target, name) in self.disabled() {
            text.push_str(&format!("{target} {name}\n"));
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io("making its directory"))?;
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let mut file = create_private(&tmp).map_err(io("creating a temporary file"))?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(io("writing a temporary file"))?;
        // Replaces whatever is at `path`, a link included, never what a link points to.
        std::fs::rename(&tmp, path).map_err(io("renaming the temporary file over"))?;
        // The rename is durable once the directory is.
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)
                .and_then(|dir| dir.sync_all())
                .map_err(io("syncing its directory"))?;
        }
        Ok(())
    }
}

/// Creates `path` for writing with mode 0600 whatever the umask, never through a link:
/// `O_CREAT | O_EXCL` (with `O_NOFOLLOW`, which says so) fails on anything already there. The
/// state file's directory is the user's, so what is there is a temporary file a crash left,
/// or something planted: it is removed (a link itself, not its target) and the create tried
/// once more; a second failure is an error.
fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let create = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
    };
    let file = match create() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(path)?;
            create()?
        }
        created => created?,
    };
    // The umask can only have taken bits off 0600; set it exactly all the same.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(file)
}

/// Domains are compared without case and final dot, as DNS names.
fn domain_key(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// The largest state file read: a line per disabled service, site or domain (names of at
/// most 255 bytes) is far less for any configuration.
const MAX_STATE_FILE: u64 = 16 << 20;
/// The most characters of a bad line quoted in its error.
const MAX_QUOTED: usize = 200;

/// Why the state file cannot be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateFileError {
    #[error("state file {}: {what}", path.display())]
    Io {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
    #[error(
        "state file {}: not a regular file (a symbolic link, a directory, a FIFO?): gslbd reads only \
         the file it writes; remove it",
        path.display()
    )]
    NotRegular { path: PathBuf },
    #[error(
        "state file {}: over {} MiB, far more than gslbd writes; remove it",
        path.display(),
        MAX_STATE_FILE >> 20
    )]
    TooLarge { path: PathBuf },
    #[error("state file {}:{line}: {text:?} is not \"service|site|domain NAME\"", path.display())]
    Line {
        path: PathBuf,
        line: usize,
        text: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_and_others_do_not() {
        assert_eq!(
            Command::parse("service disable web1"),
            Some(Command {
                target: Target::Service,
                name: "web1".into(),
                enable: false
            })
        );
        assert_eq!(
            Command::parse("domain enable www.example.com").map(|c| (c.target, c.enable)),
            Some((Target::Domain, true))
        );
        for bad in [
            "service",
            "service disable",
            "service stop web1",
            "pool disable web1",
            "service disable a b",
        ] {
            assert_eq!(Command::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn state_file_round_trips_and_bad_lines_are_refused_with_their_line() {
        let dir = std::env::temp_dir().join(format!("gslb-steering-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("admin-state");
        assert_eq!(AdminState::load(&path).unwrap(), AdminState::default());
        let mut state = AdminState::default();
        for line in [
            "service disable web1",
            "site disable dc2",
            "domain disable WWW.example.com.",
        ] {
            assert!(state.apply(&Command::parse(line).unwrap()));
        }
        assert!(state.is_disabled(Target::Domain, "www.example.com"));
        state.save(&path).unwrap();
        assert!(!dir.join("admin-state.tmp").exists());
        assert_eq!(AdminState::load(&path).unwrap(), state);

        std::fs::write(&path, "# c\n\nservice web1\nservice\n").unwrap();
        let error = AdminState::load(&path).unwrap_err().to_string();
        assert!(
            error.ends_with("admin-state:4: \"service\" is not \"service|site|domain NAME\""),
            "{error}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn some_state() -> AdminState {
        let mut state = AdminState::default();
        state.apply(&Command::parse("service disable web1").unwrap());
        state
    }

    /// The name of [`the_state_file_is_0600_whatever_the_umask`] for `--exact`.
    const UMASK_TEST: &str = "steering::tests::the_state_file_is_0600_whatever_the_umask";
    /// Set in the child process that test starts: where it saves, under umask 0.
    const UMASK_CHILD: &str = "GSLB_TEST_STATE_FILE_UMASK_0";

    /// The mode is 0600 even under umask 0. The umask is the process's, so the save runs in a
    /// child process (this test binary, this test alone), not beside other tests.
    #[test]
    fn the_state_file_is_0600_whatever_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        if let Some(path) = std::env::var_os(UMASK_CHILD) {
            // SAFETY: umask has no preconditions; this process runs this test only.
            unsafe { libc::umask(0) };
            some_state().save(Path::new(&path)).unwrap();
            return;
        }
        let dir = gslb_tests::TempDir::new("state-umask");
        let path = dir.join("admin-state");
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", UMASK_TEST, "--test-threads=1", "--quiet"])
            .env(UMASK_CHILD, &path)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "the save under umask 0: {status}");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o7777, 0o600, "{mode:o}");
        assert_eq!(AdminState::load(&path).unwrap(), some_state());
    }

    /// A state file larger than gslbd ever writes is refused unread past the cap, and a bad
    /// line is quoted in part: a hostile file costs bounded memory and a bounded message.
    #[test]
    fn a_huge_state_file_or_line_is_refused_in_bounded_memory() {
        let dir = gslb_tests::TempDir::new("state-huge");
        let path = dir.join("admin-state");
        let mut big = "service a\n".repeat((MAX_STATE_FILE as usize) / 10);
        big.push_str("service b\n");
        std::fs::write(&path, &big).unwrap();
        let error = AdminState::load(&path).unwrap_err();
        assert!(matches!(error, StateFileError::TooLarge { .. }), "{error}");
        assert!(error.to_string().contains("over 16 MiB"), "{error}");
        std::fs::write(&path, format!("service {}\n", "x ".repeat(100_000))).unwrap();
        let error = AdminState::load(&path).unwrap_err().to_string();
        assert!(
            error.contains(":1:") && error.len() < 400,
            "{} bytes",
            error.len()
        );
        // A file of ordinary size is read.
        std::fs::write(&path, "# a comment\nservice a\n").unwrap();
        assert!(AdminState::load(&path).is_ok());
    }

    /// The state file's directory is the user's: a link planted at the temporary file's name
    /// is not written through, nor is a link at the state file's own name read (at start, as
    /// root) or written through.
    #[test]
    fn the_state_file_follows_no_link() {
        use std::os::unix::fs::{FileTypeExt, PermissionsExt, symlink};
        let dir = gslb_tests::TempDir::new("state-links");
        let path = dir.join("admin-state");
        let victim = dir.join("victim");
        std::fs::write(&victim, "root:secret:19000:0:99999:7:::\n").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o640)).unwrap();

        symlink(&victim, dir.join("admin-state.tmp")).unwrap();
        some_state()
            .save(&path)
            .expect("the link is replaced, not followed");
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "root:secret:19000:0:99999:7:::\n",
            "written through the link"
        );
        assert!(
            std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_file()
        );
        assert_eq!(AdminState::load(&path).unwrap(), some_state());
        assert!(!dir.join("admin-state.tmp").exists());

        // A stale temporary file (a crash between create and rename) does not stop a save.
        std::fs::write(dir.join("admin-state.tmp"), "stale").unwrap();
        AdminState::default().save(&path).unwrap();
        assert_eq!(AdminState::load(&path).unwrap(), AdminState::default());

        // A link at the state file's own name: refused unread, so no line of its target
        // reaches an error message or the log.
        std::fs::remove_file(&path).unwrap();
        symlink(&victim, &path).unwrap();
        let error = AdminState::load(&path).unwrap_err().to_string();
        assert!(!error.contains("secret"), "{error}");
        assert!(error.contains("not a regular file"), "{error}");
        // Saving replaces the link itself.
        some_state().save(&path).unwrap();
        assert!(
            std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_file()
        );
        assert!(
            std::fs::read_to_string(&victim)
                .unwrap()
                .starts_with("root:secret")
        );

        // A FIFO would block the start forever: refused without waiting for a writer.
        std::fs::remove_file(&path).unwrap();
        let made = {
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid C string.
            unsafe { libc::mkfifo(c.as_ptr(), 0o600) }
        };
        assert_eq!(made, 0);
        assert!(
            std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_fifo()
        );
        let error = AdminState::load(&path).unwrap_err().to_string();
        assert!(error.contains("not a regular file"), "{error}");
    }
}
