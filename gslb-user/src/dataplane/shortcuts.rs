//! What spares a hit lookups, written by each publish beside the answers:
//!
//! - **Default-view copies.** A client whose view has no set of its own for a name gets the
//!   default view's; the program finds that out by a failed `ANSWERS` lookup under its view
//!   and a second one under the default (two hash lookups, ~35 ns each). So publish also
//!   writes the default's set under every view without its own, and the first lookup hits. A
//!   copy keeps the default set's `ROTOR` slot, so it is the same rotation (the responder's
//!   turn for such a client is the default set's too, `responder::turns`), and it goes with its
//!   generation like every other set. Not for `ANSWER_ANY_VIEW` sets (their hint below skips
//!   the view altogether), and at most [`COPIES_MAX`] per publish: beyond it the domains that
//!   do not fit take the second lookup as before (`PublishStats::uncopied`).
//! - **Any-view hints** (`ANY_VIEW`, see `gslb_common::ANY_VIEW_WORDS`): the bit of every
//!   (name, qtype) whose answer is every client's, so the program reads no `VIEWS` trie for it.

use std::sync::Arc;

use gslb_common::{
    ANSWER_ANY_VIEW, ANY_VIEW_WORDS, AnswerKey, AnswerSet, DEFAULT_VIEW, any_view_bit,
};

use crate::compile::ViewPrefixes;

/// Most default-view copies one publish writes: each is an `ANSWERS` entry (~0.5 KiB with the
/// kernel's overhead, so 8 MiB per generation) and a batch write, added to every publish.
pub(super) const COPIES_MAX: usize = 16_384;

/// The views of the published trie other than the default, kept while the trie is the same
/// (`Snapshot::views` is shared from snapshot to snapshot until the partition changes).
#[derive(Default)]
pub(super) struct TrieViews(Option<(Arc<ViewPrefixes>, Vec<u32>)>);

impl TrieViews {
    /// The distinct views of `prefixes` but the default, ascending.
    pub(super) fn of(&mut self, prefixes: &Arc<ViewPrefixes>) -> &[u32] {
        if !self
            .0
            .as_ref()
            .is_some_and(|(p, _)| Arc::ptr_eq(p, prefixes))
        {
            let mut views: Vec<u32> = prefixes
                .iter()
                .map(|(_, v)| v.view)
                .filter(|v| *v != DEFAULT_VIEW)
                .collect();
            views.sort_unstable();
            views.dedup();
            self.0 = Some((Arc::clone(prefixes), views));
        }
        &self.0.as_ref().expect("just set").1
    }
}

/// Appends to `keys`/`sets` (one publish, rotor slots given) a copy of each domain's default
/// set under every view of `views` without a set of its own for it, at most [`COPIES_MAX`];
/// `domains`: the range of each domain's sets in `keys`. Returns (copies written, copies left
/// out for the budget).
pub(super) fn copy_defaults(
    views: &[u32],
    keys: &mut Vec<AnswerKey>,
    sets: &mut Vec<AnswerSet>,
    domains: &[std::ops::Range<usize>],
) -> (usize, usize) {
    let (mut copied, mut left) = (0, 0);
    for range in domains {
        let own = &keys[range.clone()];
        let Some(default) = own.iter().position(|k| k.view == DEFAULT_VIEW) else {
            continue;
        };
        let default = range.start + default;
        if sets[default].flags & ANSWER_ANY_VIEW != 0 {
            continue;
        }
        let has = |view: u32| own.iter().any(|k| k.view == view);
        let missing: Vec<u32> = views.iter().copied().filter(|v| !has(*v)).collect();
        if copied + missing.len() > COPIES_MAX {
            left += missing.len();
            continue;
        }
        copied += missing.len();
        let (key, set) = (keys[default], sets[default]);
        for view in missing {
            keys.push(AnswerKey { view, ..key });
            sets.push(set);
        }
    }
    (copied, left)
}

/// The `ANY_VIEW` words of a publish: the bit of each `ANSWER_ANY_VIEW` set's (name, qtype).
pub(super) fn any_view_words(keys: &[AnswerKey], sets: &[AnswerSet]) -> Vec<u64> {
    let mut words = vec![0u64; ANY_VIEW_WORDS as usize];
    for (key, _) in keys
        .iter()
        .zip(sets)
        .filter(|(k, s)| k.view == DEFAULT_VIEW && s.flags & ANSWER_ANY_VIEW != 0)
    {
        let (word, bit) = any_view_bit(key.name_hash, key.qtype);
        words[word as usize] |= bit;
    }
    words
}

