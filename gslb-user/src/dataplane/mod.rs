//! The kernel side as the rest of the code sees it: loads the XDP object built by build.rs,
//! attaches and pins it, and hides the raw maps behind [`AnswerTable::publish`],
//! [`Dataplane::counters`] and [`LdnsMap::scan`] (the resolvers the fast path has seen).
//! `rotors`: the `ROTOR` slot of each rotating answer set. `heartbeat`: the controller's
//! heartbeat the program trusts for `server.stale_after_s`. `local_mac`: the attached
//! interfaces' own MACs, the only destinations the program answers.

mod heartbeat;
mod local_mac;
mod rotors;

pub use self::heartbeat::HeartbeatMap;
pub use self::local_mac::{interface_mac, mac_word};

use std::{
    collections::HashSet,
    net::{IpAddr, Ipv6Addr},
    path::{Path, PathBuf},
    time::Duration,
};

use aya::{
    Ebpf, EbpfError, EbpfLoader,
    maps::{Array, HashMap, LpmTrie, Map, MapData, MapError, PerCpuArray, lpm_trie::Key},
    pin::PinError,
    programs::{
        ProgramError, Xdp, XdpMode as AyaXdpMode,
        links::{FdLink, PinnedLink},
        xdp::{XdpLink, XdpLinkId},
    },
};
use std::sync::Arc;

use gslb_common::{
    ANSWER_BY_RTT, ANSWER_ROTATE, AnswerKey, AnswerSet, Config, Counter, DomainKey, DomainValue,
    LDNS_MAX, LDNS_OFF, LISTEN_IN_TRIE, LISTEN_INLINE, LISTEN_PREFIX_LEN, LOCAL_MACS_MAX,
    LdnsConfig, LdnsKey, LdnsValue, ListenKey, ListenSet, LocalMacs, MAX_ADDRS, QNAME_MAX,
    QTYPE_AAAA, RRL_CONFIG_MAP, RRL_COUNTERS_MAP, RRL_DROPPED, RRL_SLIPPED, RTT_VIEW_BIT,
    RrlConfig, V4_MAPPED_BITS, VIEW_KEY_GENERATION_BITS, ViewKey, ViewValue, maps, name_hash,
    programs,
};
use hickory_proto::{rr::Name, serialize::binary::BinEncodable};
use tracing::{info, warn};

use self::rotors::RotorSlots;
use crate::{
    compile::{Answer, DomainEntry, Snapshot},
    config::{AnswerMode, XdpMode},
};

/// The maps shared between the program and the controller, pinned and adopted across restarts.
/// (`ROTOR` and `SCRATCH` are the program's own working memory: a restarted gslbd's program
/// starts its rotations afresh.)
const PINNED_MAPS: [&str; 7] = [
    maps::CONFIG,
    maps::LISTEN,
    maps::LISTEN_SET,
    maps::VIEWS,
    maps::DOMAINS,
    maps::ANSWERS,
    maps::COUNTERS,
];

/// How long an old generation stays after the switch; see [`AnswerTable::publish`].
const GENERATION_GRACE: std::time::Duration = std::time::Duration::from_millis(1);

/// The XDP object, compiled for bpfel by build.rs.
pub static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/gslb"));

#[derive(Debug, thiserror::Error)]
pub enum DataplaneError {
    /// Display shows only the context: the cause follows in the error chain (`{:#}`).
    #[error("loading the XDP object")]
    Load(#[source] Box<EbpfError>),
    #[error("XDP program {name}")]
    Program {
        name: &'static str,
        source: Box<ProgramError>,
    },
    #[error("the XDP object has no {kind} named {name}")]
    Missing {
        kind: &'static str,
        name: &'static str,
    },
    #[error(
        "adopting the pinned maps in {dir} (left by a gslbd of another version? stop it, then remove the directory)"
    )]
    Adopt {
        dir: PathBuf,
        source: Box<EbpfError>,
    },
    #[error("link pinned at {path}")]
    Link {
        path: PathBuf,
        source: Box<aya::programs::links::LinkError>,
    },
    #[error("map {name}")]
    Map {
        name: &'static str,
        source: Box<MapError>,
    },
    #[error("attaching XDP to {interface} ({mode:?} mode)")]
    Attach {
        interface: String,
        mode: XdpMode,
        source: Box<ProgramError>,
    },
    #[error("pinning {what} at {path}")]
    Pin {
        what: &'static str,
        path: PathBuf,
        source: Box<PinError>,
    },
    #[error("pin directory {path}")]
    PinDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("name {name:?} cannot be encoded: {reason}")]
    Name { name: String, reason: String },
    #[error("reading the MAC of {interface}")]
    InterfaceMac {
        interface: String,
        source: std::io::Error,
    },
    #[error("the fast path answers at most {max} interfaces' MACs")]
    TooManyMacs { max: usize },
}

type Result<T, E = DataplaneError> = std::result::Result<T, E>;

fn map_err(name: &'static str) -> impl FnOnce(MapError) -> DataplaneError {
    move |source| DataplaneError::Map {
        name,
        source: Box::new(source),
    }
}

