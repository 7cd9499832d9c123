//! The `ECS_ALLOW` trie as a publish writes it: `server.ecs_allow` (the resolvers whose EDNS
//! Client Subnet is used) under the parity of the generation being published (see
//! `gslb_common::EcsAllowKey`), the same list the responder checks (`responder::ecs::Allow`).
//!
//! A publish makes parity `(g + 1) & 1` hold the new list before it switches `CONFIG` to
//! `g + 1`: packets read parity `g & 1` until the switch (the other was last read by
//! generation `g - 1`, switched away from a publish ago, and the publish waits for the RCU
//! grace period that followed that switch: `AnswerTable::await_grace`), and
//! parity `(g + 1) & 1` after it, so every packet sees one whole list. Whether there is a list
//! (`ECS_ALLOW_LIST`) is in the same generation's `LISTEN_SET` slot, written before the switch
//! too.

use aya::maps::{LpmTrie, MapData, lpm_trie::Key};
use gslb_common::{
    ECS_ALLOW_LIST, ECS_ALLOW_TAG_BITS, ECS_FAMILY_V4, ECS_FAMILY_V6, EcsAllowKey, V4_MAPPED_BITS,
    maps,
};
use ipnet::IpNet;

use super::{Result, encode::mapped, map_err};

/// The trie and what each parity holds.
pub(super) struct EcsAllowMap {
    map: LpmTrie<MapData, EcsAllowKey, u8>,
    /// By parity, the keys this process wrote; `None`: unknown (pins adopted, or a publish
    /// failed while writing it), found by a scan of the trie (at most 2,048 keys).
    held: [Option<Vec<Key<EcsAllowKey>>>; 2],
}

/// The `ECS_ALLOW` key of an allowed prefix in `parity`.
pub fn ecs_allow_key(parity: u32, net: IpNet) -> Key<EcsAllowKey> {
    let (family, bits) = match net {
        IpNet::V4(n) => (ECS_FAMILY_V4, V4_MAPPED_BITS + u32::from(n.prefix_len())),
        IpNet::V6(n) => (ECS_FAMILY_V6, u32::from(n.prefix_len())),
    };
    Key::new(
        ECS_ALLOW_TAG_BITS + bits,
        EcsAllowKey {
            parity: (parity & 1) as u8,
            family,
            reserved: [0; 2],
            addr: mapped(net.network()),
        },
    )
}

/// `ListenSet::flags` for the list.
pub(super) fn flags(list: Option<&[IpNet]>) -> u32 {
    if list.is_some() { ECS_ALLOW_LIST } else { 0 }
}

/// Keys compared whole: `Key` has no `PartialEq`.
fn same(a: &Key<EcsAllowKey>, b: &Key<EcsAllowKey>) -> bool {
    a.prefix_len() == b.prefix_len() && a.data() == b.data()
}

impl EcsAllowMap {
    pub(super) fn new(map: LpmTrie<MapData, EcsAllowKey, u8>) -> Self {
        EcsAllowMap {
            map,
            held: [None, None],
        }
    }

    /// Makes `parity` hold `list` (nothing for `None`: the flag is then clear and the trie
    /// unread): inserts the prefixes it lacks and removes the ones not listed. Packets must
    /// not read `parity` (see the module's doc). Returns (written, removed).
    pub(super) fn write(&mut self, parity: u32, list: Option<&[IpNet]>) -> Result<(usize, usize)> {
        let parity = parity & 1;
        let held = match self.held[parity as usize].take() {
            Some(held) => held,
            None => self
                .map
                .keys()
                .filter_map(std::result::Result::ok)
                .filter(|k| u32::from(k.data().parity) == parity)
                .collect(),
        };
        let want: Vec<Key<EcsAllowKey>> = list
            .unwrap_or_default()
            .iter()
            .map(|net| ecs_allow_key(parity, *net))
            .collect();
        let mut written = 0;
        for key in want.iter().filter(|k| !held.iter().any(|h| same(h, k))) {
            self.map
                .insert(key, &1, 0)
                .map_err(map_err(maps::ECS_ALLOW))?;
            written += 1;
        }
        let mut removed = 0;
        for key in held.iter().filter(|h| !want.iter().any(|k| same(h, k))) {
            self.map.remove(key).map_err(map_err(maps::ECS_ALLOW))?;
            removed += 1;
        }
        self.held[parity as usize] = Some(want);
        Ok((written, removed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_put_parity_and_family_first_and_map_ipv4() {
        let v4: IpNet = "203.0.113.0/24".parse().unwrap();
        let key = ecs_allow_key(3, v4);
        assert_eq!(key.prefix_len(), 32 + 96 + 24);
        assert_eq!(
            (key.data().parity, key.data().family, key.data().reserved),
            (1, ECS_FAMILY_V4, [0, 0])
        );
        assert_eq!(
            key.data().addr,
            "::ffff:203.0.113.0"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets()
        );
        // An IPv6 prefix around ::ffff:0:0/96 stays in its family's part of the trie.
        let v6 = ecs_allow_key(0, "::/0".parse().unwrap());
        assert_eq!(v6.prefix_len(), 32);
        assert_eq!((v6.data().parity, v6.data().family), (0, ECS_FAMILY_V6));
        assert_eq!(flags(None), 0);
        assert_eq!(flags(Some(&[v4])), ECS_ALLOW_LIST);
    }
}