#[cfg(test)]
pub(super) mod tests {
    use std::net::{IpAddr, Ipv4Addr};
    use std::path::Path;

    use gslb_common::{ANSWER_ROTATE, name_hash};
    use hickory_proto::{
        op::Message,
        rr::{Name, RData},
        serialize::binary::BinEncodable,
    };

    use super::*;
    use crate::compile::{Answer, Snapshot};
    use crate::dataplane::{Dataplane, answer_key, answer_set, can_load_xdp, wire_name};
    use crate::policy::AnswerMode;

    /// An A query for `name` from `src` to `dst`, port 53, as an Ethernet frame (the UDP
    /// checksum zero: the fast path does not check it over IPv4).
    pub(in crate::dataplane) fn v4_query_frame(
        src: Ipv4Addr,
        dst: Ipv4Addr,
        name: &str,
    ) -> Vec<u8> {
        v4_query_frame_ecs(src, dst, name, None)
    }

    /// [`v4_query_frame`] with an OPT record carrying the ECS subnet `ecs` (address, source
    /// prefix length; the address bytes of whole bytes of the prefix), when given.
    fn v4_query_frame_ecs(
        src: Ipv4Addr,
        dst: Ipv4Addr,
        name: &str,
        ecs: Option<(Ipv4Addr, u8)>,
    ) -> Vec<u8> {
        use hickory_proto::op::{Edns, MessageType, OpCode, Query};
        use hickory_proto::rr::RecordType;
        use hickory_proto::rr::rdata::opt::EdnsOption;
        let mut msg = Message::new(7, MessageType::Query, OpCode::Query);
        msg.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
        if let Some((addr, source)) = ecs {
            let mut data = vec![0, 1, source, 0];
            data.extend_from_slice(&addr.octets()[..usize::from(source).div_ceil(8)]);
            let mut edns = Edns::new();
            edns.set_max_payload(1232).set_version(0);
            edns.options_mut().insert(EdnsOption::Unknown(8, data));
            msg.set_edns(edns);
        }
        let dns = msg.to_bytes().unwrap();
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        let total = (20 + 8 + dns.len()) as u16;
        f.extend_from_slice(&[0x45, 0]);
        f.extend_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&src.octets());
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