/// The loaded XDP object: both programs verified and loaded, maps created.
pub struct Dataplane {
    ebpf: Ebpf,
    pub table: AnswerTable,
    counters: PerCpuArray<MapData, u64>,
    /// `RRL_COUNTERS`: answers dropped and slipped by rate limiting.
    rrl_counters: PerCpuArray<MapData, u64>,
    /// `None` once taken by [`Dataplane::take_ldns`].
    ldns: Option<LdnsMap>,
    /// `None` once taken by [`Dataplane::take_heartbeat`].
    heartbeat: Option<HeartbeatMap>,
    local_macs: Array<MapData, LocalMacs>,
    pin_dir: Option<PathBuf>,
    /// Map pins, removed by [`Dataplane::unpin`].
    pinned: Vec<PathBuf>,
    /// Links of the answering program without a pin directory (tests): detached on drop.
    links: Vec<XdpLinkId>,
    /// Links pinned in the pin directory (`link-<interface>`), which keep XDP attached when
    /// gslbd dies; the pin is removed on a clean detach.
    pinned_links: Vec<(PathBuf, FdLink)>,
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
            adopted = dir.join(maps::CONFIG).exists();
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
        for name in [programs::ANSWER, programs::PASS] {
            let program = program_mut(&mut ebpf, name)?;
            program.load().map_err(|source| DataplaneError::Program {
                name,
                source: Box::new(source),
            })?;
        }
        let mut take = |name: &'static str| {
            ebpf.take_map(name)
                .ok_or(DataplaneError::Missing { kind: "map", name })
        };
        let table = AnswerTable {
            config: Array::try_from(take(maps::CONFIG)?).map_err(map_err(maps::CONFIG))?,
            rrl: Array::try_from(take(RRL_CONFIG_MAP)?).map_err(map_err(RRL_CONFIG_MAP))?,
            listen: LpmTrie::try_from(take(maps::LISTEN)?).map_err(map_err(maps::LISTEN))?,
            listen_set: Array::try_from(take(maps::LISTEN_SET)?)
                .map_err(map_err(maps::LISTEN_SET))?,
            views: LpmTrie::try_from(take(maps::VIEWS)?).map_err(map_err(maps::VIEWS))?,
            domains: HashMap::try_from(take(maps::DOMAINS)?).map_err(map_err(maps::DOMAINS))?,
            answers: HashMap::try_from(take(maps::ANSWERS)?).map_err(map_err(maps::ANSWERS))?,
            published: None,
            names: std::collections::HashMap::new(),
            rotors: RotorSlots::default(),
        };
        let counters =
            PerCpuArray::try_from(take(maps::COUNTERS)?).map_err(map_err(maps::COUNTERS))?;
        let rrl_counters =
            PerCpuArray::try_from(take(RRL_COUNTERS_MAP)?).map_err(map_err(RRL_COUNTERS_MAP))?;
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
            table,
            counters,
            rrl_counters,
            ldns: Some(ldns),
            heartbeat: Some(heartbeat),
            local_macs,
            pin_dir: pin_dir.map(Path::to_path_buf),
            pinned,
            links: Vec::new(),
            pinned_links: Vec::new(),
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
            self.links.push(id);
            return Ok(mode);
        };
        self.detach_stale_links(&dir, interface);
        let name = programs::ANSWER;
        let path = dir.join(format!("link-{interface}"));
        let program = program_mut(&mut self.ebpf, name)?;
        let (mode, id) = if path.exists() {
            // The interface runs an earlier gslbd's program through a pinned link: swap the
            // program in that link (one atomic update, no moment without XDP).
            let link = PinnedLink::from_pin(&path).map_err(|source| DataplaneError::Link {
                path: path.clone(),
                source: Box::new(source),
            })?;
            let link =
                XdpLink::try_from(FdLink::from(link)).map_err(|source| DataplaneError::Link {
                    path: path.clone(),
                    source: Box::new(source),
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
        let fd_link = FdLink::try_from(link).map_err(|source| DataplaneError::Link {
            path: path.clone(),
            source: Box::new(source),
        })?;
        let fd_link = if path.exists() {
            fd_link
        } else {
            FdLink::from(fd_link.pin(&path).map_err(|source| DataplaneError::Pin {
                what: "link",
                path: path.clone(),
                source: Box::new(source),
            })?)
        };
        self.pinned_links.push((path, fd_link));
        Ok(mode)
    }

    /// Links pinned for other interfaces are from an earlier configuration: detach them.
    fn detach_stale_links(&self, dir: &Path, interface: &str) {
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
        for (path, link) in self.pinned_links.drain(..) {
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

    /// Leaves XDP attached through the pinned links and the maps pinned, so the fast path keeps
    /// answering after this process exits and the next gslbd adopts it.
    pub fn keep_attached(self) {
        if self.pin_dir.is_none() && !self.links.is_empty() {
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
}

fn program_mut<'a>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<&'a mut Xdp> {
    ebpf.program_mut(name)
        .and_then(|p| p.try_into().ok())
        .ok_or(DataplaneError::Missing {
            kind: "program",
            name,
        })
}

/// Hit and miss counters, one per [`Counter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counters(pub [u64; Counter::COUNT as usize]);

// By hand: arrays of more than 32 elements derive no `Default`.
impl Default for Counters {
    fn default() -> Self {
        Counters([0; Counter::COUNT as usize])
    }
}

impl Counters {
    pub fn get(&self, counter: Counter) -> u64 {
        self.0[counter as usize]
    }

    pub fn hits(&self) -> u64 {
        Counter::ALL
            .iter()
            .filter(|c| c.is_hit())
            .map(|c| self.get(*c))
            .sum()
    }

    /// Counters that rose from `earlier` to `self`, by how much.
    pub fn delta(&self, earlier: &Counters) -> Vec<(Counter, u64)> {
        Counter::ALL
            .iter()
            .map(|c| (*c, self.get(*c).wrapping_sub(earlier.get(*c))))
            .filter(|(_, d)| *d != 0)
            .collect()
    }
}

/// Reads counters from a pinned `COUNTERS` map, e.g. of a running gslbd.
pub fn pinned_counters(dir: &Path) -> Result<Counters> {
    let data = MapData::from_pin(dir.join(maps::COUNTERS)).map_err(map_err(maps::COUNTERS))?;
    let map: PerCpuArray<MapData, u64> =
        PerCpuArray::try_from(Map::PerCpuArray(data)).map_err(map_err(maps::COUNTERS))?;
    read_counters(&map)
}

fn read_counters(map: &PerCpuArray<MapData, u64>) -> Result<Counters> {
    let mut out = Counters::default();
    for c in Counter::ALL {
        let values = map.get(&(c as u32), 0).map_err(map_err(maps::COUNTERS))?;
        out.0[c as usize] = values.iter().sum();
    }
    Ok(out)
}

/// The fast path's answer tables.
pub struct AnswerTable {
    config: Array<MapData, Config>,
    /// `RRL_CONFIG`: rewritten by every publish (not pinned: each program has its own).
    rrl: Array<MapData, RrlConfig>,
    listen: LpmTrie<MapData, ListenKey, u8>,
    listen_set: Array<MapData, ListenSet>,
    views: LpmTrie<MapData, ViewKey, ViewValue>,
    domains: HashMap<MapData, DomainKey, DomainValue>,
    answers: HashMap<MapData, AnswerKey, AnswerSet>,
    /// What the maps hold now, as this process published it (`None` after adopting pins: the
    /// next publish rewrites everything).
    published: Option<Published>,
    /// Wire form and hash of every name published so far.
    names: std::collections::HashMap<String, (Vec<u8>, u64)>,
    /// The `ROTOR` slot of each rotating answer set published.
    rotors: RotorSlots,
}

/// The last snapshot published, and the generations it went under.
struct Published {
    snapshot: Snapshot,
    generation: u32,
    view_generation: u32,
    /// The `DOMAINS` and `ANSWERS` keys written for `generation` (copies included).
    domain_keys: Vec<DomainKey>,
    answer_keys: Vec<AnswerKey>,
}

/// What a publish wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PublishStats {
    pub generation: u32,
    pub prefixes: usize,
    pub domains: usize,
    pub answers: usize,
    /// Names longer than the fast path's key: answered by the responder only.
    pub too_long: usize,
    /// Names whose `ANSWERS` key hash equals an earlier name's (for 64-bit hashes of a real
    /// configuration, practically never): answered by the responder only.
    pub collisions: usize,
    /// Entries of older generations removed.
    pub removed: usize,
    /// The trie was edited in place (`prefixes` counts the prefixes written or removed) rather
    /// than rewritten under a new view generation.
    pub in_place: bool,
    /// Answer sets copied to new views before the trie edit.
    pub copied: usize,
    /// Rotating answer sets beyond `ROTOR_SLOTS` that share a rotation slot with others (see
    /// `dataplane::rotors`); 0 unless more than 65,536 sets rotate.
    pub shared_rotors: usize,
}

impl AnswerTable {
    /// Makes `snapshot` what the fast path answers. The new generation is written beside the
    /// current one and switched to with one write of `CONFIG`, so a packet sees either the old
    /// tables or the new ones, never a mix; the old generation is removed afterwards.
    ///
    /// The view trie has its own generation. When the new views refine the published ones
    /// (every new view and LDNS view covers addresses of one published view, as the compiler
    /// keeps them between compilations), the trie is edited in place instead: first each new
    /// view gets a copy of the current generation's answers of the view it comes from, then the
    /// changed prefixes are inserted and the stale ones removed. Each of those writes leaves
    /// every lookup's answer as it was; the answers change only with the switch.
    pub fn publish(&mut self, snapshot: &Snapshot) -> Result<PublishStats> {
        let current = self.config.get(&0, 0).map_err(map_err(maps::CONFIG))?;
        let generation = current.generation.wrapping_add(1);
        let mut stats = PublishStats {
            generation,
            ..Default::default()
        };

        for addr in &snapshot.listen {
            self.listen
                .insert(&listen_key(*addr), &1, 0)
                .map_err(map_err(maps::LISTEN))?;
        }
        // The slot of the new generation; packets of the current one read the other.
        self.listen_set
            .set(generation & 1, &listen_set(&snapshot.listen), 0)
            .map_err(map_err(maps::LISTEN_SET))?;

        // What the maps hold, when this process wrote it: the old entries are then removed by
        // their keys instead of by walking the maps (a syscall per entry).
        let mut previous = self.published.take().filter(|p| {
            p.generation == current.generation && p.view_generation == current.view_generation
        });
        // Not written by this process (pins adopted): everything in the maps now is stale
        // once the new generations are in, so it is listed before they are written.
        let scanned = match &previous {
            Some(_) => None,
            None => Some((
                self.views
                    .keys()
                    .filter_map(|k| k.ok())
                    .collect::<Vec<Key<ViewKey>>>(),
                self.domains
                    .keys()
                    .filter_map(|k| k.ok())
                    .collect::<Vec<DomainKey>>(),
                self.answers
                    .keys()
                    .filter_map(|k| k.ok())
                    .collect::<Vec<AnswerKey>>(),
            )),
        };
        let plan = previous
            .as_ref()
            .and_then(|p| refinement(&p.snapshot, snapshot));
        let mut stale_views: Vec<Key<ViewKey>> = Vec::new();
        let view_generation = match plan {
            Some(origins) => {
                let old = previous.as_mut().expect("planned from it");
                let copied = self.copy_answers(&old.snapshot, current.generation, &origins)?;
                stats.copied = copied.len();
                old.answer_keys.extend(copied);
                if !Arc::ptr_eq(&old.snapshot.views, &snapshot.views) {
                    stats.prefixes = self.edit_views(
                        &old.snapshot.views,
                        &snapshot.views,
                        current.view_generation,
                    )?;
                }
                stats.in_place = true;
                current.view_generation
            }
            None => {
                let view_generation = current.view_generation.wrapping_add(1);
                if let Some(old) = &previous {
                    let g = old.view_generation;
                    stale_views = old
                        .snapshot
                        .views
                        .iter()
                        .map(|(n, _)| view_key(g, n.network(), n.prefix_len()))
                        .collect();
                }
                for (net, view) in snapshot.views.iter() {
                    self.views
                        .insert(
                            &view_key(view_generation, net.network(), net.prefix_len()),
                            view,
                            0,
                        )
                        .map_err(map_err(maps::VIEWS))?;
                    stats.prefixes += 1;
                }
                view_generation
            }
        };

        // Name hash of each name published, to leave a colliding name to the responder: its
        // queries then find the other name's sets, fail the name compare and are passed.
        let mut hashed: std::collections::HashMap<u64, Vec<u8>> = std::collections::HashMap::new();
        let (mut domain_keys, mut answer_keys) = (Vec::new(), Vec::new());
        let (mut domain_values, mut answer_values) = (Vec::new(), Vec::new());
        for domain in &snapshot.domains {
            // Names repeat from publish to publish: their wire form and hash are kept.
            let (wire, hash) = self.wire_and_hash(&domain.name)?;
            let Some(key) = wire_domain_key(&wire, domain.qtype, generation) else {
                stats.too_long += 1;
                continue;
            };
            if hashed.get(&hash).is_some_and(|other| *other != wire) {
                warn!(name = %domain.name, "name hash collides with another name's; left to the responder");
                stats.collisions += 1;
                continue;
            }
            hashed.insert(hash, wire.clone());
            domain_keys.push(key);
            domain_values.push(DomainValue {
                domain_id: domain.id,
                reserved: 0,
            });
            for (key, set) in answer_sets(domain, &wire, hash, generation) {
                answer_keys.push(key);
                answer_values.push(set);
            }
        }
        stats.shared_rotors = self.rotors.assign(&answer_keys, &mut answer_values);
        batch(&mut self.domains, &domain_keys, Some(&domain_values))
            .map_err(map_err(maps::DOMAINS))?;
        batch(&mut self.answers, &answer_keys, Some(&answer_values))
            .map_err(map_err(maps::ANSWERS))?;
        stats.domains = domain_keys.len();
        stats.answers = answer_keys.len();

        // Rate limiting first: it applies to the old generation's answers as well as the new.
        let r = &snapshot.rrl;
        let rrl = if r.enabled {
            RrlConfig::new(r.rate, r.burst, r.slip, r.ipv4_prefix, r.ipv6_prefix)
        } else {
            RrlConfig::default()
        };
        self.rrl.set(0, &rrl, 0).map_err(map_err(RRL_CONFIG_MAP))?;
        let config = Config {
            generation,
            dns_port: snapshot.dns_port,
            edns_udp_size: snapshot.edns_udp_size,
            view_generation,
        };
        self.config
            .set(0, &config, 0)
            .map_err(map_err(maps::CONFIG))?;
        // A packet that read the old generation just before the switch may still be looking
        // its entries up. A program run takes well under a microsecond and cannot be preempted,
        // so after this pause none can be: only then are the old entries deleted.
        std::thread::sleep(GENERATION_GRACE);
        let (stale_domains, stale_answers) = match (previous, scanned) {
            (Some(p), _) => (p.domain_keys, p.answer_keys),
            (None, Some((views, domains, answers))) => {
                stale_views = views;
                (domains, answers)
            }
            (None, None) => unreachable!("scanned when there is no previous publish"),
        };
        stats.removed = self.remove_stale(stale_views, stale_domains, stale_answers, snapshot)?;
        self.published = Some(Published {
            snapshot: snapshot.clone(),
            generation,
            view_generation,
            domain_keys,
            answer_keys,
        });
        Ok(stats)
    }

    /// The wire form and hash of a published name; names repeat from publish to publish, so
    /// they are kept.
    fn wire_and_hash(&mut self, name: &str) -> Result<(Vec<u8>, u64)> {
        if let Some(known) = self.names.get(name) {
            return Ok(known.clone());
        }
        let wire = wire_name(name)?;
        let hash = name_hash(&wire);
        self.names.insert(name.to_owned(), (wire.clone(), hash));
        Ok((wire, hash))
    }

    /// Gives each new view a copy of the answers its origin has in `generation` (`origins`:
    /// new view → origin, both dimensions, the LDNS views with [`RTT_VIEW_BIT`]).
    fn copy_answers(
        &mut self,
        old: &Snapshot,
        generation: u32,
        origins: &std::collections::HashMap<u32, u32>,
    ) -> Result<Vec<AnswerKey>> {
        let mut copied = Vec::new();
        if origins.iter().all(|(new, origin)| new == origin) {
            return Ok(copied);
        }
        for domain in &old.domains {
            // Published before, so it encodes; a name too long for the key was not published.
            let (wire, hash) = self.wire_and_hash(&domain.name)?;
            if wire.len() > QNAME_MAX {
                continue;
            }
            let sets = answer_sets(domain, &wire, hash, generation);
            for (new, origin) in origins.iter().filter(|(n, o)| n != o) {
                for (key, set) in sets.iter().filter(|(k, _)| k.view == *origin) {
                    // Until the switch the copy is its origin's answer, and rotates with it.
                    let set = AnswerSet {
                        rotor: self.rotors.published(key).unwrap_or(0),
                        ..*set
                    };
                    let key = AnswerKey { view: *new, ..*key };
                    self.answers
                        .insert(&key, &set, 0)
                        .map_err(map_err(maps::ANSWERS))?;
                    copied.push(key);
                }
            }
        }
        Ok(copied)
    }

    /// Rewrites the trie of `view_generation` from `old` to `new` in place: changed and new
    /// prefixes first, stale ones after, so an address is never left without its prefix.
    fn edit_views(
        &mut self,
        old: &[(ipnet::IpNet, ViewValue)],
        new: &[(ipnet::IpNet, ViewValue)],
        view_generation: u32,
    ) -> Result<usize> {
        if old == new {
            return Ok(0);
        }
        // Both lists are disjoint prefixes in address order (as the compiler emits them): one
        // walk finds the changed, new and stale ones without hashing a million prefixes.
        let order = |n: &ipnet::IpNet| {
            (
                crate::compile::partition::key_of(n.network()),
                n.prefix_len(),
            )
        };
        let (mut inserts, mut removes) = (Vec::new(), Vec::new());
        let (mut i, mut j) = (0, 0);
        while i < old.len() || j < new.len() {
            match (old.get(i), new.get(j)) {
                (Some(o), Some(n)) if o.0 == n.0 => {
                    if o.1 != n.1 {
                        inserts.push(*n);
                    }
                    i += 1;
                    j += 1;
                }
                (Some(o), Some(n)) if order(&o.0) < order(&n.0) => {
                    removes.push(o.0);
                    i += 1;
                }
                (Some(o), None) => {
                    removes.push(o.0);
                    i += 1;
                }
                (_, Some(n)) => {
                    inserts.push(*n);
                    j += 1;
                }
                (None, None) => unreachable!("the loop condition"),
            }
        }
        let mut written = 0;
        for (net, view) in &inserts {
            self.views
                .insert(
                    &view_key(view_generation, net.network(), net.prefix_len()),
                    view,
                    0,
                )
                .map_err(map_err(maps::VIEWS))?;
            written += 1;
        }
        for net in &removes {
            self.views
                .remove(&view_key(view_generation, net.network(), net.prefix_len()))
                .map_err(map_err(maps::VIEWS))?;
            written += 1;
        }
        Ok(written)
    }

    /// Removes the entries of replaced generations, by their keys, and listen addresses no
    /// longer served.
    fn remove_stale(
        &mut self,
        stale_views: Vec<Key<ViewKey>>,
        stale_domains: Vec<DomainKey>,
        stale_answers: Vec<AnswerKey>,
        snapshot: &Snapshot,
    ) -> Result<usize> {
        let mut removed = 0;
        let keep: Vec<ListenKey> = snapshot
            .listen
            .iter()
            .map(|a| ListenKey { addr: mapped(*a) })
            .collect();
        let stale: Vec<Key<ListenKey>> = self
            .listen
            .keys()
            .filter_map(|k| k.ok())
            .filter(|k| !keep.contains(&k.data()))
            .collect();
        for k in stale {
            self.listen.remove(&k).map_err(map_err(maps::LISTEN))?;
            removed += 1;
        }
        for k in stale_views {
            self.views.remove(&k).map_err(map_err(maps::VIEWS))?;
            removed += 1;
        }
        batch::<_, DomainValue>(&mut self.domains, &stale_domains, None)
            .map_err(map_err(maps::DOMAINS))?;
        batch::<_, AnswerSet>(&mut self.answers, &stale_answers, None)
            .map_err(map_err(maps::ANSWERS))?;
        Ok(removed + stale_domains.len() + stale_answers.len())
    }
}

/// Writes (`values`: `Some`) or deletes (`None`) many entries of a hash map in one
/// `bpf(BPF_MAP_UPDATE_BATCH / BPF_MAP_DELETE_BATCH)` call instead of a call per entry: a
/// republish rewrites every answer set, and the calls were most of its time. aya 0.16 has no
/// batch operations, hence the raw syscall. A kernel without them (before 5.6) gets one call
/// per entry. A delete of a key that is not there is not an error (adopted maps, retries).
fn batch<K: aya::Pod, V: aya::Pod>(
    map: &mut HashMap<MapData, K, V>,
    keys: &[K],
    values: Option<&[V]>,
) -> std::result::Result<(), MapError> {
    use aya::maps::IterableMap;
    use std::os::fd::{AsFd, AsRawFd};
    if keys.is_empty() {
        return Ok(());
    }
    if let Some(values) = values {
        assert_eq!(keys.len(), values.len(), "one value per key");
    }
    // `union bpf_attr`'s batch member (include/uapi/linux/bpf.h).
    #[repr(C)]
    struct BatchAttr {
        in_batch: u64,
        out_batch: u64,
        keys: u64,
        values: u64,
        count: u32,
        map_fd: u32,
        elem_flags: u64,
        flags: u64,
    }
    const BPF_MAP_UPDATE_BATCH: libc::c_long = 26;
    const BPF_MAP_DELETE_BATCH: libc::c_long = 27;
    let fd = map.map().fd().as_fd().as_raw_fd();
    let mut done = 0;
    while done < keys.len() {
        let mut attr = BatchAttr {
            in_batch: 0,
            out_batch: 0,
            keys: keys[done..].as_ptr() as u64,
            values: values.map_or(0, |v| v[done..].as_ptr() as u64),
            count: (keys.len() - done) as u32,
            map_fd: fd as u32,
            elem_flags: 0,
            flags: 0,
        };
        let cmd = if values.is_some() {
            BPF_MAP_UPDATE_BATCH
        } else {
            BPF_MAP_DELETE_BATCH
        };
        // SAFETY: `attr` points at `count` keys (and values) that live through the call; the
        // kernel reads them and writes back `count` only.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                cmd,
                &mut attr as *mut BatchAttr,
                size_of::<BatchAttr>() as u32,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let error = std::io::Error::last_os_error();
        // The kernel stopped at entry `count`: a delete of a missing key; skip it and go on.
        done += attr.count as usize;
        match error.raw_os_error() {
            Some(libc::ENOENT) if values.is_none() => done += 1,
            // 524: the kernel's internal ENOTSUPP, which map commands can return as is.
            Some(libc::EINVAL) | Some(524) | Some(libc::EOPNOTSUPP) if done == 0 => {
                return one_by_one(map, keys, values);
            }
            _ => {
                let call = if values.is_some() {
                    "bpf_map_update_batch"
                } else {
                    "bpf_map_delete_batch"
                };
                return Err(MapError::SyscallError(aya::sys::SyscallError {
                    call,
                    io_error: error,
                }));
            }
        }
    }
    Ok(())
}

/// [`batch`] one entry at a time.
fn one_by_one<K: aya::Pod, V: aya::Pod>(
    map: &mut HashMap<MapData, K, V>,
    keys: &[K],
    values: Option<&[V]>,
) -> std::result::Result<(), MapError> {
    for (i, key) in keys.iter().enumerate() {
        match values {
            Some(values) => map.insert(key, &values[i], 0)?,
            None => match map.remove(key) {
                Err(MapError::KeyNotFound) | Ok(()) => {}
                Err(e) => return Err(e),
            },
        }
    }
    Ok(())
}

/// Every answer set of `domain` in `generation`: its views' (flagged when the domain is
/// answered by RTT) and its LDNS views'.
fn answer_sets(
    domain: &DomainEntry,
    wire: &[u8],
    hash: u64,
    generation: u32,
) -> Vec<(AnswerKey, AnswerSet)> {
    let key = |view: u32| answer_key(hash, domain.qtype, generation, view);
    let mut sets = Vec::with_capacity(domain.answers.len() + domain.rtt_answers.len());
    for (view, answer) in &domain.answers {
        let mut set = answer_set(answer, wire);
        if domain.by_rtt {
            set.flags |= ANSWER_BY_RTT;
        }
        sets.push((key(*view), set));
    }
    for (view, answer) in &domain.rtt_answers {
        sets.push((key(*view | RTT_VIEW_BIT), answer_set(answer, wire)));
    }
    sets
}

/// Whether `new`'s views refine `old`'s, so that the trie can be edited in place: every new
/// view (and LDNS view) covers addresses of exactly one old one (its origin), and a new number
/// that is not its own origin was not in use. Returns new → origin (LDNS views with
/// [`RTT_VIEW_BIT`]), or `None` when the trie must be rewritten.
fn refinement(old: &Snapshot, new: &Snapshot) -> Option<std::collections::HashMap<u32, u32>> {
    let (a, b) = (&old.segments, &new.segments);
    if a.starts.is_empty() || b.starts.is_empty() {
        return None;
    }
    if Arc::ptr_eq(a, b) || a == b {
        return Some(std::collections::HashMap::new());
    }
    // new key → origin key (None: "no LDNS view").
    let mut origin: std::collections::HashMap<u32, Option<u32>> = std::collections::HashMap::new();
    let mut in_use: std::collections::HashSet<u32> = std::collections::HashSet::new();
    let (mut i, mut j) = (0, 0);
    loop {
        let (ov, orv) = (a.views[i], a.rtt_views[i]);
        let (nv, nrv) = (b.views[j], b.rtt_views[j]);
        in_use.insert(ov);
        if orv != 0 {
            in_use.insert(orv | RTT_VIEW_BIT);
        }
        let pairs = [
            (nv, Some(ov)),
            (nrv | RTT_VIEW_BIT, (orv != 0).then_some(orv | RTT_VIEW_BIT)),
        ];
        for (n, o) in pairs {
            // No LDNS view now: there must have been none (its answers would vanish early).
            if n == RTT_VIEW_BIT {
                if o.is_some() {
                    return None;
                }
                continue;
            }
            if *origin.entry(n).or_insert(o) != o {
                return None;
            }
        }
        let next_a = a.starts.get(i + 1);
        let next_b = b.starts.get(j + 1);
        match (next_a, next_b) {
            (None, None) => break,
            (Some(x), Some(y)) if x == y => {
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x < y => i += 1,
            (Some(_), None) => i += 1,
            _ => j += 1,
        }
    }
    let mut copies = std::collections::HashMap::new();
    for (n, o) in origin {
        match o {
            Some(o) if o == n => {}
            // A new number must be fresh: copying into one in use would change its answers.
            Some(o) if !in_use.contains(&n) => {
                copies.insert(n, o);
            }
            // An LDNS view where there was none: until the switch its lookups find nothing
            // and fall back to the view's answer, as before.
            None if !in_use.contains(&n) => {}
            _ => return None,
        }
    }
    Some(copies)
}

/// The resolvers (LDNS) the fast path has seen (`LDNS`, an LRU map the program fills, see
/// gslb-ebpf's `record_ldns`) and how it records them (`LDNS_CONFIG`). Not pinned: a restarted
/// gslbd learns resolvers again from their next queries.
pub struct LdnsMap {
    config: Array<MapData, LdnsConfig>,
    seen: HashMap<MapData, LdnsKey, LdnsValue>,
}

/// A resolver (or masked prefix of resolvers) the fast path has seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeenLdns {
    /// The entry's key: the resolver's address with the LDNS mask's host bits cleared.
    pub group: IpAddr,
    /// The address of the query that created the entry: the one to probe.
    pub addr: IpAddr,
    /// Time since its last query, as recorded (it may have queried up to one epoch later).
    pub idle: Duration,
}

/// What one [`LdnsMap::scan`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LdnsScan {
    /// Entries seen within the timeout.
    pub seen: Vec<SeenLdns>,
    /// Entries idle longer than the timeout, deleted.
    pub expired: usize,
}

impl LdnsMap {
    /// Another handle on the same two maps (duplicated descriptors): the fast-path feed's runs
    /// each read through one, so that a run that dies does not close the maps, which the
    /// program's reload on detach needs open.
    pub fn try_clone(&self) -> Result<LdnsMap, DataplaneError> {
        use aya::maps::IterableMap;
        use std::os::fd::AsFd;
        fn dup(data: &MapData, name: &'static str) -> Result<Map, DataplaneError> {
            let fd = data
                .fd()
                .as_fd()
                .try_clone_to_owned()
                .map_err(|e| map_err(name)(MapError::from(e)))?;
            MapData::from_fd(fd)
                .and_then(Map::from_map_data)
                .map_err(map_err(name))
        }
        Ok(LdnsMap {
            config: Array::try_from(dup(self.config.map(), maps::LDNS_CONFIG)?)
                .map_err(map_err(maps::LDNS_CONFIG))?,
            seen: HashMap::try_from(dup(self.seen.map(), maps::LDNS)?)
                .map_err(map_err(maps::LDNS))?,
        })
    }

    fn settings(&self) -> Result<LdnsConfig> {
        self.config.get(&0, 0).map_err(map_err(maps::LDNS_CONFIG))
    }

    fn set_settings(&mut self, config: &LdnsConfig) -> Result<()> {
        self.config
            .set(0, config, 0)
            .map_err(map_err(maps::LDNS_CONFIG))
    }

    /// Groups resolvers by prefix (NetScaler `ldnsmask`): queries from one /`v4` (IPv4) or
    /// /`v6` (IPv6) prefix share one entry; 32 and 128 keep every address apart (the default).
    /// Entries recorded under other masks stay until they expire. Lengths above the family's
    /// are taken as the whole address.
    pub fn set_masks(&mut self, v4: u8, v6: u8) -> Result<()> {
        let mut config = self.settings()?;
        config.host_v4 = host_bytes(96 + u32::from(v4.min(32)));
        config.host_v6 = host_bytes(u32::from(v6.min(128)));
        config.epoch = config.epoch.wrapping_add(1);
        self.set_settings(&config)
    }

    /// Turns recording on or off.
    pub fn set_enabled(&mut self, enabled: bool) -> Result<()> {
        let mut config = self.settings()?;
        config.flags = if enabled {
            config.flags & !LDNS_OFF
        } else {
            config.flags | LDNS_OFF
        };
        self.set_settings(&config)
    }

    /// Starts a new epoch: each resolver's next query (per CPU) refreshes its entry's time.
    /// [`LdnsMap::scan`] does this too.
    pub fn new_epoch(&mut self) -> Result<u32> {
        let mut config = self.settings()?;
        config.epoch = config.epoch.wrapping_add(1);
        self.set_settings(&config)?;
        Ok(config.epoch)
    }

    /// Reads every entry, deletes those idle longer than `timeout` (the LDNS entry timeout)
    /// and starts a new epoch, so that the times read by the next scan are at most one scan
    /// interval old. Costs two syscalls per entry: scan about once a second.
    pub fn scan(&mut self, timeout: Duration) -> Result<LdnsScan> {
        let now = monotonic_ns();
        let mut scan = LdnsScan::default();
        let mut stale = Vec::new();
        let mut visited = HashSet::new();
        // Entries evicted or deleted while iterating can restart the kernel's walk: bounded,
        // and each key taken once.
        for item in self.seen.iter().take(2 * LDNS_MAX as usize) {
            // An entry gone between the key walk and the read: nothing to do.
            let Ok((key, value)) = item else { continue };
            if !visited.insert(key.addr) {
                continue;
            }
            let idle = Duration::from_nanos(now.saturating_sub(value.last_seen_ns));
            if idle > timeout {
                stale.push(key);
                continue;
            }
            scan.seen.push(SeenLdns {
                group: unmapped(key.addr),
                addr: unmapped(value.addr),
                idle,
            });
        }
        for key in stale {
            match self.seen.remove(&key) {
                Ok(()) => scan.expired += 1,
                // Evicted meanwhile.
                Err(MapError::KeyNotFound) => {}
                Err(source) => {
                    return Err(DataplaneError::Map {
                        name: maps::LDNS,
                        source: Box::new(source),
                    });
                }
            }
        }
        self.new_epoch()?;
        Ok(scan)
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of `bpf_ktime_get_ns`.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A 16-byte address mask with the bits after the first `prefix` set.
fn host_bytes(prefix: u32) -> [u8; 16] {
    let keep = if prefix >= 128 {
        u128::MAX
    } else {
        !(u128::MAX >> prefix)
    };
    (!keep).to_be_bytes()
}

/// A map address back to an `IpAddr`: IPv4-mapped addresses as IPv4.
pub fn unmapped(addr: [u8; 16]) -> IpAddr {
    Ipv6Addr::from(addr).to_canonical()
}

/// IPv4 as IPv4-mapped IPv6, the one address form of the maps.
pub fn mapped(addr: IpAddr) -> [u8; 16] {
    match addr {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// The `LISTEN_SET` value for the addresses we serve: inline when they fit, otherwise a
/// pointer to the `LISTEN` trie.
pub fn listen_set(listen: &[IpAddr]) -> ListenSet {
    let mut set = ListenSet::default();
    let mut distinct: Vec<[u8; 16]> = listen.iter().map(|a| mapped(*a)).collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() > LISTEN_INLINE {
        set.count = LISTEN_IN_TRIE;
        return set;
    }
    set.count = distinct.len() as u32;
    set.addrs[..distinct.len()].copy_from_slice(&distinct);
    set
}

/// The `LISTEN` trie key of an address we serve: the whole address.
pub fn listen_key(addr: IpAddr) -> Key<ListenKey> {
    Key::new(LISTEN_PREFIX_LEN, ListenKey { addr: mapped(addr) })
}

/// The `ANSWERS` key of (name, qtype, view) in one generation, the name given by its hash.
pub fn answer_key(name_hash: u64, qtype: u16, generation: u32, view: u32) -> AnswerKey {
    AnswerKey {
        name_hash,
        generation,
        view,
        qtype,
        reserved: 0,
        reserved2: 0,
    }
}

/// The `VIEWS` trie key for a client prefix in one generation.
pub fn view_key(generation: u32, network: IpAddr, prefix_len: u8) -> Key<ViewKey> {
    let bits = match network {
        IpAddr::V4(_) => V4_MAPPED_BITS + prefix_len as u32,
        IpAddr::V6(_) => prefix_len as u32,
    };
    Key::new(
        VIEW_KEY_GENERATION_BITS + bits,
        ViewKey {
            generation: generation.to_be_bytes(),
            addr: mapped(network),
        },
    )
}

/// A name in uncompressed wire form, lower-cased: what the fast path builds from a query.
pub fn wire_name(name: &str) -> Result<Vec<u8>> {
    let err = |reason: String| DataplaneError::Name {
        name: name.into(),
        reason,
    };
    let fqdn = Name::from_ascii(name)
        .map_err(|e| err(e.to_string()))?
        .to_lowercase();
    let mut fqdn = fqdn;
    fqdn.set_fqdn(true);
    fqdn.to_bytes().map_err(|e| err(e.to_string()))
}

/// The `DOMAINS` key for (name, qtype) in one generation; `None` when the name is longer than
/// the fast path's key, so only the responder can answer it.
pub fn domain_key(name: &str, qtype: u16, generation: u32) -> Result<Option<DomainKey>> {
    Ok(wire_domain_key(&wire_name(name)?, qtype, generation))
}

/// [`domain_key`] of a name already in wire form.
fn wire_domain_key(wire: &[u8], qtype: u16, generation: u32) -> Option<DomainKey> {
    if wire.len() > QNAME_MAX {
        return None;
    }
    let mut key = DomainKey {
        qtype,
        generation,
        ..Default::default()
    };
    key.name[..wire.len()].copy_from_slice(wire);
    Some(key)
}

/// The ones' complement sum of `bytes` as 16-bit big-endian words from an even offset, folded.
pub fn ones_sum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|w| u32::from(w[0]) << 8 | u32::from(*w.get(1).unwrap_or(&0)))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// One answer record exactly as the fast path writes it: a pointer to the question name at
/// offset 12, then type, class IN, TTL, RDLENGTH and the address.
pub fn answer_record(qtype: u16, ttl: u32, addr: IpAddr) -> Vec<u8> {
    let rdata = match addr {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    let mut rr = vec![0xc0, 12];
    rr.extend_from_slice(&qtype.to_be_bytes());
    rr.extend_from_slice(&1u16.to_be_bytes());
    rr.extend_from_slice(&ttl.to_be_bytes());
    rr.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    rr.extend_from_slice(&rdata);
    rr
}

/// The map value for one answer to the name `wire` (lower-cased wire form, at most
/// `QNAME_MAX` bytes): the records as the fast path copies them to the wire, with the checksum
/// sums it adds instead of summing the records itself. A rotating answer of two or more
/// records is flagged `ANSWER_ROTATE`; one record is the same answer without a rotation, so it
/// takes no `ROTOR` slot (slots are given at publish, see `rotors`).
pub fn answer_set(answer: &Answer, wire: &[u8]) -> AnswerSet {
    let qtype = match answer.addrs.first() {
        Some(IpAddr::V6(_)) => QTYPE_AAAA,
        _ => gslb_common::QTYPE_A,
    };
    // No records (NODATA for this view) or more than the set holds: the program passes the
    // query (count 0) and the responder answers it from the same snapshot.
    let fits = answer.addrs.len() <= MAX_ADDRS;
    let count = if fits { answer.addrs.len() as u8 } else { 0 };
    let mut set = AnswerSet {
        ttl: answer.ttl,
        count,
        flags: if answer.mode == AnswerMode::Rotate && count > 1 {
            ANSWER_ROTATE
        } else {
            0
        },
        qtype,
        name_len: wire.len() as u16,
        ..Default::default()
    };
    set.name[..wire.len()].copy_from_slice(wire);
    let mut all = Vec::new();
    for (i, addr) in answer
        .addrs
        .iter()
        .take(if fits { MAX_ADDRS } else { 0 })
        .enumerate()
    {
        let rr = answer_record(qtype, answer.ttl, *addr);
        set.rr_csum[i] = ones_sum(&rr) as u32;
        all.extend_from_slice(&rr);
    }
    set.all_csum = ones_sum(&all) as u32;
    set.records[..all.len()].copy_from_slice(&all);
    set
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;

    #[test]
    fn qname_key_encoding() {
        let table: &[(&str, &[u8])] = &[
            ("www.example.com", b"\x03www\x07example\x03com\x00"),
            ("WWW.Example.COM.", b"\x03www\x07example\x03com\x00"),
            ("a", b"\x01a\x00"),
            ("_dns.x-y.example", b"\x04_dns\x03x-y\x07example\x00"),
        ];
        for (name, wire) in table {
            let key = domain_key(name, 1, 7).unwrap().unwrap();
            assert_eq!(&key.name[..wire.len()], *wire, "{name}");
            assert!(
                key.name[wire.len()..].iter().all(|b| *b == 0),
                "{name}: padding"
            );
            assert_eq!((key.qtype, key.generation, key.reserved), (1, 7, 0));
        }
    }

    #[test]
    fn names_longer_than_the_key_are_left_to_the_responder() {
        // 2 labels of 63 + root: 1+63+1+63+1 = 129 wire bytes, one over the key.
        let long = format!("{}.{}", "a".repeat(63), "b".repeat(63));
        assert_eq!(wire_name(&long).unwrap().len(), QNAME_MAX + 1);
        assert!(domain_key(&long, 1, 0).unwrap().is_none());
        let fits = format!("{}.{}", "a".repeat(63), "b".repeat(62));
        assert!(domain_key(&fits, 1, 0).unwrap().is_some());
    }

    #[test]
    fn view_keys_put_the_generation_first_and_map_ipv4() {
        let table = [
            (IpAddr::V4(Ipv4Addr::new(198, 51, 100, 0)), 24, 32 + 96 + 24),
            (
                IpAddr::V6("2001:db8:100::".parse::<Ipv6Addr>().unwrap()),
                48,
                32 + 48,
            ),
            (IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0, 32 + 96),
        ];
        for (net, len, bits) in table {
            let key = view_key(0x01020304, net, len);
            assert_eq!(key.prefix_len(), bits, "{net}/{len}");
            assert_eq!(key.data().generation, [1, 2, 3, 4]);
            assert_eq!(key.data().addr, mapped(net));
        }
    }

    const WWW: &str = "www.example.com";

    #[test]
    fn answer_keys_hash_the_lower_case_wire_name() {
        let wire = wire_name("WWW.Example.COM").unwrap();
        assert_eq!(wire, b"\x03www\x07example\x03com\x00");
        let key = answer_key(name_hash(&wire), QTYPE_AAAA, 7, 3);
        assert_eq!(
            (key.name_hash, key.qtype, key.generation, key.view),
            (name_hash(&wire), 28, 7, 3)
        );
        assert_eq!((key.reserved, key.reserved2), (0, 0));
    }

    #[test]
    fn listen_sets_hold_up_to_eight_addresses_inline() {
        let v4 = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 53));
        let v6: IpAddr = "2001:db8::53".parse().unwrap();
        let set = listen_set(&[v4, v6, v4]);
        assert_eq!(set.count, 2, "distinct addresses");
        assert!(set.addrs[..2].contains(&mapped(v4)) && set.addrs[..2].contains(&mapped(v6)));
        assert!(set.addrs[2..].iter().all(|a| *a == [0; 16]));
        let many: Vec<IpAddr> = (1..=LISTEN_INLINE as u8 + 1)
            .map(|i| IpAddr::V4(Ipv4Addr::new(192, 0, 2, i)))
            .collect();
        assert_eq!(
            listen_set(&many[..LISTEN_INLINE]).count,
            LISTEN_INLINE as u32
        );
        assert_eq!(listen_set(&many).count, LISTEN_IN_TRIE);
    }

    /// An A query for www.example.com from 203.0.113.7 to `dst`, port 53, as an Ethernet frame
    /// (checksums zero: the fast path does not check them).
    fn v4_query_frame(dst: Ipv4Addr) -> Vec<u8> {
        use hickory_proto::op::{Message, MessageType, OpCode, Query};
        use hickory_proto::rr::RecordType;
        let mut msg = Message::new();
        msg.set_id(7)
            .set_message_type(MessageType::Query)
            .set_op_code(OpCode::Query)
            .add_query(Query::query(Name::from_ascii(WWW).unwrap(), RecordType::A));
        let dns = msg.to_bytes().unwrap();
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        let total = (20 + 8 + dns.len()) as u16;
        f.extend_from_slice(&[0x45, 0]);
        f.extend_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0, 203, 0, 113, 7]);
        f.extend_from_slice(&dst.octets());
        // The IPv4 header checksum (the fast path passes a frame whose header does not sum).
        let csum = crate::health::icmp::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&csum.to_be_bytes());
        f.extend_from_slice(&40000u16.to_be_bytes());
        f.extend_from_slice(&53u16.to_be_bytes());
        f.extend_from_slice(&((8 + dns.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(&dns);
        f
    }

    /// Batch writes and deletes reach every entry, in several thousands at once, and a delete
    /// that meets a missing key in the middle goes on past it.
    #[test]
    fn batch_writes_and_deletes_every_entry() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            assert_ne!(
                std::env::var("GSLB_REQUIRE_PRIVILEGED").as_deref(),
                Ok("1"),
                "needs root"
            );
            eprintln!("skipped: loading XDP programs needs root");
            return;
        }
        let mut dp = Dataplane::load(None).expect("loading the XDP object");
        let map = &mut dp.table.domains;
        let key = |i: u32| DomainKey {
            qtype: 1,
            generation: i,
            ..DomainKey::default()
        };
        let keys: Vec<DomainKey> = (0..5000).map(key).collect();
        let values: Vec<DomainValue> = (0..5000)
            .map(|i| DomainValue {
                domain_id: i,
                reserved: 0,
            })
            .collect();
        batch(map, &keys, Some(&values)).expect("batch update");
        for i in [0u32, 1, 2500, 4999] {
            assert_eq!(map.get(&key(i), 0).expect("written").domain_id, i);
        }
        // Delete a range with holes: 100..200 are gone already.
        batch::<_, DomainValue>(map, &keys[100..200], None).expect("first delete");
        batch::<_, DomainValue>(map, &keys, None).expect("delete over missing keys");
        assert_eq!(map.keys().count(), 0, "every entry deleted");
    }

    #[test]
    fn more_listen_addresses_than_fit_inline_are_looked_up_in_the_trie() {
        use aya::programs::{TestRun, TestRunOptions};
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            assert_ne!(
                std::env::var("GSLB_REQUIRE_PRIVILEGED").as_deref(),
                Ok("1"),
                "needs root"
            );
            eprintln!("skipped: loading XDP programs needs root");
            return;
        }
        let listen: Vec<String> = (1..=LISTEN_INLINE as u8 + 1)
            .map(|i| format!("\"192.0.2.{i}\""))
            .collect();
        let text = format!(
            r#"
[server]
listen = [{}]

[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"

[[site]]
name = "lab"
ip = "192.0.2.1"

[[service]]
name = "web"
ip = "198.51.100.10"
site = "lab"

[[gslb_domain]]
name = "www.example.com"
services = ["web"]
"#,
            listen.join(", ")
        );
        let config = crate::config::Config::parse(&text, Path::new("listen.toml")).unwrap();
        let snapshot = Snapshot::from_config(&config);
        assert_eq!(listen_set(&snapshot.listen).count, LISTEN_IN_TRIE);
        let mut dp = Dataplane::load(None).expect("loading the XDP object");
        dp.table.publish(&snapshot).expect("publishing");
        let last = Ipv4Addr::new(192, 0, 2, LISTEN_INLINE as u8 + 1);
        for (dst, action, counter) in [
            (last, 3, Counter::HitAV4),                                   // XDP_TX
            (Ipv4Addr::new(192, 0, 2, 99), 2, Counter::OtherDestination), // XDP_PASS
        ] {
            let before = dp.counters().unwrap();
            let frame = v4_query_frame(dst);
            let mut out = vec![0u8; 4096];
            let result = dp
                .program()
                .test_run(TestRunOptions {
                    data_in: Some(&frame),
                    data_out: Some(&mut out),
                    ..TestRunOptions::new()
                })
                .expect("BPF_PROG_TEST_RUN");
            assert_eq!(result.return_value, action, "to {dst}");
            assert_eq!(
                dp.counters().unwrap().delta(&before),
                [(counter, 1)],
                "to {dst}"
            );
        }
    }

    #[test]
    fn ldns_masks_clear_the_host_bits_of_the_mapped_address() {
        // (prefix over the 128-bit mapped address, host bytes)
        let table: [(u32, [u8; 16]); 6] = [
            (128, [0; 16]),
            (96 + 32, [0; 16]),
            (96 + 24, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff]),
            (
                96 + 20,
                [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0f, 0xff],
            ),
            (
                96 + 12,
                [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0f, 0xff, 0xff],
            ),
            (
                56,
                [
                    0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                ],
            ),
        ];
        for (prefix, host) in table {
            assert_eq!(host_bytes(prefix), host, "/{prefix}");
        }
        for addr in ["192.0.2.7", "2001:db8::7"] {
            let addr: IpAddr = addr.parse().unwrap();
            assert_eq!(unmapped(mapped(addr)), addr);
        }
    }

    #[test]
    fn listen_keys_are_whole_mapped_addresses() {
        let key = listen_key(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 53)));
        assert_eq!(key.prefix_len(), 128);
        assert_eq!(
            key.data().addr,
            Ipv4Addr::new(192, 0, 2, 53).to_ipv6_mapped().octets()
        );
    }

    #[test]
    fn answer_set_checksums_match_the_records() {
        let answer = Answer {
            ttl: 300,
            mode: AnswerMode::Rotate,
            addrs: vec!["192.0.2.10".parse().unwrap(), "192.0.2.11".parse().unwrap()],
        };
        let wire = wire_name(WWW).unwrap();
        let set = answer_set(&answer, &wire);
        assert_eq!(
            (set.count, set.flags, set.qtype, set.ttl),
            (2, ANSWER_ROTATE, 1, 300)
        );
        assert_eq!(set.name_len as usize, wire.len());
        assert_eq!(&set.name[..wire.len()], &wire[..]);
        assert!(
            set.name[wire.len()..].iter().all(|b| *b == 0),
            "name padding"
        );
        let rr0 = answer_record(1, 300, answer.addrs[0]);
        assert_eq!(
            rr0,
            [0xc0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 192, 0, 2, 10]
        );
        // Sum by hand: c00c + 0001 + 0001 + 0000 + 012c + 0004 + c000 + 020a.
        let by_hand: u32 = 0xc00c + 1 + 1 + 0x012c + 4 + 0xc000 + 0x020a;
        let folded = (by_hand & 0xffff) + (by_hand >> 16);
        assert_eq!(set.rr_csum[0], folded);
        let both = [rr0, answer_record(1, 300, answer.addrs[1])].concat();
        assert_eq!(set.all_csum, ones_sum(&both) as u32);
        assert_eq!(set.rr_len(), 16);
        assert_eq!(
            &set.records[..32],
            &both[..],
            "records back to back, as on the wire"
        );
        assert!(set.records[32..].iter().all(|b| *b == 0));
    }
}
