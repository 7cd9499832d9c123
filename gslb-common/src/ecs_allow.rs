//! `server.ecs_allow` in the fast path: the resolvers whose EDNS Client Subnet the program
//! uses, in the `ECS_ALLOW` LPM trie (gslb-ebpf/src/ecs_allow.rs), the same list the
//! responder checks (`responder::ecs::Allow`). From any other source the option is ignored
//! as the responder ignores it: the source is the client and no option is echoed.

/// `ListenSet::flags`: `server.ecs_allow` is set, so a query's ECS option is used only
/// when its source is in `ECS_ALLOW` under this generation's parity; without the flag, ECS is
/// used from every source and the trie is not read.
pub const ECS_ALLOW_LIST: u32 = 1;

/// Key of `ECS_ALLOW` (an LPM trie): an allowed prefix of one generation's parity and family.
///
/// `parity` is `generation & 1` of the generation the list belongs to, as in `RttChoiceKey`
/// and `LISTEN_SET`: a publish writes parity `(g + 1) & 1`, which no packet reads any more
/// (its generation was switched away from a publish ago, after the grace pause), then switches
/// `CONFIG`; so a packet sees the whole old list or the whole new one.
///
/// `family` (1 IPv4, 2 IPv6, as ECS numbers them) keeps the two families apart: the responder
/// matches an IPv4 source against IPv4 prefixes only (an IPv6 `::/0` or `::ffff:0:0/96` does
/// not contain it), and an IPv4 address is stored IPv4-mapped like everywhere else, so without
/// the family byte an IPv6 prefix around `::ffff:0:0/96` would cover IPv4 sources.
/// (An IPv6 source inside `::ffff:0:0/96` never reaches the lookup: the program passes it as
/// martian.)
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EcsAllowKey {
    pub parity: u8,
    pub family: u8,
    pub reserved: [u8; 2],
    /// The address, IPv4-mapped for IPv4 ([`crate::mapped_key`]), big-endian.
    pub addr: [u8; 16],
}
const _: () = assert!(size_of::<EcsAllowKey>() == 20);

/// Leading key bits every `ECS_ALLOW` entry and lookup matches exactly: parity, family and
/// the reserved bytes. An IPv4 prefix of length n is `ECS_ALLOW_TAG_BITS + 96 + n` bits long
/// (its mapped prefix), an IPv6 one `ECS_ALLOW_TAG_BITS + n`; a lookup is the whole key.
pub const ECS_ALLOW_TAG_BITS: u32 = 32;

/// `EcsAllowKey::family` of IPv4 and IPv6.
pub const ECS_FAMILY_V4: u8 = 1;
pub const ECS_FAMILY_V6: u8 = 2;

/// Most prefixes `server.ecs_allow` accepts (`config::clients`).
pub const ECS_ALLOW_PREFIXES_MAX: usize = 1024;

/// Entries of `ECS_ALLOW`: both parities of the longest list.
pub const ECS_ALLOW_MAX: u32 = 2 * ECS_ALLOW_PREFIXES_MAX as u32;
