//! Loads the XDP object built by build.rs, attaches its answering program to interfaces
//! (pinned as `link-<interface>` in the pin directory, so that XDP outlives gslbd and the next
//! one swaps its program in) and pins the shared maps, adopting those an earlier gslbd left.

use std::path::{Path, PathBuf};

use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, HashMap, MapData, PerCpuArray, ProgramArray},
    programs::{
        ProgramError, Xdp, XdpMode as AyaXdpMode,
        links::{FdLink, PinnedLink},
        xdp::{XdpLink, XdpLinkId},
    },
};
use gslb_common::{
    LOCAL_MACS_MAX, LocalMacs, RRL_COUNTERS_MAP, RRL_DROPPED, RRL_SLIPPED, TAIL_COOKIE,
    TAIL_WILDCARD, maps, programs,
};
use tracing::{info, warn};

use super::XdpMode;
use super::{
    CounterReader, Counters, DataplaneError, HeartbeatMap, LdnsMap, Result,
    counters::read_counters, interface_mac, mac_word, map_err, pin_dir, publish::AnswerTable,
};

/// The maps shared between the program and the controller, pinned and adopted across restarts.
const PINNED_MAPS: [&str; 11] = maps::PINNED;

/// The XDP object, compiled for bpfel by build.rs.
pub static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/gslb"));

/// The loaded XDP object: both programs verified and loaded, maps created.
pub struct Dataplane {
    ebpf: Ebpf,
    /// `TAIL_CALLS`, held open: the kernel empties a program array no process holds.
    _tail_calls: ProgramArray<MapData>,
    pub table: AnswerTable,
    counters: PerCpuArray<MapData, u64>,
    /// `RRL_COUNTERS`: answers dropped and slipped by rate limiting.
    rrl_counters: PerCpuArray<MapData, u64>,
    /// `None` once taken by [`Dataplane::take_counter_reader`].
    counter_reader: Option<CounterReader>,
    /// `None` once taken by [`Dataplane::take_ldns`].
    ldns: Option<LdnsMap>,
    /// `None` once taken by [`Dataplane::take_heartbeat`].
    heartbeat: Option<HeartbeatMap>,
    local_macs: Array<MapData, LocalMacs>,
    pin_dir: Option<PathBuf>,
    /// Map pins, removed by [`Dataplane::unpin`].
    pinned: Vec<PathBuf>,
    /// Attachments of the answering program without a pin directory (tests): detached on
    /// drop.
    attachments: Vec<XdpLinkId>,
    /// Attachments pinned in the pin directory (`link-<interface>`), which keep XDP attached
    /// when gslbd dies; the pin is removed on a clean detach.
    pinned_attachments: Vec<(PathBuf, FdLink)>,
    adopted: bool,
}