    const SERVER: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 53);
    const V1_CLIENT: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
    const OTHER_CLIENT: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 7);

    /// `www` with `v1`'s answer when `view_answer`, else the same for every client; `all`
    /// always the same for every client.
    fn snapshot(view_answer: bool) -> Snapshot {
        snapshot_with(view_answer, "198.51.100.0/24")
    }

    /// [`snapshot`] with `v1` at `prefix`.
    fn snapshot_with(view_answer: bool, prefix: &str) -> Snapshot {
        let view = if view_answer {
            "[[gslb_domain.view]]\nview = \"v1\"\nservices = [\"v1\"]\n"
        } else {
            ""
        };
        let text = format!(
            r#"
[server]
listen = ["192.0.2.53"]
[[view]]
name = "v1"
prefixes = ["{prefix}"]
[[zone]]
name = "example.com"
ns = ["ns.example.net"]
soa.rname = "hostmaster.example.com"
[[site]]
name = "s"
ip = "192.0.2.1"
[[service]]
name = "web"
ip = "192.0.2.10"
site = "s"
[[service]]
name = "v1"
ip = "192.0.2.20"
site = "s"
[[service]]
name = "all"
ip = "192.0.2.30"
site = "s"
[[gslb_domain]]
name = "all.example.com"
services = ["all"]
[[gslb_domain]]
name = "www.example.com"
services = ["web"]
{view}"#
        );
        let config = crate::config::Config::parse(&text, Path::new("shortcuts.toml")).unwrap();
        Snapshot::from_config(&config)
    }

    /// The A addresses the fast path answers `name` from `src` (it must answer).
    fn answered(dp: &Dataplane, src: Ipv4Addr, name: &str) -> Vec<IpAddr> {
        answered_frame(dp, &v4_query_frame(src, SERVER, name), name)
    }

    /// The program's verdict on `frame`, and the frame it leaves.
    fn run_frame(dp: &Dataplane, frame: &[u8]) -> (u32, Vec<u8>) {
        use aya::programs::{TestRun, TestRunOptions};
        let mut out = vec![0u8; 4096];
        let result = dp
            .program()
            .test_run(TestRunOptions {
                data_in: Some(frame),
                data_out: Some(&mut out),
                ..TestRunOptions::new()
            })
            .expect("BPF_PROG_TEST_RUN");
        out.truncate(result.data_size_out as usize);
        (result.return_value, out)
    }

    fn answered_frame(dp: &Dataplane, frame: &[u8], name: &str) -> Vec<IpAddr> {
        let (action, out) = run_frame(dp, frame);
        assert_eq!(action, 3, "{name}: XDP_TX");
        let reply = Message::from_vec(&out[42..]).unwrap();
        reply
            .answers
            .iter()
            .filter_map(|r| match r.data {
                RData::A(a) => Some(IpAddr::V4(a.0)),
                _ => None,
            })
            .collect()
    }

    fn addr(a: &str) -> Vec<IpAddr> {
        vec![a.parse().unwrap()]
    }

    fn set_every_word(dp: &mut Dataplane, word: u64) {
        for i in 0..ANY_VIEW_WORDS {
            dp.table.any_view.set(i, &word, 0).unwrap();
        }
    }

    #[test]
    fn the_hint_skips_the_trie_and_no_bit_changes_an_answer() {
        if !can_load_xdp() {
            return;
        }
        let mut dp = Dataplane::load(None).expect("loading the XDP object");
        let snapshot = snapshot(true);
        let generation = dp.table.publish(&snapshot).unwrap().generation;
        // A v1 answer planted for the any-view name: its hint goes straight to the default
        // view's set, so the trie's view, and the plant, are never read.
        let v1 = snapshot.views[0].1.view;
        assert_ne!(v1, DEFAULT_VIEW);
        let wire = wire_name("all.example.com").unwrap();
        let planted = Answer {
            ttl: 30,
            mode: AnswerMode::All,
            max_answers: 8,
            addrs: vec!["192.0.2.99".parse().unwrap()],
            names: Vec::new(),
        };
        let key = answer_key(name_hash(&wire), 1, generation, v1);
        dp.table
            .answers
            .insert(&key, &answer_set(&planted, &wire, false), 0)
            .unwrap();
        assert_eq!(
            answered(&dp, V1_CLIENT, "all.example.com"),
            addr("192.0.2.30")
        );
        // Without the bit, the trie's way finds the plant: the bit is what skipped it.
        set_every_word(&mut dp, 0);
        assert_eq!(
            answered(&dp, V1_CLIENT, "all.example.com"),
            addr("192.0.2.99")
        );
        // Every bit set (another name's, or stale): www's answer still follows the view.
        set_every_word(&mut dp, !0);
        assert_eq!(
            answered(&dp, V1_CLIENT, "www.example.com"),
            addr("192.0.2.20")
        );
        assert_eq!(
            answered(&dp, OTHER_CLIENT, "www.example.com"),
            addr("192.0.2.10")
        );
    }

    #[test]
    fn a_bit_left_from_the_last_publish_never_gives_its_answer() {
        if !can_load_xdp() {
            return;
        }
        let mut dp = Dataplane::load(None).expect("loading the XDP object");
        // www the same for every client: hinted.
        dp.table.publish(&snapshot(false)).unwrap();
        let hash = name_hash(&wire_name("www.example.com").unwrap());
        let (word, bit) = any_view_bit(hash, 1);
        assert_ne!(dp.table.any_view.get(&word, 0).unwrap() & bit, 0, "hinted");
        assert_eq!(
            answered(&dp, V1_CLIENT, "www.example.com"),
            addr("192.0.2.10")
        );
        // Then with v1's answer of its own: the publish clears the bit; left set (as a packet
        // racing the publish could find it), v1's client still gets v1's answer.
        dp.table.publish(&snapshot(true)).unwrap();
        assert_eq!(dp.table.any_view.get(&word, 0).unwrap() & bit, 0, "cleared");
        set_every_word(&mut dp, !0);
        assert_eq!(
            answered(&dp, V1_CLIENT, "www.example.com"),
            addr("192.0.2.20")
        );
        assert_eq!(
            answered(&dp, OTHER_CLIENT, "www.example.com"),
            addr("192.0.2.10")
        );
    }

    /// The program's view cache (gslb-ebpf's `source_view`) keeps a source's view for one
    /// generation only: when the next one moves the source out of `v1`, its answer follows.
    #[test]
    fn a_cached_view_is_not_used_in_the_next_generation() {
        if !can_load_xdp() {
            return;
        }
        let mut dp = Dataplane::load(None).expect("loading the XDP object");
        dp.table.publish(&snapshot(true)).unwrap();
        // Twice: the second from the cache.
        for _ in 0..2 {
            assert_eq!(
                answered(&dp, V1_CLIENT, "www.example.com"),
                addr("192.0.2.20")
            );
        }
        // v1 elsewhere (a new trie, not a refinement): the client is the default view's.
        let stats = dp
            .table
            .publish(&snapshot_with(true, "198.51.101.0/24"))
            .unwrap();
        assert!(!stats.in_place);
        assert_eq!(
            answered(&dp, V1_CLIENT, "www.example.com"),
            addr("192.0.2.10")
        );
    }

    /// The same for an ECS subnet, which shares the cache (a subnet's trie key is that of a
    /// source of its address): asked from another source, twice in v1, then v1 moves away and
    /// the subnet is passed (in the default view's block, left to the responder).
    #[test]
    fn a_cached_subnet_view_is_not_used_in_the_next_generation() {
        if !can_load_xdp() {
            return;
        }
        let mut dp = Dataplane::load(None).expect("loading the XDP object");
        dp.table.publish(&snapshot(true)).unwrap();
        let frame = v4_query_frame_ecs(
            OTHER_CLIENT,
            SERVER,
            "www.example.com",
            Some((Ipv4Addr::new(198, 51, 100, 0), 24)),
        );
        for _ in 0..2 {
            assert_eq!(
                answered_frame(&dp, &frame, "www.example.com"),
                addr("192.0.2.20")
            );
        }
        let stats = dp
            .table
            .publish(&snapshot_with(true, "198.51.101.0/24"))
            .unwrap();
        assert!(!stats.in_place);
        // The subnet is now in no published block (the default view's), whose ECS scope the
        // program does not know: passed to the responder, not answered from the cached v1.
        assert_eq!(run_frame(&dp, &frame).0, 2, "XDP_PASS");
    }

    fn key(name: u64, view: u32) -> AnswerKey {
        AnswerKey {
            name_hash: name,
            qtype: 1,
            view,
            generation: 3,
            ..AnswerKey::default()
        }
    }

    fn set(rotor: u16, flags: u8) -> AnswerSet {
        AnswerSet {
            count: 2,
            flags,
            rotor,
            ..AnswerSet::default()
        }
    }

    #[test]
    fn views_without_their_own_set_get_the_default_with_its_rotor() {
        // Name 1: default (slot 7) and view 2 of its own; name 2: any-view; name 3: view 1
        // only (no default to copy).
        let mut keys = vec![key(1, 0), key(1, 2), key(2, 0), key(3, 1)];
        let mut sets = vec![
            set(7, ANSWER_ROTATE),
            set(8, ANSWER_ROTATE),
            set(0, ANSWER_ANY_VIEW),
            set(9, ANSWER_ROTATE),
        ];
        let domains = [0..2, 2..3, 3..4];
        let (copied, left) = copy_defaults(&[1, 2, 3], &mut keys, &mut sets, &domains);
        assert_eq!((copied, left), (2, 0));
        assert_eq!(&keys[4..], [key(1, 1), key(1, 3)]);
        assert!(
            sets[4..].iter().all(|s| *s == sets[0]),
            "the default's set, slot 7"
        );
    }

    #[test]
    fn beyond_the_budget_whole_domains_are_left_to_the_second_lookup() {
        let views: Vec<u32> = (1..=COPIES_MAX as u32 / 2 + 1).collect();
        let mut keys = vec![key(1, 0), key(2, 0)];
        let mut sets = vec![set(1, ANSWER_ROTATE), set(2, ANSWER_ROTATE)];
        let (copied, left) = copy_defaults(&views, &mut keys, &mut sets, &[0..1, 1..2]);
        assert_eq!((copied, left), (views.len(), views.len()));
        assert!(keys[2..].iter().all(|k| k.name_hash == 1));
    }

    #[test]
    fn any_view_words_hold_the_bits_of_any_view_default_sets_only() {
        let keys = [key(1, 0), key(2, 0), key(3, 4)];
        let sets = [
            set(0, ANSWER_ANY_VIEW),
            set(0, ANSWER_ROTATE),
            set(0, ANSWER_ANY_VIEW),
        ];
        let words = any_view_words(&keys, &sets);
        let (w, b) = any_view_bit(1, 1);
        assert_ne!(words[w as usize] & b, 0);
        let ones: u32 = words.iter().map(|w| w.count_ones()).sum();
        assert_eq!(ones, 1, "only name 1's default set");
    }
}