impl Dataplane {
    /// Loads the embedded object into the kernel (needs CAP_BPF, i.e. root). Given a bpffs
    /// directory, every shared map is pinned there, or, when an earlier gslbd left pins there
    /// (it was killed, or told to keep XDP attached), those maps are adopted: the new program
    /// reads the very tables the running one does, so answers continue across the restart.
    pub fn load(pin_dir: Option<&Path>) -> Result<Self> {
        let mut loader = EbpfLoader::new();
        let mut pinned = Vec::new();
        let mut adopted = false;
        if let Some(dir) = pin_dir {
            std::fs::create_dir_all(dir).map_err(|source| DataplaneError::PinDir {
                path: dir.into(),
                source,
            })?;
            let pins = pin_dir::open(dir)?;
            // With `server.user` the directory is the user's: taken back before its pins are
            // checked, then opened by path (aya's `BPF_OBJ_GET` follows links), so that none
            // is swapped for a link in between. `privilege::give_dir` gives it back.
            pins.take().map_err(|source| DataplaneError::PinDir {
                path: dir.into(),
                source,
            })?;
            for name in PINNED_MAPS {
                pin_dir::has_pin(&pins, name)?;
            }
            adopted = pin_dir::has_pin(&pins, maps::CONFIG)?;
            for name in PINNED_MAPS {
                let path = dir.join(name);
                loader.map_pin_path(name, path.clone());
                pinned.push(path);
            }
        }
        let mut ebpf = loader.load(OBJECT).map_err(|source| match pin_dir {
            // The likeliest cause: pins of a build with other map layouts.
            Some(dir) if adopted => DataplaneError::Adopt {
                dir: dir.into(),
                source: Box::new(source),
            },
            _ => DataplaneError::Load(Box::new(source)),
        })?;
        if adopted {
            info!(pin_path = %pin_dir.expect("adopted implies a pin dir").display(), "adopted the pinned maps of an earlier gslbd");
        }
        for name in [
            programs::ANSWER,
            programs::WILDCARD,
            programs::COOKIE,
            programs::PASS,
        ] {
            let program = program_mut(&mut ebpf, name)?;
            program.load().map_err(|source| DataplaneError::Program {
                name,
                source: Box::new(source),
            })?;
        }
        // The answering program's other parts, which its tail calls find here. The array is
        // this object's own, not pinned: the kernel empties a program array when its last
        // user-space holder closes it, so once this process is gone (XDP left attached),
        // questions we do not serve are passed without their wildcard's answer, and those
        // with a cookie without theirs, until the heartbeat goes stale and every frame is
        // passed.
        let mut tail = ProgramArray::try_from(ebpf.take_map(maps::TAIL_CALLS).ok_or(
            DataplaneError::Missing {
                kind: "map",
                name: maps::TAIL_CALLS,
            },
        )?)
        .map_err(map_err(maps::TAIL_CALLS))?;
        for (slot, name) in [
            (TAIL_WILDCARD, programs::WILDCARD),
            (TAIL_COOKIE, programs::COOKIE),
        ] {
            let fd = program_mut(&mut ebpf, name)?
                .fd()
                .map_err(|source| DataplaneError::Program {
                    name,
                    source: Box::new(source),
                })?
                .try_clone()
                .map_err(|source| DataplaneError::Program {
                    name,
                    source: Box::new(ProgramError::IOError(source)),
                })?;
            tail.set(slot, &fd, 0).map_err(map_err(maps::TAIL_CALLS))?;
        }
        let mut take = |name: &'static str| {
            ebpf.take_map(name)
                .ok_or(DataplaneError::Missing { kind: "map", name })
        };
        let table = AnswerTable::from_maps(&mut take)?;
        let (counters, rrl_counters) = (take(maps::COUNTERS)?, take(RRL_COUNTERS_MAP)?);
        let counter_reader = CounterReader::duplicate(&counters, &rrl_counters)?;
        let counters = PerCpuArray::try_from(counters).map_err(map_err(maps::COUNTERS))?;
        let rrl_counters =
            PerCpuArray::try_from(rrl_counters).map_err(map_err(RRL_COUNTERS_MAP))?;
        let ldns = LdnsMap {
            config: Array::try_from(take(maps::LDNS_CONFIG)?)
                .map_err(map_err(maps::LDNS_CONFIG))?,
            seen: HashMap::try_from(take(maps::LDNS)?).map_err(map_err(maps::LDNS))?,
        };
        let heartbeat = HeartbeatMap {
            map: Array::try_from(take(maps::HEARTBEAT)?).map_err(map_err(maps::HEARTBEAT))?,
        };
        let local_macs =
            Array::try_from(take(maps::LOCAL_MACS)?).map_err(map_err(maps::LOCAL_MACS))?;
        Ok(Self {
            ebpf,
            _tail_calls: tail,
            table,
            counters,
            rrl_counters,
            counter_reader: Some(counter_reader),
            ldns: Some(ldns),
            heartbeat: Some(heartbeat),
            local_macs,
            pin_dir: pin_dir.map(Path::to_path_buf),
            pinned,
            attachments: Vec::new(),
            pinned_attachments: Vec::new(),
            adopted,
        })
    }

    /// Whether [`Dataplane::load`] adopted the pins of an earlier gslbd.
    pub fn adopted(&self) -> bool {
        self.adopted
    }

    /// The answering program, e.g. for `BPF_PROG_TEST_RUN`.
    pub fn program(&self) -> &Xdp {
        self.loaded(programs::ANSWER)
    }

    /// The answering program and the answer table at once, e.g. to run the program while
    /// publishing.
    pub fn program_and_table(&mut self) -> (&Xdp, &mut AnswerTable) {
        let program = self
            .ebpf
            .program(programs::ANSWER)
            .and_then(|p| p.try_into().ok())
            .expect("loaded in Dataplane::load");
        (program, &mut self.table)
    }

    /// The pass-through program, e.g. as a baseline for timing the answering one.
    pub fn pass_program(&self) -> &Xdp {
        self.loaded(programs::PASS)
    }

    /// Loads the floor programs (`gslb_floor`: the answering program's parse and reply without
    /// a map lookup; `gslb_floor_grow`: the same with one constant record, the frame grown for
    /// it) on this object's maps, for benches; gslbd never loads them. Once is enough.
    pub fn load_floor(&mut self) -> Result<()> {
        for name in [programs::FLOOR, programs::FLOOR_GROW] {
            let program = program_mut(&mut self.ebpf, name)?;
            if program.fd().is_ok() {
                continue;
            }
            program.load().map_err(|source| DataplaneError::Program {
                name,
                source: Box::new(source),
            })?;
        }
        Ok(())
    }

    /// The floor program; runs and attaches fail until [`Dataplane::load_floor`].
    pub fn floor_program(&self) -> &Xdp {
        self.loaded(programs::FLOOR)
    }

    /// The floor program that grows the frame for one record; runs fail until
    /// [`Dataplane::load_floor`].
    pub fn floor_grow_program(&self) -> &Xdp {
        self.loaded(programs::FLOOR_GROW)
    }

    /// Attaches the floor program (loaded by [`Dataplane::load_floor`]) alone, in place of the
    /// answering one: a bench's lower bound on the same wire. Detached when this dataplane
    /// is dropped (the program owns the link), like [`Dataplane::attach_pass`]'s.
    pub fn attach_floor(&mut self, interface: &str, mode: XdpMode) -> Result<XdpMode> {
        self.attach_program(programs::FLOOR, interface, mode)
            .map(|(mode, _)| mode)
    }

    fn loaded(&self, name: &str) -> &Xdp {
        self.ebpf
            .program(name)
            .and_then(|p| p.try_into().ok())
            .expect("loaded in Dataplane::load")
    }

    /// Attaches the answering program. `Auto` tries native mode and falls back to generic (SKB)
    /// mode, which every interface supports. Returns the mode in force.
    pub fn attach(&mut self, interface: &str, mode: XdpMode) -> Result<XdpMode> {
        // Before the program can see a frame of this interface.
        let mac = interface_mac(interface).map_err(|source| DataplaneError::InterfaceMac {
            interface: interface.into(),
            source,
        })?;
        self.add_local_mac(mac)?;
        let Some(dir) = self.pin_dir.clone() else {
            let (mode, id) = self.attach_program(programs::ANSWER, interface, mode)?;
            self.attachments.push(id);
            return Ok(mode);
        };
        Self::detach_stale_attachments(&dir, interface);
        let name = programs::ANSWER;
        let path = dir.join(format!("link-{interface}"));
        // Opened after the drop, as the user, so a link here would reach nothing the user may
        // not open; refused all the same, as everywhere in the pin directory.
        let linked = pin_dir::has_pin(&pin_dir::open(&dir)?, &format!("link-{interface}"))?;
        let program = program_mut(&mut self.ebpf, name)?;
        let (mode, id) = if linked {
            // The interface runs an earlier gslbd's program through a pinned link: swap the
            // program in that link (one atomic update, no moment without XDP).
            let link =
                PinnedLink::from_pin(&path).map_err(|source| DataplaneError::PinnedAttachment {
                    path: path.clone(),
                    source: Box::new(source),
                })?;
            let link = XdpLink::try_from(FdLink::from(link)).map_err(|source| {
                DataplaneError::PinnedAttachment {
                    path: path.clone(),
                    source: Box::new(source),
                }
            })?;
            let id = program
                .attach_to_link(link)
                .map_err(|source| DataplaneError::Program {
                    name,
                    source: Box::new(source),
                })?;
            info!(interface, pin = %path.display(), "XDP program replaced in the pinned link");
            (mode, id)
        } else {
            self.attach_program(name, interface, mode)?
        };
        let program = program_mut(&mut self.ebpf, name)?;
        let link = program
            .take_link(id)
            .map_err(|source| DataplaneError::Program {
                name,
                source: Box::new(source),
            })?;
        let fd_link =
            FdLink::try_from(link).map_err(|source| DataplaneError::PinnedAttachment {
                path: path.clone(),
                source: Box::new(source),
            })?;
        let fd_link = if linked {
            fd_link
        } else {
            FdLink::from(fd_link.pin(&path).map_err(|source| DataplaneError::Pin {
                what: "link",
                path: path.clone(),
                source: Box::new(source),
            })?)
        };
        self.pinned_attachments.push((path, fd_link));
        Ok(mode)
    }

    /// Attachments pinned for other interfaces are from an earlier configuration: detach them.
    fn detach_stale_attachments(dir: &Path, interface: &str) {
        let ours = format!("link-{interface}");
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("link-") && name != ours {
                warn!(pin = %entry.path().display(), "detaching XDP from an interface no longer configured");
                if let Err(error) = std::fs::remove_file(entry.path()) {
                    warn!(pin = %entry.path().display(), %error, "could not remove the link pin");
                }
            }
        }
    }

    /// Attaches the pass-through program, for the far end of a veth pair (see gslb-ebpf).
    pub fn attach_pass(&mut self, interface: &str, mode: XdpMode) -> Result<XdpMode> {
        self.attach_program(programs::PASS, interface, mode)
            .map(|(mode, _)| mode)
    }

    fn attach_program(
        &mut self,
        name: &'static str,
        interface: &str,
        mode: XdpMode,
    ) -> Result<(XdpMode, XdpLinkId)> {
        let program = program_mut(&mut self.ebpf, name)?;
        let tries: &[XdpMode] = match mode {
            XdpMode::Auto => &[XdpMode::Native, XdpMode::Skb],
            XdpMode::Native => &[XdpMode::Native],
            XdpMode::Skb => &[XdpMode::Skb],
        };
        let mut last = None;
        for &m in tries {
            let flags = if m == XdpMode::Native {
                AyaXdpMode::Driver
            } else {
                AyaXdpMode::Skb
            };
            let name_c = std::ffi::CString::new(interface).map_err(|_| DataplaneError::Attach {
                interface: interface.into(),
                mode: m,
                source: Box::new(ProgramError::UnexpectedProgramType),
            })?;
            match program.attach(name_c.as_c_str(), flags) {
                Ok(id) => {
                    info!(program = name, interface, mode = %m, "XDP attached");
                    return Ok((m, id));
                }
                Err(source) => {
                    if tries.len() > 1 {
                        warn!(program = name, interface, mode = %m, error = %source, "XDP attach failed, trying the next mode");
                    }
                    last = Some(DataplaneError::Attach {
                        interface: interface.into(),
                        mode: m,
                        source: Box::new(source),
                    });
                }
            }
        }
        Err(last.expect("at least one mode tried"))
    }

    /// Detaches the answering program from every interface it was attached to.
    pub fn detach(&mut self) -> Result<()> {
        for (path, link) in self.pinned_attachments.drain(..) {
            // The pin holds the link too: without it, closing our fd detaches.
            if let Err(error) = std::fs::remove_file(&path) {
                warn!(pin = %path.display(), %error, "could not remove the link pin");
            }
            drop(link);
        }
        let name = programs::ANSWER;
        let program = program_mut(&mut self.ebpf, name)?;
        // Unloading drops the program's own links; it is loaded again so the dataplane stays
        // usable (test_run, a later attach).
        program.unload().map_err(|source| DataplaneError::Program {
            name,
            source: Box::new(source),
        })?;
        program.load().map_err(|source| DataplaneError::Program {
            name,
            source: Box::new(source),
        })
    }

    /// Detaches the answering program and removes the pins, as gslbd exits: the link pins are
    /// removed and the links closed (closing a bpf link detaches it), without loading the
    /// program again as [`Dataplane::detach`] does, which needs privileges gslbd no longer has
    /// after it became `server.user` (the verifier's, `CAP_PERFMON`).
    pub fn close(mut self) {
        for (path, link) in self.pinned_attachments.drain(..) {
            if let Err(error) = std::fs::remove_file(&path) {
                warn!(pin = %path.display(), %error, "could not remove the link pin");
            }
            drop(link);
        }
        self.unpin();
    }

    /// Leaves XDP attached through the pinned links and the maps pinned, so the fast path keeps
    /// answering after this process exits and the next gslbd adopts it.
    pub fn keep_attached(self) {
        if self.pin_dir.is_none() && !self.attachments.is_empty() {
            warn!("no pin directory: XDP is detached when gslbd exits");
        }
    }

    /// Removes the pins this process made.
    pub fn unpin(&mut self) {
        for path in self.pinned.drain(..) {
            if let Err(error) = std::fs::remove_file(&path) {
                warn!(path = %path.display(), %error, "could not remove pin");
            }
        }
    }

    /// The per-CPU counters, summed over CPUs.
    /// Answers the fast path's rate limiting dropped and slipped (`[rrl]`), summed over CPUs.
    pub fn rrl_counters(&self) -> Result<(u64, u64)> {
        let sum = |slot: u32| -> Result<u64> {
            let per_cpu = self
                .rrl_counters
                .get(&slot, 0)
                .map_err(map_err(RRL_COUNTERS_MAP))?;
            Ok(per_cpu.iter().sum())
        };
        Ok((sum(RRL_DROPPED)?, sum(RRL_SLIPPED)?))
    }

    pub fn counters(&self) -> Result<Counters> {
        read_counters(&self.counters)
    }

    /// The resolvers the fast path records; `None` after [`Dataplane::take_ldns`].
    pub fn ldns(&mut self) -> Option<&mut LdnsMap> {
        self.ldns.as_mut()
    }

    /// Adds `mac` to the destinations the program answers (`LocalMacs`; [`Dataplane::attach`]
    /// adds the interface's). Until one is added, the destination MAC is not checked (a
    /// program run under BPF_PROG_TEST_RUN only).
    pub fn add_local_mac(&mut self, mac: [u8; 6]) -> Result<()> {
        let mut local = self
            .local_macs
            .get(&0, 0)
            .map_err(map_err(maps::LOCAL_MACS))?;
        let word = mac_word(mac);
        let count = local.count as usize;
        if local.macs[..count].contains(&word) {
            return Ok(());
        }
        if count >= LOCAL_MACS_MAX {
            return Err(DataplaneError::TooManyMacs {
                max: LOCAL_MACS_MAX,
            });
        }
        local.macs[count] = word;
        local.count += 1;
        self.local_macs
            .set(0, &local, 0)
            .map_err(map_err(maps::LOCAL_MACS))
    }

    /// Hands the heartbeat map to its own task (`daemon/heartbeat.rs`).
    pub fn take_heartbeat(&mut self) -> Option<HeartbeatMap> {
        self.heartbeat.take()
    }

    /// Hands the resolver map to its own task (it stays valid while the program is loaded, and
    /// after, for reading).
    pub fn take_ldns(&mut self) -> Option<LdnsMap> {
        self.ldns.take()
    }

    /// The counters on descriptors of their own, for a reader beside this dataplane's owner
    /// (the admin endpoint); `None` once taken.
    pub fn take_counter_reader(&mut self) -> Option<CounterReader> {
        self.counter_reader.take()
    }
}

fn program_mut<'a>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<&'a mut Xdp> {
    ebpf.program_mut(name)
        .and_then(|p| p.try_into().ok())
        .ok_or(DataplaneError::Missing {
            kind: "program",
            name,
        })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, symlink};

    use gslb_common::maps;

    use super::Dataplane;
    use crate::dataplane::can_load_xdp;
    use gslb_tests::TempDir as TestDir;

    /// A pin directory is the user's between starts: a link it holds could point the next
    /// gslbd, still root, at another program's pins. Only real pins in a real directory on
    /// bpffs are adopted.
    #[test]
    fn only_real_pins_in_a_real_bpffs_directory_are_adopted() {
        if !can_load_xdp() {
            return;
        }
        let real = TestDir::bpffs("adopt-real");
        let _first = Dataplane::load(Some(&real.0)).expect("loading and pinning");

        let planted = TestDir::bpffs("adopt-link");
        symlink(real.join(maps::CONFIG), planted.join(maps::CONFIG)).unwrap();
        match Dataplane::load(Some(&planted.0)) {
            Ok(dp) => panic!("adopted through a link (adopted: {})", dp.adopted()),
            Err(error) => {
                let error = crate::error_text::anyhow_like(&error);
                assert!(error.contains("symbolic link"), "{error}");
                assert!(
                    error.contains(&planted.join(maps::CONFIG).display().to_string()),
                    "{error}"
                );
            }
        }
        let left: Vec<_> = std::fs::read_dir(&planted.0)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, [maps::CONFIG], "refused before anything was pinned");

        let link_dir = planted.join("dir");
        symlink(&real.0, &link_dir).unwrap();
        match Dataplane::load(Some(&link_dir)) {
            Ok(dp) => panic!(
                "adopted through a linked directory (adopted: {})",
                dp.adopted()
            ),
            Err(error) => {
                let error = crate::error_text::anyhow_like(&error);
                assert!(error.contains("symbolic link"), "{error}");
            }
        }

        let elsewhere = TestDir::new("adopt-not-bpffs");
        let error = Dataplane::load(Some(&elsewhere.0))
            .err()
            .expect("pins need a bpffs");
        let error = crate::error_text::anyhow_like(&error);
        assert!(error.contains("not on a bpf file system"), "{error}");

        // The user's directory is taken back before it is read, so nothing in it changes
        // between the check of a pin and its adoption by path.
        std::os::unix::fs::chown(&real.0, Some(65534), Some(65534)).unwrap();
        let adopted = Dataplane::load(Some(&real.0)).expect("adopting the real pins");
        assert!(adopted.adopted());
        let meta = std::fs::metadata(&real.0).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (0, 0));
    }
}
